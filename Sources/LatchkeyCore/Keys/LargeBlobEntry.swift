// One credential's large blob in the key's large-blob array (CTAP 2.1
// §6.10.3), for seeding and reading blobs through the control API: an entry
// is a CBOR map {1: ciphertext, 2: nonce, 3: origSize}, the ciphertext being
// AES-256-GCM, under the credential's largeBlobKey with the AAD "blob" ||
// uint64LE(origSize), of the blob compressed with raw DEFLATE (RFC 1951,
// no zlib header). The serialized array is the CBOR array followed by the
// first 16 bytes of its SHA-256.

import CBOR
import CZlib
import LatchkeyCrypto

/// Reading and writing large-blob array entries.
enum LargeBlobEntry {
    /// Why an entry could not be made or read.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static let hashLength = 16

    /// The CBOR array of a serialized large-blob array (its hash checked).
    static func entries(ofSerialized serialized: [UInt8]) throws(Failure) -> [CBORValue] {
        guard serialized.count > hashLength else { throw Failure(description: "the large-blob array is too short") }
        let array = Array(serialized.dropLast(hashLength))
        guard Array(SHA256.hash(array).prefix(hashLength)) == Array(serialized.suffix(hashLength)) else {
            throw Failure(description: "the large-blob array's hash does not match")
        }
        do {
            return try CBORDecoder().decode(array).arrayValue("large-blob array")
        } catch {
            throw Failure(description: "the large-blob array is not a CBOR array: \(error)")
        }
    }

    /// The serialized array of `entries`.
    static func serialize(_ entries: [CBORValue]) -> [UInt8] {
        let array = CBORValue.array(entries).encoded()
        return array + SHA256.hash(array).prefix(hashLength)
    }

    /// The entry holding `blob` for a credential with `largeBlobKey`.
    static func seal(_ blob: [UInt8], largeBlobKey: [UInt8], nonce: [UInt8]) throws(Failure) -> CBORValue {
        let compressed = try deflate(blob)
        let sealed: [UInt8]
        do {
            sealed = try AES256GCM.seal(compressed, key: largeBlobKey, nonce: nonce, authenticating: aad(blob.count))
        } catch {
            throw Failure(description: "cannot encrypt the large blob: \(error)")
        }
        return .intMap([(1, .bytes(sealed)), (2, .bytes(nonce)), (3, .int(blob.count))])
    }

    /// The blob of the first entry `largeBlobKey` opens, if any (§6.10.3:
    /// entries that do not decrypt belong to other credentials).
    static func open(_ entries: [CBORValue], largeBlobKey: [UInt8]) -> [UInt8]? {
        for entry in entries {
            guard let map = try? entry.mapValue(),
                let sealed = try? map[int: 1]?.bytesValue(),
                let nonce = try? map[int: 2]?.bytesValue(),
                let size = try? map[int: 3]?.intValue(), size >= 0,
                let compressed = try? AES256GCM.open(
                    sealed,
                    key: largeBlobKey,
                    nonce: nonce,
                    authenticating: aad(size)
                ),
                let blob = try? inflate(compressed, expected: size)
            else { continue }
            return blob
        }
        return nil
    }

    private static func aad(_ size: Int) -> [UInt8] {
        Array("blob".utf8) + (0..<8).map { UInt8(truncatingIfNeeded: UInt64(size) >> (8 * UInt64($0))) }
    }

    /// Raw DEFLATE (windowBits -15), as python-fido2 and browsers write it.
    static func deflate(_ input: [UInt8]) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard
            deflateInit2_(
                &stream,
                Z_DEFAULT_COMPRESSION,
                Z_DEFLATED,
                -MAX_WBITS,
                8,
                Z_DEFAULT_STRATEGY,
                ZLIB_VERSION,
                Int32(MemoryLayout<z_stream>.size)
            ) == Z_OK
        else { throw Failure(description: "zlib deflateInit2 failed") }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
        let status = finish(&stream, input: input, output: &output) { CZlib.deflate(&$0, Z_FINISH) }
        guard status == Z_STREAM_END else { throw Failure(description: "zlib deflate failed (\(status))") }
        return Array(output.prefix(Int(stream.total_out)))
    }

    /// Inflates raw DEFLATE that must give exactly `expected` bytes.
    static func inflate(_ input: [UInt8], expected: Int) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, -MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(description: "zlib inflateInit2 failed")
        }
        defer { inflateEnd(&stream) }
        // One byte more than expected, so that a longer output is caught.
        var output = [UInt8](repeating: 0, count: expected + 1)
        let status = finish(&stream, input: input, output: &output) { CZlib.inflate(&$0, Z_FINISH) }
        guard status == Z_STREAM_END, Int(stream.total_out) == expected else {
            throw Failure(description: "the large blob does not inflate to its original size")
        }
        return Array(output.prefix(expected))
    }

    /// Runs one zlib call over all of `input` into `output` (both whole
    /// buffers: the pointers live only for the call).
    private static func finish(
        _ stream: inout z_stream,
        input: [UInt8],
        output: inout [UInt8],
        _ call: (inout z_stream) -> Int32
    ) -> Int32 {
        var input = input
        return input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                return call(&stream)
            }
        }
    }
}
