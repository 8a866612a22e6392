// The release version, the one place it is written: latchkeyd --version, the
// control API's GET /v1/status, latchkeyctl --version and its User-Agent, and
// the Debian package (scripts/package-deb.sh asks the built binary) all read it.
// docs/control-api.openapi.yaml's info.version must match (Tests/e2e checks).

/// The latchkey release version.
public enum LatchkeyVersion {
    public static let string = "0.1.0"
}
