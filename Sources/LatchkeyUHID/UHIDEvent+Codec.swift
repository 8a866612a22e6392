// The byte layout of `struct uhid_event` and the codec between it and
// `UHIDEvent`. Pure: no system calls.
//
// Byte order: uhid does no conversion, so every integer field is in the
// host's native byte order (little-endian on x86_64 and aarch64, the hosts
// latchkey runs on). The codec reads and writes native order, exactly as a C
// program filling the struct does. The tests check every offset below
// against the C header.
//
// Size: the union member `struct uhid_start_req` is not packed and holds a
// `__u64`, so the union is 8-aligned and rounds its largest member (create2,
// 4372 bytes) up to 4376; the packed outer struct adds the 4-byte type
// without padding: sizeof(struct uhid_event) = 4380. (The rig's Python smoke
// writes 4376 bytes; the kernel zero-extends short writes, so both work.)

/// Offsets (from the start of `struct uhid_event`) and sizes of the fields
/// the codec uses.
enum UHIDEventLayout {
    /// sizeof(struct uhid_event)
    static let size = 4380
    /// offsetof(struct uhid_event, u)
    static let payload = 4
    /// UHID_DATA_MAX
    static let dataMax = 4096
    /// HID_MAX_DESCRIPTOR_SIZE
    static let descriptorMax = 4096

    /// struct uhid_create2_req
    enum Create2 {
        static let name = payload + 0
        static let nameCount = 128
        static let phys = payload + 128
        static let physCount = 64
        static let uniq = payload + 192
        static let uniqCount = 64
        static let rdSize = payload + 256
        static let bus = payload + 258
        static let vendor = payload + 260
        static let product = payload + 264
        static let version = payload + 268
        static let country = payload + 272
        static let rdData = payload + 276
    }

    /// struct uhid_start_req
    enum Start {
        static let devFlags = payload + 0
        static let end = payload + 8
    }

    /// struct uhid_output_req
    enum Output {
        static let data = payload + 0
        static let size = payload + 4096
        static let rtype = payload + 4098
        static let end = payload + 4099
    }

    /// struct uhid_get_report_req
    enum GetReport {
        static let id = payload + 0
        static let rnum = payload + 4
        static let rtype = payload + 5
        static let end = payload + 6
    }

    /// struct uhid_get_report_reply_req
    enum GetReportReply {
        static let id = payload + 0
        static let err = payload + 4
        static let size = payload + 6
        static let data = payload + 8
    }

    /// struct uhid_set_report_req
    enum SetReport {
        static let id = payload + 0
        static let rnum = payload + 4
        static let rtype = payload + 5
        static let size = payload + 6
        static let data = payload + 8
    }

    /// struct uhid_set_report_reply_req
    enum SetReportReply {
        static let id = payload + 0
        static let err = payload + 4
        static let end = payload + 6
    }

    /// struct uhid_input2_req
    enum Input2 {
        static let size = payload + 0
        static let data = payload + 2
    }
}

extension UHIDEvent {
    /// The size of every encoded event: sizeof(struct uhid_event), 4380 bytes.
    public static let encodedSize = UHIDEventLayout.size

    /// The most data one OUTPUT, INPUT2, GET_REPORT_REPLY or SET_REPORT
    /// carries: UHID_DATA_MAX, 4096 bytes.
    public static let maximumDataCount = UHIDEventLayout.dataMax

    /// Decodes one event as read from `/dev/uhid`.
    ///
    /// Strict: throws `.truncatedEvent` when `bytes` ends before the type
    /// field, before the fixed fields of the payload, or before the data the
    /// payload's size field announces; `.invalidEvent` for a size field above
    /// 4096, an empty report descriptor, or more than 4380 bytes;
    /// `.unknownEventType` for any other type (the legacy types included).
    /// Bytes after the announced data (the kernel sends zeros) are not read.
    public init(bytes: [UInt8]) throws(UHIDError) {
        let reader = EventReader(bytes: bytes)
        guard bytes.count <= UHIDEventLayout.size else {
            throw UHIDError(.invalidEvent, "a uhid event has at most 4380 bytes, got \(bytes.count)")
        }
        try reader.require(UHIDEventLayout.payload, "the type field")
        let rawType: UInt32 = reader.integer(at: 0)
        guard let type = UHIDEventType(rawValue: rawType) else {
            throw UHIDError(.unknownEventType, "uhid event type \(rawType) is not handled")
        }
        switch type {
        case .destroy:
            self = .destroy
        case .stop:
            self = .stop
        case .open:
            self = .open
        case .close:
            self = .close

        case .start:
            typealias L = UHIDEventLayout.Start
            try reader.require(L.end, "UHID_START")
            self = .start(UHIDDeviceFlags(rawValue: reader.integer(at: L.devFlags)))

        case .output:
            typealias L = UHIDEventLayout.Output
            try reader.require(L.end, "UHID_OUTPUT")
            self = .output(
                UHIDOutputRequest(
                    data: try reader.data(at: L.data, sizeAt: L.size, "UHID_OUTPUT"),
                    rtype: UHIDReportType(rawValue: reader.integer(at: L.rtype))
                )
            )

        case .getReport:
            typealias L = UHIDEventLayout.GetReport
            try reader.require(L.end, "UHID_GET_REPORT")
            self = .getReport(
                UHIDGetReportRequest(
                    id: reader.integer(at: L.id),
                    rnum: reader.integer(at: L.rnum),
                    rtype: UHIDReportType(rawValue: reader.integer(at: L.rtype))
                )
            )

        case .getReportReply:
            typealias L = UHIDEventLayout.GetReportReply
            try reader.require(L.data, "UHID_GET_REPORT_REPLY")
            self = .getReportReply(
                UHIDGetReportReply(
                    id: reader.integer(at: L.id),
                    err: reader.integer(at: L.err),
                    data: try reader.data(at: L.data, sizeAt: L.size, "UHID_GET_REPORT_REPLY")
                )
            )

        case .setReport:
            typealias L = UHIDEventLayout.SetReport
            try reader.require(L.data, "UHID_SET_REPORT")
            self = .setReport(
                UHIDSetReportRequest(
                    id: reader.integer(at: L.id),
                    rnum: reader.integer(at: L.rnum),
                    rtype: UHIDReportType(rawValue: reader.integer(at: L.rtype)),
                    data: try reader.data(at: L.data, sizeAt: L.size, "UHID_SET_REPORT")
                )
            )

        case .setReportReply:
            typealias L = UHIDEventLayout.SetReportReply
            try reader.require(L.end, "UHID_SET_REPORT_REPLY")
            self = .setReportReply(
                UHIDSetReportReply(id: reader.integer(at: L.id), err: reader.integer(at: L.err))
            )

        case .input2:
            typealias L = UHIDEventLayout.Input2
            try reader.require(L.data, "UHID_INPUT2")
            self = .input2(try reader.data(at: L.data, sizeAt: L.size, "UHID_INPUT2"))

        case .create2:
            typealias L = UHIDEventLayout.Create2
            try reader.require(L.rdData, "UHID_CREATE2")
            let size = Int(reader.integer(at: L.rdSize) as UInt16)
            guard size > 0, size <= UHIDEventLayout.descriptorMax else {
                throw UHIDError(.invalidEvent, "UHID_CREATE2 rd_size \(size) is outside 1...4096")
            }
            try reader.require(L.rdData + size, "the report descriptor of UHID_CREATE2")
            self = .create2(
                UHIDCreate2Request(
                    name: reader.string(at: L.name, count: L.nameCount),
                    phys: reader.string(at: L.phys, count: L.physCount),
                    uniq: reader.string(at: L.uniq, count: L.uniqCount),
                    bus: reader.integer(at: L.bus),
                    vendor: reader.integer(at: L.vendor),
                    product: reader.integer(at: L.product),
                    version: reader.integer(at: L.version),
                    country: reader.integer(at: L.country),
                    rdData: reader.bytes(at: L.rdData, count: size)
                )
            )
        }
    }

    /// The event as the 4380 bytes of one `write()` to `/dev/uhid`, unused
    /// bytes zero.
    ///
    /// Throws `.invalidEvent` when a field does not fit: data above 4096
    /// bytes, a report descriptor empty or above 4096 bytes, a name above
    /// 127 bytes of UTF-8 or a phys or uniq above 63 (the kernel keeps one
    /// byte less than the array for the terminating NUL), or a string
    /// holding a NUL.
    public func encoded() throws(UHIDError) -> [UInt8] {
        var bytes: [UInt8] = []
        try encode(into: &bytes)
        return bytes
    }

    /// Appends the event's 4380 bytes to `buffer`; see `encoded()`.
    public func encode(into buffer: inout [UInt8]) throws(UHIDError) {
        var writer = EventWriter()
        writer.put(type.rawValue, at: 0)
        switch self {
        case .destroy, .stop, .open, .close:
            break

        case .start(let flags):
            writer.put(flags.rawValue, at: UHIDEventLayout.Start.devFlags)

        case .output(let request):
            typealias L = UHIDEventLayout.Output
            try writer.putData(request.data, at: L.data, sizeAt: L.size, "UHID_OUTPUT")
            writer.put(request.rtype.rawValue, at: L.rtype)

        case .getReport(let request):
            typealias L = UHIDEventLayout.GetReport
            writer.put(request.id, at: L.id)
            writer.put(request.rnum, at: L.rnum)
            writer.put(request.rtype.rawValue, at: L.rtype)

        case .getReportReply(let reply):
            typealias L = UHIDEventLayout.GetReportReply
            writer.put(reply.id, at: L.id)
            writer.put(reply.err, at: L.err)
            try writer.putData(reply.data, at: L.data, sizeAt: L.size, "UHID_GET_REPORT_REPLY")

        case .setReport(let request):
            typealias L = UHIDEventLayout.SetReport
            writer.put(request.id, at: L.id)
            writer.put(request.rnum, at: L.rnum)
            writer.put(request.rtype.rawValue, at: L.rtype)
            try writer.putData(request.data, at: L.data, sizeAt: L.size, "UHID_SET_REPORT")

        case .setReportReply(let reply):
            typealias L = UHIDEventLayout.SetReportReply
            writer.put(reply.id, at: L.id)
            writer.put(reply.err, at: L.err)

        case .input2(let data):
            typealias L = UHIDEventLayout.Input2
            try writer.putData(data, at: L.data, sizeAt: L.size, "UHID_INPUT2")

        case .create2(let request):
            typealias L = UHIDEventLayout.Create2
            try writer.putString(request.name, at: L.name, count: L.nameCount, "name")
            try writer.putString(request.phys, at: L.phys, count: L.physCount, "phys")
            try writer.putString(request.uniq, at: L.uniq, count: L.uniqCount, "uniq")
            guard !request.rdData.isEmpty, request.rdData.count <= UHIDEventLayout.descriptorMax else {
                throw UHIDError(
                    .invalidEvent,
                    "a report descriptor has 1...4096 bytes, got \(request.rdData.count)"
                )
            }
            writer.put(UInt16(request.rdData.count), at: L.rdSize)
            writer.put(request.bus, at: L.bus)
            writer.put(request.vendor, at: L.vendor)
            writer.put(request.product, at: L.product)
            writer.put(request.version, at: L.version)
            writer.put(request.country, at: L.country)
            writer.putBytes(request.rdData, at: L.rdData)
        }
        buffer.append(contentsOf: writer.bytes)
    }
}

/// Reads native-order fields of an event; callers check lengths with
/// `require` before reading.
private struct EventReader {
    let bytes: [UInt8]

    /// Throws `.truncatedEvent` unless `count` bytes are present.
    func require(_ count: Int, _ what: String) throws(UHIDError) {
        guard bytes.count >= count else {
            throw UHIDError(.truncatedEvent, "\(what) needs \(count) bytes, got \(bytes.count)")
        }
    }

    func integer<T: FixedWidthInteger>(at offset: Int) -> T {
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { raw in
            for index in raw.indices { raw[index] = bytes[offset + index] }
        }
        return value
    }

    func bytes(at offset: Int, count: Int) -> [UInt8] {
        Array(bytes[offset..<(offset + count)])
    }

    /// `data[..<size]` of a payload whose `__u16 size` is at `sizeOffset`
    /// (the reader of `EventWriter.putData`): throws when the size is above
    /// UHID_DATA_MAX or the event ends before the data does.
    func data(at offset: Int, sizeAt sizeOffset: Int, _ what: String) throws(UHIDError) -> [UInt8] {
        let size = Int(integer(at: sizeOffset) as UInt16)
        guard size <= UHIDEventLayout.dataMax else {
            throw UHIDError(.invalidEvent, "\(what) size \(size) exceeds UHID_DATA_MAX (4096)")
        }
        try require(offset + size, "the data of \(what)")
        return bytes(at: offset, count: size)
    }

    /// A NUL-padded char array: the bytes before the first NUL (all of them
    /// when there is none), as UTF-8 with invalid sequences replaced.
    func string(at offset: Int, count: Int) -> String {
        let field = bytes[offset..<(offset + count)]
        let end = field.firstIndex(of: 0) ?? field.endIndex
        return String(decoding: field[..<end], as: UTF8.self)
    }
}

/// Builds the 4380 zeroed bytes of one event and fills native-order fields.
private struct EventWriter {
    var bytes = [UInt8](repeating: 0, count: UHIDEventLayout.size)

    mutating func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        withUnsafeBytes(of: value) { raw in
            for index in raw.indices { bytes[offset + index] = raw[index] }
        }
    }

    mutating func putBytes(_ data: [UInt8], at offset: Int) {
        bytes.replaceSubrange(offset..<(offset + data.count), with: data)
    }

    /// Writes `data` and its count into a `size` field, at most UHID_DATA_MAX bytes.
    mutating func putData(_ data: [UInt8], at offset: Int, sizeAt sizeOffset: Int, _ what: String) throws(UHIDError) {
        guard data.count <= UHIDEventLayout.dataMax else {
            throw UHIDError(.invalidEvent, "\(what) carries at most 4096 bytes, got \(data.count)")
        }
        put(UInt16(data.count), at: sizeOffset)
        putBytes(data, at: offset)
    }

    /// Writes a string into a NUL-padded array, leaving room for the NUL the
    /// kernel's copy keeps.
    mutating func putString(_ string: String, at offset: Int, count: Int, _ what: String) throws(UHIDError) {
        let utf8 = Array(string.utf8)
        guard utf8.count < count else {
            throw UHIDError(
                .invalidEvent,
                "UHID_CREATE2 \(what) has at most \(count - 1) bytes of UTF-8, got \(utf8.count)"
            )
        }
        guard !utf8.contains(0) else {
            throw UHIDError(.invalidEvent, "UHID_CREATE2 \(what) must not contain a NUL")
        }
        putBytes(utf8, at: offset)
    }
}
