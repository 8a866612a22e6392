// Drivers that play arbitrary bytes against the key core's JSON parsers, as the control
// server and the import path call them, checking invariants. The fuzzers
// (Fuzz/Sources/FuzzControlRequests, FuzzCXF, FuzzExchangeEnvelope) and the crasher replay
// test (Tests/LatchkeyCoreTests) share them, so a kept crasher means the same thing to
// both. Nothing here touches a file, a socket or a key: the parsers are pure. A target of
// its own, so that the fuzzers link the core alone and no product of the package exists
// only for them.

import CTAP
import Foundation
import LatchkeyCore
import LatchkeyCrypto
import LatchkeyJSON

/// Runs bytes through the JSON parsers of the control API, CXF and the export envelope.
///
/// Each entry point returns a description of every broken invariant; empty when all held.
/// A trap in a parser is a crash libFuzzer keeps on its own.
public enum JSONFuzzDriver {
    /// A libFuzzer `LLVMFuzzerTestOneInput` body: runs `driver` on the input and traps on a
    /// broken invariant, so that libFuzzer keeps the input.
    public static func fuzz(_ start: UnsafeRawPointer, _ count: Int, _ driver: ([UInt8]) -> [String]) -> Int32 {
        let violations = driver([UInt8](UnsafeRawBufferPointer(start: start, count: count)))
        precondition(violations.isEmpty, "JSON parser invariant broken: \(violations)")
        return 0
    }

    // MARK: Control API request bodies

    /// A control API request body: the first byte picks the document type (modulo the
    /// number of types, in the order of ``requestReaders``), the rest is the body, decoded
    /// with `JSONDecoder` as the control server's `decode` does.
    ///
    /// Invariants: a body that decodes encodes again, and its encoding decodes to an equal
    /// document (by its JSON, keys sorted); the checks the handlers make on a decoded body
    /// without a key (protocol names, policy values, base64url fields) do not trap.
    public static func controlRequest(_ input: [UInt8]) -> [String] {
        guard let selector = input.first else { return [] }
        let reader = requestReaders[Int(selector) % requestReaders.count]
        return reader(Data(input.dropFirst()))
    }

    /// The request documents the control API decodes, one reader each.
    static let requestReaders: [@Sendable (Data) -> [String]] = [
        roundTrip(CreateKeyRequest.self) { request in
            _ = CreateKeyRequest.protocolMode(request.protocol)
            if let policy = request.policy {
                try? policy.applied(to: PolicySettings()).validate(mode: request.presence ?? .prompt)
            }
        },
        roundTrip(UserUpdateRequest.self),
        roundTrip(PINRequest.self),
        roundTrip(ConfigDocument.self),
        roundTrip(PresenceDocument.self),
        roundTrip(UserVerifiedDocument.self),
        roundTrip(OverrideRequest.self),
        roundTrip(SeedCredentialRequest.self) { request in
            for field in [request.credentialId, request.privateKey, request.userHandle, request.largeBlob] {
                _ = field.flatMap { Base64URL.decode($0, standardAlphabet: true) }
            }
            if let key = request.privateKey.flatMap({ Base64URL.decode($0, standardAlphabet: true) }) {
                _ = try? CredentialPrivateKey(pkcs8: key)
            }
        },
        roundTrip(PolicyOverrides.self) { overrides in
            for mode in [PresenceMode.auto, .prompt, .deny] {
                try? overrides.applied(to: PolicySettings()).validate(mode: mode)
            }
        },
        roundTrip(PasswordUsedRequest.self),
        roundTrip(AcceptedCredentialsSignal.self) { signal in
            _ = Base64URL.decode(signal.userId, standardAlphabet: true)
            for id in signal.allAcceptedCredentialIds { _ = Base64URL.decode(id, standardAlphabet: true) }
        },
        roundTrip(CurrentUserDetailsSignal.self) { signal in
            _ = Base64URL.decode(signal.userId, standardAlphabet: true)
        },
        roundTrip(UnknownCredentialSignal.self) { signal in
            _ = Base64URL.decode(signal.credentialId, standardAlphabet: true)
        },
        roundTrip(ExportRequest.self),
        importRequest,
    ]

    /// A reader of `type` that checks the JSON round trip and runs `check` on what decoded.
    static func roundTrip<T: Codable & Sendable>(
        _ type: T.Type,
        check: @escaping @Sendable (T) -> Void = { _ in }
    ) -> @Sendable (Data) -> [String] {
        { data in
            guard let decoded = try? JSONDecoder().decode(T.self, from: data) else { return [] }
            check(decoded)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            guard let encoded = try? encoder.encode(decoded) else {
                return ["\(T.self) decoded but does not encode"]
            }
            guard let again = try? JSONDecoder().decode(T.self, from: encoded) else {
                return ["\(T.self) does not decode its own encoding \(String(decoding: encoded, as: UTF8.self))"]
            }
            guard let reencoded = try? encoder.encode(again), reencoded == encoded else {
                return ["\(T.self) changes on a second round trip"]
            }
            return []
        }
    }

    /// POST /v1/keys/{name}/import: the request, then what the import does with its
    /// document before any key is touched (``importedEntries(_:passphrase:)``).
    static func importRequest(_ data: Data) -> [String] {
        guard let request = try? JSONDecoder().decode(ImportRequest.self, from: data) else { return [] }
        return importedEntries(request.document, passphrase: request.passphrase ?? "fuzz")
    }

    // MARK: CXF

    /// A CXF document as JSON bytes, read as an import reads a plaintext one.
    ///
    /// Invariants: every passkey read is written back by `CXF.encode` into a document that
    /// reads back to the same passkeys (without largeBlob, which latchkey does not write).
    public static func cxf(_ input: [UInt8]) -> [String] {
        guard let entries = try? CXF.read(Data(input)) else { return [] }
        return cxfRoundTrip(entries)
    }

    static func cxfRoundTrip(_ entries: [CXFEntry]) -> [String] {
        let passkeys = entries.compactMap { entry -> CXFPasskey? in
            guard case .passkey(var passkey) = entry.outcome else { return nil }
            passkey.hasLargeBlob = false
            return passkey
        }
        let document = CXF.encode(passkeys, accountId: [1, 2, 3, 4], exporterDisplayName: "fuzz", timestamp: 0)
        let again: [CXFEntry]
        do throws(CXFError) {
            again = try CXF.read(document)
        } catch {
            return ["CXF does not read its own encoding: \(error)"]
        }
        let reread = again.compactMap { entry -> CXFPasskey? in
            if case .passkey(let passkey) = entry.outcome { passkey } else { nil }
        }
        guard reread == passkeys, again.count == passkeys.count else {
            return ["\(passkeys.count) passkeys written, \(reread.count) of \(again.count) entries read back equal"]
        }
        return []
    }

    // MARK: The export envelope

    /// The largest scrypt work (N·r·p) a fuzzed envelope is opened with: above it only the
    /// checks run, so that every input takes microseconds. The envelope seeds use N = 16,
    /// r = 1, p = 1.
    static let maximumFuzzedCost: UInt64 = 1 << 8

    /// An import's `document` as JSON bytes, opened with the passphrase "fuzz" when it is an
    /// envelope, as the import path does.
    ///
    /// Invariants: an envelope whose fields pass the checks asks for scrypt work (N·r·p) of
    /// at most ``ExchangeEnvelope/maxCost`` (scrypt itself refuses more memory than
    /// ``ExchangeEnvelope/maxMemoryBytes``); what opens is read as CXF under the CXF
    /// invariants.
    public static func envelope(_ input: [UInt8]) -> [String] {
        guard let document = try? JSONDecoder().decode(JSONValue.self, from: Data(input)) else { return [] }
        return importedEntries(document, passphrase: "fuzz")
    }

    /// What the import route does with a document before it touches a key: an envelope is
    /// decoded from the document's JSON, checked and (when cheap) opened, then its
    /// plaintext read as CXF; a plain document is read as CXF.
    static func importedEntries(_ document: JSONValue, passphrase: String) -> [String] {
        guard ExchangeEnvelope.isEnvelope(document) else {
            guard let entries = try? CXF.read(document.jsonData()) else { return [] }
            return cxfRoundTrip(entries)
        }
        guard let envelope = try? JSONDecoder().decode(ExchangeEnvelope.self, from: document.jsonData()) else {
            return []
        }
        let checked: ExchangeEnvelope.Checked
        do throws(ExchangeEnvelope.Failure) {
            checked = try envelope.checked()
        } catch {
            return []
        }
        let parameters = checked.parameters
        let cost = parameters.n.multipliedReportingOverflow(by: UInt64(parameters.r))
        let total = cost.partialValue.multipliedReportingOverflow(by: UInt64(parameters.p))
        if cost.overflow || total.overflow || total.partialValue > ExchangeEnvelope.maxCost {
            return ["an envelope of scrypt cost over \(ExchangeEnvelope.maxCost) passed the checks"]
        }
        guard total.partialValue <= maximumFuzzedCost else { return [] }
        guard let plaintext = try? envelope.open(passphrase: passphrase) else { return [] }
        guard let entries = try? CXF.read(Data(plaintext)) else { return [] }
        return cxfRoundTrip(entries)
    }
}
