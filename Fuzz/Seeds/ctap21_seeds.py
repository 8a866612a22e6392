#!/usr/bin/env python3
"""Writes the FuzzCTAP seeds for clientPIN, credentialManagement (0x0A and its
FIDO_2_1_PRE twin 0x41), authenticatorConfig and the previewSign extension: one
well-formed request per subcommand, so that short fuzz runs start past the parsers.

    python3 Fuzz/Seeds/ctap21_seeds.py     # rewrites Fuzz/Seeds/FuzzCTAP/{pin,cm,cfg,ext}_*

A seed is FuzzCTAP's input (Fuzz/Sources/FuzzCTAP/main.swift): a selector byte
(0x00: a CTAP2 request, no power cycle, no clock step) then the command byte
and its canonical CBOR parameters (python-fido2's encoder sorts map keys the
CTAP2 way). MACs and ciphertexts are fixed filler: the fuzzer mutates from here.
"""

from pathlib import Path

from fido2 import cbor

OUT = Path(__file__).resolve().parent / "FuzzCTAP"
MAKE_CREDENTIAL, GET_ASSERTION = 0x01, 0x02
CLIENT_PIN, CRED_MGMT, CONFIG, CRED_MGMT_PRE = 0x06, 0x0A, 0x0D, 0x41
# A P-256 point (Tests/python/pin_protocol_vectors.py's platform key) as a COSE_Key.
KEY_AGREEMENT = {
    1: 2, 3: -25, -1: 1,
    -2: bytes.fromhex("73cd2cb3356e1c762f2c0eb587e87512e785632c67f9de2a3870124a7c10aac2"),
    -3: bytes.fromhex("4f2cb03719e14f2992e9413b64b9ed9897e3cd329804cf1a6523072b2c48176e"),
}
RP_ID_HASH = bytes.fromhex("a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947")  # example.com


def param(protocol: int) -> bytes:
    return bytes([0xA5] * (16 if protocol == 1 else 32))


def enc(protocol: int, size: int) -> bytes:
    return bytes([0x3C] * (size if protocol == 1 else size + 16))


def seeds() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for p in (1, 2):
        out[f"pin_v{p}_get_retries"] = [CLIENT_PIN, {1: p, 2: 1}]
        out[f"pin_v{p}_get_key_agreement"] = [CLIENT_PIN, {1: p, 2: 2}]
        out[f"pin_v{p}_set_pin"] = [CLIENT_PIN, {1: p, 2: 3, 3: KEY_AGREEMENT, 4: param(p), 5: enc(p, 64)}]
        out[f"pin_v{p}_change_pin"] = [CLIENT_PIN, {1: p, 2: 4, 3: KEY_AGREEMENT, 4: param(p), 5: enc(p, 64),
                                                    6: enc(p, 16)}]
        out[f"pin_v{p}_get_pin_token"] = [CLIENT_PIN, {1: p, 2: 5, 3: KEY_AGREEMENT, 6: enc(p, 16)}]
        out[f"pin_v{p}_get_uv_token"] = [CLIENT_PIN, {1: p, 2: 6, 3: KEY_AGREEMENT, 9: 0x03,
                                                      0x0A: "example.com"}]
        out[f"pin_v{p}_get_uv_retries"] = [CLIENT_PIN, {1: p, 2: 7}]
        out[f"pin_v{p}_token_with_permissions"] = [CLIENT_PIN, {1: p, 2: 9, 3: KEY_AGREEMENT, 6: enc(p, 16),
                                                                9: 0x27, 0x0A: "example.com"}]
    descriptor = {"id": bytes([0x42] * 16), "type": "public-key"}
    user = {"id": bytes([1, 2, 3, 4]), "name": "alice", "displayName": "Alice"}
    credman = {
        "metadata": (1, None),
        "rps_begin": (2, None),
        "rps_next": (3, None),
        "creds_begin": (4, {1: RP_ID_HASH}),
        "creds_next": (5, None),
        "delete": (6, {2: descriptor}),
        "update_user": (7, {2: descriptor, 3: user}),
    }
    for name, (sub, params) in credman.items():
        for command, prefix in ((CRED_MGMT, "cm"), (CRED_MGMT_PRE, "cm_pre")):
            request = {1: sub}
            if params is not None:
                request[2] = params
            if sub not in (3, 5):  # the *Next subcommands carry no pinUvAuthParam
                request[3] = 2
                request[4] = param(2)
            out[f"{prefix}_{name}"] = [command, request]
    config = {
        "enterprise_attestation": (1, None),
        "toggle_always_uv": (2, None),
        "set_min_pin_length": (3, {1: 6, 2: ["example.com"], 3: True}),
        "vendor_prototype": (0xFF, {1: 0}),
    }
    for name, (sub, params) in config.items():
        request = {1: sub, 3: 2, 4: param(2)}
        if params is not None:
            request[2] = params
        out[f"cfg_{name}"] = [CONFIG, request]
    out["cfg_set_min_pin_length_unauthenticated"] = [CONFIG, {1: 3, 2: {1: 8}}]
    # previewSign (the drafted WebAuthn sign extension): generateKey for every
    # algorithm, and a sign request with ARKG arguments for a filler credential.
    out["ext_preview_sign_generate"] = [MAKE_CREDENTIAL, {
        1: bytes(32), 2: {"id": "example.com"}, 3: {"id": b"\x01"}, 4: [{"type": "public-key", "alg": -7}],
        6: {"previewSign": {3: [-65539, -300, -70009, -9, -7], 4: 0b001}},
    }]
    arkg_args = cbor.encode({3: -65539, -1: bytes([0x04] * 81), -2: b"ctx"})
    out["ext_preview_sign_sign"] = [GET_ASSERTION, {
        1: "example.com", 2: bytes(32), 3: [{"type": "public-key", "id": bytes(64)}],
        4: {"previewSign": {2: bytes(35), 6: bytes(32), 7: arkg_args}}, 5: {"up": False},
    }]
    return {name: bytes([0x00, command]) + cbor.encode(body) for name, (command, body) in out.items()}


def main() -> None:
    for old in list(OUT.glob("pin_*")) + list(OUT.glob("cm_*")) + list(OUT.glob("cfg_*")) + list(OUT.glob("ext_*")):
        old.unlink()
    for name, data in sorted(seeds().items()):
        (OUT / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
