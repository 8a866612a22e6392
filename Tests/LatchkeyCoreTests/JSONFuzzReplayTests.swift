// Replays the JSON fuzzers' seeds (Fuzz/Seeds) and kept crashers through the drivers the
// fuzzers run (JSONFuzzDriver), checks that the seeds reach what they were made for, and
// runs a deterministic sample of mutated seeds.

import Foundation
import Testing

@testable import LatchkeyCore
@testable import LatchkeyJSONFuzzing

@Suite("JSON fuzz replay")
struct JSONFuzzReplayTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The files of `Fuzz/Seeds/<fuzzer>` and `Tests/LatchkeyCoreTests/Crashers/<fuzzer>`.
    static func inputs(_ fuzzer: String) throws -> [(String, [UInt8])] {
        var inputs: [(String, [UInt8])] = []
        for directory in ["Fuzz/Seeds/\(fuzzer)", "Tests/LatchkeyCoreTests/Crashers/\(fuzzer)"] {
            let url = repository.appendingPathComponent(directory)
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            for file in try FileManager.default.contentsOfDirectory(at: url, includingPropertiesForKeys: nil)
            where !file.lastPathComponent.hasPrefix(".") && file.pathExtension != "md" {
                inputs.append(("\(directory)/\(file.lastPathComponent)", [UInt8](try Data(contentsOf: file))))
            }
        }
        return inputs.sorted { $0.0 < $1.0 }
    }

    static let drivers: [(String, @Sendable ([UInt8]) -> [String])] = [
        ("FuzzControlRequests", JSONFuzzDriver.controlRequest),
        ("FuzzCXF", JSONFuzzDriver.cxf),
        ("FuzzExchangeEnvelope", JSONFuzzDriver.envelope),
    ]

    @Test("every seed and kept crasher runs through its driver without breaking an invariant")
    func seedsAndCrashers() throws {
        for (fuzzer, driver) in Self.drivers {
            let inputs = try Self.inputs(fuzzer)
            #expect(!inputs.isEmpty, "\(fuzzer) has no seeds")
            for (name, input) in inputs {
                #expect(driver(input).isEmpty, "\(name)")
            }
        }
    }

    @Test("the seeds reach past the parsers: each control body decodes as the type it picks")
    func controlSeedsDecode() throws {
        let types: [Int: any Decodable.Type] = [
            0: CreateKeyRequest.self, 1: UserUpdateRequest.self, 2: PINRequest.self, 3: ConfigDocument.self,
            4: PresenceDocument.self, 5: UserVerifiedDocument.self, 6: OverrideRequest.self,
            7: SeedCredentialRequest.self, 8: PolicyOverrides.self, 9: PasswordUsedRequest.self,
            10: AcceptedCredentialsSignal.self, 11: CurrentUserDetailsSignal.self,
            12: UnknownCredentialSignal.self, 13: ExportRequest.self, 14: ImportRequest.self,
        ]
        #expect(types.count == JSONFuzzDriver.requestReaders.count)
        for (name, input) in try Self.inputs("FuzzControlRequests") {
            let type = try #require(types[Int(input[0]) % JSONFuzzDriver.requestReaders.count])
            #expect(throws: Never.self, "\(name)") { _ = try JSONDecoder().decode(type, from: Data(input.dropFirst())) }
        }
    }

    @Test("the envelope seed opens with the passphrase fuzz to the CXF seed, two passkeys and a skipped password")
    func envelopeSeedOpens() throws {
        let seeds = Dictionary(uniqueKeysWithValues: try Self.inputs("FuzzExchangeEnvelope"))
        let cxf = Dictionary(uniqueKeysWithValues: try Self.inputs("FuzzCXF"))
        let envelopeBytes = try #require(seeds["Fuzz/Seeds/FuzzExchangeEnvelope/envelope_n16"])
        let envelope = try JSONDecoder().decode(ExchangeEnvelope.self, from: Data(envelopeBytes))
        let plaintext = try envelope.open(passphrase: "fuzz")
        #expect(plaintext == cxf["Fuzz/Seeds/FuzzCXF/two_passkeys"])
        let entries = try CXF.read(Data(plaintext))
        #expect(entries.filter { if case .passkey = $0.outcome { true } else { false } }.count == 2)
        #expect(entries.count == 3)
    }

    /// Bytes that change JSON's structure, for the mutations.
    static let jsonBytes = Array(#"{}[]",:0e-9"#.utf8)

    @Test("mutated seeds run without breaking an invariant")
    func mutatedSeeds() throws {
        var state: UInt64 = 0x0A11_CE55
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        for (fuzzer, driver) in Self.drivers {
            for (name, seed) in try Self.inputs(fuzzer) where !seed.isEmpty {
                for _ in 0..<40 {
                    var input = seed
                    for _ in 0...(next() % 4) {
                        let index = Int(next() % UInt64(input.count))
                        switch next() % 3 {
                        case 0: input[index] = UInt8(truncatingIfNeeded: next())
                        case 1: input.remove(at: index)
                        default: input.insert(Self.jsonBytes[Int(next() % UInt64(Self.jsonBytes.count))], at: index)
                        }
                        if input.isEmpty { input = [0] }
                    }
                    #expect(driver(input).isEmpty, "\(name) mutated: \(String(decoding: input, as: UTF8.self))")
                }
            }
        }
    }
}
