// authenticatorLargeBlobs (0x0C), CTAP 2.1 §6.10: reads and fragmented writes
// of the serialized large-blob array, checked in the spec's order (§6.10.2):
// which error wins is behaviour.
//
// The array is opaque to the key: a CBOR array of entries that clients
// encrypt with each credential's largeBlobKey, followed by LEFT(SHA-256(array),
// 16). The key checks only that trailing hash, and keeps the whole array as one
// store secret, so that a write is replaced all at once and durable before its
// last fragment is answered; authenticatorReset deletes it with the other
// secrets:
//
// | secret           | value |
// |------------------|-------|
// | large-blob-array | the serialized large-blob array; absent means the initial one |
//
// A write in progress lives in memory only (`PendingLargeBlobWrite`), in the
// conversation that began it (Conversations.swift): other commands may come
// between its fragments, a power cycle abandons it.

import CBOR
import LatchkeyCrypto

enum LargeBlobSecret {
    static let array = "large-blob-array"
    /// The length of the trailing truncated hash (§6.10.2: LEFT(SHA-256, 16)).
    static let hashLength = 16
}

/// A serialized large-blob array arriving in fragments: expectedLength, and
/// the buffer whose length is expectedNextOffset (CTAP 2.1 §6.10.2).
struct PendingLargeBlobWrite: Sendable {
    var expectedLength: Int
    var buffer: [UInt8] = []
}

extension Authenticator {
    /// maxFragmentLength (§6.10.2): maxMsgSize − 64, room for the command's
    /// other fields around a fragment.
    static let maxLargeBlobFragmentLength = maxMessageSize - 64

    /// The array of a key that never stored one: the empty CBOR array and
    /// its truncated hash (§6.10.2).
    static let initialLargeBlobArray: [UInt8] = withTruncatedHash([0x80])

    /// `array` followed by LEFT(SHA-256(array), 16).
    static func withTruncatedHash(_ array: [UInt8]) -> [UInt8] {
        array + SHA256.hash(array).prefix(LargeBlobSecret.hashLength)
    }

    // MARK: - authenticatorLargeBlobs (CTAP 2.1 §6.10.2)

    /// A read answers with a fragment; a write answers with the status alone.
    func largeBlobs(_ request: LargeBlobsRequest, from origin: RequestOrigin) throws(CTAPStatus)
        -> LargeBlobsResponse?
    {
        // Steps 1–3: an offset, and exactly one of get and set.
        guard let offset = request.offset else { throw .invalidParameter }
        switch (request.get, request.set) {
        case (let get?, nil):
            return try readLargeBlobs(request, get: get, offset: offset)
        case (nil, let fragment?):
            try writeLargeBlobs(request, fragment: fragment, offset: offset, from: origin)
            return nil
        default:
            throw .invalidParameter
        }
    }

    /// Step 4: `get` bytes of the stored array from `offset`, fewer at its
    /// end. Reading needs no token, even on a key with a PIN: the entries are
    /// encrypted under keys only their credentials release.
    private func readLargeBlobs(_ request: LargeBlobsRequest, get: UInt64, offset: UInt64) throws(CTAPStatus)
        -> LargeBlobsResponse
    {
        // Steps 4.1–4.2: the write-only keys.
        if request.length != nil { throw .invalidParameter }
        if request.pinUvAuthParam != nil || request.pinUvAuthProtocol != nil { throw .invalidParameter }
        // Step 4.3.
        guard get <= UInt64(Self.maxLargeBlobFragmentLength) else { throw .invalidLength }
        // Step 4.4: offset may equal the length (an empty fragment says the
        // client has read everything).
        let array = try storedLargeBlobArray()
        guard offset <= UInt64(array.count) else { throw .invalidParameter }
        let start = Int(offset)
        let end = start + min(Int(get), array.count - start)
        return LargeBlobsResponse(config: Array(array[start..<end]))
    }

    /// Step 5: one fragment of a new array; the last one commits it. A write
    /// belongs to the conversation that sent its first fragment: another
    /// one's fragments find no write in progress (CTAP1_ERR_INVALID_SEQ) and
    /// another one's first fragment begins a write of its own.
    private func writeLargeBlobs(
        _ request: LargeBlobsRequest,
        fragment: [UInt8],
        offset: UInt64,
        from origin: RequestOrigin
    ) throws(CTAPStatus) {
        // Step 5.1.
        guard fragment.count <= Self.maxLargeBlobFragmentLength else { throw .invalidLength }
        if offset == 0 {
            // Step 5.2: the first fragment announces the total length.
            guard let length = request.length else { throw .invalidParameter }
            guard length <= UInt64(configuration.maxSerializedLargeBlobArray) else { throw .largeBlobStorageFull }
            // The shortest array is 0x80 and its hash.
            guard length >= UInt64(1 + LargeBlobSecret.hashLength) else { throw .invalidParameter }
            // Steps 5.2.4–5.2.5 set expectedLength and expectedNextOffset
            // before the token is checked: an unauthorized first fragment
            // still ends the write that was in progress.
            conversations[origin].largeBlobWrite = PendingLargeBlobWrite(expectedLength: Int(length))
        } else if request.length != nil {
            // Step 5.3.
            throw .invalidParameter
        }
        // Step 5.4: fragments arrive in order; without a write in progress
        // no offset but 0 is expected.
        guard var write = conversations[origin].largeBlobWrite, offset == UInt64(write.buffer.count) else {
            throw .invalidSequence
        }

        // Step 5.5: a key protected by a PIN or built-in UV, or with alwaysUv on, wants a
        // token with the lbw permission for every fragment.
        let protected = try userVerificationConfigured() ? true : alwaysUv()
        if protected {
            let message =
                [UInt8](repeating: 0xFF, count: 32) + [CTAPCommand.largeBlobs.rawValue, 0x00]
                + littleEndian(UInt32(offset)) + SHA256.hash(fragment)
            try authenticatePinUvAuthParam(
                request.pinUvAuthParam, protocol: request.pinUvAuthProtocol, message: message,
                permission: .largeBlobWrite
            )
        }

        // Step 5.6: nothing beyond the announced length. The write stays
        // open for a correct fragment.
        guard write.buffer.count + fragment.count <= write.expectedLength else { throw .invalidParameter }
        // Steps 5.7–5.9.
        write.buffer += fragment
        guard write.buffer.count == write.expectedLength else {
            conversations[origin].largeBlobWrite = write
            return
        }

        // Step 5.10: the complete array. Whatever happens now, this write is
        // over; a failed one leaves the stored array as it was.
        conversations[origin].largeBlobWrite = nil
        try commitLargeBlobArray(write.buffer)
    }

    /// Stores a complete serialized array after checking its trailing hash
    /// (INTEGRITY_FAILURE) and size: a largeBlobs write's last step, and the
    /// control API's replacement.
    func commitLargeBlobArray(_ serialized: [UInt8]) throws(CTAPStatus) {
        guard serialized.count <= configuration.maxSerializedLargeBlobArray else { throw .largeBlobStorageFull }
        guard serialized.count >= 1 + LargeBlobSecret.hashLength else { throw .integrityFailure }
        let hashStart = serialized.count - LargeBlobSecret.hashLength
        guard Self.withTruncatedHash(Array(serialized[..<hashStart])) == serialized else {
            throw .integrityFailure
        }
        do {
            // One secret, replaced in one durable store call: a crash leaves
            // the old array or the new one, never a mixture.
            try storing("storing the large-blob array") { () throws(StoreError) in
                try store.setSecret(serialized, named: LargeBlobSecret.array)
            }
        } catch let status where status == .keyStoreFull {
            throw .largeBlobStorageFull
        }
    }

    // MARK: - The stored array

    /// The serialized large-blob array: the stored one, or the initial one.
    func storedLargeBlobArray() throws(CTAPStatus) -> [UInt8] {
        try storing("reading the large-blob array") { () throws(StoreError) in
            try store.secret(named: LargeBlobSecret.array)
        } ?? Self.initialLargeBlobArray
    }

    /// For the control API: how many bytes the serialized large-blob array
    /// takes, and how many the key keeps at most.
    public func largeBlobArrayStatus() throws(CTAPStatus) -> (serializedSize: Int, limit: Int) {
        (try storedLargeBlobArray().count, configuration.maxSerializedLargeBlobArray)
    }
}

/// uint32LittleEndian(value), as the large-blob pinUvAuthParam covers the offset.
private func littleEndian(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
}
