// `latchkeyctl large-blob size KEY`: how much of a key's large-blob store
// (authenticatorLargeBlobs) is used.

import ArgumentParser
import LatchkeyContract

struct LargeBlob: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "large-blob",
        abstract: "Inspect a key's large-blob store.",
        discussion: """
            Relying parties store data next to a credential (WebAuthn's largeBlob \
            extension) in one array per key, encrypted with keys only the \
            credentials know. latchkeyctl can tell how big it is; `reset` empties it.

            Examples:
              latchkeyctl large-blob size default
            """,
        subcommands: [Size.self],
        defaultSubcommand: Size.self
    )

    struct Size: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the large-blob array's size and limit (GET /v1/keys/NAME/large-blobs).",
            discussion: """
                The serialized array of a key without large blobs takes 17 bytes \
                (an empty CBOR array and its 16-byte hash).

                Examples:
                  latchkeyctl large-blob size default
                  latchkeyctl large-blob size ci-1 --json
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
        var key: KeyName

        func run() throws {
            try global.showDocument(at: ControlPath.largeBlobs(key: key), as: LargeBlobsInfo.self) { blobs in
                let used = blobs.serializedSize <= 17 ? " (empty)" : ""
                return Table.fields([
                    ("key", key.rawValue),
                    ("size", "\(blobs.serializedSize) bytes\(used)"),
                    ("limit", "\(blobs.maxSerializedLargeBlobArray) bytes"),
                ])
            }
        }
    }
}
