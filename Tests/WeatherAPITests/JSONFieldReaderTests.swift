import Testing
@testable import WeatherAPI

/// The session bodies' reader: what it accepts, what it refuses, and why.
@Suite struct JSONFieldReaderTests {
    let names = ["platform", "appVersion", "installationId"]

    func read(_ text: String) throws(JSONFieldReader.Failure) -> [String?] {
        try JSONFieldReader.strings(names, in: Array(text.utf8))
    }

    /// Content-Type: `application/json` in any case, with parameters and surrounding spaces.
    @Test(arguments: [
        ("application/json", true), ("Application/JSON", true), ("application/json; charset=utf-8", true),
        (" \tapplication/json ;charset=utf-8", true), ("application/json;", true), ("application/json\r", true),
        ("", false), ("text/plain", false), ("application/jsonp", false), ("application/json5", false),
        ("application json", false), ("application\\json", false), ("xapplication/json", false), ("application/", false),
    ])
    func jsonMediaTypeIsRecognised(_ value: String, _ expected: Bool) {
        #expect(JSONBody.isJSONMediaType(value) == expected)
    }

    @Test func wantedStringsAreReadAndTheRestSkipped() throws {
        let body =
            #" { "extra": {"a": [1, -2.5e+3, true, false, null, "x", {}, []]}, "platform" : "ios","#
            + #" "installationId": "8F1A\u00e9\/\"\\\n\uD83D\uDE00", "appVersion": null, "n": 0 } "#
        #expect(try read(body) == ["ios", nil, "8F1Aé/\"\\\n😀"])
        #expect(try read("{}") == [nil, nil, nil])
        #expect(try read(#"{"platform":"é☃"}"#) == ["é☃", nil, nil])
    }

    @Test(arguments: [
        "", " ", "{", "}", "{\"platform\"}", "{\"platform\":}", "{\"platform\":\"ios\",}", "{,}",
        "{\"a\":1}x", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":tru}",
        "{\"a\":NaN}", "{'a':1}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\uD800\"}",
        "{\"a\":\"\\uDC00\"}", "{\"a\":\"\\uD800\\u0041\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"\u{0}\"}",
        "{\"a\":[1,]}", "{\"a\":[1 2]}", "{\"a\" 1}", "{\"platform\":\"ios\"}{}", "\u{FEFF}{}",
    ])
    func invalidJSONIsRefused(text: String) {
        #expect(throws: JSONFieldReader.Failure.invalid) { try read(text) }
    }

    @Test func invalidUTF8IsRefused() {
        let body = Array(#"{"platform":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        #expect(throws: JSONFieldReader.Failure.invalid) { try JSONFieldReader.strings(names, in: body) }
        let skipped = Array(#"{"other":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: JSONFieldReader.Failure.invalid) { try JSONFieldReader.strings(names, in: skipped) }
    }

    @Test(arguments: ["[]", "\"ios\"", "42", "null", " true "])
    func otherDocumentsAreNotObjects(text: String) {
        #expect(throws: JSONFieldReader.Failure.notAnObject) { try read(text) }
    }

    @Test func wrongTypesAndDuplicatesAreNamed() throws {
        #expect(throws: JSONFieldReader.Failure.wrongType("platform")) { try read(#"{"platform":7}"#) }
        #expect(throws: JSONFieldReader.Failure.wrongType("appVersion")) { try read(#"{"appVersion":["1"],"platform":{}}"#) }
        // A syntax error anywhere wins over a type error.
        #expect(throws: JSONFieldReader.Failure.invalid) { try read(#"{"platform":7,"#) }
        #expect(throws: JSONFieldReader.Failure.duplicate("platform")) { try read(#"{"platform":"ios","platform":"android"}"#) }
        #expect(throws: JSONFieldReader.Failure.duplicate("platform")) { try read(#"{"platform":null,"platform":"ios"}"#) }
        // Unwanted fields may repeat, as JSON allows.
        #expect(try read(#"{"x":1,"x":2}"#) == [nil, nil, nil])
    }

    @Test func nestingIsBounded() throws {
        let ok = String(repeating: "[", count: JSONFieldReader.maxDepth - 1) + String(repeating: "]", count: JSONFieldReader.maxDepth - 1)
        #expect(try read("{\"a\":\(ok)}") == [nil, nil, nil])
        let deep = String(repeating: "[", count: JSONFieldReader.maxDepth) + String(repeating: "]", count: JSONFieldReader.maxDepth)
        #expect(throws: JSONFieldReader.Failure.invalid) { try read("{\"a\":\(deep)}") }
        let huge = String(repeating: "[", count: 100_000)
        #expect(throws: JSONFieldReader.Failure.invalid) { try read(huge) }
    }
}
