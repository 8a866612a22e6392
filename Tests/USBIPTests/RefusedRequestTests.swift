// OP_REQ_* requests the server reads far enough to know their code but cannot serve: each
// gets the protocol's reply with status 1 (ST_NA) before the connection closes, so that a
// client reads an error instead of waiting for its timeout (issue 10). Bytes that are no
// request at all close the connection without a reply (HostileInputTests).

import Testing

@testable import USBIP

/// An OP_REQ_IMPORT with the given 32 bytes as its bus id field.
func rawImport(busidField: [UInt8]) -> [UInt8] {
    precondition(busidField.count == 32)
    return hex("0111 8003 00000000") + busidField
}

/// The three replies a refusal can take.
let failedImportReply = hex("0111 0003 00000001")
let failedDevlistReply = hex("0111 0005 00000001 00000000")

/// Refused requests, each with the reply it must get and the error kept for the log.
let refusedRequests: [(String, [UInt8], [UInt8], USBIPError.Code)] = [
    (
        "an import whose bus id has no terminating zero",
        rawImport(busidField: [UInt8](repeating: 0x41, count: 32)), failedImportReply, .invalidField
    ),
    (
        "an import whose bus id is not UTF-8",
        rawImport(busidField: [0xFF, 0xFE, 0x2D, 0x31] + [UInt8](repeating: 0, count: 28)), failedImportReply,
        .invalidField
    ),
    (
        "an import whose bus id is a lone continuation byte",
        rawImport(busidField: [0x80] + [UInt8](repeating: 0, count: 31)), failedImportReply, .invalidField
    ),
    (
        "an import of another protocol version",
        hex("0106 8003 00000000") + Array("1-1".utf8) + [UInt8](repeating: 0, count: 29), failedImportReply,
        .unsupportedVersion
    ),
    ("a device list of another protocol version", hex("0106 8005 00000000"), failedDevlistReply, .unsupportedVersion),
    ("a device list of version 0", hex("0000 8005 00000000"), failedDevlistReply, .unsupportedVersion),
    (
        "OP_REQ_DEVINFO (0x8002), which latchkey does not implement", hex("0111 8002 00000000"),
        hex("0111 0002 00000001"), .unknownOperation
    ),
    ("an unknown request code 0x8007", hex("0111 8007 00000000"), hex("0111 0007 00000001"), .unknownOperation),
    ("the request code 0xFFFF", hex("0111 FFFF 00000000"), hex("0111 7FFF 00000001"), .unknownOperation),
    (
        "an unknown request code of another version", hex("0200 8010 00000000"), hex("0111 0010 00000001"),
        .unsupportedVersion
    ),
]

@Suite("refused requests")
struct RefusedRequestTests {
    @Test("a request that cannot be served gets its reply with status 1, then the close", arguments: refusedRequests)
    func refusedRequestIsAnswered(name: String, request: [UInt8], reply: [UInt8], code: USBIPError.Code) {
        for feeding in Feeding.allCases {
            var server = USBIPServerConnection(exports: testExports)
            let actions = server.receive(request, feeding, maximumSplit: 9)
            #expect(actions == [.send(reply), .close], "\(name), \(feeding)")
            #expect(server.failure == USBIPError(code, ""), "\(name), \(feeding)")
            #expect(server.isClosed)
            #expect(server.attachedBusID == nil)
            // Nothing more, whatever follows.
            #expect(server.receive(importRequest) == [])
            #expect(server.inputEnded() == [])
        }
    }

    @Test("a refusal is a reply the client decoder reads as a failure", arguments: refusedRequests)
    func refusalIsReadable(name: String, request: [UInt8], reply: [UInt8], code: USBIPError.Code) throws {
        var client = USBIPClientDecoder()
        client.append(reply)
        let message = try #require(try client.next(), "\(name)")
        switch message {
        case .opRepImport(let decoded): #expect(decoded.status == .notAvailable && decoded.device == nil)
        case .opRepDevlist(let decoded): #expect(decoded.status == .notAvailable && decoded.devices.isEmpty)
        case .opRepStatus(let decoded): #expect(decoded.status == .notAvailable)
        default: Issue.record("\(name): \(message)")
        }
        #expect(client.phase == .finished)
        #expect(client.bufferedByteCount == 0)
    }

    @Test("a request is answered only once all its bytes are there")
    func answeredOnlyWhenWhole() {
        var server = USBIPServerConnection(exports: testExports)
        let request = rawImport(busidField: [UInt8](repeating: 0x41, count: 32))
        #expect(server.receive(Array(request.prefix(39))) == [])
        #expect(!server.isClosed)
        #expect(server.receive([request[39]]) == [.send(failedImportReply), .close])
    }

    @Test(
        "a request cut short by the end of input is answered with status 1",
        arguments: [
            (hex("0111 8003"), failedImportReply),
            (hex("0111 8003 00000000 312D31"), failedImportReply),
            (Array(importRequest.prefix(39)), failedImportReply),
            (hex("0111 8005 0000"), failedDevlistReply),
            (hex("0111 8002 00"), hex("0111 0002 00000001")),
            (hex("0106 8003 00000000"), failedImportReply),
        ]
    )
    func truncatedRequestIsAnswered(prefix: [UInt8], reply: [UInt8]) {
        var server = USBIPServerConnection(exports: testExports)
        #expect(server.receive(prefix) == [])
        #expect(server.inputEnded() == [.send(reply), .close])
        #expect(server.failure == USBIPError(.truncated, ""))
        #expect(server.isClosed)
    }

    @Test(
        "the end of input before a request's code is known closes without a reply",
        arguments: [[], [0x01], [0x01, 0x11], [0x01, 0x11, 0x80]] as [[UInt8]]
    )
    func tooShortToKnowTheCode(prefix: [UInt8]) {
        var server = USBIPServerConnection(exports: testExports)
        #expect(server.receive(prefix) == [])
        #expect(server.inputEnded() == [.close])
        #expect(server.failure == (prefix.isEmpty ? nil : USBIPError(.truncated, "")))
    }

    @Test("the end of input after an import closes without a reply, a partial URB kept as truncated")
    func inputEndAfterImport() throws {
        var server = USBIPServerConnection(exports: testExports)
        let imported = server.receive(importRequest)
        #expect(imported.count == 1)
        #expect(server.inputEnded() == [.close])
        #expect(server.failure == nil)

        server.disconnected()
        _ = server.receive(importRequest + Array(rawSubmit().prefix(20)))
        #expect(server.inputEnded() == [.close])
        #expect(server.failure == USBIPError(.truncated, ""))
    }

    @Test("an OP request after the import is a protocol error, not answered: the client reads URB replies")
    func operationAfterImportIsNotAnswered() {
        var server = USBIPServerConnection(exports: testExports)
        _ = server.receive(importRequest)
        #expect(server.receive(hex("0111 8002 00000000")) == [.close])
        #expect(server.failure == USBIPError(.unexpectedMessage, ""))
    }

    @Test("the bare reply header round-trips and refuses an OK status or a request code")
    func bareReplyHeader() throws {
        let reply = USBIPOpRepStatus(answering: 0x8002, status: .notAvailable)
        #expect(reply.code == 0x0002)
        #expect(try USBIPOpRepStatus(bytes: reply.encodedBytes) == reply)
        #expect(throws: USBIPError(.unknownOperation, "")) { try USBIPOpRepStatus(bytes: hex("0111 0002 00000000")) }
        #expect(throws: USBIPError(.unexpectedMessage, "")) { try USBIPOpRepStatus(bytes: hex("0111 8002 00000001")) }
        var client = USBIPClientDecoder()
        client.append(hex("0111 0002 00000000"))
        #expect(throws: USBIPError(.unknownOperation, "")) { try client.next() }
    }
}
