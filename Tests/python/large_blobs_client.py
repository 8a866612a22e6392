#!/usr/bin/env python3
"""python-fido2 (PyPI `fido2`, 2.x) as the platform for latchkey's
authenticatorLargeBlobs, over stdio: a cross-check against a client that shares
no code with latchkey.

Driven by the Swift test `CTAPTests/LargeBlobsTests`, with the line protocol
of pin_client.py (whose device and checks it reuses): each CTAPHID_CBOR
request goes out as `CALL <hex>`, the answer comes back as one hex line. Ends
with `DONE <n> checks` and exit status 0, or a traceback and a non-zero status.

With `LargeBlobs` (`fido2.ctap2.blob`) it puts, gets, replaces and deletes
blobs: first on a key without a PIN (no token needed), then with a PIN and
pinUvAuthTokens carrying the lbw permission from PIN protocols One and Two,
in 500-byte fragments so that every array takes several writes and reads. A
write without a token, with a token lacking lbw, or beyond the key's limit
must fail with the status the spec names, leaving the blobs as they were.

The blob keys are fresh 32-byte AES-256-GCM keys, what a credential's
largeBlobKey is: latchkey does not implement the largeBlobKey extension yet,
so no credential can hand one out, and LargeBlobs needs only the key.
"""

import os

from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.blob import LargeBlobs
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2

import pin_client
from pin_client import StdioDevice, check, expect_error

PIN = "1234"
# Smaller than maxMsgSize − 64, as a client with a small buffer would use:
# every array below then takes several fragments each way.
FRAGMENT = 500


def large_blobs(ctap, client_pin=None, token=None):
    blobs = LargeBlobs(ctap, client_pin.protocol if client_pin else None, token)
    blobs.max_fragment_length = FRAGMENT
    return blobs


def main():
    ctap = Ctap2(StdioDevice())
    info = ctap.info
    check(LargeBlobs.is_supported(info), "getInfo advertises largeBlobs")
    check(info.max_large_blob == 4096, f"maxSerializedLargeBlobArray {info.max_large_blob}")
    check(large_blobs(ctap).read_blob_array() == [], "a new key holds the empty array")

    # Without a PIN no token is needed.
    unprotected = os.urandom(32)
    large_blobs(ctap).put_blob(unprotected, b"written before the PIN")
    check(large_blobs(ctap).get_blob(unprotected) == b"written before the PIN", "blob without a PIN")

    ClientPin(ctap, PinProtocolV2()).set_pin(PIN)
    expect_error(CtapError.ERR.PUAT_REQUIRED, "a write without a token once a PIN is set",
                 lambda: large_blobs(ctap).put_blob(os.urandom(32), b"refused"))
    check(large_blobs(ctap).get_blob(unprotected) == b"written before the PIN", "reading needs no token")

    client_pin = ClientPin(ctap, PinProtocolV2())
    cm = client_pin.get_pin_token(PIN, ClientPin.PERMISSION.CREDENTIAL_MGMT)
    expect_error(CtapError.ERR.PIN_AUTH_INVALID, "a token without lbw",
                 lambda: large_blobs(ctap, client_pin, cm).put_blob(os.urandom(32), b"refused"))

    keys = {}
    for protocol in (PinProtocolV1, PinProtocolV2):
        version = protocol.VERSION
        client_pin = ClientPin(ctap, protocol())
        token = client_pin.get_pin_token(PIN, ClientPin.PERMISSION.LARGE_BLOB_WRITE)
        blobs = large_blobs(ctap, client_pin, token)
        # Incompressible, compressible and empty data.
        contents = {
            "random": os.urandom(700),
            "text": f"protocol {version} ".encode() * 200,
            "empty": b"",
        }
        for name, data in contents.items():
            keys[(version, name)] = os.urandom(32)
            blobs.put_blob(keys[(version, name)], data)
        for name, data in contents.items():
            check(blobs.get_blob(keys[(version, name)]) == data, f"v{version}: {name} blob reads back")
        check(len(blobs.read_blob_array()) == 1 + 3 * version, f"v{version}: entries after the puts")

        replacement = f"replaced with protocol {version}".encode()
        blobs.put_blob(keys[(version, "text")], replacement)
        check(blobs.get_blob(keys[(version, "text")]) == replacement, f"v{version}: a replaced blob")
        check(len(blobs.read_blob_array()) == 1 + 3 * version, f"v{version}: replacing adds no entry")

    blobs = large_blobs(ctap, client_pin, token)
    check(blobs.get_blob(keys[(1, "random")]) is not None, "protocol One's blobs are still there")
    check(blobs.get_blob(os.urandom(32)) is None, "an unknown key finds nothing")

    # Beyond 4096 bytes the key refuses the whole array and keeps the old one.
    before = blobs.read_blob_array()
    expect_error(CtapError.ERR.LARGE_BLOB_STORAGE_FULL, "an array beyond the limit",
                 lambda: blobs.put_blob(os.urandom(32), os.urandom(3000)))
    check(blobs.read_blob_array() == before, "the refused write changed nothing")

    # Delete everything but two blobs, which the Swift test then counts.
    for key in [unprotected] + [keys[(v, n)] for v in (1, 2) for n in ("text", "empty")] + [keys[(1, "random")]]:
        blobs.delete_blob(key)
    check(blobs.get_blob(unprotected) is None, "a deleted blob is gone")
    check(blobs.get_blob(keys[(2, "random")]) is not None, "the others stay")
    check(len(blobs.read_blob_array()) == 1, "one entry left")
    blobs.put_blob(os.urandom(32), b"the last one")
    check(len(blobs.read_blob_array()) == 2, "two entries left")

    print(f"DONE {pin_client.checks} checks", flush=True)


if __name__ == "__main__":
    main()
