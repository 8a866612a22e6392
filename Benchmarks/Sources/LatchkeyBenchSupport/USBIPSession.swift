// What the USB/IP benchmarks measure through: a release latchkeyd started for one benchmark
// process, its key imported by the benchmarks' USB/IP host, and one ES256 credential made
// over that connection. The daemon runs only while a USB/IP benchmark does, so it takes no
// CPU from the others.

import CTAPHID
import Foundation

/// latchkeyd, the host attached to its key, and the getAssertion the benchmarks repeat.
public final class USBIPSession {
    /// Names the release latchkeyd the USB/IP benchmarks run; scripts/bench.sh sets it.
    public static let daemonVariable = "LATCHKEYD"

    public let host: USBIPHIDHost
    /// getAssertion for the credential made at start, as CTAPHID_CBOR carries it.
    public let getAssertion: [UInt8]
    /// The size of that getAssertion's response: status byte and CBOR.
    public let responseSize: Int
    private let daemon: DaemonProcess
    private let directory: ScratchDirectory

    /// The daemon at `$LATCHKEYD`, or nil when the variable is unset or empty.
    public static var daemonPath: String? {
        ProcessInfo.processInfo.environment[daemonVariable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Starts `binary`, imports its key, allocates a channel and makes a non-discoverable
    /// credential; the first getAssertion is sent once, to learn its response's size.
    public init(daemon binary: String) throws {
        guard access(binary, X_OK) == 0 else { throw BenchFailure("no executable latchkeyd at \(binary)") }
        directory = try ScratchDirectory("usbip")
        daemon = try DaemonProcess.start(binary: binary, stateDirectory: directory.path("latchkeyd"))
        do {
            host = try USBIPHIDHost(port: daemon.port, busid: DaemonProcess.busid)
            try host.setConfiguration()
            try host.allocateChannel()
            let request = BenchRequests.getAssertion(
                credentialId: try BenchRequests.credentialId(try host.cbor(BenchRequests.makeCredential()))
            )
            responseSize = try Self.succeeded(host.cbor(request)).count
            getAssertion = request
        } catch {
            daemon.kill()
            throw error
        }
    }

    /// One getAssertion round trip; its response, which must be a success.
    @discardableResult
    public func assertOnce() throws -> [UInt8] {
        try Self.succeeded(host.cbor(getAssertion))
    }

    private static func succeeded(_ response: [UInt8]) throws -> [UInt8] {
        guard response.first == 0 else {
            throw BenchFailure("getAssertion over USB/IP: status \(response.first ?? 0xFF)")
        }
        return response
    }

    /// Reports of one getAssertion round trip: interrupt-OUT for the request, interrupt-IN
    /// for the response.
    public var reports: (output: Int, input: Int) {
        (
            CTAPHIDPacketizer.reportCount(payloadSize: getAssertion.count),
            CTAPHIDPacketizer.reportCount(payloadSize: responseSize)
        )
    }

    /// A PING payload whose round trip moves as many reports as one getAssertion does: a PING
    /// echoes its payload, so it moves the same number each way, and a getAssertion whose two
    /// report counts have an odd sum is matched one report over.
    public var pingPayload: [UInt8] {
        let perWay = (reports.output + reports.input + 1) / 2
        let size = CTAPHIDConstants.initPayloadSize + (perWay - 1) * CTAPHIDConstants.continuationPayloadSize
        precondition(CTAPHIDPacketizer.reportCount(payloadSize: size) == perWay)
        return Array(repeating: 0x50, count: size)
    }

    /// SIGTERM to the daemon; throws when it did not exit cleanly.
    public func stop() throws { try daemon.stop() }
}
