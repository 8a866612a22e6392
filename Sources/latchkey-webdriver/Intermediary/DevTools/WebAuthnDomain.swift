// The DevTools WebAuthn domain, answered from latchkeyd through its control API:
// an authenticator is a latchkeyd key named `cdp-<random>` that the browser
// finds among its USB security keys (through /dev/uhid or USB/IP), owned by the
// CDP session that added it. docs/automation.md, "DevTools", has the table of
// commands and what each becomes.

import LatchkeyContract
import LatchkeyJSON
import Logging
import NIOHTTP1

struct WebAuthnDomain: Sendable {
    let control: ControlAPI
    let sessions: DevToolsSessions
    let account: BrowserAccount
    let logger: Logger

    /// The commands of the domain the gateway answers; any other is "wasn't found".
    static let commands: Set<String> = [
        "enable", "disable", "addVirtualAuthenticator", "removeVirtualAuthenticator", "addCredential",
        "getCredential", "getCredentials", "removeCredential", "clearCredentials", "setUserVerified",
        "setAutomaticPresenceSimulation", "setResponseOverrideBits", "setCredentialProperties",
    ]

    /// The command's answer text (its result, or its error).
    func answer(_ command: CDPCommand, connection: UInt64) async -> String {
        do {
            let result = try await handle(command, scope: CDPScope(connection: connection, sessionId: command.sessionId))
            return CDPMessage.result(command, result)
        } catch {
            logger.info(
                "WebAuthn command refused",
                metadata: ["method": "\(command.method)", "code": "\(error.code)", "error": "\(error.message) \(error.data ?? "")"]
            )
            return CDPMessage.error(id: command.id, sessionId: command.sessionId, error)
        }
    }

    func handle(_ command: CDPCommand, scope: CDPScope) async throws(CDPError) -> [String: JSONValue] {
        let params = command.params
        guard Self.commands.contains(command.method) else { throw .methodNotFound("WebAuthn.\(command.method)") }
        switch command.method {
        case "enable":
            try CDPFields(.object(params), path: "params").only(["enableUI"])
            _ = try CDPFields(.object(params), path: "params").bool("enableUI")
            await sessions.enable(scope)
            return [:]
        case "disable":
            try CDPFields(.object(params), path: "params").only([])
            await removeKeys(await sessions.disable(scope), reason: "WebAuthn.disable")
            return [:]
        default:
            break
        }
        guard await sessions.isEnabled(scope) else { throw .notEnabled }
        if command.method == "addVirtualAuthenticator" {
            return ["authenticatorId": .string(try await add(DevToolsAuthenticatorOptions(params: params), scope: scope))]
        }
        let fields = try CDPFields(.object(params), path: "params")
        let id = try fields.required(fields.string("authenticatorId"), "authenticatorId")
        guard let options = await sessions.options(of: id, in: scope) else { throw .noSuchAuthenticator(id) }
        switch command.method {
        case "removeVirtualAuthenticator":
            try fields.only(["authenticatorId"])
            try expect(await send(.DELETE, "/v1/keys/\(id)"), [204, 404], id)
            await sessions.remove(id)
            logger.info("virtual authenticator removed", metadata: ["scope": "\(scope)", "key": "\(id)"])
            return [:]
        case "addCredential":
            try fields.only(["authenticatorId", "credential"])
            let answer = try await send(.POST, "/v1/keys/\(id)/credentials", CDPCredential.seedRequest(params: params, options: options))
            if answer.status == 507 { throw .server("virtual authenticator \(id) is full: \(answer.errorMessage)") }
            try expect(answer, [201], id)
            return [:]
        case "getCredential":
            try fields.only(["authenticatorId", "credentialId"])
            let credential = try credentialId(fields)
            guard let found = try await credentialWithKey(id, credential) else { throw .noSuchCredential }
            return ["credential": found]
        case "getCredentials":
            try fields.only(["authenticatorId"])
            return ["credentials": .array(try await credentials(of: id))]
        case "removeCredential":
            try fields.only(["authenticatorId", "credentialId"])
            let credential = try credentialId(fields)
            await sessions.deletingHere(id, [credential])
            let answer = try await send(.DELETE, "/v1/keys/\(id)/credentials/\(credential)")
            if answer.status == 404 { throw .noSuchCredential }
            try expect(answer, [204], id)
            return [:]
        case "clearCredentials":
            try fields.only(["authenticatorId"])
            let listed = try await send(.GET, "/v1/keys/\(id)/credentials")
            try expect(listed, [200], id)
            let ids = (listed.body?.array ?? []).compactMap { $0.object?["credentialId"]?.string }
            await sessions.deletingHere(id, ids)
            try expect(await send(.DELETE, "/v1/keys/\(id)/credentials"), [204], id)
            return [:]
        case "setUserVerified":
            try fields.only(["authenticatorId", "isUserVerified"])
            let verified = try fields.required(fields.bool("isUserVerified"), "isUserVerified")
            try expect(await send(.PUT, "/v1/keys/\(id)/user-verified", .object(["isUserVerified": .bool(verified)])), [200], id)
            return [:]
        case "setAutomaticPresenceSimulation":
            try fields.only(["authenticatorId", "enabled"])
            let enabled = try fields.required(fields.bool("enabled"), "enabled")
            let mode = JSONValue.object(["mode": .string(enabled ? "auto" : "prompt")])
            try expect(await send(.PUT, "/v1/keys/\(id)/presence", mode), [200], id)
            return [:]
        case "setResponseOverrideBits":
            try fields.only(["authenticatorId", "isBogusSignature", "isBadUV", "isBadUP"])
            try await overrideBits(id, fields)
            return [:]
        case "setCredentialProperties":
            try fields.only(["authenticatorId", "credentialId", "backupEligibility", "backupState"])
            let credential = try credentialId(fields)
            for key in ["backupEligibility", "backupState"] {
                if try fields.bool(key) == true {
                    throw .server("\(key) true cannot be served: a latchkey key is never backup eligible")
                }
            }
            let answer = try await send(.GET, "/v1/keys/\(id)/credentials/\(credential)")
            if answer.status == 404 { throw .noSuchCredential }
            try expect(answer, [200], id)
            return [:]
        default:
            throw .methodNotFound("WebAuthn.\(command.method)")
        }
    }

    /// Removes keys, whatever happens to each (a key already gone is fine).
    func removeKeys(_ keys: [String], reason: String) async {
        for key in keys {
            let answer = try? await control.send(.DELETE, "/v1/keys/\(key)")
            if let answer, answer.status == 204 || answer.status == 404 {
                logger.info("virtual authenticator removed", metadata: ["key": "\(key)", "reason": "\(reason)"])
            } else {
                logger.error("cannot remove a key", metadata: ["key": "\(key)", "error": "\(answer?.errorMessage ?? "no answer")"])
            }
        }
    }

    /// A credential as the domain's Credential, private key included where latchkeyd
    /// holds one; nil when the key has no such credential.
    func credentialWithKey(_ key: String, _ credentialId: String) async throws(CDPError) -> JSONValue? {
        let one = try await send(.GET, "/v1/keys/\(key)/credentials/\(credentialId)?privateKey=true")
        if one.status == 404 { return nil }
        try expect(one, [200], key)
        return CDPCredential.from(latchkey: one.body?.object ?? [:])
    }

    /// The domain's event for one of latchkeyd's credential events on `key`.
    func eventParams(_ method: String, key: String, fields: [String: JSONValue]) async -> [String: JSONValue] {
        let credentialId = fields["credentialId"]?.string ?? ""
        if method == "WebAuthn.credentialDeleted" { return ["credentialId": .string(CDPBinary.cdp(credentialId))] }
        // The stored credential, with its private key; a non-discoverable one (nothing
        // stored) from the event's own fields.
        let stored = try? await credentialWithKey(key, credentialId)
        var credential = stored ?? CDPCredential.from(latchkey: fields)
        if case .object(var members) = credential, let count = fields["signCount"] {
            members["signCount"] = count  // the event's counter is the one this operation signed
            credential = .object(members)
        }
        return ["credential": credential]
    }

    private func add(_ options: DevToolsAuthenticatorOptions, scope: CDPScope) async throws(CDPError) -> String {
        let name = "cdp-" + String(VirtualAuthenticators.newKeyName().dropFirst(3))
        try await account.admit(name, ownKeys: await sessions.keys(), control: control, refused: CDPError.server) {
            () async throws(CDPError) in
            try expect(await send(.POST, "/v1/keys", options.createKeyRequest(name: name)), [201], name)
        } remove: {
            await removeKeys([name], reason: "isolation")
        }
        await sessions.add(name, options: options, scope: scope)
        logger.info("virtual authenticator added", metadata: ["scope": "\(scope)", "key": "\(name)"])
        return name
    }

    /// Every credential of the key, private keys included.
    private func credentials(of key: String) async throws(CDPError) -> [JSONValue] {
        let list = try await send(.GET, "/v1/keys/\(key)/credentials")
        try expect(list, [200], key)
        var answer: [JSONValue] = []
        for credential in list.body?.array ?? [] {
            guard let credentialId = credential.object?["credentialId"]?.string,
                let full = try await credentialWithKey(key, credentialId)
            else { continue }  // deleted meanwhile
            answer.append(full)
        }
        return answer
    }

    /// setResponseOverrideBits: the key's override queue emptied, then each bit set as
    /// latchkeyd's nearest override, for its next 1000 operations (the bits stay until
    /// the next call; latchkeyd counts). isBogusSignature flips a signature byte, as
    /// Chromium zeroes the signature: the RP's verification fails either way. isBadUV
    /// fails built-in UV (CTAP2_ERR_UV_INVALID) where Chromium clears the UV flag, and
    /// isBadUP refuses presence (CTAP2_ERR_OPERATION_DENIED) where Chromium clears the UP
    /// flag: a real key cannot send a response with either flag wrongly clear.
    private func overrideBits(_ key: String, _ fields: CDPFields) async throws(CDPError) {
        let bits = [
            ("isBogusSignature", "bogus-signature"), ("isBadUV", "uv-false"), ("isBadUP", "deny"),
        ]
        var actions: [String] = []
        for (field, action) in bits {
            if try fields.bool(field) == true { actions.append(action) }
        }
        try expect(await send(.DELETE, "/v1/keys/\(key)/overrides"), [204], key)
        for action in actions {
            let body = JSONValue.object([
                "action": .string(action), "count": .number(1000),
                "operations": .array([.string("makeCredential"), .string("getAssertion")]),
            ])
            try expect(await send(.POST, "/v1/keys/\(key)/overrides", body), [201], key)
        }
    }

    private func credentialId(_ fields: CDPFields) throws(CDPError) -> String {
        try fields.required(fields.binary("credentialId"), "credentialId")
    }

    private func send(_ method: HTTPMethod, _ path: String, _ body: JSONValue? = nil) async throws(CDPError) -> ControlAnswer {
        do {
            return try await control.send(method, path, body)
        } catch {
            throw .server(error.message)
        }
    }

    /// latchkeyd's 400 and 409 are the command's fault, 404 a key that is gone,
    /// anything else latchkeyd's.
    private func expect(_ answer: ControlAnswer, _ statuses: Set<Int>, _ key: String) throws(CDPError) {
        guard !statuses.contains(answer.status) else { return }
        switch answer.status {
        case 404: throw .noSuchAuthenticator(key)
        default: throw .server("latchkeyd answered \(answer.status): \(answer.errorMessage)")
        }
    }
}
