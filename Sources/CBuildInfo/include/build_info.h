#ifndef CLOSET_WEATHER_BUILD_INFO_H
#define CLOSET_WEATHER_BUILD_INFO_H

/// The release version of this build, as `make dist` wrote it into the binary, or "dev" for a
/// build it did not make (`swift build`). Never NULL.
const char *cw_build_version(void);

#endif
