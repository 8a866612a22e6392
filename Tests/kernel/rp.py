"""The relying party of the kernel tests: python-fido2's Fido2Server, which verifies
every registration (including the attestation statement's signature, not its trust
path) and every assertion that a real client (python-fido2, Chromium or Firefox) got
from latchkeyd through the guest kernel's hidraw.

Shared by fido2_checks.py and the browser matrix (browsers/matrix.py); runs inside
the rig guest (python-fido2 2.2.1).
"""

from __future__ import annotations

import os

from fido2.attestation import Attestation
from fido2.server import Fido2Server
from fido2.webauthn import (
    AttestationConveyancePreference,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
)


def verify_attestation(attestation_object, client_data_hash: bytes) -> None:
    """Checks the attestation statement's signature over authData || clientDataHash."""
    fmt = attestation_object.fmt
    if fmt not in ("packed", "none"):
        raise AssertionError(f"attestation format {fmt!r}; a latchkey key makes packed or none")
    Attestation.for_type(fmt)().verify(attestation_object.att_stmt, attestation_object.auth_data,
                                       client_data_hash)


def make_server(rp_id: str, name: str = "latchkey kernel tests") -> Fido2Server:
    """A server for rp_id that asks for direct attestation and verifies its signature."""
    return Fido2Server(PublicKeyCredentialRpEntity(name=name, id=rp_id),
                       attestation=AttestationConveyancePreference.DIRECT,
                       verify_attestation=verify_attestation)


def new_user(prefix: str = "kernel") -> PublicKeyCredentialUserEntity:
    name = f"{prefix}-{os.urandom(3).hex()}"
    return PublicKeyCredentialUserEntity(id=os.urandom(16), name=name, display_name=name.title())
