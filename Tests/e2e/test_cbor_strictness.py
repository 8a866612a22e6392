"""CTAP2 canonical CBOR and the user handle's length through the real daemon (issue 10;
docs/conformance.md "CBOR strictness"): a makeCredential whose byte string, text string, map or
integer head is longer than it needs to be is CTAP2_ERR_INVALID_CBOR (CTAP 2.1 §8), an
empty or overlong user.id CTAP1_ERR_INVALID_LENGTH; neither asks for a touch or stores
anything, and the canonical request right after succeeds."""

from __future__ import annotations

import os

import pytest
from fido2 import cbor

import ctaphid_raw as raw
import rp

INVALID_LENGTH, INVALID_CBOR = 0x03, 0x12


def make_credential(user_id: bytes = b"\x01\x02\x03\x04") -> bytes:
    return bytes([0x01]) + cbor.encode({
        1: b"\xc1" * 32, 2: {"id": rp.RP_ID, "name": "Example"}, 3: {"id": user_id, "name": "alice"},
        4: [{"type": "public-key", "alg": -7}]})


def lengthened(request: bytes, head: bytes, longer: bytes) -> bytes:
    assert head in request
    return request.replace(head, longer, 1)


NON_MINIMAL = {
    "clientDataHash-length-in-2-bytes": (b"\x58\x20", b"\x59\x00\x20"),
    "clientDataHash-length-in-8-bytes": (b"\x58\x20", b"\x5b" + bytes(7) + b"\x20"),
    "user.id-length-in-1-byte": (b"\x44\x01\x02\x03\x04", b"\x58\x04\x01\x02\x03\x04"),
    "map-count-in-1-byte": (b"\xa4", b"\xb8\x04"),
    "alg-in-1-byte": (b"\x26", b"\x38\x06"),
}


@pytest.fixture
def host(usb, key):
    return usb.channels(key["usbip"]["busid"])


@pytest.mark.parametrize("name", list(NON_MINIMAL))
def test_non_minimal_heads_are_invalid_cbor(host, control, key, name):
    cid = host.open_channel()
    head, longer = NON_MINIMAL[name]
    answer, data = host.call(cid, raw.CBOR, lengthened(make_credential(), head, longer))
    assert (answer, data) == (raw.CBOR, bytes([INVALID_CBOR])), f"{name}: {data.hex()}"
    assert control.get(f"/v1/keys/{key['name']}/credentials") == []
    answer, data = host.call(cid, raw.CBOR, make_credential())
    assert answer == raw.CBOR and data[0] == 0, "the canonical request is served"


@pytest.mark.parametrize("user_id", [b"", os.urandom(65)], ids=["empty", "65-bytes"])
def test_user_id_outside_1_to_64_bytes_is_invalid_length(host, key, user_id):
    cid = host.open_channel()
    answer, data = host.call(cid, raw.CBOR, make_credential(user_id))
    assert (answer, data) == (raw.CBOR, bytes([INVALID_LENGTH]))
    for good in (b"\x01", os.urandom(64)):
        answer, data = host.call(cid, raw.CBOR, make_credential(good))
        assert answer == raw.CBOR and data[0] == 0, f"a {len(good)}-byte user.id is served"
