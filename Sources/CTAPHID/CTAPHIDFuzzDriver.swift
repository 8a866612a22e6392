// A driver that plays arbitrary bytes against the state machine as host, engine and clock,
// checking invariants. The fuzzer (Fuzz/Sources/FuzzCTAPHID) and the crasher replay test
// (Tests/CTAPHIDTests) share it, so a kept crasher means the same thing to both.

/// Plays an arbitrary byte string against ``CTAPHIDStateMachine`` and reports broken
/// invariants. Not part of the library's API: reached with `@_spi(Fuzzing) import CTAPHID`.
///
/// The input is a sequence of operations, each starting with one byte `op`. For the host's
/// operations, bits 3–4 of `op` choose the CID: 0 reads 4 bytes, 1 is the broadcast CID, 2 the
/// newest channel the device allocated, 3 one of the allocated channels picked by the next byte.
/// - `op & 7 == 0`: one initialization packet; bits 5–7 pick the command (INIT, PING, CBOR, MSG,
///   CANCEL, LOCK, WINK, or a byte read from the input), then a length byte and a data byte
///   (see `length(_:)` and `data(_:count:)`).
/// - 1: one continuation packet; bits 5–7 equal to 7 read its sequence number, otherwise it is
///   the one that follows the last packet sent; then a data byte.
/// - 2: a whole message, fragmented, as for 0 (only its initialization packet when too long).
/// - 3: one raw report: bit 5 set reads a length byte (modulo 80, for short and long reports);
///   the bytes after the CID come from the input.
/// - 4: time advances by the next byte × 64 ms, then `tick`.
/// - 5: the engine answers: a CID choice byte (bit 2 set: the busy channel), a byte choosing
///   CBOR, MSG or ERROR, and two length bytes (modulo 7700, so some answers are too long to
///   frame; an ERROR carries one byte).
/// - 6: a keepalive: a CID choice byte and a status byte.
/// - 7: time jumps to `nextDeadline`, then `tick`.
/// Structured operations exist so that the fuzzer reaches deep states (a valid INIT needs a
/// length of exactly 8) without having to guess them; raw reports keep every byte reachable.
///
/// Invariants: every `.send` is 64 bytes; a host reading every `.send` sees well-framed,
/// complete messages after each call; error replies carry one byte; INIT responses carry 17
/// bytes and a CID other than 0 and the broadcast CID; `.deliver` carries MSG or CBOR, at most
/// 7609 bytes, and makes its channel busy; `.cancel` names the busy channel; `respond` and
/// `keepalive` for a channel that is not busy do nothing; after `tick(now:)` no deadline is at
/// or before `now`.
@_spi(Fuzzing)
public enum CTAPHIDFuzzDriver {
    /// Runs `input` and returns a description of each broken invariant; empty when all held.
    public static func run(_ input: [UInt8]) -> [String] {
        var run = Run(input: input)
        run.play()
        return run.violations
    }

    private struct Run {
        var input: [UInt8]
        var position = 0
        var machine: CTAPHIDStateMachine
        var host = CTAPHIDResponseAssembler()
        var now: UInt64 = 0
        var allocated: [UInt32] = []
        /// The sequence number that follows the last packet the host sent.
        var nextSequence: UInt8 = 0
        var violations: [String] = []

        init(input: [UInt8]) {
            self.input = input
            // A short continuation timeout makes timeouts reachable with few time steps.
            self.machine = CTAPHIDStateMachine(configuration: .init(continuationTimeout: 300))
        }

        mutating func next() -> UInt8? {
            guard position < input.count else { return nil }
            defer { position += 1 }
            return input[position]
        }

        mutating func nextOrZero() -> UInt8 { next() ?? 0 }

        mutating func play() {
            while let op = next(), violations.isEmpty {
                switch op & 0x07 {
                case 0:
                    sendInitialization(op: op)
                case 1:
                    sendContinuation(op: op)
                case 2:
                    sendMessage(op: op)
                case 3:
                    sendRawReport(op: op)
                case 4:
                    now += UInt64(nextOrZero()) << 6
                    tick()
                case 5:
                    respond()
                case 6:
                    keepalive()
                default:
                    if let deadline = machine.nextDeadline {
                        now = max(now, deadline)
                    }
                    tick()
                }
            }
        }

        mutating func channel(selector: UInt8) -> UInt32 {
            switch selector & 0x03 {
            case 0:
                return (0..<4).reduce(0) { value, _ in value << 8 | UInt32(nextOrZero()) }
            case 1:
                return CTAPHIDConstants.broadcastChannel
            case 2:
                return allocated.last ?? 1
            default:
                let pick = Int(nextOrZero())
                return allocated.isEmpty ? 1 : allocated[pick % allocated.count]
            }
        }

        /// The command byte that bits 5–7 of `op` pick.
        mutating func commandByte(_ op: UInt8) -> UInt8 {
            let commands: [CTAPHIDCommand] = [.initialize, .ping, .cbor, .msg, .cancel, .lock, .wink]
            let index = Int(op >> 5)
            return index < commands.count ? commands[index].rawValue : nextOrZero() & 0x7F
        }

        /// A message length: with bit 7 clear, one of the interesting sizes; with bit 7 set, 15
        /// bits read from this byte and the next.
        mutating func length(_ byte: UInt8) -> Int {
            let sizes = [0, 1, 8, 57, 58, 117, 7609, 7610]
            if byte & 0x80 == 0 {
                return sizes[Int(byte & 0x07)]
            }
            return Int(byte & 0x7F) << 8 | Int(nextOrZero())
        }

        /// `count` bytes of data from one input byte: the byte itself (a LOCK duration, taken
        /// modulo 16 so both valid and invalid ones are common), then a pattern after it.
        func data(_ byte: UInt8, count: Int) -> [UInt8] {
            (0..<count).map { $0 == 0 ? byte & 0x0F : byte &+ UInt8(truncatingIfNeeded: $0) }
        }

        mutating func sendInitialization(op: UInt8) {
            let cid = channel(selector: op >> 3)
            let command = commandByte(op)
            let length = length(nextOrZero())
            let header = [command | 0x80, UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
            nextSequence = 0
            feed(cid.bigEndianBytes + header + data(nextOrZero(), count: CTAPHIDConstants.initPayloadSize))
        }

        mutating func sendContinuation(op: UInt8) {
            let cid = channel(selector: op >> 3)
            var sequence = nextSequence & 0x7F
            if op >> 5 == 7 {
                sequence = nextOrZero() & 0x7F
            }
            nextSequence = sequence &+ 1
            feed(cid.bigEndianBytes + [sequence] + data(nextOrZero(), count: CTAPHIDConstants.continuationPayloadSize))
        }

        mutating func sendMessage(op: UInt8) {
            let cid = channel(selector: op >> 3)
            let command = commandByte(op)
            let length = length(nextOrZero())
            let payload = data(nextOrZero(), count: min(length, CTAPHIDConstants.maxMessageSize))
            var reports = CTAPHIDPacketizer.fragment(channel: cid, command: command, payload: payload)
            if length > CTAPHIDConstants.maxMessageSize {
                reports = [Array(reports[0].prefix(5)) + [UInt8(length >> 8), UInt8(length & 0xFF)] + reports[0][7...]]
            }
            nextSequence = UInt8(reports.count - 1)
            for report in reports where violations.isEmpty {
                feed(report)
            }
        }

        mutating func sendRawReport(op: UInt8) {
            let cid = channel(selector: op >> 3)
            let length = op & 0x20 != 0 ? Int(nextOrZero()) % 80 : CTAPHIDConstants.reportSize
            var report = cid.bigEndianBytes
            while report.count < length {
                report.append(nextOrZero())
            }
            feed(Array(report.prefix(length)))
        }

        mutating func feed(_ report: [UInt8]) {
            let busyBefore = machine.busyChannel
            let actions = machine.receive(report: report, now: now)
            check(actions, busyBefore: busyBefore, call: "receive")
        }

        mutating func tick() {
            let busyBefore = machine.busyChannel
            let actions = machine.tick(now: now)
            check(actions, busyBefore: busyBefore, call: "tick")
            if let deadline = machine.nextDeadline, deadline <= now {
                violations.append("deadline \(deadline) is not after now \(now) after tick")
            }
        }

        mutating func respond() {
            let selector = nextOrZero()
            let cid = selector & 0x04 != 0 ? (machine.busyChannel ?? 1) : channel(selector: selector)
            let commands: [CTAPHIDCommand] = [.cbor, .msg, .error]
            let command = commands[Int(nextOrZero()) % commands.count]
            var length = (Int(nextOrZero()) << 8 | Int(nextOrZero())) % 7700
            if command == .error {
                length = 1
            }
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
            let busyBefore = machine.busyChannel
            let actions = machine.respond(channel: cid, command: command, payload: payload)
            if busyBefore != cid, !actions.isEmpty {
                violations.append("respond for idle channel \(cid) produced \(actions.count) actions")
            }
            if busyBefore == cid, machine.busyChannel != nil {
                violations.append("respond did not end the transaction of channel \(cid)")
            }
            check(actions, busyBefore: busyBefore, call: "respond")
        }

        mutating func keepalive() {
            let selector = nextOrZero()
            let cid = selector & 0x04 != 0 ? (machine.busyChannel ?? 1) : channel(selector: selector)
            let status = KeepaliveStatus(rawValue: nextOrZero())
            let busyBefore = machine.busyChannel
            let actions = machine.keepalive(channel: cid, status: status)
            let expected = busyBefore == cid ? 1 : 0
            if actions.count != expected {
                violations.append("keepalive for channel \(cid) produced \(actions.count) actions, not \(expected)")
            }
            check(actions, busyBefore: busyBefore, call: "keepalive")
        }

        mutating func check(_ actions: [CTAPHIDStateMachine.Action], busyBefore: UInt32?, call: String) {
            for action in actions {
                switch action {
                case .send(let report):
                    guard report.count == CTAPHIDConstants.reportSize else {
                        violations.append("\(call): a report of \(report.count) bytes")
                        continue
                    }
                    checkHostView(host.receive(report), call: call)
                case .deliver(let cid, let command, let payload):
                    if command != .msg && command != .cbor {
                        violations.append("\(call): delivered command \(command)")
                    }
                    if payload.count > CTAPHIDConstants.maxMessageSize {
                        violations.append("\(call): delivered \(payload.count) bytes")
                    }
                    if busyBefore != nil || machine.busyChannel != cid {
                        violations.append("\(call): delivered on \(cid), busy before \(String(describing: busyBefore))")
                    }
                case .cancel(let cid):
                    if busyBefore != cid {
                        violations.append("\(call): cancel for \(cid), busy was \(String(describing: busyBefore))")
                    }
                case .wink:
                    break
                case .channelInitialized(let cid):
                    if cid == CTAPHIDConstants.broadcastChannel || cid == CTAPHIDConstants.reservedChannel {
                        violations.append("\(call): initialized the reserved channel \(cid)")
                    }
                }
            }
            if host.isAssembling {
                violations.append("\(call): the device left a message unfinished")
            }
        }

        mutating func checkHostView(_ event: CTAPHIDResponseAssembler.Event?, call: String) {
            switch event {
            case .error:
                violations.append("\(call): the device sent a badly framed report")
            case .message(let cid, .error, let payload) where payload.count != 1:
                violations.append("\(call): an error reply on \(cid) with \(payload.count) bytes")
            case .message(let cid, .initialize, let payload):
                guard payload.count == 17 else {
                    violations.append("\(call): an INIT response on \(cid) with \(payload.count) bytes")
                    return
                }
                let assigned = UInt32(bigEndianBytes: payload[8..<12])
                if assigned == CTAPHIDConstants.reservedChannel || assigned == CTAPHIDConstants.broadcastChannel {
                    violations.append("\(call): INIT assigned CID \(assigned)")
                }
                if cid == CTAPHIDConstants.broadcastChannel {
                    allocated.append(assigned)
                } else if assigned != cid {
                    violations.append("\(call): INIT on \(cid) answered with CID \(assigned)")
                }
            case .message, .keepalive, nil:
                break
            }
        }
    }
}
