// The master key's source for a configuration: the key core holds the
// settings, the daemon resolves the state directory against its working
// directory (PrivateDirectory) before the store sees it.

import LatchkeyCore
import LatchkeyStore

extension DaemonConfiguration {
    /// The master key's source as the store finds it, for the state directory
    /// as an absolute path (which names the key's keyring item).
    func masterKey(environment: [String: String]) -> MasterKeySource {
        MasterKeySource(
            kind: masterKeySource, stateDirectory: PrivateDirectory.absolute(stateDirectory),
            credentialFile: masterKeyCredentialFile, withKey: masterKeyWithKey, environment: environment
        )
    }
}
