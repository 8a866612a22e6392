// The overrides queue and the response rewrites of the response-stage
// overrides.

import CBOR
import CTAP
import Logging
import Testing

@testable import LatchkeyCore

@Suite("overrides")
struct OverrideTests {
    @Test("an override acts on its count of matching operations, oldest first, then leaves the queue")
    func counting() {
        let queue = OverrideQueue()
        queue.add(.deny, count: 2)
        queue.add(.timeout, count: 1, operations: [.getAssertion])
        #expect(queue.take(.presence, operation: .getAssertion) == .deny)
        #expect(queue.entries.map(\.remaining) == [1, 1])
        #expect(queue.take(.presence, operation: .makeCredential) == .deny)
        #expect(queue.take(.presence, operation: .makeCredential) == nil, "the timeout is for getAssertion only")
        #expect(queue.take(.presence, operation: .getAssertion) == .timeout)
        #expect(queue.take(.presence, operation: .getAssertion) == nil)
        #expect(queue.entries.isEmpty)
    }

    @Test("each stage takes only its own actions, and an inapplicable override waits")
    func stages() {
        let queue = OverrideQueue()
        queue.add(.bogusSignature)
        queue.add(.uvFalse)
        #expect(queue.hasResponseOverrides)
        #expect(queue.take(.presence, operation: .makeCredential) == .uvFalse)
        #expect(queue.take(.response, operation: .makeCredential) { _ in false } == nil)
        #expect(queue.entries.count == 1)
        #expect(queue.take(.response, operation: .makeCredential) == .bogusSignature)
        #expect(!queue.hasResponseOverrides)
    }

    @Test("ids are unique and clear empties the queue")
    func clearing() {
        let queue = OverrideQueue()
        let first = queue.add(.dropConnection, count: 3, operations: [.getInfo])
        let second = queue.add(.malformedResponse)
        #expect(first.id != second.id)
        #expect(first.operations == [.getInfo])
        #expect(second.operations == [.makeCredential, .getAssertion])
        queue.clear()
        #expect(queue.entries.isEmpty)
    }

    @Test("a presence-stage override answers before the mode")
    func presence() async {
        let board = PresenceBoard()
        let queue = OverrideQueue()
        let broker = PresenceBroker(
            key: "k",
            mode: .auto,
            timeoutSeconds: 30,
            board: board,
            logger: Logger(label: "test"),
            overrides: queue
        )
        queue.add(.deny)
        queue.add(.timeout)
        queue.add(.approve)
        broker.update(mode: .deny, timeoutSeconds: nil)
        #expect(await broker.requestPresence(PresenceRequest(operation: .makeCredential)) == .denied)
        #expect(await broker.requestPresence(PresenceRequest(operation: .u2fAuthenticate)) == .timedOut)
        #expect(
            await broker.requestPresence(PresenceRequest(operation: .getAssertion)) == .approved,
            "approve, in deny mode"
        )
        #expect(await broker.requestPresence(PresenceRequest(operation: .getAssertion)) == .denied, "the mode again")
    }

    @Test("bogus-signature flips the last byte of getAssertion's signature and re-encodes canonically")
    func bogusAssertion() throws {
        let signature: [UInt8] = [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02]
        let body = CBORValue.intMap([
            (1, .textMap([("type", .text("public-key"))])), (2, .bytes([9, 9])), (3, .bytes(signature)),
        ])
        let response = [UInt8(0)] + body.encoded()
        let tampered = try #require(ResponseTampering.bogusSignature(cbor: response, operation: .getAssertion))
        #expect(tampered.first == 0)
        let decoded = try CBORDecoder().decode(Array(tampered.dropFirst()))
        let sig = try decoded.mapValue()[int: 3]?.bytesValue()
        #expect(sig == signature.dropLast() + [0x03])
        #expect(decoded.encoded() == Array(tampered.dropFirst()))
    }

    @Test("bogus-signature reaches attStmt.sig of makeCredential, and passes over responses without one")
    func bogusAttestation() throws {
        let statement = CBORValue.textMap([("alg", .int(-7)), ("sig", .bytes([1, 2, 3]))])
        let body = CBORValue.intMap([(1, .text("packed")), (2, .bytes([7])), (3, statement)])
        let tampered = try #require(
            ResponseTampering.bogusSignature(cbor: [0] + body.encoded(), operation: .makeCredential)
        )
        let sig = try CBORDecoder().decode(Array(tampered.dropFirst())).mapValue()[int: 3]?.mapValue()[text: "sig"]?
            .bytesValue()
        #expect(sig == [1, 2, 2])
        let none = CBORValue.intMap([(1, .text("none")), (2, .bytes([7])), (3, .textMap([]))])
        #expect(ResponseTampering.bogusSignature(cbor: [0] + none.encoded(), operation: .makeCredential) == nil)
        #expect(ResponseTampering.bogusSignature(cbor: [0x27], operation: .getAssertion) == nil)
        #expect(
            ResponseTampering.bogusSignature(apdu: [0x01, 0, 0, 0, 1, 0x30, 0x01, 0x05, 0x90, 0x00])?.suffix(3) == [
                0x04, 0x90, 0x00,
            ]
        )
        #expect(ResponseTampering.bogusSignature(apdu: [0x69, 0x85]) == nil)
    }

    @Test("malformed-response keeps status 0 and truncates the CBOR so that it no longer decodes")
    func malformed() throws {
        let body = CBORValue.intMap([(1, .text("packed")), (2, .bytes(Array(repeating: 7, count: 40)))]).encoded()
        let tampered = try #require(ResponseTampering.malformed(cbor: [0] + body))
        #expect(tampered.first == 0)
        #expect(throws: CBORError.self) { try CBORDecoder().decode(Array(tampered.dropFirst())) }
        #expect(ResponseTampering.malformed(cbor: [0]) == [0x00, 0xA1])
        #expect(ResponseTampering.malformed(cbor: [0x2E]) == nil, "an error response is left alone")
        #expect(ResponseTampering.malformed(apdu: [1, 2, 3, 4, 0x90, 0x00]) == [1, 2, 0x90, 0x00])
    }

    @Test("operations are told from the CTAP command byte and the APDU's INS")
    func operations() {
        #expect(OverrideOperation(cborCommand: 0x01) == .makeCredential)
        #expect(OverrideOperation(cborCommand: 0x02) == .getAssertion)
        #expect(OverrideOperation(cborCommand: 0x41) == .credentialManagement)
        #expect(OverrideOperation(cborCommand: 0x42) == nil)
        #expect(OverrideOperation(apdu: [0x00, 0x01, 0x03, 0x00]) == .makeCredential)
        #expect(OverrideOperation(apdu: [0x00, 0x02, 0x07, 0x00]) == .getAssertion)
        #expect(OverrideOperation(apdu: [0x00, 0x03]) == nil)
    }
}
