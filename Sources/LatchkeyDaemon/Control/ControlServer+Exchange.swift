// Control API routes for the WebAuthn signals and for passkey export and
// import in the Credential Exchange Format (README "Signals" and "Export and
// import").
//
// Export and import go through the daemon with the passphrase in the
// request body, like a PIN: the daemon encrypts before any private key
// leaves it, so a key crosses the socket in plaintext only when the caller
// asked for plaintext, and the daemon itself never writes an export to disk.
// scrypt runs on NIO's thread pool, not on the concurrency pool or an actor.

import CTAP
import Foundation
import Hummingbird
import LatchkeyNames
import NIOCore
import NIOPosix

extension ControlServer {
    func addExchangeRoutes(to routes: ControlRoutes) {
        let manager = self.manager

        routes.keyBody(.post, "signals/accepted-credentials", .use) { (context, body: AcceptedCredentialsSignal) in
            try await manager.signalAcceptedCredentials(context.key, body, by: context.caller)
        }
        routes.keyBody(.post, "signals/current-user-details", .use) { (context, body: CurrentUserDetailsSignal) in
            try await manager.signalCurrentUserDetails(context.key, body, by: context.caller)
        }
        routes.keyBody(.post, "signals/unknown-credential", .use) { (context, body: UnknownCredentialSignal) in
            try await manager.signalUnknownCredential(context.key, body, by: context.caller)
        }

        routes.keyResponse(.post, "export", .export) { request, context in
            do {
                let body: ExportRequest = try await decode(request)
                let passphrase = try Self.exportPassphrase(body)
                let export = try await manager.exportCXF(
                    context.key,
                    pin: body.pin,
                    by: context.caller,
                    sealing: passphrase.map(Self.sealing)
                )
                return Self.document(export.document, passkeys: export.count)
            } catch {
                // The error document for every failure, an encryption failure included.
                let reported: any Error =
                    error is ControlError || error is DecodingError
                    ? error : ControlError.internalError("the export could not be encrypted: \(error)")
                return try await answer { () async throws -> Empty in throw reported }
            }
        }

        routes.key(.post, "import", .use) { request, context in
            // The document is read (and an envelope opened) once the caller may use the key.
            try await manager.importCXF(context.key, by: context.caller) {
                var request = request
                let buffer = try await request.collectBody(upTo: ControlHTTPLimits.maxImportBodyBytes)
                let body = try JSONDecoder().decode(ImportRequest.self, from: Data(buffer.readableBytesView))
                return try await Self.entries(of: body)
            }
        }
    }

    /// Encrypts a CXF document under `passphrase` into the envelope's JSON, on NIO's thread pool.
    private static func sealing(_ passphrase: String) -> @Sendable (Data) async throws -> Data {
        { cxf in
            let envelope = try await NIOThreadPool.singleton.runIfActive {
                try ExchangeEnvelope.seal(Array(cxf), passphrase: passphrase)
            }
            return JSONValue.encodable(envelope)
        }
    }

    /// The export's passphrase, nil for plaintext; exactly one must be asked for.
    private static func exportPassphrase(_ body: ExportRequest) throws(ControlError) -> String? {
        switch (body.passphrase, body.plaintext ?? false) {
        case (let passphrase?, false):
            guard !passphrase.isEmpty else { throw .badRequest("the passphrase is empty") }
            return passphrase
        case (nil, true): return nil
        case (_?, true): throw .badRequest("give a passphrase or plaintext: true, not both")
        case (nil, false):
            throw .badRequest("give a passphrase to encrypt the export, or plaintext: true for bare CXF")
        }
    }

    /// The credentials of an import's document: opened with the passphrase
    /// when it is an envelope (on the thread pool), read as CXF either way.
    /// An envelope that does not open, or a document that is not CXF, is
    /// refused whole: nothing is imported.
    private static func entries(of body: ImportRequest) async throws -> [CXFEntry] {
        let plaintext: Data
        if ExchangeEnvelope.isEnvelope(body.document) {
            guard let passphrase = body.passphrase else {
                throw ControlError(400, "passphrase_required", "the file is encrypted: give its passphrase")
            }
            let envelope: ExchangeEnvelope
            do {
                envelope = try JSONDecoder().decode(ExchangeEnvelope.self, from: body.document.jsonData())
            } catch {
                throw ControlError.badRequest("not a latchkey export envelope: \(error)")
            }
            let opened = try await NIOThreadPool.singleton.runIfActive {
                Result { () throws(ExchangeEnvelope.Failure) in try envelope.open(passphrase: passphrase) }
            }
            switch opened {
            case .success(let bytes): plaintext = Data(bytes)
            case .failure(let failure) where failure.kind == .decryptionFailed:
                throw ControlError(400, "decryption_failed", failure.reason)
            case .failure(let failure):
                throw ControlError.badRequest("not a latchkey export envelope: \(failure.reason)")
            }
        } else {
            guard body.passphrase == nil else {
                throw ControlError.badRequest("the document is plaintext CXF; a passphrase is for an encrypted one")
            }
            plaintext = body.document.jsonData()
        }
        do throws(CXFError) {
            return try CXF.read(plaintext)
        } catch {
            throw ControlError.badRequest("not a CXF document: \(error.reason)")
        }
    }

    /// A JSON document as the response body, with the passkey count in a header.
    private static func document(_ data: Data, passkeys: Int) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if let field = HTTPFields.Element.Name("Latchkey-Passkeys") { headers[field] = "\(passkeys)" }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension JSONValue {
    /// The JSON text of an encodable value, keys sorted.
    static func encodable(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The envelope is strings and integers; encoding it cannot fail.
        return try! encoder.encode(value)
    }
}
