// The JSON documents of the signal, export and import endpoints (/v1). Byte
// strings are base64url without padding; the signal bodies use the member
// names of WebAuthn's Signal API (rpId, userId, allAcceptedCredentialIds,
// credentialId, name, displayName), so a relying party's call maps onto
// them one to one.

import CTAP
import Foundation
import LatchkeyJSON

/// POST /v1/keys/{name}/signals/accepted-credentials
/// (PublicKeyCredential.signalAllAcceptedCredentials).
public struct AcceptedCredentialsSignal: Codable, Sendable {
    public var rpId: String
    public var userId: String
    public var allAcceptedCredentialIds: [String]
}

/// POST /v1/keys/{name}/signals/current-user-details
/// (PublicKeyCredential.signalCurrentUserDetails).
public struct CurrentUserDetailsSignal: Codable, Sendable {
    public var rpId: String
    public var userId: String
    public var name: String
    public var displayName: String
}

/// POST /v1/keys/{name}/signals/unknown-credential
/// (PublicKeyCredential.signalUnknownCredential).
public struct UnknownCredentialSignal: Codable, Sendable {
    public var rpId: String
    public var credentialId: String
}

/// What a signal changed: the credentials deleted (as they were) and renamed
/// (as they are now); both empty when the signal matched nothing.
public struct SignalDocument: Codable, Sendable, Equatable {
    public var deleted: [CredentialDocument]
    public var updated: [CredentialDocument]

    init(_ outcome: Authenticator.SignalOutcome) {
        deleted = outcome.deleted.map(CredentialDocument.init)
        updated = outcome.updated.map(CredentialDocument.init)
    }
}

/// POST /v1/keys/{name}/export: `passphrase` for the encrypted envelope, or
/// `plaintext: true` for bare CXF; exactly one. `pin`: the key's PIN, which a
/// key that is not exportable needs (docs/access.md). Never logged.
public struct ExportRequest: Codable, Sendable {
    public var passphrase: String?
    public var plaintext: Bool?
    public var pin: String?
}

extension ExportRequest {
    /// The export's passphrase, nil for plaintext; exactly one must be asked for.
    func passphraseChoice() throws(CoreError) -> String? {
        switch (passphrase, plaintext ?? false) {
        case (let passphrase?, false):
            guard !passphrase.isEmpty else { throw .invalid("the passphrase is empty") }
            return passphrase
        case (nil, true): return nil
        case (_?, true): throw .invalid("give a passphrase or plaintext: true, not both")
        case (nil, false):
            throw .invalid("give a passphrase to encrypt the export, or plaintext: true for bare CXF")
        }
    }
}

/// POST /v1/keys/{name}/import: `document` is an envelope (then
/// `passphrase` opens it) or a plaintext CXF document.
package struct ImportRequest: Decodable, Sendable {
    package var passphrase: String?
    package var document: JSONValue
}

/// The answer to an import: every credential of the document, imported or
/// skipped with its reason.
public struct ImportReport: Codable, Sendable, Equatable {
    public struct Imported: Codable, Sendable, Equatable {
        /// Where the credential was in the document.
        public var location: String
        public var credential: CredentialDocument
        /// What of the passkey was not imported (largeBlob), if anything.
        public var notes: [String]?
    }

    public struct Skipped: Codable, Sendable, Equatable {
        public var location: String
        public var credentialId: String?
        public var rpId: String?
        public var reason: String
    }

    public var imported: [Imported]
    public var skipped: [Skipped]
}
