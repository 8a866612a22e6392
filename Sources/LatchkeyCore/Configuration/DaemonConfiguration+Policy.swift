// The `[policy]` table and its per-key form `[keys.policy]` of the TOML
// configuration: both read as overrides, applied to the defaults (README
// "Configuration", `DaemonConfiguration.documentedDefaults`).

import TOMLKit

extension TableReader {
    /// Reads every policy key of this table, then refuses unknown ones.
    mutating func policyOverrides() throws(ConfigurationError) -> PolicyOverrides {
        var overrides = PolicyOverrides()
        overrides.userVerification = try choice("user-verification", of: UserVerificationPolicy.self)
        overrides.notifications = try bool("notifications")
        overrides.conditionalRegistration = try bool("conditional-registration")
        overrides.signalWindowSeconds = try int("signal-window-seconds")
        overrides.onMismatch = try choice("on-mismatch", of: MismatchAction.self)
        overrides.allowRpIds = try strings("allow-rp-ids")
        overrides.denyRpIds = try strings("deny-rp-ids")
        overrides.requirePin = try bool("require-pin")
        overrides.rateLimitPerHour = try int("rate-limit-per-hour")
        overrides.promptsPerMinute = try int("prompts-per-minute")
        overrides.denyCooldownSeconds = try int("deny-cooldown-seconds")
        try finish()
        return overrides
    }

    /// One of an enumeration's raw values; the error lists them.
    mutating func choice<Choice: RawRepresentable & CaseIterable>(
        _ key: String,
        of type: Choice.Type
    ) throws(ConfigurationError) -> Choice? where Choice.RawValue == String {
        guard let value = try string(key) else { return nil }
        guard let parsed = Choice(rawValue: value) else {
            let names = Choice.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw ConfigurationError("\(path): \(key) must be one of \(names), not \"\(value)\"")
        }
        return parsed
    }

    mutating func strings(_ key: String) throws(ConfigurationError) -> [String]? {
        guard let raw = value(key) else { return nil }
        guard let array = raw.array else { throw ConfigurationError("\(path): \(key) must be an array of strings") }
        var result: [String] = []
        for element in array {
            guard let string = element.string else {
                throw ConfigurationError("\(path): \(key) must be an array of strings")
            }
            result.append(string)
        }
        return result
    }
}
