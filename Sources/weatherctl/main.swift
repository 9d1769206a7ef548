import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

// Wiring only: the commands live in Commands/, the command line in CLI/.
// A database `migrate` creates is not for others, whatever the shell's umask (as weather-fcgi).
umask(umask(0o027) | 0o027)
exit(WeatherCtl.main(Array(CommandLine.arguments.dropFirst()), environment: Bootstrap.processEnvironment(), now: Timestamp.systemNow()))
