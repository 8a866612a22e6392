// Signals, export and import for the control API: the key manager finds the
// key and hands the work to its engine (Authenticator+Signals.swift,
// Authenticator+Exchange.swift). The passphrase work — scrypt and the
// envelope — runs on the `BlockingWork` the daemon gives (NIO's thread pool),
// off this actor, so a slow key derivation holds up no other control request.
//
// Logs say what changed in counts; credential IDs only at debug, and never a
// passphrase or a key.

import CTAP
import Foundation
import LatchkeyContract
import LatchkeyJSON
import Logging

extension KeyManager {
    // MARK: Signals

    package func signalAcceptedCredentials(_ grant: KeyGrant, _ signal: AcceptedCredentialsSignal)
        async throws(CoreError) -> SignalDocument
    {
        try await applySignal(grant, "accepted-credentials") { () throws(CoreError) in
            let userId = try Self.bytes(signal.userId, "userId")
            var accepted: [[UInt8]] = []
            for id in signal.allAcceptedCredentialIds {
                accepted.append(try Self.bytes(id, "allAcceptedCredentialIds"))
            }
            return { authenticator throws(AdministrationError) in
                try await authenticator.signalAcceptedCredentials(
                    rpId: signal.rpId,
                    userHandle: userId,
                    acceptedCredentialIds: accepted
                )
            }
        }
    }

    package func signalCurrentUserDetails(_ grant: KeyGrant, _ signal: CurrentUserDetailsSignal)
        async throws(CoreError) -> SignalDocument
    {
        try await applySignal(grant, "current-user-details") { () throws(CoreError) in
            let userId = try Self.bytes(signal.userId, "userId")
            return { authenticator throws(AdministrationError) in
                try await authenticator.signalCurrentUserDetails(
                    rpId: signal.rpId,
                    userHandle: userId,
                    name: signal.name,
                    displayName: signal.displayName
                )
            }
        }
    }

    package func signalUnknownCredential(_ grant: KeyGrant, _ signal: UnknownCredentialSignal)
        async throws(CoreError) -> SignalDocument
    {
        try await applySignal(grant, "unknown-credential") { () throws(CoreError) in
            let credentialId = try Self.bytes(signal.credentialId, "credentialId")
            return { authenticator throws(AdministrationError) in
                try await authenticator.signalUnknownCredential(rpId: signal.rpId, credentialId: credentialId)
            }
        }
    }

    /// What a signal does to a key's engine.
    private typealias SignalWork = (Authenticator) async throws(AdministrationError) -> Authenticator.SignalOutcome

    /// Finds the key, then reads the request's IDs (`prepare`: a key that does not exist is
    /// `notFound` before a malformed ID is `invalid`), runs the signal on the engine, logs and answers
    /// what changed.
    private func applySignal(
        _ grant: KeyGrant,
        _ signal: String,
        prepare: () throws(CoreError) -> SignalWork
    ) async throws(CoreError) -> SignalDocument {
        let key = try require(grant, .use).key
        let work = try prepare()
        let outcome = try await administering(grant.name) { () throws(AdministrationError) in
            try await work(key.authenticator)
        }
        Self.log(key, signal, outcome)
        return SignalDocument(outcome)
    }

    private static func log(_ key: VirtualKey, _ signal: String, _ outcome: Authenticator.SignalOutcome) {
        key.logger.info(
            "signal applied",
            metadata: [
                "signal": "\(signal)", "deleted": "\(outcome.deleted.count)", "updated": "\(outcome.updated.count)",
            ]
        )
        for credential in outcome.deleted {
            key.logger.debug("credential deleted by a signal", metadata: ["id": "\(Base64URL.encode(credential.id))"])
        }
    }

    // MARK: Export and import

    /// The key's discoverable credentials as CXF JSON, for its owner, when the key
    /// is exportable or the request carries its PIN (verified by the key's engine: a
    /// wrong one costs a retry); sealed in the passphrase envelope or plaintext, as
    /// the request asks. scrypt runs on `blocking`, off this actor, so a slow key
    /// derivation holds up no other request. A successful export is a `key.exported`
    /// event and a journal line.
    package func exportCXF(_ grant: KeyGrant, _ request: ExportRequest) async throws(CoreError) -> (document: Data, count: Int) {
        let managed = try require(grant, .export)
        let passphrase = try request.passphraseChoice()
        let key = managed.key
        let exportGrant = try grantExport(
            managed, by: grant.caller, evidence: try await exportEvidence(managed, pin: request.pin)
        )
        let exported = try await administering(grant.name) { () throws(AdministrationError) in
            try await key.authenticator.exportCredentials()
        }
        let cxf = CXF.encode(
            exported.map(CXFPasskey.init),
            accountId: key.aaguid,
            exporterDisplayName: "latchkey key \(grant.name)",
            timestamp: UInt64(Date().timeIntervalSince1970)
        )
        var document = cxf
        if let passphrase {
            do {
                let envelope = try await blocking.run { try ExchangeEnvelope.seal(Array(cxf), passphrase: passphrase) }
                document = JSONValue.encodable(envelope)
            } catch {
                throw .internalError("the export could not be encrypted: \(error)")
            }
        }
        noteExport(
            of: managed,
            by: grant.caller,
            grant: exportGrant,
            format: passphrase == nil ? "cxf" : "cxf-encrypted",
            count: exported.count
        )
        return (document, exported.count)
    }

    /// What an export request brings besides its caller: the engine's
    /// verdict on `pin`, or whether the key has a PIN that could have been
    /// given. An exportable key needs neither, so its PIN is not spent.
    func exportEvidence(_ managed: Managed, pin: String?) async throws(CoreError) -> ExportEvidence {
        let authenticator = managed.key.authenticator
        let name = managed.key.configuration.name
        if managed.key.configuration.exportable { return .noPIN(keyHasPIN: false) }
        guard let pin else {
            let isSet = try await administering(name) { () throws(AdministrationError) in
                try await authenticator.pinStatus().isSet
            }
            return .noPIN(keyHasPIN: isSet)
        }
        do {
            try await authenticator.verifyPIN(pin.precomposedStringWithCanonicalMapping)
            return .pinVerified
        } catch {
            // A store that fails is the daemon's failure, not a refused PIN.
            guard error.code != .storage else { throw CoreError(error, key: name.rawValue) }
            return .pinRefused(error.reason)
        }
    }

    /// The export tier's second condition (Keys/Access.swift), a refusal
    /// published and logged like any other.
    func grantExport(_ managed: Managed, by caller: Caller, evidence: ExportEvidence) throws(CoreError)
        -> ExportGrant
    {
        do {
            return try AccessRules.checkExport(
                caller: caller,
                key: managed.key.configuration.name.rawValue,
                owner: managed.owner,
                exportable: managed.key.configuration.exportable,
                evidence: evidence
            )
        } catch {
            throw refused(error)
        }
    }

    /// Private keys left the daemon: one `key.exported` event on the key's
    /// stream and one journal line (never the secret; the credential ID only
    /// on the stream). `format`: cxf, cxf-encrypted or pkcs8.
    func noteExport(
        of managed: Managed,
        by caller: Caller,
        grant: ExportGrant,
        format: String,
        count: Int,
        credentialId: String? = nil
    ) {
        let name = managed.key.configuration.name.rawValue
        var fields: [String: EventValue] = [
            "uid": .int(Int(caller.uid)), "grant": .string(grant.rawValue), "format": .string(format),
            "count": .int(count), "door": "control",
        ]
        if let credentialId { fields["credentialId"] = .string(credentialId) }
        events.publish(.keyExported, key: name, fields)
        logger.notice(
            "private keys exported",
            metadata: [
                "key": "\(name)", "uid": "\(caller.uid)", "grant": "\(grant.rawValue)", "format": "\(format)",
                "count": "\(count)", "door": "control",
            ]
        )
    }

    /// Imports the passkeys of the document `read` gives (read once the caller may
    /// use the key, and opened with its passphrase when it is an envelope); the rest,
    /// and passkeys the engine refuses, are reported as skipped. The report keeps the
    /// document's order.
    package func importCXF(_ grant: KeyGrant, read: () async throws -> ImportRequest) async throws -> ImportReport {
        let key = try require(grant, .use).key
        let entries = try await entries(of: try await read())
        var imported: [(Int, ImportReport.Imported)] = []
        var skipped: [(Int, ImportReport.Skipped)] = []
        var candidates: [(index: Int, entry: CXFEntry, passkey: CXFPasskey)] = []
        for (index, entry) in entries.enumerated() {
            switch entry.outcome {
            case .passkey(let passkey): candidates.append((index, entry, passkey))
            case .skipped(let reason): skipped.append((index, Self.skipped(entry, reason)))
            }
        }
        let imports = candidates.map { candidate in
            let passkey = candidate.passkey
            return PasskeyImport(
                rpId: passkey.rpId,
                credentialId: passkey.credentialId,
                userHandle: passkey.userHandle,
                userName: passkey.username,
                userDisplayName: passkey.userDisplayName,
                pkcs8: passkey.key,
                credRandom: passkey.hmacCredentials.map { $0.withUV + $0.withoutUV },
                credBlob: passkey.credBlob
            )
        }
        let outcomes = try await administering(grant.name) { () throws(AdministrationError) in
            try await key.authenticator.importPasskeys(imports)
        }
        for (candidate, outcome) in zip(candidates, outcomes) {
            switch outcome {
            case .imported(let credential):
                let notes =
                    candidate.passkey.hasLargeBlob
                    ? ["largeBlob not imported: latchkey keeps large blobs per key, not per credential"] : nil
                imported.append(
                    (
                        candidate.index,
                        ImportReport.Imported(
                            location: candidate.entry.location,
                            credential: CredentialDocument(credential),
                            notes: notes
                        )
                    )
                )
            case .skipped(let reason):
                skipped.append((candidate.index, Self.skipped(candidate.entry, reason)))
            }
        }
        let report = ImportReport(
            imported: imported.sorted { $0.0 < $1.0 }.map(\.1),
            skipped: skipped.sorted { $0.0 < $1.0 }.map(\.1)
        )
        key.logger.info(
            "passkeys imported",
            metadata: ["imported": "\(report.imported.count)", "skipped": "\(report.skipped.count)"]
        )
        return report
    }

    /// The credentials of an import's document: opened with the passphrase when it
    /// is an envelope (scrypt on `blocking`), read as CXF either way. An envelope that
    /// does not open, or a document that is not CXF, is refused whole: nothing is
    /// imported.
    nonisolated func entries(of body: ImportRequest) async throws(CoreError) -> [CXFEntry] {
        let plaintext: Data
        if ExchangeEnvelope.isEnvelope(body.document) {
            guard let passphrase = body.passphrase else {
                throw CoreError(.passphraseRequired, "the file is encrypted: give its passphrase")
            }
            let envelope: ExchangeEnvelope
            do {
                envelope = try JSONDecoder().decode(ExchangeEnvelope.self, from: body.document.jsonData())
            } catch {
                throw .invalid("not a latchkey export envelope: \(error)")
            }
            let opened: Result<[UInt8], ExchangeEnvelope.Failure>
            do {
                opened = try await blocking.run {
                    Result { () throws(ExchangeEnvelope.Failure) in try envelope.open(passphrase: passphrase) }
                }
            } catch {
                throw .internalError("the envelope could not be opened: \(error)")
            }
            switch opened {
            case .success(let bytes): plaintext = Data(bytes)
            case .failure(let failure) where failure.kind == .decryptionFailed:
                throw CoreError(.decryptionFailed, failure.reason)
            case .failure(let failure):
                throw .invalid("not a latchkey export envelope: \(failure.reason)")
            }
        } else {
            guard body.passphrase == nil else {
                throw .invalid("the document is plaintext CXF; a passphrase is for an encrypted one")
            }
            plaintext = body.document.jsonData()
        }
        do throws(CXFError) {
            return try CXF.read(plaintext)
        } catch {
            throw .invalid("not a CXF document: \(error.reason)")
        }
    }

    private static func skipped(_ entry: CXFEntry, _ reason: String) -> ImportReport.Skipped {
        ImportReport.Skipped(
            location: entry.location,
            credentialId: entry.credentialId.map(Base64URL.encode),
            rpId: entry.rpId,
            reason: reason
        )
    }

    // MARK: Shared

    static func bytes(_ text: String, _ field: String) throws(CoreError) -> [UInt8] {
        guard let bytes = Base64URL.decode(text, standardAlphabet: true), !bytes.isEmpty else {
            throw .invalid("\(field) must be non-empty base64url")
        }
        return bytes
    }
}
