import CSQLite
import WeatherCore

/// Provider pauses on the database's `-writer` page (`WriterLock`), which every worker of the
/// machine maps: one 64-bit word per provider, replaced by compare-and-swap, so no lock is
/// taken and nothing is written to the database. Word layout: the pause's end in seconds (low
/// 32 bits, unsigned: until 2106), failures in a row (8 bits), the failure's code (24 bits);
/// zero is "no record".
final class SharedProviderPauses: ProviderPauseBoard, @unchecked Sendable {
    private let page: WriterLock

    init(page: WriterLock) { self.page = page }

    func pause(of provider: String) -> ProviderPause? {
        guard let word = page.pauseSlot(tag: Self.tag(provider), claim: false) else { return nil }
        return Self.unpacked(csqlite_atomic_load(word))
    }

    func update(_ provider: String, _ change: (ProviderPause?) -> ProviderPause?) -> Bool {
        guard let word = page.pauseSlot(tag: Self.tag(provider), claim: true) else { return false }
        while true {
            let seen = csqlite_atomic_load(word)
            if csqlite_atomic_replace(word, seen, Self.packed(change(Self.unpacked(seen)))) { return true }
        }
    }

    static func packed(_ pause: ProviderPause?) -> UInt64 {
        guard let pause else { return 0 }
        let until = UInt64(UInt32(clamping: pause.until.seconds))
        let failures = UInt64(UInt8(clamping: max(1, pause.failures)))
        return until | failures << 32 | UInt64(pause.failure & 0xFF_FFFF) << 40
    }

    static func unpacked(_ word: UInt64) -> ProviderPause? {
        guard word != 0 else { return nil }
        return ProviderPause(
            failures: Int(word >> 32 & 0xFF), until: Timestamp(seconds: Int64(word & 0xFFFF_FFFF)),
            failure: UInt32(word >> 40))
    }

    /// A provider's slot name: FNV-1a of its name, never zero (zero marks a free slot).
    static func tag(_ provider: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in provider.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash == 0 ? 1 : hash
    }
}
