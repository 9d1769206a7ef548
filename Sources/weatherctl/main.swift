import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

// Wiring only: the commands live in Commands/, the command line in CLI/.
Bootstrap.restrictFileCreation()
Bootstrap.forbidCoreDumps()
exit(WeatherCtl.main(Array(CommandLine.arguments.dropFirst()), environment: Bootstrap.processEnvironment(), now: Timestamp.systemNow()))
