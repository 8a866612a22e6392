// A [[keys]] table's feature switches: the same options POST /v1/keys takes,
// for keys the configuration file defines.

import CTAP
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
        #expect(!legacy.residentKeys)
        #expect(!legacy.largeBlobs && !legacy.credBlob && !legacy.minPinLength && !legacy.prf)
        #expect(!legacy.thirdPartyPayment && !legacy.persistentPinUvAuthToken)
        #expect(legacy.enterpriseAttestation && legacy.enterpriseAttestationRpIds == ["corp.example"])
        #expect(legacy.previewSign)
        let plain = configuration.keys[1]
        #expect(plain.protocolMode == .ctap21)
        #expect(plain.residentKeys)
        #expect(plain.largeBlobs && plain.credBlob && plain.minPinLength && plain.prf)
        #expect(plain.thirdPartyPayment && plain.persistentPinUvAuthToken)
        #expect(!plain.enterpriseAttestation && plain.enterpriseAttestationRpIds.isEmpty)
        #expect(!plain.previewSign, "previewSign, a draft, is off unless asked for")
    }

    @Test("previewSign reaches the engine only on a key switched to it")
    func previewSignSwitch() {
        for on in [false, true] {
            var key = KeyConfiguration(name: "k")
            key.previewSign = on
            var engine = AuthenticatorConfiguration(aaguid: Array(repeating: 0, count: 16))
            VirtualKey.applyFeatures(of: key, to: &engine)
            #expect(engine.enabledExtensions.contains(ExtensionIdentifier.previewSign) == on)
            #expect(engine.enabledExtensions.contains(ExtensionIdentifier.thirdPartyPayment))
        }
    }

    @Test("an unknown protocol is refused with where it is")
    func badProtocol() {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        #expect(throws: ConfigurationError.self) {
            try configuration.apply(toml: "[[keys]]\nname = \"k\"\nprotocol = \"ctap3\"\n", source: "test.toml")
        }
    }
}
