// The wire types as CBORDecodable and CBOREncodable: entities decode what
// they encode, and a request that carries extension inputs reads them against
// the extensions offered (every supported one when no key narrows the set).

import CBOR
import Testing

@testable import CTAP

@Suite("wire types")
struct WireCodingTests {
    @Test("each WebAuthn entity decodes what it encodes")
    func entitiesRoundTrip() throws {
        let rp = RelyingPartyEntity(id: "example.com", name: "Example")
        #expect(try RelyingPartyEntity(decoding: rp.cbor.encoded()) == rp)
        let unnamed = RelyingPartyEntity(id: "example.com")
        #expect(try RelyingPartyEntity(decoding: unnamed.cbor.encoded()) == unnamed)
        let user = UserEntity(id: [1, 2, 3], name: "alice", displayName: "Alice")
        #expect(try UserEntity(decoding: user.cbor.encoded()) == user)
        let descriptor = CredentialDescriptor(id: [9, 8, 7])
        #expect(try CredentialDescriptor(decoding: descriptor.cbor.encoded()) == descriptor)
        let parameters = CredentialParameters(alg: COSEAlgorithm.edDSA.rawValue)
        #expect(try CredentialParameters(decoding: parameters.cbor.encoded()) == parameters)
    }

    @Test("an assertion names the user only when identifying; credentialManagement's user is the whole entity")
    func userForms() throws {
        let user = UserEntity(id: [1], name: "alice", displayName: "Alice")
        #expect(user.cbor(identifying: false) == .textMap([("id", .bytes([1]))]))
        #expect(user.cbor == user.cbor(identifying: true))
    }

    @Test("a request reads the inputs of every supported extension unless told which are offered")
    func extensionInputsAgainstTheOfferedSet() throws {
        // A text string is the wrong type for hmac-secret's input in both requests.
        var create = MakeCredentialBuilder()
        create.extensions = [(ExtensionIdentifier.hmacSecret, "not an input")]
        #expect(throws: CBORError(.unexpectedType, "")) { try MakeCredentialRequest(cbor: create.cbor) }
        let made = try MakeCredentialRequest(cbor: create.cbor, offering: [ExtensionIdentifier.credProtect])
        #expect(made.extensions.hmacSecret == false)

        var get = GetAssertionBuilder()
        get.extensions = [(ExtensionIdentifier.hmacSecret, "not an input")]
        #expect(throws: CBORError(.unexpectedType, "")) { try GetAssertionRequest(cbor: get.cbor) }
        #expect(try GetAssertionRequest(cbor: get.cbor, offering: []).extensions.hmacSecret == nil)
    }

    @Test("lists and options read as their types; absent, they are empty and unset")
    func listsAndOptions() throws {
        var get = GetAssertionBuilder()
        get.allowList = [[1], [2, 2]]
        get.up = false
        let request = try GetAssertionRequest(cbor: get.cbor)
        #expect(request.allowList == [CredentialDescriptor(id: [1]), CredentialDescriptor(id: [2, 2])])
        #expect(request.options == AuthenticatorOptions(up: false))
        let bare = try GetAssertionRequest(cbor: GetAssertionBuilder().cbor)
        #expect(bare.allowList.isEmpty && bare.options == AuthenticatorOptions())
        let made = try MakeCredentialRequest(cbor: MakeCredentialBuilder(algorithms: [-8, -7]).cbor)
        #expect(made.pubKeyCredParams == [CredentialParameters(alg: -8), CredentialParameters(alg: -7)])
    }
}
