// Nothing to import: this target only gives a sanitizer build its default options
// (sanitizer_options.c). The programs link it; no Swift module imports it.
