import WeatherCore

/// `weatherctl migrate`: applies the migrations this build carries, as the workers do at start-up.
enum MigrateCommand {
    static let spec = CommandSpec(
        name: "migrate",
        summary: "apply pending database migrations and list the ones applied",
        details: """
            Creates the database at WEATHER_DB_PATH when it does not exist (its directory must).
            Each migration runs in its own transaction together with its record in d1_migrations,
            so running this while workers serve, or twice at once, applies each file exactly once.
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: Context) throws(CLIError) -> Int32 {
        let store = try context.openStore(try context.config(), .creating)
        let applied = try context.storeCall { () throws(StoreError) in try store.applyMigrations() }
        context.emit(
            human: applied.isEmpty ? "no pending migrations\n" : applied.map { "applied \($0)\n" }.joined(),
            json: .object([("applied", .array(applied.map(JSONValue.string)))]))
        return ExitCode.ok
    }
}
