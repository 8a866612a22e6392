#!/usr/bin/env python3
"""Cross-check vectors for PIN/UV auth protocols One and Two (CTAP 2.1 §6.5.6,
§6.5.7), computed with PyPI `cryptography` alone, which shares no code with
latchkey. Neither the CTAP 2.1 specification nor the CTAP 2.2 draft publishes
test vectors for these protocols, so Tests/CTAPTests/PinUvAuthProtocolTests.swift
keeps the values this script prints (run it to see them again):

    python3 Tests/python/pin_protocol_vectors.py

Inputs are fixed: the authenticator's key agreement scalar a, the platform's
scalar b (both below the P-256 group order), so Z = x(a·bG) = x(b·aG).
Outputs:
  - the platform's public key (x, y), which the Swift test sends as keyAgreement;
  - Z;
  - kdf One: SHA-256(Z);
  - kdf Two: HKDF-SHA-256(salt = 32 zero bytes, IKM = Z, L = 32, info "CTAP2 HMAC key")
    || HKDF-SHA-256(same, info "CTAP2 AES key");
  - authenticate One: HMAC-SHA-256(kdf One, message)[:16];
  - authenticate Two: HMAC-SHA-256(kdf Two[:32], message);
  - encrypt One: AES-256-CBC(kdf One, IV = 16 zero bytes, plaintext);
  - encrypt Two: IV || AES-256-CBC(kdf Two[32:], IV, plaintext) for a fixed IV;
for message = b"CTAP 2.1 cross-check" and plaintext = bytes(range(32)).
"""

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

A = bytes.fromhex("7a1f3c5e9b2d4f6081a3c5e7092b4d6f8193a5c7e90b2d4f6170839faebdcf01")
B = bytes.fromhex("1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f001")
MESSAGE = b"CTAP 2.1 cross-check"
PLAINTEXT = bytes(range(32))
IV = bytes(range(0xA0, 0xB0))


def private_key(scalar: bytes) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(scalar, "big"), ec.SECP256R1())


def sha256(data: bytes) -> bytes:
    digest = hashes.Hash(hashes.SHA256())
    digest.update(data)
    return digest.finalize()


def hkdf(z: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=bytes(32), info=info).derive(z)


def mac(key: bytes, message: bytes) -> bytes:
    h = hmac.HMAC(key, hashes.SHA256())
    h.update(message)
    return h.finalize()


def cbc(key: bytes, iv: bytes, plaintext: bytes) -> bytes:
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return encryptor.update(plaintext) + encryptor.finalize()


def main() -> None:
    authenticator, platform = private_key(A), private_key(B)
    z = platform.exchange(ec.ECDH(), authenticator.public_key())
    assert z == authenticator.exchange(ec.ECDH(), platform.public_key())
    numbers = platform.public_key().public_numbers()
    one = sha256(z)
    two = hkdf(z, b"CTAP2 HMAC key") + hkdf(z, b"CTAP2 AES key")
    values = {
        "a": A, "b": B,
        "platform x": numbers.x.to_bytes(32, "big"), "platform y": numbers.y.to_bytes(32, "big"),
        "Z": z,
        "kdf one": one,
        "kdf two": two,
        "authenticate one": mac(one, MESSAGE)[:16],
        "authenticate two": mac(two[:32], MESSAGE),
        "encrypt one": cbc(one, bytes(16), PLAINTEXT),
        "encrypt two": IV + cbc(two[32:], IV, PLAINTEXT),
    }
    for name, value in values.items():
        print(f"{name}: {value.hex()}")


if __name__ == "__main__":
    main()
