// A key's feature switches as data: one row per switch, named as each door names it —
// the control API's key option and key.json (WebDriver's name where §11 has one), the
// configuration file's [[keys]] key and latchkeyctl's flag, the CTAP extension
// identifiers it offers, and what latchkey-webdriver does with it. The configuration
// reader, the control documents, latchkeyctl and latchkey-webdriver read this table, so
// that a new extension is the engine's change and one row here.

/// One feature switch of a key.
public struct KeyFeature: Hashable, Sendable, CustomStringConvertible {
    /// The name in the control API's key documents and requests and in key.json
    /// ("hasCredBlob").
    public let option: String
    /// The key in a [[keys]] table, and latchkeyctl's `--NAME` / `--no-NAME`
    /// ("cred-blob").
    public let configurationKey: String
    /// Whether a key has it when nothing says otherwise.
    public let defaultValue: Bool
    /// The CTAP extension identifiers it offers (getInfo's extensions): a key without
    /// the feature offers none of them.
    public let extensions: [String]
    /// What it offers, as latchkeyctl's help says it after "Offer".
    public let summary: String
    /// Its line's comment in the configuration file's documented defaults.
    public let configurationComment: String
    /// What latchkey-webdriver makes of it for a WebDriver virtual authenticator.
    public let webDriver: WebDriverUse

    /// How a WebDriver Authenticator Configuration (WebAuthn §11) sets a feature.
    public enum WebDriverUse: Hashable, Sendable {
        /// A boolean property named `option` (absent: false), also switched on by
        /// naming one of these identifiers in the configuration's `extensions`.
        case property(extensions: [String])
        /// Always off: §11 cannot name it, and an authenticator "MUST NOT support any
        /// authenticator extension not present in its extensions array".
        case off
        /// Not sent: the key has latchkeyd's default.
        case daemonDefault
    }

    public var description: String { option }
}

extension KeyFeature {
    public static let residentKeys = KeyFeature(
        option: "hasResidentKey", configurationKey: "resident-keys", defaultValue: true, extensions: [],
        summary: "discoverable credentials", configurationComment: "discoverable credentials (getInfo rk)",
        webDriver: .property(extensions: [])
    )
    public static let largeBlob = KeyFeature(
        option: "hasLargeBlob", configurationKey: "large-blob", defaultValue: true, extensions: ["largeBlobKey"],
        summary: "large blobs and largeBlobKey", configurationComment: "authenticatorLargeBlobs and largeBlobKey",
        webDriver: .property(extensions: ["largeBlob"])
    )
    public static let credBlob = KeyFeature(
        option: "hasCredBlob", configurationKey: "cred-blob", defaultValue: true, extensions: ["credBlob"],
        summary: "the credBlob extension", configurationComment: "the credBlob extension",
        webDriver: .property(extensions: ["credBlob"])
    )
    public static let minPinLength = KeyFeature(
        option: "hasMinPinLength", configurationKey: "min-pin-length", defaultValue: true,
        extensions: ["minPinLength"], summary: "the minPinLength extension",
        configurationComment: "the minPinLength extension", webDriver: .property(extensions: ["minPinLength"])
    )
    public static let prf = KeyFeature(
        option: "hasPrf", configurationKey: "prf", defaultValue: true, extensions: ["hmac-secret", "hmac-secret-mc"],
        summary: "hmac-secret, which WebAuthn's PRF uses",
        configurationComment: "hmac-secret and hmac-secret-mc (WebAuthn PRF)",
        webDriver: .property(extensions: ["prf", "hmacCreateSecret", "hmac-secret"])
    )
    public static let thirdPartyPayment = KeyFeature(
        option: "hasThirdPartyPayment", configurationKey: "third-party-payment", defaultValue: true,
        extensions: ["thirdPartyPayment"], summary: "the thirdPartyPayment extension",
        configurationComment: "the thirdPartyPayment extension (CTAP 2.2)", webDriver: .off
    )
    public static let persistentToken = KeyFeature(
        option: "hasPersistentToken", configurationKey: "persistent-token", defaultValue: true, extensions: [],
        summary: "the persistent read-only credential management token, perCredMgmtRO",
        configurationComment: "perCredMgmtRO: a read-only credential management token that lasts",
        webDriver: .daemonDefault
    )
    public static let previewSign = KeyFeature(
        option: "hasPreviewSign", configurationKey: "preview-sign", defaultValue: false, extensions: ["previewSign"],
        summary: "the drafted previewSign extension, WebAuthn sign v4 with ARKG",
        configurationComment: "the drafted previewSign extension (WebAuthn sign v4, ARKG)", webDriver: .daemonDefault
    )
    public static let enterpriseAttestation = KeyFeature(
        option: "hasEnterpriseAttestation", configurationKey: "enterprise-attestation", defaultValue: false,
        extensions: [], summary: "enterprise attestation, getInfo's ep",
        configurationComment: "ep: a certificate naming this key, once authenticatorConfig enables it",
        webDriver: .daemonDefault
    )

    /// Every feature, in the order the configuration file and the documents list them.
    public static let all: [KeyFeature] = [
        residentKeys, largeBlob, credBlob, minPinLength, prf, thirdPartyPayment, persistentToken, previewSign,
        enterpriseAttestation,
    ]

    /// The feature whose `option` is `name`.
    public static func named(option name: String) -> KeyFeature? { all.first { $0.option == name } }
}

/// Which features a key has: every feature of the table, on or off.
public struct KeyFeatures: Hashable, Sendable {
    private var on: Set<KeyFeature>

    /// Each feature at its default.
    public init() { on = Set(KeyFeature.all.filter(\.defaultValue)) }

    public subscript(feature: KeyFeature) -> Bool {
        get { on.contains(feature) }
        set { if newValue { on.insert(feature) } else { on.remove(feature) } }
    }

    /// The CTAP extension identifiers of the features that are off: the ones a key
    /// with these features does not offer.
    public var extensionsOff: Set<String> {
        Set(KeyFeature.all.filter { !on.contains($0) }.flatMap(\.extensions))
    }
}

/// Feature switches in a JSON object, each under its feature's `option` name, beside
/// the object's other members: a request (POST /v1/keys, key.json) names those it
/// sets, a key's options document all of them.
public struct KeyFeatureSwitches: Codable, Hashable, Sendable {
    /// The switches given, by feature.
    public var values: [KeyFeature: Bool]

    public init(_ values: [KeyFeature: Bool] = [:]) { self.values = values }

    /// Every feature of `features`, on or off.
    public init(_ features: KeyFeatures) {
        values = Dictionary(uniqueKeysWithValues: KeyFeature.all.map { ($0, features[$0]) })
    }

    public subscript(feature: KeyFeature) -> Bool? {
        get { values[feature] }
        set { values[feature] = newValue }
    }

    private struct Member: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Reads the switches from the object `decoder` holds (a member of another type is
    /// left to that type).
    public init(from decoder: any Decoder) throws {
        let object = try decoder.container(keyedBy: Member.self)
        values = [:]
        for feature in KeyFeature.all {
            if let value = try object.decodeIfPresent(Bool.self, forKey: Member(feature.option)) {
                values[feature] = value
            }
        }
    }

    /// Writes the switches into the object `encoder` holds, beside its other members.
    public func encode(to encoder: any Encoder) throws {
        var object = encoder.container(keyedBy: Member.self)
        for feature in KeyFeature.all {
            if let value = values[feature] { try object.encode(value, forKey: Member(feature.option)) }
        }
    }
}

/// A JSON object of `Settings` with feature switches beside its members, under the
/// features' names: a key creation request (the daemon's, latchkeyctl's) and a key's
/// options document. The settings' members read through it (`request.name`).
@dynamicMemberLookup
public struct WithFeatureSwitches<Settings> {
    public var settings: Settings
    public var features: KeyFeatureSwitches

    public init(_ settings: Settings, features: KeyFeatureSwitches = KeyFeatureSwitches()) {
        self.settings = settings
        self.features = features
    }

    public subscript<Value>(dynamicMember path: WritableKeyPath<Settings, Value>) -> Value {
        get { settings[keyPath: path] }
        set { settings[keyPath: path] = newValue }
    }
}

extension WithFeatureSwitches: Encodable where Settings: Encodable {
    /// One object: the settings' members, then the switches.
    public func encode(to encoder: any Encoder) throws {
        try settings.encode(to: encoder)
        try features.encode(to: encoder)
    }
}

extension WithFeatureSwitches: Decodable where Settings: Decodable {
    public init(from decoder: any Decoder) throws {
        settings = try Settings(from: decoder)
        features = try KeyFeatureSwitches(from: decoder)
    }
}

extension WithFeatureSwitches: Sendable where Settings: Sendable {}
extension WithFeatureSwitches: Equatable where Settings: Equatable {}
