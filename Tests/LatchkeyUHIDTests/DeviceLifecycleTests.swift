// UHIDDevice against a stand-in kernel on a SOCK_SEQPACKET socket pair:
// CREATE2 with every field, START/OPEN/CLOSE, output reports with and
// without a report-ID byte, GET_REPORT and SET_REPORT answered at once,
// INPUT2, DESTROY, and the reader stopping promptly in every way it can.

import Glibc
@testable import LatchkeyUHID
import Synchronization
import Testing

@Suite("UHIDDevice against a stand-in kernel", .timeLimit(.minutes(1)))
struct DeviceLifecycleTests {
    @Test("a full lifecycle: CREATE2, START, OPEN, output reports, report requests, INPUT2, CLOSE, DESTROY")
    func fullLifecycle() throws {
        let kernel = try StandInKernel()
        let configuration = testConfiguration()
        let device = try kernel.device(configuration)
        let recorder = EventRecorder()
        try device.start(handler: recorder.handler)

        // CREATE2, field by field.
        guard case .create2(let create) = try kernel.readEvent() else {
            Issue.record("the first event is not UHID_CREATE2")
            return
        }
        #expect(create.bus == 0x03)
        #expect(create.name == "latchkey test key")
        #expect(create.phys == "latchkey/test")
        #expect(create.uniq == "latchkey-test-0001")
        #expect(create.vendor == 0x1209)
        #expect(create.product == 0x0001)
        #expect(create.version == 0x0100)
        #expect(create.country == 0)
        #expect(create.rdData == fidoReportDescriptor)
        #expect(create.rdData.count == 34)

        try kernel.send(.start([]))
        try kernel.send(.open)
        #expect(recorder.wait(forCount: 2) == [.started([]), .opened])

        // A 64-byte report as hidraw passes it; then 65 bytes with report ID 0 first.
        let report = pattern(64, start: 0x10)
        try kernel.send(.output(UHIDOutputRequest(data: report, rtype: .output)))
        try kernel.send(.output(UHIDOutputRequest(data: [0] + report, rtype: .output)))
        #expect(recorder.wait(forCount: 4).suffix(2) == [.outputReport(report), .outputReport(report)])

        // GET_REPORT and SET_REPORT: answered at once with the same id and EIO.
        try kernel.send(.getReport(UHIDGetReportRequest(id: 0x1234_5678, rnum: 0, rtype: .feature)))
        #expect(
            try kernel.readEvent()
                == .getReportReply(UHIDGetReportReply(id: 0x1234_5678, err: UInt16(EIO), data: []))
        )
        try kernel.send(.setReport(UHIDSetReportRequest(id: 0x9ABC_DEF0, rnum: 0, rtype: .feature, data: [1, 2])))
        #expect(try kernel.readEvent() == .setReportReply(UHIDSetReportReply(id: 0x9ABC_DEF0, err: UInt16(EIO))))

        // An input report goes out as one INPUT2.
        let input = pattern(64, start: 0xA0)
        try device.sendInputReport(input)
        #expect(try kernel.readEvent() == .input2(input))

        try kernel.send(.close)
        try kernel.send(.stop)
        #expect(recorder.wait(forCount: 6).suffix(2) == [.closed, .stopped])

        // DESTROY, then the descriptor closes: the reader has stopped.
        let started = ContinuousClock.now
        device.destroy()
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(try kernel.eventsUntilEndOfFile() == [.destroy])
        #expect(throws: UHIDError(.destroyed, "")) { try device.sendInputReport(input) }
        #expect(recorder.recorded.count == 6)
    }

    @Test("output reports are passed on exactly, except 65 bytes led by report ID 0")
    func outputReportRule() {
        let report = pattern(64)
        #expect(UHIDDevice.outputReport(from: report) == report)
        #expect(UHIDDevice.outputReport(from: [0] + report) == report)
        #expect(UHIDDevice.outputReport(from: [1] + report) == [1] + report)
        #expect(UHIDDevice.outputReport(from: [0] + pattern(63)) == [0] + pattern(63))
        #expect(UHIDDevice.outputReport(from: [0, 0] + report) == [0, 0] + report)
        #expect(UHIDDevice.outputReport(from: []) == [])
    }

    @Test("an OUTPUT of another report type and an unknown event become warnings; the reader goes on")
    func warnings() throws {
        let kernel = try StandInKernel()
        let recorder = EventRecorder()
        let device = try kernel.startedDevice(recording: recorder)

        try kernel.send(.output(UHIDOutputRequest(data: pattern(64), rtype: .feature)))
        var unknown = [UInt8](repeating: 0, count: 4380)
        unknown[0] = 99
        try kernel.send(bytes: unknown)
        try kernel.send(bytes: [6, 0])  // shorter than a type field
        try kernel.send(.input2([1]))  // the kernel never sends this
        try kernel.send(.open)

        let events = recorder.wait(forCount: 5)
        #expect(events.count == 5)
        #expect(events.last == .opened)
        for event in events.dropLast() {
            guard case .warning = event else {
                Issue.record("expected a warning, got \(event)")
                continue
            }
        }
        #expect(events.first == .warning(UHIDError(.unknownEventType, "")))
        #expect(events.dropFirst(2).first == .warning(UHIDError(.truncatedEvent, "")))
        device.destroy()
        #expect(try kernel.eventsUntilEndOfFile() == [.destroy])
    }

    @Test("destroy() stops a reader blocked in poll at once, and is idempotent")
    func destroyIsPromptAndIdempotent() throws {
        let kernel = try StandInKernel()
        let device = try kernel.device()
        try device.start { _ in }
        _ = try kernel.readEvent()
        usleep(50_000)  // let the reader block
        let started = ContinuousClock.now
        device.destroy()
        device.destroy()
        #expect(ContinuousClock.now - started < .milliseconds(500))
        #expect(try kernel.eventsUntilEndOfFile() == [.destroy])
        device.destroy()
    }

    @Test("destroy() from inside the handler writes DESTROY and the reader closes the descriptor")
    func destroyFromHandler() throws {
        let kernel = try StandInKernel()
        let device = try kernel.device()
        let holder = Mutex<UHIDDevice?>(device)
        let recorder = EventRecorder()
        let record = recorder.handler
        try device.start { event in
            record(event)
            if event == .opened { holder.withLock { $0 }?.destroy() }
        }
        _ = try kernel.readEvent()
        try kernel.send(.open)
        #expect(try kernel.eventsUntilEndOfFile() == [.destroy])
        #expect(recorder.recorded == [.opened])
        holder.withLock { $0 = nil }
    }

    @Test("releasing the last reference destroys the device")
    func deinitDestroys() throws {
        let kernel = try StandInKernel()
        do {
            let device = try kernel.device()
            try device.start { _ in }
            _ = try kernel.readEvent()
        }
        #expect(try kernel.eventsUntilEndOfFile() == [.destroy])
    }

    @Test("a device never started closes its descriptor without writing DESTROY")
    func destroyUnstarted() throws {
        let kernel = try StandInKernel()
        let device = try kernel.device()
        #expect(throws: UHIDError(.notStarted, "")) { try device.sendInputReport(pattern(64)) }
        device.destroy()
        #expect(try kernel.eventsUntilEndOfFile() == [])
        #expect(throws: UHIDError(.destroyed, "")) { try device.start { _ in } }
    }

    @Test("start twice throws alreadyStarted; an oversized input report throws invalidEvent")
    func misuse() throws {
        let kernel = try StandInKernel()
        let device = try kernel.device()
        try device.start { _ in }
        #expect(throws: UHIDError(.alreadyStarted, "")) { try device.start { _ in } }
        #expect(throws: UHIDError(.invalidEvent, "")) { try device.sendInputReport(pattern(4097)) }
        device.destroy()
        #expect(try kernel.eventsUntilEndOfFile().map(\.type) == [.create2, .destroy])
    }

    @Test("when the other end closes, the handler gets failed(endOfFile) and destroy() still returns")
    func peerCloses() throws {
        var kernel: StandInKernel? = try StandInKernel()
        let device = try UHIDDevice(configuration: testConfiguration(), fileDescriptor: kernel!.deviceDescriptor)
        let recorder = EventRecorder()
        try device.start(handler: recorder.handler)
        _ = try kernel!.readEvent()
        kernel = nil
        let failure = recorder.wait { if case .failed = $0 { true } else { false } }
        #expect(failure == .failed(UHIDError(.endOfFile, "")))
        device.destroy()
        #expect(recorder.recorded.count == 1)
    }

    @Test("a configuration that does not fit CREATE2 is refused, and the given descriptor is closed")
    func invalidConfiguration() throws {
        let kernel = try StandInKernel()
        var configuration = testConfiguration(uniq: String(repeating: "u", count: 64))
        #expect(throws: UHIDError(.invalidEvent, "")) {
            try kernel.device(configuration)
        }
        #expect(try kernel.eventsUntilEndOfFile() == [])
        configuration = testConfiguration()
        configuration.reportDescriptor = []
        #expect(throws: UHIDError(.invalidEvent, "")) { try configuration.validate() }
        configuration.reportDescriptor = [0xC0]
        configuration.name = String(repeating: "n", count: 127)
        try configuration.validate()
    }

    @Test("the handler sees events in order under a burst, and input reports from many threads all arrive whole")
    func burst() throws {
        let kernel = try StandInKernel()
        let recorder = EventRecorder()
        let device = try kernel.startedDevice(recording: recorder)
        for index in 0..<200 {
            try kernel.send(.output(UHIDOutputRequest(data: pattern(64, start: UInt8(index)), rtype: .output)))
        }
        let events = recorder.wait(forCount: 200)
        #expect(events == (0..<200).map { .outputReport(pattern(64, start: UInt8($0))) })

        // Senders on threads of their own while this thread reads: a socket
        // pair, unlike /dev/uhid, blocks writers when nobody reads.
        let senders = try (0..<8).map { index in
            try PosixThread.spawn {
                for _ in 0..<25 { try? device.sendInputReport(pattern(64, start: UInt8(index))) }
            }
        }
        defer { senders.forEach { $0.join() } }
        var counts: [UInt8: Int] = [:]
        for _ in 0..<200 {
            guard case .input2(let data) = try kernel.readEvent() else {
                Issue.record("expected INPUT2")
                continue
            }
            #expect(data == pattern(64, start: data[0]))
            counts[data[0], default: 0] += 1
        }
        #expect(counts == Dictionary(uniqueKeysWithValues: (0..<8).map { (UInt8($0), 25) }))
        device.destroy()
        #expect(try kernel.eventsUntilEndOfFile() == [.destroy])
    }
}

@Suite("Opening /dev/uhid")
struct OpenTests {
    @Test("a missing device node says the uhid module is not loaded")
    func missingNode() {
        let path = "/nonexistent-latchkey-test/uhid"
        let error = #expect(throws: UHIDError(.uhidUnavailable, "")) {
            try UHIDDevice(configuration: testConfiguration(), path: path)
        }
        #expect(error?.reason == "no \(path): the uhid module is not loaded (modprobe uhid)")
        #expect(error?.errno == ENOENT)
        #expect(error?.systemCall == "open")
    }

    @Test(
        "open errors map to what the operator must do",
        arguments: [
            (ENOENT, UHIDError.Code.uhidUnavailable, "no /dev/uhid: the uhid module is not loaded (modprobe uhid)"),
            (ENODEV, .uhidUnavailable, "no /dev/uhid: the uhid module is not loaded (modprobe uhid)"),
            (EACCES, .permissionDenied, "no permission to open /dev/uhid: run as the latchkey service / root"),
            (EPERM, .permissionDenied, "no permission to open /dev/uhid: run as the latchkey service / root"),
            (EMFILE, .systemCall, nil),
        ] as [(Int32, UHIDError.Code, String?)]
    )
    func openErrorMapping(errno: Int32, code: UHIDError.Code, reason: String?) {
        let error = UHIDDevice.openError(Posix.systemCallError("open", errno: errno), path: "/dev/uhid")
        #expect(error.code == code)
        #expect(error.errno == errno)
        if let reason { #expect(error.reason == reason) }
    }

    @Test("an invalid configuration is refused before anything is opened")
    func validatesFirst() {
        let configuration = testConfiguration(uniq: String(repeating: "u", count: 100))
        #expect(throws: UHIDError(.invalidEvent, "")) {
            try UHIDDevice(configuration: configuration, path: "/nonexistent-latchkey-test/uhid")
        }
    }
}
