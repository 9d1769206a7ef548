import Foundation
import Testing
import WeatherCore
import WeatherCrypto

/// Published vectors: FIPS 180-2 appendix B (SHA-256), RFC 4231 (HMAC-SHA256) and the SipHash
/// reference implementation's (SipHash-2-4).
@Suite struct CryptoVectorTests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func sha256MatchesFIPS180(message: String, digest: String) {
        #expect(SHA256.hex(message) == digest)
    }

    @Test func sha256OfMillionAs() {
        #expect(Hex.encode(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000))) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test(arguments: [
        ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        (
            [UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
    ])
    func hmacMatchesRFC4231(key: [UInt8], message: [UInt8], mac: String) throws {
        #expect(Hex.encode(HMACSHA256.authenticationCode(for: message, key: key)) == mac)
        // A kept key (its pads hashed once) gives the same MAC every time, from bytes or a string.
        let kept = HMACSHA256.Key(key)
        #expect(Hex.encode(kept.authenticationCode(for: message)) == mac)
        #expect(Hex.encode(kept.authenticationCode(for: message[...])) == mac)
        if let text = String(validating: message, as: UTF8.self) { #expect(kept.hex(text) == mac) }
    }

    @Test func randomBytesAreFreshAndSized() throws {
        let a = try SecureRandom.bytes(32), b = try SecureRandom.bytes(32)
        #expect(a.count == 32)
        #expect(a != b)
    }

    @Test func constantTimeComparison() {
        #expect(ConstantTime.equals("secret-token", "secret-token"))
        #expect(!ConstantTime.equals("secret-token", "secret-tokeN"))
        #expect(!ConstantTime.equals("secret", "secret-token"))
        #expect(ConstantTime.equals("", ""))
        #expect(!ConstantTime.equals("", "x") && !ConstantTime.equals("x", ""))
        // A bridged or sliced string is compared by its UTF-8 bytes too.
        #expect(ConstantTime.equals(String("xsecret-token".dropFirst()), "secret-token"))
        #expect(ConstantTime.equals("é", "\u{E9}") && !ConstantTime.equals("é", "e\u{301}"))
    }

    @Test func base64URLHasNoPaddingAndUrlAlphabet() {
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode(Array("fo".utf8)) == "Zm8")
        #expect(Base64URL.encode([UInt8](repeating: 0, count: 32)).count == 43)
        // Every length from 0 to 40 against Foundation's base64, translated to the URL alphabet.
        var generator = SystemRandomNumberGenerator()
        for count in 0...40 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let reference = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == reference, "length \(count)")
        }
        #expect(Hex.decode("00ff10") == [0, 255, 16])
        #expect(Hex.decode("0g") == nil)
    }

    /// The reference's vectors: key 00 01 … 0f, message 00 01 … (n − 1) for each length n; these
    /// lengths cover no whole word, one partial word, exact words and several words.
    @Test(arguments: [
        (0, 0x726f_db47_dd0e_0e31 as UInt64), (1, 0x74f8_39c5_93dc_67fd), (7, 0xab02_00f5_8b01_d137), (8, 0x93f5_f579_9a93_2462),
        (15, 0xa129_ca61_49be_45e5), (16, 0x3f2a_cc7f_57c2_9bdb), (63, 0x958a_324c_eb06_4572),
    ])
    func sipHash24MatchesTheReference(length: Int, expected: UInt64) {
        let hasher = SipHash24(key: Array(0..<16))
        let message = [UInt8]((0..<length).map { UInt8($0) })
        #expect(message.withUnsafeBytes { hasher.hash($0) } == expected)
        if length == 15 { #expect(hasher.hex(String(decoding: message, as: UTF8.self)) == "a129ca6149be45e5") }
    }
}
