// CTAP1/U2F over CTAPHID_MSG (FIDO U2F Raw Message Formats v1.2; CTAP 2.1 §11
// "Interoperating with CTAP1/U2F authenticators"): VERSION, REGISTER and
// AUTHENTICATE with check-only, enforce and dont-enforce. Key handles are
// wrapped credential IDs bound to the application parameter, so a U2F
// registration also works through CTAP2 getAssertion with that rpIdHash.

import CBOR
import LatchkeyCrypto

/// An ISO 7816-4 status word closing every U2F response.
public struct U2FStatusWord: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// SW_NO_ERROR (0x9000)
    public static let noError = U2FStatusWord(rawValue: 0x9000)
    /// SW_CONDITIONS_NOT_SATISFIED (0x6985): user presence is required.
    public static let conditionsNotSatisfied = U2FStatusWord(rawValue: 0x6985)
    /// SW_WRONG_DATA (0x6A80): for example, a key handle that is not ours.
    public static let wrongData = U2FStatusWord(rawValue: 0x6A80)
    /// SW_WRONG_LENGTH (0x6700)
    public static let wrongLength = U2FStatusWord(rawValue: 0x6700)
    /// ISO 7816-4 "incorrect parameters P1-P2" (0x6A86)
    public static let wrongP1P2 = U2FStatusWord(rawValue: 0x6A86)
    /// SW_CLA_NOT_SUPPORTED (0x6E00)
    public static let claNotSupported = U2FStatusWord(rawValue: 0x6E00)
    /// SW_INS_NOT_SUPPORTED (0x6D00)
    public static let insNotSupported = U2FStatusWord(rawValue: 0x6D00)
    /// ISO 7816-4 "no precise diagnosis" (0x6F00): an internal failure.
    public static let unknown = U2FStatusWord(rawValue: 0x6F00)

    var bytes: [UInt8] { [UInt8(rawValue >> 8), UInt8(rawValue & 0xFF)] }
}

/// A command APDU in short or extended length encoding (ISO 7816-4 §5.1).
public struct CommandAPDU: Sendable, Equatable {
    public var cla: UInt8
    public var ins: UInt8
    public var p1: UInt8
    public var p2: UInt8
    public var data: [UInt8]

    /// Parses `bytes`; nil when the length fields do not match the bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count >= 4 else { return nil }
        cla = bytes[0]
        ins = bytes[1]
        p1 = bytes[2]
        p2 = bytes[3]
        let body = Array(bytes[4...])
        if body.isEmpty || body.count == 1 {
            // No data; at most a short Le.
            data = []
        } else if body[0] == 0 {
            // Extended: 00 | Lc(2) | data | Le(2)?, or 00 | Le(2). python-fido2
            // sends an empty body as Lc = 0 followed by Le.
            guard body.count >= 3 else { return nil }
            let length = Int(body[1]) << 8 | Int(body[2])
            if body.count == 3 {
                data = []
            } else {
                guard body.count == 3 + length || body.count == 3 + length + 2 else { return nil }
                data = Array(body[3..<3 + length])
            }
        } else {
            // Short: Lc | data | Le?
            let length = Int(body[0])
            guard body.count == 1 + length || body.count == 1 + length + 1 else { return nil }
            data = Array(body[1..<1 + length])
        }
    }
}

extension Authenticator {
    /// U2F instruction bytes.
    enum U2FInstruction: UInt8 {
        case register = 0x01
        case authenticate = 0x02
        case version = 0x03
    }

    /// Handles one CTAPHID_MSG payload (a U2F request APDU) and returns the
    /// response data followed by the status word.
    public func handleAPDU(_ bytes: [UInt8], from origin: RequestOrigin = .solitary) async -> [UInt8] {
        // A U2F request is "another command" to the conversation's CTAP2 sequences.
        conversations[origin].assertions = nil
        conversations[origin].enumeration = nil
        // U2F cannot verify the user, so alwaysUv turns it off (CTAP 2.1
        // §6.11.3); getInfo then leaves U2F_V2 out of versions. A store that
        // cannot say counts as on.
        guard configuration.u2fAvailable, (try? alwaysUv()) == false else {
            return U2FStatusWord.insNotSupported.bytes
        }
        guard let apdu = CommandAPDU(bytes: bytes) else { return U2FStatusWord.wrongLength.bytes }
        guard apdu.cla == 0 else { return U2FStatusWord.claNotSupported.bytes }
        do throws(U2FStatusWord) {
            switch U2FInstruction(rawValue: apdu.ins) {
            case .version:
                guard apdu.data.isEmpty else { throw U2FStatusWord.wrongLength }
                return Array("U2F_V2".utf8) + U2FStatusWord.noError.bytes
            case .register:
                return try await u2fRegister(apdu) + U2FStatusWord.noError.bytes
            case .authenticate:
                return try await u2fAuthenticate(apdu) + U2FStatusWord.noError.bytes
            case nil:
                throw U2FStatusWord.insNotSupported
            }
        } catch {
            return error.bytes
        }
    }

    /// REGISTER: challenge parameter (32) | application parameter (32).
    private func u2fRegister(_ apdu: CommandAPDU) async throws(U2FStatusWord) -> [UInt8] {
        guard apdu.data.count == 64 else { throw .wrongLength }
        guard let identity = configuration.attestationIdentity else { throw .insNotSupported }
        let challenge = Array(apdu.data[0..<32])
        let application = Array(apdu.data[32..<64])
        // U2F keys answer "not satisfied" until touched; the host retries.
        let request = u2fPresenceRequest(.u2fRegister, application: application)
        guard await presence.requestPresence(request).isApproval else { throw .conditionsNotSatisfied }
        do {
            let key = try CredentialPrivateKey.generate(.es256, entropy: entropy)
            guard let p256 = key.p256 else { throw U2FStatusWord.unknown }
            let keyHandle = try wrapper.wrap(
                WrappedCredential(privateKey: key, credProtect: 1), rpIdHash: application, entropy: entropy
            )
            let publicKey = p256.publicKey.x963Representation
            let signed = [0x00] + application + challenge + keyHandle + publicKey
            let signature = try identity.privateKey.signature(for: signed)
            return [0x05] + publicKey + [UInt8(keyHandle.count)] + keyHandle + identity.certificateChain[0] + signature
        } catch {
            diagnostics?("U2F register: \(error)")
            throw .unknown
        }
    }

    /// The presence request of a U2F operation. U2F names the site only by
    /// a hash, which the host claims as it claims a CTAP2 rpId; a
    /// discoverable credential stored for that hash tells the RP ID it
    /// stands for, so that the prompt can name the site. Without one (or
    /// when the store cannot answer) the request carries the hash alone.
    private func u2fPresenceRequest(_ operation: PresenceRequest.Operation, application: [UInt8]) -> PresenceRequest {
        let site = (try? store.credentials(rpIdHash: application))?.first?.rpId
        return PresenceRequest(operation: operation, rpId: site, rpIdHash: application)
    }

    /// AUTHENTICATE: challenge (32) | application (32) | L (1) | key handle (L).
    /// P1 0x07 check-only, 0x03 enforce-user-presence-and-sign,
    /// 0x08 dont-enforce-user-presence-and-sign.
    private func u2fAuthenticate(_ apdu: CommandAPDU) async throws(U2FStatusWord) -> [UInt8] {
        guard apdu.data.count >= 65, apdu.data.count == 65 + Int(apdu.data[64]) else { throw .wrongLength }
        let challenge = Array(apdu.data[0..<32])
        let application = Array(apdu.data[32..<64])
        let keyHandle = Array(apdu.data[65...])
        let credential: FoundCredential?
        do {
            credential = try findCredential(id: keyHandle, rpIdHash: application)
        } catch {
            throw .unknown
        }
        // U2F signs with P-256 only, and cannot verify the user: a credential
        // made with credProtect userVerificationRequired is not usable here.
        guard let credential, credential.privateKey.p256 != nil,
            credential.credProtect.permits(userVerified: false, listed: true)
        else { throw .wrongData }

        let flags: AuthenticatorDataFlags
        switch apdu.p1 {
        case 0x07:
            // The key handle is ours: U2F says so with "conditions not satisfied".
            throw .conditionsNotSatisfied
        case 0x03:
            let request = u2fPresenceRequest(.u2fAuthenticate, application: application)
            guard await presence.requestPresence(request).isApproval else { throw .conditionsNotSatisfied }
            flags = [.userPresent]
        case 0x08:
            flags = []
        default:
            throw .wrongP1P2
        }
        do {
            let scope = credential.stored == nil ? [] : credential.id
            let counter = try store.nextSignatureCounter(scope: scope)
            var counterBytes: [UInt8] = []
            appendBigEndian(counter, into: &counterBytes)
            let signature = try credential.privateKey.signature(
                for: application + [flags.rawValue] + counterBytes + challenge
            )
            return [flags.rawValue] + counterBytes + signature
        } catch {
            diagnostics?("U2F authenticate: \(error)")
            throw .unknown
        }
    }
}

extension U2FStatusWord: Error {}
