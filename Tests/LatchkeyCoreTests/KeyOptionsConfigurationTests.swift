// A [[keys]] table's feature switches: the same options POST /v1/keys takes,
// for keys the configuration file defines.

import CTAP
import Foundation
import LatchkeyContract
import Testing

@testable import LatchkeyCore

@Suite("key options in the configuration file")
struct KeyOptionsConfigurationTests {
    @Test("every switch is read, and the defaults are everything on")
    func switches() throws {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try configuration.apply(
            toml: """
                [[keys]]
                name = "legacy"
                protocol = "u2f-only"
                resident-keys = false
                large-blob = false
                cred-blob = false
                min-pin-length = false
                prf = false
                third-party-payment = false
                persistent-token = false
                preview-sign = true
                enterprise-attestation = true
                enterprise-attestation-rp-ids = ["corp.example"]
                [[keys]]
                name = "plain"
                """,
            source: "test.toml"
        )
        let legacy = configuration.keys[0]
        #expect(legacy.protocolMode == .u2fOnly)
        #expect(legacy.enterpriseAttestationRpIds == ["corp.example"])
        for feature in KeyFeature.all {
            let on = feature == .previewSign || feature == .enterpriseAttestation
            #expect(legacy.features[feature] == on, "\(feature)")
        }
        let plain = configuration.keys[1]
        #expect(plain.protocolMode == .ctap21 && plain.enterpriseAttestationRpIds.isEmpty)
        for feature in KeyFeature.all {
            #expect(plain.features[feature] == feature.defaultValue, "\(feature)")
        }
        #expect(!plain.features[.previewSign], "previewSign, a draft, is off unless asked for")
        #expect(!plain.features[.enterpriseAttestation])
    }

    @Test("previewSign reaches the engine only on a key switched to it")
    func previewSignSwitch() {
        for on in [false, true] {
            var key = KeyConfiguration(name: "k")
            key.features[.previewSign] = on
            var engine = AuthenticatorConfiguration(aaguid: Array(repeating: 0, count: 16))
            VirtualKey.applyFeatures(of: key, to: &engine)
            #expect(engine.enabledExtensions.contains(ExtensionIdentifier.previewSign) == on)
            #expect(engine.enabledExtensions.contains(ExtensionIdentifier.thirdPartyPayment))
        }
    }

    @Test("the feature table: names unique, and every extension it switches is one the engine supports")
    func featureTable() {
        for name in [\KeyFeature.option, \KeyFeature.configurationKey] {
            #expect(Set(KeyFeature.all.map { $0[keyPath: name] }).count == KeyFeature.all.count)
        }
        for feature in KeyFeature.all {
            #expect(Set(feature.extensions).isSubset(of: ExtensionIdentifier.supported), "\(feature)")
        }
    }

    @Test("a feature that is off takes exactly its extensions off the engine", arguments: KeyFeature.all)
    func featureExtensions(_ feature: KeyFeature) {
        var key = KeyConfiguration(name: "k")
        for other in KeyFeature.all { key.features[other] = true }
        key.features[feature] = false
        var engine = AuthenticatorConfiguration(aaguid: Array(repeating: 0, count: 16))
        VirtualKey.applyFeatures(of: key, to: &engine)
        #expect(engine.enabledExtensions == Set(ExtensionIdentifier.supported).subtracting(feature.extensions))
    }

    @Test("a request's switches and a key's options are JSON members under the table's names")
    func featureJSON() throws {
        let request = try JSONDecoder().decode(
            CreateKeyRequest.self, from: Data(#"{"name": "k", "hasCredBlob": false, "hasPrf": true}"#.utf8)
        )
        #expect(request.name == "k" && request.features.values == [.credBlob: false, .prf: true])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(
            String(decoding: try encoder.encode(request), as: UTF8.self) == #"{"hasCredBlob":false,"hasPrf":true,"name":"k"}"#
        )
    }

    @Test("an unknown protocol is refused with where it is")
    func badProtocol() {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        #expect(throws: ConfigurationError.self) {
            try configuration.apply(toml: "[[keys]]\nname = \"k\"\nprotocol = \"ctap3\"\n", source: "test.toml")
        }
    }
}
