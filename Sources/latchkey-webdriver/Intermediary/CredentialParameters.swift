// WebAuthn §11's Credential Parameters both ways: an Add Credential request,
// checked as the spec's remote end steps check it and turned into the body of
// latchkeyd's POST /v1/keys/{name}/credentials; and a credential latchkeyd
// lists, turned into what Get Credentials answers.

import LatchkeyJSON

/// A checked Add Credential request.
public struct CredentialParameters: Sendable, Equatable {
    /// base64url without padding, as latchkeyd takes byte strings.
    public var credentialId: String
    public var isResidentCredential: Bool
    public var rpId: String
    public var privateKey: String
    public var userHandle: String?
    public var signCount: Int64
    public var largeBlob: String?
    public var userName: String?
    public var userDisplayName: String?

    /// Checks `parameters` in the spec's order. `supportsLargeBlob`: whether
    /// the authenticator has the largeBlob extension; without it a largeBlob
    /// is left out, as §11 says.
    public init(parameters: JSONValue, supportsLargeBlob: Bool) throws(WebDriverError) {
        guard let members = parameters.object else {
            throw .invalidArgument("the Credential Parameters must be a JSON object, not \(parameters.typeName)")
        }
        func bytes(_ key: String) throws(WebDriverError) -> String? {
            guard let value = members[key] else { return nil }
            guard let text = value.string, let canonical = Base64URL.canonical(text) else {
                throw .invalidArgument("\(key) must be a base64url string")
            }
            return canonical
        }
        func text(_ key: String) throws(WebDriverError) -> String? {
            guard let value = members[key] else { return nil }
            guard let text = value.string else {
                throw .invalidArgument("\(key) must be a string, not \(value.typeName)")
            }
            return text
        }
        guard let credentialId = try bytes("credentialId"), !credentialId.isEmpty else {
            throw .invalidArgument("credentialId is required: the credential ID, base64url")
        }
        self.credentialId = credentialId
        guard let resident = members["isResidentCredential"] else {
            throw .invalidArgument("isResidentCredential is required")
        }
        guard let isResidentCredential = resident.bool else {
            throw .invalidArgument("isResidentCredential must be a boolean, not \(resident.typeName)")
        }
        self.isResidentCredential = isResidentCredential
        guard let rpId = try text("rpId"), Self.isValidRPID(rpId) else {
            throw .invalidArgument("rpId is required and must be a valid RP ID (a domain, e.g. \"example.com\")")
        }
        self.rpId = rpId
        guard let privateKey = try bytes("privateKey"), !privateKey.isEmpty else {
            throw .invalidArgument("privateKey is required: a PKCS#8 private key (RFC 5958), base64url")
        }
        self.privateKey = privateKey
        userHandle = try bytes("userHandle")
        if userHandle == nil, isResidentCredential {
            throw .invalidArgument("a resident credential (isResidentCredential true) needs a userHandle")
        }
        guard let count = members["signCount"] else {
            throw .invalidArgument("signCount is required: 0 to 4294967295, or null")
        }
        switch count {
        case .null:
            // latchkey keeps a counter for every credential; "no counter" is
            // one that starts at 0.
            signCount = 0
        default:
            guard let value = count.integer, (0...Int64(UInt32.max)).contains(value) else {
                throw .invalidArgument("signCount must be an integer from 0 to 4294967295, or null")
            }
            signCount = value
        }
        let largeBlob = try bytes("largeBlob")
        self.largeBlob = supportsLargeBlob ? largeBlob : nil
        for key in ["backupEligibility", "backupState"] {
            guard let value = members[key] else { continue }
            guard let flag = value.bool else {
                throw .invalidArgument("\(key) must be a boolean, not \(value.typeName)")
            }
            if flag {
                throw .unsupportedOperation(
                    "\(key) true cannot be served: a latchkey key is a device-bound security key, never backup eligible"
                )
            }
        }
        userName = try text("userName")
        userDisplayName = try text("userDisplayName")
        guard isResidentCredential else {
            // latchkey stores no non-discoverable credential: its credential ID
            // is the private key wrapped under the key's secret, so an ID the
            // test chose can never name one.
            throw .unsupportedOperation(
                "a non-resident credential cannot keep the credentialId it is given on a latchkey key "
                    + "(its ID is its private key, wrapped by the key); add it with isResidentCredential true"
            )
        }
    }

    /// A valid RP ID is a domain: dot-separated labels of letters, digits and
    /// hyphens (IDNA A-labels), not an origin or a URL.
    static func isValidRPID(_ text: String) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return !text.isEmpty && text.utf8.count <= 253
            && labels.allSatisfy { label in
                !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            }
    }

    /// The body of POST /v1/keys/{name}/credentials.
    public var seedRequest: JSONValue {
        var body: [String: JSONValue] = [
            "credentialId": .string(credentialId),
            "isResidentCredential": .bool(isResidentCredential),
            "rpId": .string(rpId),
            "privateKey": .string(privateKey),
            "signCount": .number(Double(signCount)),
        ]
        if let userHandle { body["userHandle"] = .string(userHandle) }
        if let largeBlob { body["largeBlob"] = .string(largeBlob) }
        if let userName { body["userName"] = .string(userName) }
        if let userDisplayName { body["userDisplayName"] = .string(userDisplayName) }
        return .object(body)
    }

    /// What Get Credentials answers for a credential latchkeyd shows (GET
    /// /v1/keys/{name}/credentials/{id}?privateKey=true): §11's fields only.
    /// A counter latchkeyd has not seen used since it started is 0.
    public static func webDriverCredential(from credential: JSONValue) -> JSONValue {
        let members = credential.object ?? [:]
        var answer: [String: JSONValue] = [
            "credentialId": members["credentialId"] ?? .null,
            "isResidentCredential": members["isResidentCredential"] ?? .bool(true),
            "rpId": members["rpId"] ?? .null,
            "privateKey": members["privateKey"] ?? .null,
            "signCount": members["signCount"] ?? .number(0),
            "backupEligibility": .bool(false),
            "backupState": .bool(false),
            "userName": members["userName"] ?? .string(""),
            "userDisplayName": members["userDisplayName"] ?? .string(""),
        ]
        if let userHandle = members["userHandle"], userHandle.string?.isEmpty == false {
            answer["userHandle"] = userHandle
        }
        if let largeBlob = members["largeBlob"] { answer["largeBlob"] = largeBlob }
        return .object(answer)
    }
}
