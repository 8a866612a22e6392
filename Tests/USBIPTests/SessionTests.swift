// Whole USB/IP sessions between the test client and a server connection: listing, importing,
// enumerating the device as Linux does, and the interrupt traffic of CTAPHID — each run with
// the client's bytes arriving whole, one byte at a time, and split at random.

import Testing

@testable import USBIP

@Suite("USB/IP sessions")
struct SessionTests {
    @Test("OP_REQ_DEVLIST lists every export, then the connection closes", arguments: Feeding.allCases)
    func devlist(feeding: Feeding) throws {
        var harness = Harness(feeding: feeding)
        let outcome = try harness.send(harness.client.devlistRequest())
        #expect(outcome.closed)
        #expect(harness.server.isClosed)
        #expect(harness.server.failure == nil)
        guard case .opRepDevlist(let reply) = try #require(outcome.messages.first) else {
            Issue.record("no OP_REP_DEVLIST: \(outcome)")
            return
        }
        #expect(reply.status == .ok)
        #expect(reply.devices.map(\.device.busid) == ["1-1", "1-2"])
        let first = reply.devices[0].device
        #expect(first.busnum == 1 && first.devnum == 2)
        #expect(first.speed == .full)
        #expect(first.idVendor == 0x1209 && first.idProduct == 0x4C4B && first.bcdDevice == 0x0123)
        #expect(first.bDeviceClass == 0 && first.bConfigurationValue == 1)
        #expect(first.bNumConfigurations == 1 && first.bNumInterfaces == 1)
        #expect(
            reply.devices[0].interfaces == [
                USBIPUSBInterface(bInterfaceClass: 3, bInterfaceSubClass: 0, bInterfaceProtocol: 0)
            ]
        )
        // Closed: later bytes are ignored.
        #expect(harness.server.receive(harness.client.devlistRequest()) == [])
    }

    @Test("a whole session: import, enumeration, output and input reports, unlinks", arguments: Feeding.allCases)
    func wholeSession(feeding: Feeding) throws {
        var harness = Harness(feeding: feeding)

        // Import.
        let imported = try harness.send(harness.client.importRequest(busid: "1-1"))
        #expect(!imported.closed)
        guard case .opRepImport(let importReply) = try #require(imported.messages.first) else {
            Issue.record("no OP_REP_IMPORT: \(imported)")
            return
        }
        #expect(importReply.status == .ok)
        #expect(importReply.device?.busid == "1-1")
        #expect(harness.server.attachedBusID == "1-1")
        #expect(harness.client.devid == 0x0001_0002)

        // GET_DESCRIPTOR(DEVICE) with the 64-byte first read Linux makes.
        let (device, _) = try harness.control(Setup.getDescriptor(USBDescriptorType.device, length: 64))
        #expect(device?.status == .success)
        #expect(device?.transferBuffer == testDevice.deviceDescriptor)
        #expect(device?.actualLength == 18)

        // GET_DESCRIPTOR(CONFIGURATION): 9 bytes, then wTotalLength.
        let (header, _) = try harness.control(Setup.getDescriptor(USBDescriptorType.configuration, length: 9))
        let headerBytes = try #require(header?.transferBuffer)
        #expect(headerBytes.count == 9)
        let total = le16(headerBytes, 2)
        #expect(total == 41)
        let (configuration, _) = try harness.control(
            Setup.getDescriptor(USBDescriptorType.configuration, length: total)
        )
        #expect(configuration?.transferBuffer == testDevice.configurationDescriptor)

        // Strings: the language list, then each string in US English.
        let (languages, _) = try harness.control(Setup.getDescriptor(USBDescriptorType.string, length: 255))
        #expect(languages?.transferBuffer == [4, 3, 0x09, 0x04])
        for index: UInt8 in 1...3 {
            let (string, _) = try harness.control(
                Setup.getDescriptor(USBDescriptorType.string, index: index, language: 0x0409, length: 255)
            )
            #expect(string?.transferBuffer == testDevice.stringDescriptor(index: index))
        }

        // SET_CONFIGURATION(1), then usbhid's SET_IDLE(0) and the report descriptor.
        let (setConfiguration, _) = try harness.control(Setup.setConfiguration(1))
        #expect(setConfiguration?.status == .success)
        #expect(setConfiguration?.actualLength == 0)
        let (setIdle, _) = try harness.control(Setup.setIdle())
        #expect(setIdle?.status == .success)
        let (reportDescriptor, _) = try harness.control(
            Setup.getReportDescriptor(length: UInt16(fidoReportDescriptor.count))
        )
        #expect(reportDescriptor?.transferBuffer == fidoReportDescriptor)

        // An OUT URB is acknowledged at once and its report goes to the key.
        let request = report(0x10)
        let (outSeqnum, outBytes) = harness.client.interruptOut(request)
        let out = try harness.send(outBytes)
        #expect(out.retSubmits.map(\.seqnum) == [outSeqnum])
        #expect(out.retSubmits.first?.status == .success)
        #expect(out.retSubmits.first?.actualLength == 64)
        #expect(out.retSubmits.first?.transferBuffer == [])
        #expect(out.reports == [request])
        #expect(out.reportBusIDs == ["1-1"])

        // An IN URB is held until the key has a report.
        let (inSeqnum, inBytes) = harness.client.interruptIn()
        #expect(try harness.send(inBytes) == Outcome())
        #expect(harness.server.pendingInputURBCount == 1)
        let response = report(0x80)
        let completed = try harness.inputReport(response)
        #expect(completed.retSubmits.map(\.seqnum) == [inSeqnum])
        #expect(completed.retSubmits.first?.transferBuffer == response)
        #expect(completed.retSubmits.first?.actualLength == 64)
        #expect(harness.server.pendingInputURBCount == 0)

        // A report that comes before any IN URB waits for the next one.
        let early = report(0xA0)
        #expect(try harness.inputReport(early) == Outcome())
        #expect(harness.server.queuedInputReportCount == 1)
        let (laterSeqnum, laterBytes) = harness.client.interruptIn()
        let later = try harness.send(laterBytes)
        #expect(later.retSubmits.map(\.seqnum) == [laterSeqnum])
        #expect(later.retSubmits.first?.transferBuffer == early)
        #expect(harness.server.queuedInputReportCount == 0)

        // CMD_UNLINK of a held IN URB: -ECONNRESET, and that URB never gets a RET_SUBMIT.
        let (heldSeqnum, heldBytes) = harness.client.interruptIn()
        #expect(try harness.send(heldBytes) == Outcome())
        let (unlinkSeqnum, unlinkBytes) = harness.client.unlink(heldSeqnum)
        let unlinked = try harness.send(unlinkBytes)
        #expect(unlinked.retUnlinks == [USBIPRetUnlink(seqnum: unlinkSeqnum, status: .connectionReset)])
        #expect(unlinked.retSubmits.isEmpty)
        #expect(harness.server.pendingInputURBCount == 0)
        let afterUnlink = report(0xC0)
        #expect(try harness.inputReport(afterUnlink) == Outcome())  // queued, not sent to the unlinked URB
        let (nextSeqnum, nextBytes) = harness.client.interruptIn()
        let next = try harness.send(nextBytes)
        #expect(next.retSubmits.map(\.seqnum) == [nextSeqnum])
        #expect(next.retSubmits.first?.transferBuffer == afterUnlink)

        // CMD_UNLINK of an unknown seqnum, and of one already answered: -ENOENT.
        let (unknownUnlink, unknownBytes) = harness.client.unlink(0xDEAD)
        #expect(try harness.send(unknownBytes).retUnlinks == [USBIPRetUnlink(seqnum: unknownUnlink, status: .noEntry)])
        let (answeredUnlink, answeredBytes) = harness.client.unlink(outSeqnum)
        #expect(
            try harness.send(answeredBytes).retUnlinks == [USBIPRetUnlink(seqnum: answeredUnlink, status: .noEntry)]
        )

        #expect(!harness.server.isClosed)
        #expect(harness.client.decoder.outstandingSubmissionCount == 0)
    }

    @Test("held IN URBs complete oldest first, and pipelined commands are answered in order")
    func pipelining() throws {
        var harness = Harness()
        try harness.attach()
        let (first, firstBytes) = harness.client.interruptIn()
        let (second, secondBytes) = harness.client.interruptIn()
        let (out, outBytes) = harness.client.interruptOut(report(1))
        let (control, controlBytes) = harness.client.control(Setup.getDescriptor(USBDescriptorType.device, length: 18))
        let outcome = try harness.send(firstBytes + secondBytes + outBytes + controlBytes)
        #expect(outcome.retSubmits.map(\.seqnum) == [out, control])
        #expect(try harness.inputReport(report(2)).retSubmits.map(\.seqnum) == [first])
        #expect(try harness.inputReport(report(3)).retSubmits.map(\.seqnum) == [second])
    }

    @Test("an OUT URB of several reports delivers one per 64 bytes, the last zero-padded")
    func longOutTransfer() throws {
        var harness = Harness()
        try harness.attach()
        let data = report(0) + [9, 9, 9]
        let outcome = try harness.send(harness.client.interruptOut(data).bytes)
        #expect(outcome.retSubmits.first?.actualLength == 67)
        #expect(outcome.reports == [report(0), [9, 9, 9] + [UInt8](repeating: 0, count: 61)])
    }

    @Test("SET_REPORT(Output) on the control pipe reaches the key like an interrupt OUT report")
    func setReport() throws {
        var harness = Harness()
        try harness.attach("1-2")
        let setup = USBSetupPacket(
            bmRequestType: 0x21,
            bRequest: HIDClassRequest.setReport,
            wValue: 0x0200,
            wLength: 64
        )
        let (reply, outcome) = try harness.control(setup, data: report(5))
        #expect(reply?.status == .success)
        #expect(reply?.actualLength == 64)
        #expect(outcome.reports == [report(5)])
        #expect(outcome.reportBusIDs == ["1-2"])
    }

    @Test("unsupported control requests and unknown endpoints answer -EPIPE")
    func stalls() throws {
        var harness = Harness()
        try harness.attach()
        let (qualifier, _) = try harness.control(Setup.getDescriptor(USBDescriptorType.deviceQualifier, length: 10))
        #expect(qualifier?.status == .stall)
        #expect(qualifier?.actualLength == 0)
        let (seqnum, bytes) = harness.client.submit(direction: .in, ep: 2, length: 64)
        let outcome = try harness.send(bytes)
        #expect(outcome.retSubmits.map(\.seqnum) == [seqnum])
        #expect(outcome.retSubmits.first?.status == .stall)
        // A data stage against the URB's direction stalls too.
        let (wrongWay, wrongBytes) = harness.client.submit(
            direction: .out,
            ep: 0,
            length: 18,
            setup: Setup.getDescriptor(USBDescriptorType.device, length: 18),
            data: [UInt8](repeating: 0, count: 18)
        )
        #expect(try harness.send(wrongBytes).retSubmits.first { $0.seqnum == wrongWay }?.status == .stall)
        #expect(!harness.server.isClosed)
    }

    @Test("an IN URB whose buffer is below 64 bytes fails with -EOVERFLOW and keeps the report queued")
    func shortInBuffer() throws {
        var harness = Harness()
        try harness.attach()
        _ = try harness.inputReport(report(1))
        let (seqnum, bytes) = harness.client.interruptIn(length: 8)
        let outcome = try harness.send(bytes)
        #expect(outcome.retSubmits.map(\.seqnum) == [seqnum])
        #expect(outcome.retSubmits.first?.status == .overflow)
        #expect(outcome.retSubmits.first?.actualLength == 0)
        #expect(harness.server.queuedInputReportCount == 1)
        // A larger buffer gets exactly one 64-byte report: a short packet ends the transfer.
        let big = try harness.send(harness.client.interruptIn(length: 1024).bytes)
        #expect(big.retSubmits.first?.transferBuffer == report(1))
    }

    @Test("halting the IN endpoint fails held URBs with -EPIPE; clearing it lets reports flow again")
    func endpointHalt() throws {
        var harness = Harness()
        let held = try harness.attachHoldingInterruptIn()
        let halt = USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.setFeature, wIndex: 0x81)
        let (haltReply, haltOutcome) = try harness.control(halt)
        #expect(haltReply?.status == .success)
        #expect(haltOutcome.retSubmits.first { $0.seqnum == held }?.status == .stall)
        // While halted, a new IN URB stalls and reports queue.
        let stalled = try harness.send(harness.client.interruptIn().bytes)
        #expect(stalled.retSubmits.first?.status == .stall)
        #expect(try harness.inputReport(report(4)) == Outcome())
        let clear = USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.clearFeature, wIndex: 0x81)
        #expect(try harness.control(clear).0?.status == .success)
        let flowing = try harness.send(harness.client.interruptIn().bytes)
        #expect(flowing.retSubmits.first?.transferBuffer == report(4))
    }

    @Test("SET_CONFIGURATION(0) fails held IN URBs with -ESHUTDOWN, and interrupt URBs until reconfigured")
    func deconfigure() throws {
        var harness = Harness()
        let held = try harness.attachHoldingInterruptIn()
        let (_, outcome) = try harness.control(Setup.setConfiguration(0))
        #expect(outcome.retSubmits.first { $0.seqnum == held }?.status == .shutdown)
        let out = try harness.send(harness.client.interruptOut(report(0)).bytes)
        #expect(out.retSubmits.first?.status == .shutdown)
        #expect(out.reports.isEmpty)
        _ = try harness.control(Setup.setConfiguration(1))
        let again = try harness.send(harness.client.interruptOut(report(0)).bytes)
        #expect(again.reports == [report(0)])
    }

    @Test("past the queue limit the oldest input reports are dropped and counted")
    func queueLimit() throws {
        var harness = Harness(configuration: .init(maximumQueuedInputReports: 2))
        try harness.attach()
        for first: UInt8 in [1, 2, 3] {
            #expect(try harness.inputReport(report(first)) == Outcome())
        }
        #expect(harness.server.queuedInputReportCount == 2)
        #expect(harness.server.droppedInputReportCount == 1)
        #expect(try harness.send(harness.client.interruptIn().bytes).retSubmits.first?.transferBuffer == report(2))
        #expect(try harness.send(harness.client.interruptIn().bytes).retSubmits.first?.transferBuffer == report(3))
    }

    @Test("input reports before an import, or after a close, are dropped")
    func reportsWithoutImport() throws {
        var server = USBIPServerConnection(exports: testExports)
        #expect(server.inputReport(report(0)) == [])
        _ = server.receive(USBIPOpReqDevlist().encodedBytes)
        #expect(server.inputReport(report(0)) == [])
        #expect(server.queuedInputReportCount == 0)
    }

    @Test("importing an unknown bus id answers status 1 and closes", arguments: Feeding.allCases)
    func importUnknown(feeding: Feeding) throws {
        var harness = Harness(feeding: feeding)
        let outcome = try harness.send(harness.client.importRequest(busid: "7-7"))
        #expect(outcome.messages == [.opRepImport(USBIPOpRepImport(failure: .notAvailable))])
        #expect(outcome.closed)
        #expect(harness.server.attachedBusID == nil)
        #expect(harness.server.requestedBusID == "7-7")
    }

    @Test("importing a bus id attached elsewhere answers ST_DEV_BUSY and closes")
    func importBusy() throws {
        var harness = Harness()
        harness.server.unavailableBusIDs = ["1-1"]
        let outcome = try harness.send(harness.client.importRequest(busid: "1-1"))
        #expect(outcome.messages == [.opRepImport(USBIPOpRepImport(failure: .deviceBusy))])
        #expect(outcome.closed)
        #expect(harness.server.requestedBusID == "1-1")
    }

    @Test("disconnected() forgets the import and everything in flight, and the value serves a new client")
    func disconnectResets() throws {
        var harness = Harness()
        harness.server.unavailableBusIDs = ["1-2"]
        try harness.attach()
        _ = try harness.send(harness.client.interruptIn().bytes + harness.client.interruptIn().bytes)
        _ = harness.server.receive(Array(harness.client.importRequest(busid: "1-1").prefix(5)))  // a partial message
        harness.server.disconnected()
        #expect(harness.server.attachedBusID == nil)
        #expect(harness.server.requestedBusID == nil)
        #expect(harness.server.pendingInputURBCount == 0)
        #expect(!harness.server.isClosed)
        #expect(harness.server.unavailableBusIDs == ["1-2"])
        // A new client imports from scratch.
        harness.client = USBIPClientConnection()
        try harness.attach()
        #expect(harness.server.attachedBusID == "1-1")
    }
}
