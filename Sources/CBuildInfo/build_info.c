// The version a binary reports (`--version`, the worker's start line, `weatherctl check`).
//
// It lives in an ELF section of its own, CW_VERSION_SECTION_SIZE bytes, NUL-padded, that
// `scripts/dist.sh` replaces in the built binaries with `objcopy --update-section`: the version
// is the bundle's (its tag or commit), and setting it needs no rebuild. A compiler flag would
// have had to reach every module's command line (SwiftPM's -Xcc), and each new version would
// then have rebuilt the whole package. Outside `make dist` it stays "dev".
#include "build_info.h"

#define CW_VERSION_SECTION_SIZE 64

__attribute__((section(".cw_version"), used))
static const char version[CW_VERSION_SECTION_SIZE] = "dev";

const char *cw_build_version(void) {
    return version;
}
