// authenticatorLargeBlobs (0x0C), CTAP 2.1 §6.10: the request and response maps.

public import CBOR

/// The authenticatorLargeBlobs request (CTAP 2.1 §6.10.2).
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | get               | unsigned |
/// | 0x02 | set               | bytes |
/// | 0x03 | offset            | unsigned, required |
/// | 0x04 | length            | unsigned |
/// | 0x05 | pinUvAuthParam    | bytes |
/// | 0x06 | pinUvAuthProtocol | unsigned |
///
/// Which keys may appear together, and `offset` itself, are the handler's
/// checks: the spec answers an absent `offset` with
/// CTAP1_ERR_INVALID_PARAMETER (§6.10.2 step 1), not MISSING_PARAMETER, so
/// it is read as optional here. Only the types are checked here.
public struct LargeBlobsRequest: Sendable, CBORDecodable {
    /// The number of bytes to read.
    public var get: UInt64?
    /// A fragment to write.
    public var set: [UInt8]?
    /// The byte offset at which to read or write.
    public var offset: UInt64?
    /// The total length of a write; only with `set` at offset 0.
    public var length: UInt64?
    public var pinUvAuthParam: [UInt8]?
    public var pinUvAuthProtocol: UInt64?

    /// Reads the request map.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("largeBlobs parameters")
        get = try map[int: 0x01]?.unsignedValue("get")
        set = try map[int: 0x02]?.bytesValue("set")
        offset = try map[int: 0x03]?.unsignedValue("offset")
        length = try map[int: 0x04]?.unsignedValue("length")
        pinUvAuthParam = try map[int: 0x05]?.bytesValue("pinUvAuthParam")
        pinUvAuthProtocol = try map[int: 0x06]?.unsignedValue("pinUvAuthProtocol")
    }
}

/// The authenticatorLargeBlobs response to a read (CTAP 2.1 §6.10.2). A write
/// answers with the status alone.
///
/// | key  | name   | type |
/// |------|--------|------|
/// | 0x01 | config | bytes: part of the serialized large-blob array |
public struct LargeBlobsResponse: Sendable, CBOREncodable {
    public var config: [UInt8]

    /// The response map.
    public var cbor: CBORValue { .intMap([(0x01, .bytes(config))]) }
}
