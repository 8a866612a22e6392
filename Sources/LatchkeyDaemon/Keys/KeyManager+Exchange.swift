// Signals, export and import for the control API: the key manager finds the
// key and hands the work to its engine (Authenticator+Signals.swift,
// Authenticator+Exchange.swift). The passphrase work — scrypt and the
// envelope — happens in the route handlers, off this actor, so a slow key
// derivation holds up no other control request.
//
// Logs say what changed in counts; credential IDs only at debug, and never a
// passphrase or a key.

import CTAP
import Foundation
import LatchkeyNames
import Logging

extension KeyManager {
    // MARK: Signals

    func signalAcceptedCredentials(_ name: KeyName, _ signal: AcceptedCredentialsSignal) async throws(ControlError)
        -> SignalDocument
    {
        try await applySignal(name, "accepted-credentials") { () throws(ControlError) in
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

    func signalCurrentUserDetails(_ name: KeyName, _ signal: CurrentUserDetailsSignal) async throws(ControlError)
        -> SignalDocument
    {
        try await applySignal(name, "current-user-details") { () throws(ControlError) in
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

    func signalUnknownCredential(_ name: KeyName, _ signal: UnknownCredentialSignal) async throws(ControlError)
        -> SignalDocument
    {
        try await applySignal(name, "unknown-credential") { () throws(ControlError) in
            let credentialId = try Self.bytes(signal.credentialId, "credentialId")
            return { authenticator throws(AdministrationError) in
                try await authenticator.signalUnknownCredential(rpId: signal.rpId, credentialId: credentialId)
            }
        }
    }

    /// What a signal does to a key's engine.
    private typealias SignalWork = (Authenticator) async throws(AdministrationError) -> Authenticator.SignalOutcome

    /// Finds the key, then reads the request's IDs (`prepare`: a key that does not exist is a 404
    /// before a malformed ID is a 400), runs the signal on the engine, logs and answers what changed.
    private func applySignal(
        _ name: KeyName,
        _ signal: String,
        prepare: () throws(ControlError) -> SignalWork
    ) async throws(ControlError) -> SignalDocument {
        let key = try managed(name).key
        let work = try prepare()
        let outcome = try await administering(name) { () throws(AdministrationError) in
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

    /// The key's discoverable credentials as CXF JSON, unencrypted: the
    /// caller encrypts it or answers it only when plaintext was asked for.
    func exportCXF(_ name: KeyName) async throws(ControlError) -> (cxf: Data, count: Int) {
        let key = try managed(name).key
        let exported = try await administering(name) { () throws(AdministrationError) in
            try await key.authenticator.exportCredentials()
        }
        let cxf = CXF.encode(
            exported.map(CXFPasskey.init),
            accountId: key.aaguid,
            exporterDisplayName: "latchkey key \(name)",
            timestamp: UInt64(Date().timeIntervalSince1970)
        )
        return (cxf, exported.count)
    }

    /// Imports the passkeys among `entries`; the rest, and passkeys the
    /// engine refuses, are reported as skipped. The report keeps the
    /// document's order.
    func importCXF(_ name: KeyName, _ entries: [CXFEntry]) async throws(ControlError) -> ImportReport {
        let key = try managed(name).key
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
        let outcomes = try await administering(name) { () throws(AdministrationError) in
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

    private static func skipped(_ entry: CXFEntry, _ reason: String) -> ImportReport.Skipped {
        ImportReport.Skipped(
            location: entry.location,
            credentialId: entry.credentialId.map(Base64URL.encode),
            rpId: entry.rpId,
            reason: reason
        )
    }

    // MARK: Shared

    static func bytes(_ text: String, _ field: String) throws(ControlError) -> [UInt8] {
        guard let bytes = Base64URL.decode(text), !bytes.isEmpty else {
            throw .badRequest("\(field) must be non-empty base64url")
        }
        return bytes
    }
}
