// The codec against the kernel's own header: every event kind is built by
// filling `struct uhid_event` from <linux/uhid.h> through its C fields, and
// its raw bytes must equal our encoder's; our decoder must read them back.
// Sizes and offsets are taken from the imported C types, not typed in.

import CLinuxHID
import Glibc
@testable import LatchkeyUHID
import Testing

/// The raw bytes of a C event, as write() would send them.
private func rawBytes(of event: uhid_event) -> [UInt8] {
    withUnsafeBytes(of: event) { Array($0) }
}

/// Copies `bytes` into the start of a C array (a tuple of `__u8`).
private func fill<Tuple>(_ array: inout Tuple, with bytes: [UInt8]) {
    withUnsafeMutableBytes(of: &array) { raw in
        precondition(bytes.count <= raw.count)
        raw.copyBytes(from: bytes)
    }
}

/// One event kind: the event as our enum, and as the C struct filled field by field.
struct ABICase: Sendable, CustomTestStringConvertible {
    let name: String
    let event: UHIDEvent
    let cBytes: @Sendable () -> [UInt8]

    var testDescription: String { name }
}

private let outputData = pattern(64)
private let longData = pattern(300, start: 0x80)

let abiCases: [ABICase] = [
    ABICase(
        name: "UHID_CREATE2",
        event: .create2(
            UHIDCreate2Request(
                name: "latchkey ABI key",
                phys: "latchkey/abi",
                uniq: "abi-serial-42",
                bus: UHIDCreate2Request.busUSB,
                vendor: 0x1122_3344,
                product: 0x5566_7788,
                version: 0x99AA_BBCC,
                country: 0xDDEE_FF01,
                rdData: fidoReportDescriptor
            )
        ),
        cBytes: {
            var e = uhid_event()
            e.type = UHID_CREATE2.rawValue
            fill(&e.u.create2.name, with: Array("latchkey ABI key".utf8))
            fill(&e.u.create2.phys, with: Array("latchkey/abi".utf8))
            fill(&e.u.create2.uniq, with: Array("abi-serial-42".utf8))
            e.u.create2.rd_size = UInt16(fidoReportDescriptor.count)
            e.u.create2.bus = UInt16(BUS_USB)
            e.u.create2.vendor = 0x1122_3344
            e.u.create2.product = 0x5566_7788
            e.u.create2.version = 0x99AA_BBCC
            e.u.create2.country = 0xDDEE_FF01
            fill(&e.u.create2.rd_data, with: fidoReportDescriptor)
            return rawBytes(of: e)
        }
    ),
    ABICase(name: "UHID_DESTROY", event: .destroy) {
        var e = uhid_event()
        e.type = UHID_DESTROY.rawValue
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_START",
        event: .start(UHIDDeviceFlags(rawValue: 0x0102_0304_0506_0708))
    ) {
        var e = uhid_event()
        e.type = UHID_START.rawValue
        e.u.start.dev_flags = 0x0102_0304_0506_0708
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_START with the numbered-report flags",
        event: .start([.numberedFeatureReports, .numberedOutputReports, .numberedInputReports])
    ) {
        var e = uhid_event()
        e.type = UHID_START.rawValue
        e.u.start.dev_flags = UInt64(
            UHID_DEV_NUMBERED_FEATURE_REPORTS.rawValue | UHID_DEV_NUMBERED_OUTPUT_REPORTS.rawValue
                | UHID_DEV_NUMBERED_INPUT_REPORTS.rawValue
        )
        return rawBytes(of: e)
    },
    ABICase(name: "UHID_STOP", event: .stop) {
        var e = uhid_event()
        e.type = UHID_STOP.rawValue
        return rawBytes(of: e)
    },
    ABICase(name: "UHID_OPEN", event: .open) {
        var e = uhid_event()
        e.type = UHID_OPEN.rawValue
        return rawBytes(of: e)
    },
    ABICase(name: "UHID_CLOSE", event: .close) {
        var e = uhid_event()
        e.type = UHID_CLOSE.rawValue
        return rawBytes(of: e)
    },
    ABICase(name: "UHID_OUTPUT", event: .output(UHIDOutputRequest(data: outputData, rtype: .output))) {
        var e = uhid_event()
        e.type = UHID_OUTPUT.rawValue
        fill(&e.u.output.data, with: outputData)
        e.u.output.size = UInt16(outputData.count)
        e.u.output.rtype = UInt8(UHID_OUTPUT_REPORT.rawValue)
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_OUTPUT of a full 4096 bytes",
        event: .output(UHIDOutputRequest(data: pattern(4096, start: 9), rtype: .feature))
    ) {
        var e = uhid_event()
        e.type = UHID_OUTPUT.rawValue
        fill(&e.u.output.data, with: pattern(4096, start: 9))
        e.u.output.size = 4096
        e.u.output.rtype = UInt8(UHID_FEATURE_REPORT.rawValue)
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_GET_REPORT",
        event: .getReport(UHIDGetReportRequest(id: 0xDEAD_BEEF, rnum: 0x5A, rtype: .input))
    ) {
        var e = uhid_event()
        e.type = UHID_GET_REPORT.rawValue
        e.u.get_report.id = 0xDEAD_BEEF
        e.u.get_report.rnum = 0x5A
        e.u.get_report.rtype = UInt8(UHID_INPUT_REPORT.rawValue)
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_GET_REPORT_REPLY",
        event: .getReportReply(UHIDGetReportReply(id: 0x0102_0304, err: 0x0506, data: longData))
    ) {
        var e = uhid_event()
        e.type = UHID_GET_REPORT_REPLY.rawValue
        e.u.get_report_reply.id = 0x0102_0304
        e.u.get_report_reply.err = 0x0506
        e.u.get_report_reply.size = UInt16(longData.count)
        fill(&e.u.get_report_reply.data, with: longData)
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_SET_REPORT",
        event: .setReport(UHIDSetReportRequest(id: 0xCAFE_F00D, rnum: 3, rtype: .feature, data: longData))
    ) {
        var e = uhid_event()
        e.type = UHID_SET_REPORT.rawValue
        e.u.set_report.id = 0xCAFE_F00D
        e.u.set_report.rnum = 3
        e.u.set_report.rtype = UInt8(UHID_FEATURE_REPORT.rawValue)
        e.u.set_report.size = UInt16(longData.count)
        fill(&e.u.set_report.data, with: longData)
        return rawBytes(of: e)
    },
    ABICase(
        name: "UHID_SET_REPORT_REPLY",
        event: .setReportReply(UHIDSetReportReply(id: 0x7788_99AA, err: UInt16(EIO)))
    ) {
        var e = uhid_event()
        e.type = UHID_SET_REPORT_REPLY.rawValue
        e.u.set_report_reply.id = 0x7788_99AA
        e.u.set_report_reply.err = UInt16(EIO)
        return rawBytes(of: e)
    },
    ABICase(name: "UHID_INPUT2", event: .input2(outputData)) {
        var e = uhid_event()
        e.type = UHID_INPUT2.rawValue
        e.u.input2.size = UInt16(outputData.count)
        fill(&e.u.input2.data, with: outputData)
        return rawBytes(of: e)
    },
]

@Suite("uhid ABI against <linux/uhid.h>")
struct KernelABITests {
    @Test("struct uhid_event is 4380 bytes with its union at offset 4, as our encoder writes")
    func eventSize() {
        #expect(MemoryLayout<uhid_event>.size == 4380)
        #expect(MemoryLayout<uhid_event>.size == UHIDEvent.encodedSize)
        #expect(MemoryLayout<uhid_event>.offset(of: \.u) == UHIDEventLayout.payload)
        #expect(Int(UHID_DATA_MAX) == UHIDEvent.maximumDataCount)
        #expect(Int(HID_MAX_DESCRIPTOR_SIZE) == UHIDEventLayout.descriptorMax)
        #expect(MemoryLayout<uhid_create2_req>.size == 4372)
    }

    @Test("event type values equal the C enum")
    func eventTypes() {
        let pairs: [(UHIDEventType, uhid_event_type)] = [
            (.destroy, UHID_DESTROY), (.start, UHID_START), (.stop, UHID_STOP), (.open, UHID_OPEN),
            (.close, UHID_CLOSE), (.output, UHID_OUTPUT), (.getReport, UHID_GET_REPORT),
            (.getReportReply, UHID_GET_REPORT_REPLY), (.create2, UHID_CREATE2), (.input2, UHID_INPUT2),
            (.setReport, UHID_SET_REPORT), (.setReportReply, UHID_SET_REPORT_REPLY),
        ]
        for (ours, theirs) in pairs {
            #expect(ours.rawValue == theirs.rawValue, "\(ours)")
        }
        #expect(UHIDReportType.feature.rawValue == UHID_FEATURE_REPORT.rawValue)
        #expect(UHIDReportType.output.rawValue == UHID_OUTPUT_REPORT.rawValue)
        #expect(UHIDReportType.input.rawValue == UHID_INPUT_REPORT.rawValue)
        #expect(UHIDDeviceFlags.numberedFeatureReports.rawValue == UInt64(UHID_DEV_NUMBERED_FEATURE_REPORTS.rawValue))
        #expect(UHIDDeviceFlags.numberedOutputReports.rawValue == UInt64(UHID_DEV_NUMBERED_OUTPUT_REPORTS.rawValue))
        #expect(UHIDDeviceFlags.numberedInputReports.rawValue == UInt64(UHID_DEV_NUMBERED_INPUT_REPORTS.rawValue))
        #expect(UHIDCreate2Request.busUSB == UInt16(BUS_USB))
    }

    @Test("every field offset the codec uses equals the C header's")
    func fieldOffsets() {
        let payload = UHIDEventLayout.payload
        func offset<Root>(_ path: PartialKeyPath<Root>) -> Int? {
            MemoryLayout<Root>.offset(of: path).map { $0 + payload }
        }
        typealias C2 = UHIDEventLayout.Create2
        #expect(offset(\uhid_create2_req.name) == C2.name)
        #expect(offset(\uhid_create2_req.phys) == C2.phys)
        #expect(offset(\uhid_create2_req.uniq) == C2.uniq)
        #expect(offset(\uhid_create2_req.rd_size) == C2.rdSize)
        #expect(offset(\uhid_create2_req.bus) == C2.bus)
        #expect(offset(\uhid_create2_req.vendor) == C2.vendor)
        #expect(offset(\uhid_create2_req.product) == C2.product)
        #expect(offset(\uhid_create2_req.version) == C2.version)
        #expect(offset(\uhid_create2_req.country) == C2.country)
        #expect(offset(\uhid_create2_req.rd_data) == C2.rdData)
        #expect(MemoryLayout.size(ofValue: uhid_create2_req().name) == C2.nameCount)
        #expect(MemoryLayout.size(ofValue: uhid_create2_req().phys) == C2.physCount)
        #expect(MemoryLayout.size(ofValue: uhid_create2_req().uniq) == C2.uniqCount)

        #expect(offset(\uhid_start_req.dev_flags) == UHIDEventLayout.Start.devFlags)
        #expect(payload + MemoryLayout<uhid_start_req>.size == UHIDEventLayout.Start.end)

        #expect(offset(\uhid_output_req.data) == UHIDEventLayout.Output.data)
        #expect(offset(\uhid_output_req.size) == UHIDEventLayout.Output.size)
        #expect(offset(\uhid_output_req.rtype) == UHIDEventLayout.Output.rtype)
        #expect(payload + MemoryLayout<uhid_output_req>.size == UHIDEventLayout.Output.end)

        #expect(offset(\uhid_get_report_req.id) == UHIDEventLayout.GetReport.id)
        #expect(offset(\uhid_get_report_req.rnum) == UHIDEventLayout.GetReport.rnum)
        #expect(offset(\uhid_get_report_req.rtype) == UHIDEventLayout.GetReport.rtype)
        #expect(payload + MemoryLayout<uhid_get_report_req>.size == UHIDEventLayout.GetReport.end)

        #expect(offset(\uhid_get_report_reply_req.id) == UHIDEventLayout.GetReportReply.id)
        #expect(offset(\uhid_get_report_reply_req.err) == UHIDEventLayout.GetReportReply.err)
        #expect(offset(\uhid_get_report_reply_req.size) == UHIDEventLayout.GetReportReply.size)
        #expect(offset(\uhid_get_report_reply_req.data) == UHIDEventLayout.GetReportReply.data)

        #expect(offset(\uhid_set_report_req.id) == UHIDEventLayout.SetReport.id)
        #expect(offset(\uhid_set_report_req.rnum) == UHIDEventLayout.SetReport.rnum)
        #expect(offset(\uhid_set_report_req.rtype) == UHIDEventLayout.SetReport.rtype)
        #expect(offset(\uhid_set_report_req.size) == UHIDEventLayout.SetReport.size)
        #expect(offset(\uhid_set_report_req.data) == UHIDEventLayout.SetReport.data)

        #expect(offset(\uhid_set_report_reply_req.id) == UHIDEventLayout.SetReportReply.id)
        #expect(offset(\uhid_set_report_reply_req.err) == UHIDEventLayout.SetReportReply.err)
        #expect(payload + MemoryLayout<uhid_set_report_reply_req>.size == UHIDEventLayout.SetReportReply.end)

        #expect(offset(\uhid_input2_req.size) == UHIDEventLayout.Input2.size)
        #expect(offset(\uhid_input2_req.data) == UHIDEventLayout.Input2.data)
    }

    @Test("our encoder writes exactly the bytes of the C struct filled through its fields", arguments: abiCases)
    func encoderMatchesC(_ abiCase: ABICase) throws {
        let cBytes = abiCase.cBytes()
        #expect(cBytes.count == 4380)
        let ours = try abiCase.event.encoded()
        #expect(ours.count == cBytes.count)
        // The first differing offset, rather than two 4380-byte arrays, in a failure.
        let firstDifference = ours.indices.first { ours[$0] != cBytes[$0] }
        #expect(firstDifference == nil, "first differing byte at offset \(firstDifference ?? -1)")
    }

    @Test("our decoder reads the C struct's bytes back to the same event", arguments: abiCases)
    func decoderReadsC(_ abiCase: ABICase) throws {
        #expect(try UHIDEvent(bytes: abiCase.cBytes()) == abiCase.event)
    }
}
