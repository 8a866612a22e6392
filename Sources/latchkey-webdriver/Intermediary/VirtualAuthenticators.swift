// The WebAuthn §11 commands, answered with latchkeyd keys through its control
// API: a virtual authenticator is a latchkeyd key named `wd-<random>`, owned
// by the session that added it. A session can only reach the keys it added;
// any other name (a key of the configuration file, another session's) is
// "no such virtual authenticator", so a test cannot touch a person's key.
//
// Because these commands never reach the upstream driver, chromedriver never
// switches on its in-browser virtual authenticator environment: Chromium
// keeps talking to real HID devices, and finds the latchkey key among them.

import LatchkeyContract
import LatchkeyJSON
import Logging
import NIOHTTP1

/// Serves the §11 commands.
struct VirtualAuthenticators: Sendable {
    let control: ControlAPI
    let sessions: SessionRegistry
    /// Isolation of parallel sessions (BrowserAccount.swift): each session is a browser.
    let account: BrowserAccount
    let logger: Logger

    /// The command's answer (the `value` of a success), or its WebDriver error.
    func handle(_ command: WebAuthnCommand, session: String, body: JSONValue?) async throws(WebDriverError)
        -> JSONValue
    {
        guard await sessions.isKnown(session) else { throw .invalidSessionId(session) }
        switch command {
        case .addAuthenticator:
            return .string(try await addAuthenticator(session: session, parameters: try object(body)))
        case .removeAuthenticator(let id):
            _ = try await owned(id, session)
            try expect(try await control.send(.DELETE, "/v1/keys/\(id)"), [204, 404], authenticator: id)
            await sessions.remove(id, from: session)
            logger.info("virtual authenticator removed", metadata: ["session": "\(session)", "key": "\(id)"])
        case .addCredential(let id):
            let configuration = try await owned(id, session)
            let parameters = try CredentialParameters(
                parameters: .object(try object(body)),
                supportsLargeBlob: configuration[.largeBlob]
            )
            let answer = try await control.send(.POST, "/v1/keys/\(id)/credentials", parameters.seedRequest)
            if answer.status == 507 {
                throw .unknownError("virtual authenticator \(id) is full: \(answer.errorMessage)")
            }
            try expect(answer, [201], authenticator: id)
        case .getCredentials(let id):
            _ = try await owned(id, session)
            return .array(try await credentials(of: id))
        case .removeCredential(let id, let credential):
            _ = try await owned(id, session)
            guard let canonical = Base64URL.canonical(credential) else {
                throw .noSuchCredential(credential, authenticator: id)
            }
            let answer = try await control.send(.DELETE, "/v1/keys/\(id)/credentials/\(canonical)")
            if answer.status == 404 { throw .noSuchCredential(credential, authenticator: id) }
            try expect(answer, [204], authenticator: id)
        case .removeAllCredentials(let id):
            _ = try await owned(id, session)
            try expect(await control.send(.DELETE, "/v1/keys/\(id)/credentials"), [204], authenticator: id)
        case .setUserVerified(let id):
            let parameters = try object(body)
            _ = try await owned(id, session)
            guard let value = parameters["isUserVerified"] else { throw .invalidArgument("isUserVerified is required") }
            guard let verified = value.bool else {
                throw .invalidArgument("isUserVerified must be a boolean, not \(value.typeName)")
            }
            let request = JSONValue.object(["isUserVerified": .bool(verified)])
            try expect(await control.send(.PUT, "/v1/keys/\(id)/user-verified", request), [200], authenticator: id)
        case .setCredentialProperties(let id, let credential):
            let parameters = try object(body)
            _ = try await owned(id, session)
            for key in ["backupEligibility", "backupState"] {
                guard let value = parameters[key] else { continue }
                guard let flag = value.bool else {
                    throw .invalidArgument("\(key) must be a boolean, not \(value.typeName)")
                }
                if flag {
                    throw .unsupportedOperation("\(key) true cannot be served: a latchkey key is never backup eligible")
                }
            }
            guard let canonical = Base64URL.canonical(credential) else {
                throw .noSuchCredential(credential, authenticator: id)
            }
            let answer = try await control.send(.GET, "/v1/keys/\(id)/credentials/\(canonical)")
            if answer.status == 404 { throw .noSuchCredential(credential, authenticator: id) }
            try expect(answer, [200], authenticator: id)
        case .unknownMethod, .unknown:
            preconditionFailure("the responder answers unknown commands")
        }
        return .null
    }

    /// Removes keys, whatever happens to each (a key already gone is fine).
    func removeKeys(_ keys: [String], reason: String) async {
        for key in keys {
            do {
                let answer = try await control.send(.DELETE, "/v1/keys/\(key)")
                guard answer.status == 204 || answer.status == 404 else {
                    logger.error("cannot remove a key", metadata: ["key": "\(key)", "error": "\(answer.errorMessage)"])
                    continue
                }
                logger.info("virtual authenticator removed", metadata: ["key": "\(key)", "reason": "\(reason)"])
            } catch {
                logger.error("cannot remove a key", metadata: ["key": "\(key)", "error": "\(error.message)"])
            }
        }
    }

    private func addAuthenticator(session: String, parameters: [String: JSONValue]) async throws(WebDriverError)
        -> String
    {
        let configuration = try AuthenticatorConfiguration(parameters: .object(parameters))
        let name = Self.newKeyName()
        try await account.admit(
            name,
            ownKeys: await sessions.authenticators(of: session),
            control: control,
            refused: WebDriverError.unknownError
        ) { () async throws(WebDriverError) in
            let answer = try await control.send(.POST, "/v1/keys", configuration.createKeyRequest(name: name))
            try expect(answer, [201], authenticator: name)
        } remove: {
            await removeKeys([name], reason: "isolation")
        }
        await sessions.add(name, configuration: configuration, to: session)
        logger.info("virtual authenticator added", metadata: ["session": "\(session)", "key": "\(name)"])
        return name
    }

    /// Every credential of the key with §11's fields, private keys included.
    private func credentials(of id: String) async throws(WebDriverError) -> [JSONValue] {
        let list = try await control.send(.GET, "/v1/keys/\(id)/credentials")
        try expect(list, [200], authenticator: id)
        guard case .array(let stored) = list.body else {
            throw .unknownError("latchkeyd listed the credentials of \(id) in an unexpected shape")
        }
        var answer: [JSONValue] = []
        for credential in stored {
            guard let credentialId = credential.object?["credentialId"]?.string else { continue }
            let one = try await control.send(.GET, "/v1/keys/\(id)/credentials/\(credentialId)?privateKey=true")
            if one.status == 404 { continue }  // deleted meanwhile
            try expect(one, [200], authenticator: id)
            answer.append(CredentialParameters.webDriverCredential(from: one.body ?? .null))
        }
        return answer
    }

    /// The configuration of a key `session` added, or §11's error.
    private func owned(_ id: String, _ session: String) async throws(WebDriverError) -> AuthenticatorConfiguration {
        guard let configuration = await sessions.configuration(of: id, in: session) else {
            throw .noSuchAuthenticator(id)
        }
        return configuration
    }

    /// A command's parameters: a JSON object (WebDriver: invalid argument otherwise).
    private func object(_ body: JSONValue?) throws(WebDriverError) -> [String: JSONValue] {
        guard let members = body?.object else {
            throw .invalidArgument("the command's parameters must be a JSON object")
        }
        return members
    }

    /// Maps a control API answer outside `statuses`: the daemon's 400 and 409
    /// are the request's fault (invalid argument), 404 a key that is gone,
    /// anything else latchkeyd's (unknown error).
    private func expect(_ answer: ControlAnswer, _ statuses: Set<Int>, authenticator: String) throws(WebDriverError) {
        guard !statuses.contains(answer.status) else { return }
        switch answer.status {
        case 400, 409: throw .invalidArgument(answer.errorMessage)
        case 404: throw .noSuchAuthenticator(authenticator)
        default: throw .unknownError("latchkeyd answered \(answer.status): \(answer.errorMessage)")
        }
    }

    /// `wd-` and 16 random hex digits: a key name, and a valid authenticatorId
    /// (up to 48 unreserved characters).
    static func newKeyName() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let hex = String(value, radix: 16)
        return "wd-" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
