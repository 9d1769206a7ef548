// Where a sanitizer build's reports go (`scripts/sanitize.sh`, `make sanitize`).
//
// The end-to-end tests start `weather-fcgi` and `weatherctl` with environments of their own (and
// through Apache, runuser and `env -i`), so TSAN_OPTIONS or ASAN_OPTIONS set for `swift test`
// never reach them. The sanitizer runtimes ask the program for its default options instead: these
// send every report to a folder the script empties before the run and checks after it, whoever
// started the process. In a build without a sanitizer nothing here is compiled.
#include "sanitizer_options.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
const char *__tsan_default_options(void) {
    return "halt_on_error=0:log_path=/tmp/closet-weather-sanitizer/thread/report";
}
#endif
#if __has_feature(address_sanitizer)
// Leaks are not checked here: the Swift runtime's one-time allocations and those of the test
// process's Foundation would drown them (docs/reliability.md, "Sanitizers"). Memory errors stop the
// process, and their report is kept.
const char *__asan_default_options(void) {
    return "detect_leaks=0:log_path=/tmp/closet-weather-sanitizer/address/report";
}
#endif
#endif
