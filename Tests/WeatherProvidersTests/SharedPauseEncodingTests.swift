import Testing
import WeatherCore
@testable import WeatherProviders

/// The failure a paused provider stands for, as the workers' shared page keeps it.
@Suite struct SharedPauseEncodingTests {
    @Test(arguments: [
        ProviderFailure.timeout, .transport, .tls, .httpStatus(503, retryAfter: nil), .httpStatus(429, retryAfter: nil),
        .providerError, .notJSON, .unparseable, .notCovered, .coolingDown,
    ])
    func everyFailureSurvivesTheSharedPage(failure: ProviderFailure) {
        for lengthened in [false, true] {
            let entry = ProviderCooldowns.Entry(failures: 2, until: Timestamp(seconds: 1_796_000_000), failure: failure, lengthened: lengthened)
            #expect(ProviderCooldowns.Entry(shared: entry.shared) == entry)
        }
    }
}
