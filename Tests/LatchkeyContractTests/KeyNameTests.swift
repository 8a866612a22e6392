// KeyName: the grammar `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, on its own (the
// state directory's containment check is tested separately, in
// LatchkeyDaemonTests/StateDirectoryTests.swift).

import Foundation
import LatchkeyContract
import Testing

@Suite("key names")
struct KeyNameTests {
    @Test(
        "accepts names of the grammar",
        arguments: ["a", "default", "ci-1", "A.b_c-9", "0", "k1-test.name", String(repeating: "x", count: 64)]
    )
    func accepts(_ text: String) throws {
        #expect(try KeyName(text).rawValue == text)
    }

    @Test(
        "refuses dot names, separators, escapes, control bytes and non-ASCII",
        arguments: [
            (".", KeyNameError.Reason.badFirstCharacter), ("..", .badFirstCharacter), (".hidden", .badFirstCharacter),
            ("-x", .badFirstCharacter), ("_x", .badFirstCharacter), ("a/b", .badCharacter), ("../a", .badFirstCharacter),
            ("a/../b", .badCharacter), ("%2e%2e", .badFirstCharacter), ("a%2Fb", .badCharacter), ("a\0b", .badCharacter),
            ("a\nb", .badCharacter), ("a b", .badCharacter), ("a\\b", .badCharacter), ("é", .badFirstCharacter),
            ("aé", .badCharacter), ("a\u{200B}", .badCharacter), ("", .empty),
            (String(repeating: "x", count: 65), .tooLong), (String(repeating: "é", count: 40), .tooLong),
        ]
    )
    func refuses(_ text: String, _ reason: KeyNameError.Reason) {
        #expect(throws: KeyNameError(reason)) { try KeyName(text) }
        #expect(!KeyName.isValid(text))
    }

    @Test("an error names the rule and does not repeat the rejected text")
    func message() {
        let long = String(repeating: "y", count: 100_000)
        #expect(throws: KeyNameError.self) { try KeyName(long) }
        let error = KeyNameError(.tooLong)
        #expect(error.description.contains(KeyName.grammar))
        #expect(error.description.count < 300)
    }

    @Test("decoding validates; encoding round-trips")
    func codable() throws {
        let name = try JSONDecoder().decode(KeyName.self, from: Data(#""ci-1""#.utf8))
        #expect(name == "ci-1")
        #expect(String(decoding: try JSONEncoder().encode(name), as: UTF8.self) == #""ci-1""#)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(KeyName.self, from: Data(#""..""#.utf8)) }
    }
}
