// authenticatorLargeBlobs (CTAP 2.1 §6.10): the initial array, fragmented
// writes read back from any offset, every status in the spec's order, the
// integrity check, the size limit, the lbw permission with both PIN
// protocols, what ends a write in progress (power cycle, reset, a new first
// fragment) and what does not, persistence, and python-fido2's LargeBlobs as
// the platform.

import CBOR
import Testing

@testable import CTAP

/// `array` encoded, then LEFT(SHA-256, 16) computed by OpenSSL directly.
func serializedLargeBlobArray(_ array: CBORValue) -> [UInt8] {
    let bytes = array.encoded()
    return bytes + opensslSHA256(bytes).prefix(16)
}

/// A large-blob array of `count` entries shaped as clients write them
/// (ciphertext, nonce, origSize), each with `size` bytes of ciphertext.
func sampleLargeBlobArray(count: Int, size: Int, seed: UInt8 = 1) -> [UInt8] {
    serializedLargeBlobArray(
        .array(
            (0..<count).map { index in
                .intMap([
                    (1, .bytes((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &+ Int(seed)) })),
                    (2, .bytes(Array(repeating: UInt8(index), count: 12))), (3, .int(size - 16)),
                ])
            }
        )
    )
}

/// The array of a new key (§6.10.2): 0x80 then LEFT(SHA-256(0x80), 16).
let initialLargeBlobArray = hex("80 76be8b528d0075f7aae98d6fa57a6d3c")

/// maxMsgSize − 64.
let maxFragmentLength = 7609 - 64

/// An authenticatorLargeBlobs request map with the given members.
func largeBlobsRequest(
    get: Int? = nil,
    set: [UInt8]? = nil,
    offset: Int? = 0,
    length: Int? = nil,
    pinUvAuthParam: [UInt8]? = nil,
    pinUvAuthProtocol: Int? = nil
) -> CBORValue {
    .intMap(present: [
        (1, get.map(CBORValue.int)), (2, set.map(CBORValue.bytes)), (3, offset.map(CBORValue.int)),
        (4, length.map(CBORValue.int)), (5, pinUvAuthParam.map(CBORValue.bytes)),
        (6, pinUvAuthProtocol.map(CBORValue.int)),
    ])
}

extension TestKey {
    typealias Token = (token: [UInt8], platform: TestPlatform)

    /// authenticate(token, 32×0xff || h'0c00' || uint32LittleEndian(offset) ||
    /// SHA-256(fragment)), as a platform computes it.
    static func largeBlobsParam(_ token: Token, offset: Int, fragment: [UInt8]) -> [UInt8] {
        let offsetBytes = (0..<4).map { UInt8(truncatingIfNeeded: offset >> (8 * $0)) }
        let message = Array(repeating: UInt8(0xFF), count: 32) + [0x0C, 0x00] + offsetBytes + opensslSHA256(fragment)
        return token.platform.authenticate(key: token.token, message)
    }

    /// A read: the status, and config (empty on failure).
    func readLargeBlobs(offset: Int, get: Int) async throws -> (CTAPStatus, [UInt8]) {
        let (status, body) = try await send(.largeBlobs, largeBlobsRequest(get: get, offset: offset))
        guard status == .ok else { return (status, []) }
        let map = try #require(body).mapValue()
        #expect(map.entries.count == 1, "config alone")
        return (status, try map.required(1, "config").bytesValue())
    }

    /// One fragment of a write, authenticated with `token` when given.
    func writeLargeBlobs(
        _ fragment: [UInt8],
        offset: Int,
        length: Int? = nil,
        token: Token? = nil
    ) async throws -> CTAPStatus {
        let request = largeBlobsRequest(
            set: fragment, offset: offset, length: length,
            pinUvAuthParam: token.map { Self.largeBlobsParam($0, offset: offset, fragment: fragment) },
            pinUvAuthProtocol: token?.platform.version
        )
        let (status, body) = try await send(.largeBlobs, request)
        #expect(body == nil, "a write answers with the status alone")
        return status
    }

    /// A whole serialized array in fragments; the status of the first
    /// fragment that fails, or of the last.
    func writeLargeBlobArray(_ serialized: [UInt8], fragmentLength: Int = 1000, token: Token? = nil) async throws
        -> CTAPStatus
    {
        var offset = 0
        repeat {
            let end = min(offset + fragmentLength, serialized.count)
            let status = try await writeLargeBlobs(
                Array(serialized[offset..<end]), offset: offset, length: offset == 0 ? serialized.count : nil,
                token: token
            )
            guard status == .ok else { return status }
            offset = end
        } while offset < serialized.count
        return .ok
    }

    /// The first 100 bytes of `array` as the first fragment of a write.
    func beginLargeBlobWrite(_ array: [UInt8], token: Token? = nil) async throws -> CTAPStatus {
        try await writeLargeBlobs(Array(array[..<100]), offset: 0, length: array.count, token: token)
    }

    /// The rest of `array` after `beginLargeBlobWrite`, in one fragment.
    func finishLargeBlobWrite(_ array: [UInt8], token: Token? = nil) async throws -> CTAPStatus {
        try await writeLargeBlobs(Array(array[100...]), offset: 100, token: token)
    }

    /// The whole serialized array, read as python-fido2 does: fragments until a short one.
    func readLargeBlobArray(fragmentLength: Int = maxFragmentLength) async throws -> [UInt8] {
        var array: [UInt8] = []
        while true {
            let (status, fragment) = try await readLargeBlobs(offset: array.count, get: fragmentLength)
            try #require(status == .ok)
            array += fragment
            if fragment.count < fragmentLength { return array }
        }
    }
}

@Suite("authenticatorLargeBlobs")
struct LargeBlobsTests {
    static let protocols = [1, 2]

    // MARK: Reading

    @Test("a new key holds the empty array and its hash; getInfo advertises largeBlobs and the limit")
    func initialArray() async throws {
        #expect(initialLargeBlobArray == serializedLargeBlobArray(.array([])))
        let key = TestKey()
        #expect(try await key.readLargeBlobs(offset: 0, get: maxFragmentLength) == (.ok, initialLargeBlobArray))
        #expect(try await key.readLargeBlobs(offset: 1, get: 4) == (.ok, Array(initialLargeBlobArray[1..<5])))
        #expect(try await key.readLargeBlobs(offset: 17, get: 4) == (.ok, []), "at the end: an empty fragment")
        #expect(try await key.authenticator.largeBlobArrayStatus() == (17, 4096))

        let info = try await key.info()
        #expect(try info.required(4, "options").mapValue()[text: "largeBlobs"] == true)
        #expect(try info.required(0x0B, "maxSerializedLargeBlobArray").intValue() == 4096)
        let small = try await TestKey(maxSerializedLargeBlobArray: 1024).info()
        #expect(try small.required(0x0B, "maxSerializedLargeBlobArray").intValue() == 1024)
    }

    @Test("an array written in fragments reads back whole and from any offset")
    func writeAndRead() async throws {
        let key = TestKey()
        let array = sampleLargeBlobArray(count: 5, size: 600)
        #expect(array.count > 3000)
        #expect(try await key.writeLargeBlobArray(array, fragmentLength: 1000) == .ok)
        #expect(try await key.readLargeBlobArray() == array)
        #expect(try await key.readLargeBlobArray(fragmentLength: 256) == array)
        #expect(try await key.readLargeBlobs(offset: 100, get: 50) == (.ok, Array(array[100..<150])))
        #expect(try await key.readLargeBlobs(offset: array.count - 3, get: 50) == (.ok, Array(array.suffix(3))))
        #expect(try await key.readLargeBlobs(offset: 7, get: 0) == (.ok, []))
        #expect(try await key.authenticator.largeBlobArrayStatus() == (array.count, 4096))

        // A later write replaces the array whole, here with a shorter one in one fragment.
        let shorter = sampleLargeBlobArray(count: 1, size: 40, seed: 9)
        #expect(try await key.writeLargeBlobArray(shorter, fragmentLength: maxFragmentLength) == .ok)
        #expect(try await key.readLargeBlobArray() == shorter)
    }

    @Test("an array of exactly the limit fits; a longer one is LARGE_BLOB_STORAGE_FULL and changes nothing")
    func limit() async throws {
        let key = TestKey(maxSerializedLargeBlobArray: 1024)
        // 0x81, a byte string head of 3 bytes, the bytes, the 16-byte hash.
        let full = serializedLargeBlobArray(.array([.bytes(Array(repeating: 0x42, count: 1024 - 20))]))
        #expect(full.count == 1024)
        #expect(try await key.writeLargeBlobArray(full, fragmentLength: 300) == .ok)
        #expect(try await key.readLargeBlobArray() == full)

        let tooLong = serializedLargeBlobArray(.array([.bytes(Array(repeating: 0x43, count: 1024 - 19))]))
        #expect(try await key.writeLargeBlobArray(tooLong, fragmentLength: 300) == .largeBlobStorageFull)
        #expect(try await key.readLargeBlobArray() == full)
    }

    @Test("a store that cannot take the array answers LARGE_BLOB_STORAGE_FULL and keeps the initial one")
    func storeFull() async throws {
        let store = RecordingStore()
        store.fullSecret = "large-blob-array"
        let key = TestKey(store: store)
        let array = sampleLargeBlobArray(count: 1, size: 100)
        #expect(try await key.writeLargeBlobArray(array) == .largeBlobStorageFull)
        #expect(try await key.readLargeBlobArray() == initialLargeBlobArray)
        #expect(try await key.writeLargeBlobs([], offset: array.count) == .invalidSequence, "the write is over")
    }

    // MARK: Statuses of single requests, in the spec's order

    struct RequestCase: CustomTestStringConvertible, Sendable {
        let name: String
        let request: CBORValue
        let status: CTAPStatus
        var testDescription: String { name }

        init(_ name: String, _ status: CTAPStatus, _ request: CBORValue) {
            self.name = name
            self.request = request
            self.status = status
        }
    }

    static let tooLong = [UInt8](repeating: 0, count: maxFragmentLength + 1)
    static let eighteen = [UInt8](repeating: 1, count: 18)

    static let requestCases: [RequestCase] = [
        .init("step 1: no offset", .invalidParameter, largeBlobsRequest(get: 10, offset: nil)),
        .init("step 1: no offset with a set", .invalidParameter, largeBlobsRequest(set: [1], offset: nil, length: 17)),
        .init("step 2: neither get nor set", .invalidParameter, largeBlobsRequest()),
        .init("step 3: get and set", .invalidParameter, largeBlobsRequest(get: 10, set: [1], length: 17)),
        .init("step 4.1: get with length", .invalidParameter, largeBlobsRequest(get: 10, length: 17)),
        .init("step 4.2: get with pinUvAuthParam", .invalidParameter, largeBlobsRequest(get: 10, pinUvAuthParam: [1])),
        .init("step 4.2: get with the protocol", .invalidParameter, largeBlobsRequest(get: 10, pinUvAuthProtocol: 2)),
        .init("step 4.1 before 4.3", .invalidParameter, largeBlobsRequest(get: maxFragmentLength + 1, length: 17)),
        .init("step 4.3: get over maxFragmentLength", .invalidLength, largeBlobsRequest(get: maxFragmentLength + 1)),
        .init("step 4.3 before 4.4", .invalidLength, largeBlobsRequest(get: maxFragmentLength + 1, offset: 18)),
        .init("step 4.4: offset beyond the array", .invalidParameter, largeBlobsRequest(get: 1, offset: 18)),
        .init("step 4.4: a huge offset", .invalidParameter, largeBlobsRequest(get: 1, offset: Int.max)),
        .init("step 5.1: set over maxFragmentLength", .invalidLength, largeBlobsRequest(set: tooLong, length: 17)),
        .init("step 5.1 before 5.2.1", .invalidLength, largeBlobsRequest(set: tooLong)),
        .init("step 5.2.1: a first fragment without length", .invalidParameter, largeBlobsRequest(set: [1])),
        .init("step 5.2.2: length beyond the limit", .largeBlobStorageFull, largeBlobsRequest(set: [1], length: 4097)),
        .init("step 5.2.3: length under 17", .invalidParameter, largeBlobsRequest(set: [1], length: 16)),
        .init("step 5.3: length, offset 5", .invalidParameter, largeBlobsRequest(set: [1], offset: 5, length: 17)),
        .init("step 5.4: no write in progress", .invalidSequence, largeBlobsRequest(set: [1], offset: 5)),
        .init("step 5.6: a fragment over length", .invalidParameter, largeBlobsRequest(set: eighteen, length: 17)),
        .init("get of the wrong type", .cborUnexpectedType, .intMap([(1, .bytes([1])), (3, 0)])),
        .init("set of the wrong type", .cborUnexpectedType, .intMap([(2, "fragment"), (3, 0), (4, 17)])),
        .init("a negative offset", .cborUnexpectedType, .intMap([(1, 1), (3, -1)])),
        .init("not a map", .cborUnexpectedType, .array([1, 2])),
    ]

    @Test("each malformed request gets its status, the first the spec names", arguments: requestCases)
    func singleRequest(testCase: RequestCase) async throws {
        let key = TestKey()
        let (status, body) = try await key.send(.largeBlobs, testCase.request)
        #expect(status == testCase.status)
        #expect(body == nil)
        #expect(try await key.readLargeBlobArray() == initialLargeBlobArray)
    }

    @Test("no parameters at all is a missing parameter")
    func noParameters() async throws {
        #expect(try await TestKey().sendRaw([0x0C]).0 == .missingParameter)
    }

    // MARK: Writes in progress

    @Test("a fragment out of order is INVALID_SEQ, one past the length INVALID_PARAMETER; the write goes on")
    func fragmentOrder() async throws {
        let key = TestKey()
        let array = sampleLargeBlobArray(count: 1, size: 280)
        #expect(try await key.beginLargeBlobWrite(array) == .ok)
        #expect(try await key.writeLargeBlobs(Array(array[50..<100]), offset: 50) == .invalidSequence)
        #expect(try await key.writeLargeBlobs(Array(array[150...]), offset: 150) == .invalidSequence)
        #expect(try await key.writeLargeBlobs(Array(array[100...]) + [0], offset: 100) == .invalidParameter)
        #expect(try await key.writeLargeBlobs(Array(array[100...]), offset: 100, length: 300) == .invalidParameter)
        #expect(try await key.readLargeBlobArray() == initialLargeBlobArray, "nothing is stored before the end")
        #expect(try await key.writeLargeBlobs(Array(array[100..<200]), offset: 100) == .ok)
        #expect(try await key.writeLargeBlobs([], offset: 200) == .ok, "an empty fragment is a fragment")
        #expect(try await key.writeLargeBlobs(Array(array[200...]), offset: 200) == .ok)
        #expect(try await key.readLargeBlobArray() == array)
        #expect(try await key.writeLargeBlobs([], offset: array.count) == .invalidSequence, "a committed write is over")
    }

    @Test("a hash mismatch is INTEGRITY_FAILURE: the old array stays and the write is over")
    func integrityFailure() async throws {
        let key = TestKey()
        let old = sampleLargeBlobArray(count: 2, size: 100)
        #expect(try await key.writeLargeBlobArray(old) == .ok)
        var corrupt = sampleLargeBlobArray(count: 3, size: 200)
        corrupt[corrupt.count - 1] ^= 0x01
        #expect(try await key.writeLargeBlobArray(corrupt, fragmentLength: 400) == .integrityFailure)
        #expect(try await key.readLargeBlobArray() == old)
        #expect(try await key.writeLargeBlobs([], offset: corrupt.count) == .invalidSequence)
        // Changed bytes before an unchanged hash fail the same way, in one fragment.
        var shifted = sampleLargeBlobArray(count: 1, size: 50)
        shifted[3] ^= 0x80
        #expect(try await key.writeLargeBlobArray(shifted, fragmentLength: maxFragmentLength) == .integrityFailure)
        #expect(try await key.readLargeBlobArray() == old)
    }

    @Test("other commands between fragments leave a write alone; a power cycle abandons it")
    func interruptions() async throws {
        let key = TestKey()
        let array = sampleLargeBlobArray(count: 1, size: 280)
        #expect(try await key.beginLargeBlobWrite(array) == .ok)
        _ = try await key.info()
        _ = try await key.keyAgreement(2)
        #expect(try await key.readLargeBlobs(offset: 0, get: 17) == (.ok, initialLargeBlobArray))
        #expect(try await key.send(.getAssertion, GetAssertionBuilder().cbor).0 == .noCredentials)
        #expect(try await key.finishLargeBlobWrite(array) == .ok)
        #expect(try await key.readLargeBlobArray() == array)

        let next = sampleLargeBlobArray(count: 1, size: 280, seed: 7)
        #expect(try await key.beginLargeBlobWrite(next) == .ok)
        await key.authenticator.powerCycle()
        #expect(try await key.finishLargeBlobWrite(next) == .invalidSequence)
        #expect(try await key.readLargeBlobArray() == array)
    }

    @Test("a first fragment starts over: the write in progress ends even when the new one is refused")
    func firstFragmentStartsOver() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let token = try await key.configToken(permissions: 0x10)
        let array = sampleLargeBlobArray(count: 1, size: 280)
        #expect(try await key.beginLargeBlobWrite(array, token: token) == .ok)
        // §6.10.2 steps 5.2.4–5.2.5 come before the token check (step 5.5).
        #expect(try await key.writeLargeBlobs([], offset: 0, length: array.count) == .pinUvAuthTokenRequired)
        #expect(try await key.finishLargeBlobWrite(array, token: token) == .invalidSequence)
        // Checks before step 5.2.4 leave it alone.
        #expect(try await key.beginLargeBlobWrite(array, token: token) == .ok)
        #expect(try await key.writeLargeBlobs([], offset: 0, length: 4097) == .largeBlobStorageFull)
        #expect(try await key.writeLargeBlobs([], offset: 0, length: 16) == .invalidParameter)
        #expect(try await key.finishLargeBlobWrite(array, token: token) == .ok)
        #expect(try await key.readLargeBlobArray() == array)
    }

    // MARK: The lbw permission

    @Test("with a PIN every fragment needs a token with lbw; reads need none", arguments: protocols)
    func pinProtected(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234", protocol: version) == .ok)
        let array = sampleLargeBlobArray(count: 2, size: 500)
        let first = Array(array[..<600])
        #expect(try await key.readLargeBlobArray() == initialLargeBlobArray, "reading needs no token")

        let lbw = try await key.configToken(version, permissions: 0x10)
        func write(param: [UInt8]?, protocol: Int?) async throws -> CTAPStatus {
            let request = largeBlobsRequest(
                set: first, length: array.count, pinUvAuthParam: param, pinUvAuthProtocol: `protocol`
            )
            let (status, _) = try await key.send(.largeBlobs, request)
            return status
        }
        let param = TestKey.largeBlobsParam(lbw, offset: 0, fragment: first)
        #expect(try await write(param: nil, protocol: version) == .pinUvAuthTokenRequired)
        #expect(try await write(param: param, protocol: nil) == .missingParameter)
        #expect(try await write(param: param, protocol: 3) == .invalidParameter)
        #expect(try await write(param: Array(repeating: 0, count: param.count), protocol: version) == .pinAuthInvalid)
        #expect(
            try await write(param: TestKey.largeBlobsParam(lbw, offset: 1, fragment: first), protocol: version)
                == .pinAuthInvalid,
            "the MAC covers the offset"
        )
        #expect(
            try await write(param: TestKey.largeBlobsParam(lbw, offset: 0, fragment: [0] + first), protocol: version)
                == .pinAuthInvalid,
            "the MAC covers the fragment"
        )
        // Checks before step 5.5 win over a missing token.
        #expect(try await key.writeLargeBlobs(first, offset: 600) == .invalidSequence)
        #expect(try await key.writeLargeBlobs(first, offset: 0, length: 4097) == .largeBlobStorageFull)
        #expect(try await key.writeLargeBlobs(Self.tooLong, offset: 0, length: 4096) == .invalidLength)

        // A token for everything else but lbw is refused; so are the fragments of another token.
        let others = try await key.configToken(version, permissions: 0x01 | 0x02 | 0x04 | 0x20)
        #expect(try await key.writeLargeBlobArray(array, fragmentLength: 600, token: others) == .pinAuthInvalid)
        #expect(try await key.writeLargeBlobArray(array, fragmentLength: 600, token: lbw) == .pinAuthInvalid,
            "the lbw token was replaced by the one obtained after it")

        let token = try await key.configToken(version, permissions: 0x10)
        #expect(try await key.writeLargeBlobArray(array, fragmentLength: 600, token: token) == .ok)
        #expect(try await key.readLargeBlobArray() == array)
        #expect(try await key.pinRetries().0 == 8)
    }

    @Test("lbw survives the touch of a makeCredential, which spends mc and ga")
    func lbwOutlivesPresence() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let token = try await key.configToken(permissions: 0x01 | 0x10)
        var request = MakeCredentialBuilder(rk: true)
        request.pinUvAuthParam = token.platform.authenticate(key: token.token, request.clientDataHash)
        request.pinUvAuthProtocol = 2
        #expect(try await key.makeCredential(request).flags & 0x05 == 0x05, "UP and UV")
        let array = sampleLargeBlobArray(count: 1, size: 64)
        #expect(try await key.writeLargeBlobArray(array, token: token) == .ok)
        #expect(try await key.readLargeBlobArray() == array)
    }

    @Test("alwaysUv without a PIN: a write needs a token, and none can exist yet")
    func alwaysUvWithoutPIN() async throws {
        let key = TestKey()
        #expect(try await key.config(0x02) == .ok)
        let array = sampleLargeBlobArray(count: 1, size: 64)
        #expect(try await key.writeLargeBlobArray(array) == .pinUvAuthTokenRequired)
        let (status, _) = try await key.send(
            .largeBlobs,
            largeBlobsRequest(
                set: array, length: array.count, pinUvAuthParam: Array(repeating: 0, count: 32), pinUvAuthProtocol: 2
            )
        )
        #expect(status == .pinNotSet)
        #expect(try await key.readLargeBlobArray() == initialLargeBlobArray)
    }

    // MARK: Reset and persistence

    @Test("authenticatorReset restores the initial array and ends a write in progress")
    func reset() async throws {
        let key = TestKey()
        let array = sampleLargeBlobArray(count: 2, size: 300)
        #expect(try await key.writeLargeBlobArray(array) == .ok)
        let next = sampleLargeBlobArray(count: 1, size: 280, seed: 3)
        #expect(try await key.beginLargeBlobWrite(next) == .ok)
        #expect(try await key.send(.reset).0 == .ok)
        #expect(try await key.finishLargeBlobWrite(next) == .invalidSequence)
        #expect(try await key.readLargeBlobArray() == initialLargeBlobArray)
        #expect(try await key.authenticator.largeBlobArrayStatus() == (17, 4096))
    }

    @Test("the array outlives a restart over the same store; a write in progress does not")
    func persistence() async throws {
        let key = TestKey()
        let array = sampleLargeBlobArray(count: 3, size: 400)
        #expect(try await key.writeLargeBlobArray(array) == .ok)
        let next = sampleLargeBlobArray(count: 1, size: 280, seed: 5)
        #expect(try await key.beginLargeBlobWrite(next) == .ok)

        let restarted = TestKey(sharing: key, seed: "restart")
        #expect(try await restarted.readLargeBlobArray() == array)
        #expect(try await restarted.finishLargeBlobWrite(next) == .invalidSequence)
        #expect(try await restarted.authenticator.largeBlobArrayStatus() == (array.count, 4096))
    }

    // MARK: python-fido2

    @Test("python-fido2's LargeBlobs puts, gets and deletes blobs with lbw tokens of both protocols")
    func pythonClient() async throws {
        let key = TestKey()
        try await expectPythonClient("large_blobs_client.py", against: key, checks: 27, callsOver: 40)
        // What the client left: two blobs it wrote, read back here without it.
        let array = try CBORDecoder().decodePrefix(try await key.readLargeBlobArray()).value.arrayValue()
        #expect(array.count == 2)
    }
}
