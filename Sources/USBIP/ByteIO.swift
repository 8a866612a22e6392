// Reading and writing the fixed-width fields of USB/IP (big-endian) and of USB descriptors
// and setup packets (little-endian, USB 2.0 §8.1). Every read checks the bytes left and
// throws rather than trapping.

/// A cursor over bytes that reads fixed-width fields, throwing when too few are left.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// The bytes not yet read.
    var remaining: Int { bytes.count - offset }

    private func require(_ count: Int, _ what: StaticString) throws(USBIPError) {
        guard count <= remaining else {
            throw USBIPError(.truncated, "\(what) needs \(count) bytes, \(remaining) left")
        }
    }

    mutating func readUInt8() throws(USBIPError) -> UInt8 {
        try require(1, "a byte")
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func readUInt16() throws(USBIPError) -> UInt16 {
        try require(2, "a 16-bit field")
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    mutating func readUInt32() throws(USBIPError) -> UInt32 {
        try require(4, "a 32-bit field")
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16
            | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    mutating func readInt32() throws(USBIPError) -> Int32 {
        Int32(bitPattern: try readUInt32())
    }

    mutating func readBytes(_ count: Int) throws(USBIPError) -> [UInt8] {
        guard count >= 0 else { throw USBIPError(.invalidField, "a negative length \(count)") }
        try require(count, "a byte string")
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func skip(_ count: Int) throws(USBIPError) {
        try require(count, "padding")
        offset += count
    }

    /// A zero-terminated string in a fixed-size field (`path`, `busid`): the bytes before the
    /// first zero, which must be UTF-8. Bytes after the zero are ignored (the spec says they
    /// "shall be filled with zero bytes"; being lenient there costs nothing).
    mutating func readFixedString(size: Int, field: StaticString) throws(USBIPError) -> String {
        let raw = try readBytes(size)
        guard let end = raw.firstIndex(of: 0) else {
            throw USBIPError(.invalidField, "\(field) is not closed with a zero byte")
        }
        guard let string = String(validating: raw[..<end], as: UTF8.self) else {
            throw USBIPError(.invalidField, "\(field) is not UTF-8")
        }
        return string
    }

    /// Throws unless every byte has been read.
    func expectEnd(_ what: StaticString) throws(USBIPError) {
        guard remaining == 0 else {
            throw USBIPError(.trailingBytes, "\(remaining) bytes after \(what)")
        }
    }
}

/// A message read field by field from a `ByteReader`: the stream decoders read it
/// from a buffer that holds more, the whole-message `init(bytes:)`s from exactly its bytes.
protocol ByteReadable {
    init(reader: inout ByteReader) throws(USBIPError)
}

extension ByteReadable {
    /// Reads one message that must take every byte of `bytes`; `what` names it in the
    /// error when bytes are left over.
    init(wholeMessage bytes: [UInt8], _ what: StaticString) throws(USBIPError) {
        var reader = ByteReader(bytes)
        try self.init(reader: &reader)
        try reader.expectEnd(what)
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    mutating func appendBigEndian(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value >> 24))
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    mutating func appendBigEndian(_ value: Int32) {
        appendBigEndian(UInt32(bitPattern: value))
    }

    mutating func appendLittleEndian(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func appendZeros(_ count: Int) {
        append(contentsOf: repeatElement(0, count: count))
    }

    /// Appends `string` zero-terminated and zero-filled to `size` bytes. A string that does
    /// not fit with its terminator, or holds a zero, is a programmer error: the strings
    /// encoded are the server's own (bus ids and paths it was configured with).
    mutating func appendFixedString(_ string: String, size: Int) {
        let utf8 = Array(string.utf8)
        precondition(utf8.count < size, "\"\(string)\" does not fit a \(size)-byte field")
        precondition(!utf8.contains(0), "\"\(string)\" holds a zero byte")
        append(contentsOf: utf8)
        appendZeros(size - utf8.count)
    }
}
