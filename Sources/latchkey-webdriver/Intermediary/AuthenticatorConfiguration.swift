// WebAuthn §11 "Add Virtual Authenticator": the Authenticator Configuration a
// client sends, checked as the spec's remote end steps check it, and the
// latchkeyd key (POST /v1/keys) that stands for it.
//
// The key is a real one: the browser reaches it through /dev/uhid or USB/IP
// like any security key, so only what a USB key can be is accepted
// (transport "usb"). Every switch the spec defaults to false is sent to
// latchkeyd explicitly, because latchkeyd's own defaults are "everything on".
// The key's feature switches come from LatchkeyContract's `KeyFeature` table: a
// feature that §11 can name is a property and may be named by its extensions.

import LatchkeyContract
import LatchkeyJSON

/// A checked Authenticator Configuration.
public struct AuthenticatorConfiguration: Sendable, Equatable {
    /// latchkeyd's protocol name: "ctap2.1" or "u2f-only".
    public var latchkeyProtocol: String
    public var hasUserVerification = false
    public var isUserConsenting = true
    public var isUserVerified = false
    /// The key's features that §11 can name (`KeyFeature.WebDriverUse.property`):
    /// on when the configuration sets the property or names one of its extensions.
    public var features: [KeyFeature: Bool] = [:]

    /// The features a configuration sets: hasResidentKey, and chromedriver's
    /// spelling of the extension switches (as in the DevTools WebAuthn domain);
    /// `extensions` is the spec's.
    static let properties: [KeyFeature] = KeyFeature.all.filter {
        if case .property = $0.webDriver { true } else { false }
    }

    /// The §11 keys, with the type each takes (`extensions` is a string array).
    static let booleanKeys: Set<String> = Set(
        ["hasUserVerification", "isUserConsenting", "isUserVerified", "defaultBackupEligibility", "defaultBackupState"]
            + properties.map(\.option)
    )
    static let stringKeys: Set<String> = ["protocol", "transport"]

    /// §11's protocol names and latchkeyd's for them.
    static let protocols = ["ctap2": "ctap2.1", "ctap2_1": "ctap2.1", "ctap1/u2f": "u2f-only"]

    /// AuthenticatorTransport's values (WebAuthn §5.8.4): valid, though only "usb" can be served.
    static let transports: Set<String> = ["usb", "nfc", "ble", "smart-card", "hybrid", "internal"]

    /// The extension identifiers a latchkey key can support, each with the
    /// feature that switches it on.
    static let extensions: [String: KeyFeature] = Dictionary(
        uniqueKeysWithValues: properties.flatMap { feature -> [(String, KeyFeature)] in
            guard case .property(let identifiers) = feature.webDriver else { return [] }
            return identifiers.map { ($0, feature) }
        }
    )

    /// Checks `parameters` as §11's remote end steps do: an object, only the
    /// configuration's keys, each of its type and among its valid values,
    /// `protocol` and `transport` present (they have no default); an
    /// extension or setting latchkey cannot give is `unsupported operation`.
    public init(parameters: JSONValue) throws(WebDriverError) {
        guard let members = parameters.object else {
            throw .invalidArgument("the Authenticator Configuration must be a JSON object, not \(parameters.typeName)")
        }
        for (key, value) in members {
            if Self.booleanKeys.contains(key) {
                guard value.bool != nil else {
                    throw .invalidArgument("\(key) must be a boolean, not \(value.typeName)")
                }
            } else if Self.stringKeys.contains(key) {
                guard value.string != nil else {
                    throw .invalidArgument("\(key) must be a string, not \(value.typeName)")
                }
            } else if key == "extensions" {
                guard let items = value.array, items.allSatisfy({ $0.string != nil }) else {
                    throw .invalidArgument("extensions must be an array of extension identifiers (strings)")
                }
            } else {
                throw .invalidArgument("\(key) is not a property of an Authenticator Configuration")
            }
        }
        guard let name = members["protocol"]?.string else {
            throw .invalidArgument("protocol is required: \"ctap2\", \"ctap2_1\" or \"ctap1/u2f\"")
        }
        guard let latchkeyProtocol = Self.protocols[name] else {
            throw .invalidArgument("protocol \"\(name)\" is not one of \"ctap2\", \"ctap2_1\", \"ctap1/u2f\"")
        }
        self.latchkeyProtocol = latchkeyProtocol
        guard let transport = members["transport"]?.string else {
            throw .invalidArgument("transport is required; latchkey keys are \"usb\"")
        }
        guard Self.transports.contains(transport) else {
            throw .invalidArgument("transport \"\(transport)\" is not an AuthenticatorTransport value")
        }
        guard transport == "usb" else {
            throw .invalidArgument(
                "transport \"\(transport)\" cannot be served: a latchkey key is a USB HID security key, transport \"usb\""
            )
        }
        let named = Set((members["extensions"]?.array ?? []).compactMap(\.string))
        for item in named where Self.extensions[item] == nil {
            let known = Self.extensions.keys.sorted().joined(separator: ", ")
            throw .unsupportedOperation("extension \"\(item)\" is not supported; latchkey supports \(known)")
        }
        let switchedOn = Set(named.compactMap { Self.extensions[$0] })
        func flag(_ key: String, default value: Bool) -> Bool {
            members[key]?.bool ?? value
        }
        hasUserVerification = flag("hasUserVerification", default: false)
        isUserConsenting = flag("isUserConsenting", default: true)
        isUserVerified = flag("isUserVerified", default: false)
        for feature in Self.properties {
            features[feature] = switchedOn.contains(feature) || (members[feature.option]?.bool ?? false)
        }
        for key in ["defaultBackupEligibility", "defaultBackupState"] where flag(key, default: false) {
            throw .unsupportedOperation(
                "\(key) true cannot be served: a latchkey key is a device-bound security key, never backup eligible"
            )
        }
    }

    /// The body of POST /v1/keys for a key named `name`. Presence is `auto`
    /// when the user is consenting and `deny` when not: no person is asked.
    public func createKeyRequest(name: String) -> JSONValue {
        var request: [String: JSONValue] = [
            "name": .string(name),
            "presence": .string(isUserConsenting ? "auto" : "deny"),
            "protocol": .string(latchkeyProtocol),
            "hasUserVerification": .bool(hasUserVerification),
            "isUserVerified": .bool(isUserVerified),
            // §11 Get Credentials answers private keys: the key must let them leave.
            "exportable": .bool(true),
        ]
        for feature in KeyFeature.all {
            switch feature.webDriver {
            case .property: request[feature.option] = .bool(self[feature])
            // Not an extension §11 can name, so off: "MUST NOT support any
            // authenticator extension not present in its extensions array".
            case .off: request[feature.option] = .bool(false)
            case .daemonDefault: break
            }
        }
        return .object(request)
    }

    /// Whether the configuration switches `feature` on (a feature §11 cannot name: off).
    public subscript(feature: KeyFeature) -> Bool { features[feature] ?? false }
}
