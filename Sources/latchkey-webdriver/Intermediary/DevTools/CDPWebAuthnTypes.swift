// The DevTools WebAuthn domain's types both ways: VirtualAuthenticatorOptions,
// checked field by field and turned into latchkeyd's POST /v1/keys; Credential,
// turned into POST /v1/keys/{name}/credentials and made from what latchkeyd
// lists or reports on its event stream. CDP's `binary` is standard base64 with
// padding; latchkeyd's byte strings are base64url without it: both are read,
// CDP's is written.
//
// A field the domain does not define is an invalid-params error, not ignored:
// a test that asks for something latchkey cannot give should hear it.

import LatchkeyJSON

/// CDP's `binary` values.
enum CDPBinary {
    /// base64url without padding (latchkeyd's form) from standard base64 or base64url,
    /// padded or not; nil when `text` is neither.
    static func latchkey(_ text: String) -> String? {
        Base64URL.canonical(text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_"))
    }

    /// Standard base64 with padding (CDP's form) from base64url (latchkeyd's).
    static func cdp(_ text: String) -> String {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return standard
    }
}

/// Reading a params object field by field, with Chromium's parameter errors.
struct CDPFields {
    let members: [String: JSONValue]
    /// Where the object is, for messages: "params", "params.options".
    let path: String

    init(_ value: JSONValue?, path: String) throws(CDPError) {
        guard let value else { throw .invalidParams("\(path): mandatory field missing") }
        guard let members = value.object else { throw .invalidParams("\(path): object expected, not \(value.typeName)") }
        self.members = members
        self.path = path
    }

    /// Refuses any field not in `known`.
    func only(_ known: Set<String>) throws(CDPError) {
        for key in members.keys.sorted() where !known.contains(key) {
            throw .invalidParams("\(path).\(key): not a field of this type (it has \(known.sorted().joined(separator: ", ")))")
        }
    }

    func bool(_ key: String) throws(CDPError) -> Bool? {
        guard let value = members[key] else { return nil }
        guard let flag = value.bool else { throw .invalidParams("\(path).\(key): boolean value expected") }
        return flag
    }

    func string(_ key: String) throws(CDPError) -> String? {
        guard let value = members[key] else { return nil }
        guard let text = value.string else { throw .invalidParams("\(path).\(key): string value expected") }
        return text
    }

    func required<T>(_ value: T?, _ key: String) throws(CDPError) -> T {
        guard let value else { throw .invalidParams("\(path).\(key): mandatory field missing") }
        return value
    }

    /// A `binary` field in latchkeyd's form.
    func binary(_ key: String) throws(CDPError) -> String? {
        guard let text = try string(key) else { return nil }
        guard let bytes = CDPBinary.latchkey(text) else { throw .invalidParams("\(path).\(key): base64 value expected") }
        return bytes
    }

    func integer(_ key: String) throws(CDPError) -> Int64? {
        guard let value = members[key] else { return nil }
        guard let number = value.integer else { throw .invalidParams("\(path).\(key): integer value expected") }
        return number
    }
}

/// A checked VirtualAuthenticatorOptions (addVirtualAuthenticator's `options`).
public struct DevToolsAuthenticatorOptions: Sendable, Equatable {
    /// latchkeyd's protocol: "ctap2.1" or "u2f-only".
    public var latchkeyProtocol: String
    public var hasResidentKey = false
    public var hasUserVerification = false
    public var hasLargeBlob = false
    public var hasCredBlob = false
    public var hasMinPinLength = false
    public var hasPrf = false
    /// Presence `auto` when true, `prompt` (a person, or `latchkeyctl approve`) when false.
    public var automaticPresenceSimulation = true
    public var isUserVerified = false

    static let fields: Set<String> = [
        "protocol", "ctap2Version", "transport", "hasResidentKey", "hasUserVerification", "hasLargeBlob",
        "hasCredBlob", "hasMinPinLength", "hasPrf", "automaticPresenceSimulation", "isUserVerified",
        "defaultBackupEligibility", "defaultBackupState",
    ]
    /// AuthenticatorTransport's values in the domain: valid, though only "usb" can be served.
    static let transports: Set<String> = ["usb", "nfc", "ble", "cable", "internal", "hybrid"]

    /// Checks addVirtualAuthenticator's params (`{options}`), defaults as the domain
    /// gives them: every feature off, presence simulated, UV not verified.
    public init(params: [String: JSONValue]) throws(CDPError) {
        try CDPFields(.object(params), path: "params").only(["options"])
        let options = try CDPFields(params["options"], path: "params.options")
        try options.only(Self.fields)
        switch try options.required(options.string("protocol"), "protocol") {
        case "ctap2": latchkeyProtocol = "ctap2.1"
        case "u2f": latchkeyProtocol = "u2f-only"
        case let other: throw .invalidParams("params.options.protocol: \"\(other)\" is not u2f or ctap2")
        }
        // latchkey keys speak CTAP 2.1, which CTAP 2.0 clients use as 2.0: both versions are the same key.
        if let version = try options.string("ctap2Version"), !["ctap2_0", "ctap2_1"].contains(version) {
            throw .invalidParams("params.options.ctap2Version: \"\(version)\" is not ctap2_0 or ctap2_1")
        }
        let transport = try options.required(options.string("transport"), "transport")
        guard Self.transports.contains(transport) else {
            throw .invalidParams("params.options.transport: \"\(transport)\" is not an AuthenticatorTransport")
        }
        guard transport == "usb" else {
            throw .server(
                "transport \"\(transport)\" cannot be served: a latchkey key is a USB HID security key (transport usb)"
            )
        }
        hasResidentKey = try options.bool("hasResidentKey") ?? false
        hasUserVerification = try options.bool("hasUserVerification") ?? false
        hasLargeBlob = try options.bool("hasLargeBlob") ?? false
        hasCredBlob = try options.bool("hasCredBlob") ?? false
        hasMinPinLength = try options.bool("hasMinPinLength") ?? false
        hasPrf = try options.bool("hasPrf") ?? false
        automaticPresenceSimulation = try options.bool("automaticPresenceSimulation") ?? true
        isUserVerified = try options.bool("isUserVerified") ?? false
        for key in ["defaultBackupEligibility", "defaultBackupState"] {
            if try options.bool(key) == true {
                throw .server("\(key) true cannot be served: a latchkey key is a device-bound security key, never backup eligible")
            }
        }
    }

    /// The body of POST /v1/keys for a key named `name`, owned by the caller.
    ///
    /// Every switch is sent, since latchkeyd's own defaults are "everything on". The key
    /// is exportable, since getCredentials answers private keys. A per-key switch that
    /// makes a key remember its non-discoverable credentials (issue 27) belongs here too:
    /// with it, getCredentials, getCredential and credentialAdded carry those credentials
    /// and their private keys, through the same control API routes as discoverable ones.
    public func createKeyRequest(name: String) -> JSONValue {
        .object([
            "name": .string(name),
            "presence": .string(automaticPresenceSimulation ? "auto" : "prompt"),
            "protocol": .string(latchkeyProtocol),
            "hasResidentKey": .bool(hasResidentKey),
            "hasUserVerification": .bool(hasUserVerification),
            "isUserVerified": .bool(isUserVerified),
            "hasLargeBlob": .bool(hasLargeBlob),
            "hasCredBlob": .bool(hasCredBlob),
            "hasMinPinLength": .bool(hasMinPinLength),
            "hasPrf": .bool(hasPrf),
            "hasThirdPartyPayment": .bool(false),
            "exportable": .bool(true),
        ])
    }
}

/// The domain's Credential.
public enum CDPCredential {
    static let fields: Set<String> = [
        "credentialId", "isResidentCredential", "rpId", "privateKey", "userHandle", "signCount", "largeBlob",
        "backupEligibility", "backupState", "userName", "userDisplayName",
    ]

    /// The body of POST /v1/keys/{name}/credentials for addCredential's params
    /// (`{authenticatorId, credential}`), on a key made with `options`.
    public static func seedRequest(params: [String: JSONValue], options: DevToolsAuthenticatorOptions) throws(CDPError)
        -> JSONValue
    {
        let credential = try CDPFields(params["credential"], path: "params.credential")
        try credential.only(fields)
        let credentialId = try credential.required(credential.binary("credentialId"), "credentialId")
        guard !credentialId.isEmpty else { throw .invalidParams("params.credential.credentialId: empty") }
        let resident = try credential.required(credential.bool("isResidentCredential"), "isResidentCredential")
        let privateKey = try credential.required(credential.binary("privateKey"), "privateKey")
        let signCount = try credential.required(credential.integer("signCount"), "signCount")
        guard (0...Int64(UInt32.max)).contains(signCount) else {
            throw .invalidParams("params.credential.signCount: 0 to 4294967295")
        }
        guard let rpId = try credential.string("rpId"), CredentialParameters.isValidRPID(rpId) else {
            throw .server("rpId must be set when adding a credential, as a domain (e.g. \"example.com\")")
        }
        let userHandle = try credential.binary("userHandle")
        let largeBlob = try credential.binary("largeBlob")
        for key in ["backupEligibility", "backupState"] {
            if try credential.bool(key) == true {
                throw .server("\(key) true cannot be served: a latchkey key is never backup eligible")
            }
        }
        guard resident else {
            // latchkey stores no non-discoverable credential: its ID is the private key
            // wrapped under the key's secret, so an ID the test chose cannot name one.
            throw .server(
                "a non-resident credential cannot keep the credentialId it is given on a latchkey key "
                    + "(its ID is its private key, wrapped by the key); add it with isResidentCredential true"
            )
        }
        guard options.hasResidentKey else { throw .server("The Authenticator does not support Resident Credentials.") }
        guard let userHandle, !userHandle.isEmpty else {
            throw .server("a resident credential needs a userHandle")
        }
        if largeBlob != nil, !options.hasLargeBlob {
            throw .server("The Authenticator does not support the largeBlob extension.")
        }
        var body: [String: JSONValue] = [
            "credentialId": .string(credentialId), "isResidentCredential": .bool(true), "rpId": .string(rpId),
            "privateKey": .string(privateKey), "signCount": .number(Double(signCount)), "userHandle": .string(userHandle),
        ]
        if let largeBlob { body["largeBlob"] = .string(largeBlob) }
        if let name = try credential.string("userName") { body["userName"] = .string(name) }
        if let name = try credential.string("userDisplayName") { body["userDisplayName"] = .string(name) }
        return .object(body)
    }

    /// The domain's Credential for one latchkeyd shows (`GET …/credentials/{id}?privateKey=true`,
    /// or an event's fields): binaries in CDP's base64, a private key latchkeyd does not
    /// hold as "" (a non-discoverable credential: its key is its ID, wrapped), a counter it
    /// has not seen used as 0.
    public static func from(latchkey members: [String: JSONValue]) -> JSONValue {
        func binary(_ key: String) -> JSONValue? {
            members[key]?.string.map { .string(CDPBinary.cdp($0)) }
        }
        let resident = members["isResidentCredential"]?.bool ?? members["discoverable"]?.bool ?? true
        var credential: [String: JSONValue] = [
            "credentialId": binary("credentialId") ?? .string(""),
            "isResidentCredential": .bool(resident),
            "privateKey": binary("privateKey") ?? .string(""),
            "signCount": members["signCount"] ?? .number(0),
            "backupEligibility": .bool(false),
            "backupState": .bool(false),
            "userName": members["userName"] ?? .string(""),
            "userDisplayName": members["userDisplayName"] ?? .string(""),
        ]
        if let rpId = members["rpId"]?.string { credential["rpId"] = .string(rpId) }
        if let handle = members["userHandle"]?.string, !handle.isEmpty { credential["userHandle"] = .string(CDPBinary.cdp(handle)) }
        if let blob = binary("largeBlob") { credential["largeBlob"] = blob }
        return .object(credential)
    }
}

/// latchkeyd's credential events and the domain's events they become.
public enum CDPCredentialEvent {
    /// The domain's event for latchkeyd's `name`, nil for an event the domain has no name for.
    /// A credential seeded through the control API (origin `import`) is not announced, as
    /// Chromium announces only what the page made.
    public static func method(for name: String, fields: [String: JSONValue]) -> String? {
        switch name {
        case "credential.created":
            fields["origin"]?.string == "import" ? nil : "WebAuthn.credentialAdded"
        case "credential.asserted": "WebAuthn.credentialAsserted"
        case "credential.deleted": "WebAuthn.credentialDeleted"
        case "credential.updated": "WebAuthn.credentialUpdated"
        default: nil
        }
    }
}
