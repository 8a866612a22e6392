"""The relying-party side of the end-to-end tests: python-fido2's Fido2Client as the
browser (origin https://example.com, RP ID example.com, never a PIN) and its
Fido2Server as the website, which verifies every registration and assertion,
including the attestation statement's signature.
"""

from __future__ import annotations

import dataclasses
import os

from fido2.attestation import Attestation
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.cose import CoseKey, EdDSA, ES256
from fido2.server import Fido2Server
from fido2.webauthn import (
    AttestationConveyancePreference,
    AttestedCredentialData,
    PublicKeyCredentialParameters,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialType,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

ORIGIN = "https://example.com"
RP_ID = "example.com"
RP = PublicKeyCredentialRpEntity(name="Example RP", id=RP_ID)


class NoPinInteraction(UserInteraction):
    """A user who touches the key when asked and has no PIN to give."""

    def __init__(self):
        self.presence_prompts = 0

    def prompt_up(self) -> None:
        self.presence_prompts += 1

    def request_pin(self, permissions, rp_id):
        raise AssertionError("the client asked for a PIN; the key has none and none is needed")

    def request_uv(self, permissions, rp_id) -> bool:
        return True


def verify_attestation(attestation_object, client_data_hash: bytes) -> None:
    """Checks the attestation statement's signature (not its trust path)."""
    fmt = attestation_object.fmt
    assert fmt in ("packed", "none"), f"attestation format {fmt!r}; a latchkey key makes packed or none"
    verifier = Attestation.for_type(fmt)()
    verifier.verify(attestation_object.att_stmt, attestation_object.auth_data, client_data_hash)


def make_server(algorithm: int | None = None) -> Fido2Server:
    server = Fido2Server(RP, attestation=AttestationConveyancePreference.DIRECT,
                         verify_attestation=verify_attestation)
    if algorithm is not None:
        server.allowed_algorithms = [
            PublicKeyCredentialParameters(type=PublicKeyCredentialType.PUBLIC_KEY, alg=algorithm)]
    return server


def make_client(device, interaction: UserInteraction | None = None) -> Fido2Client:
    return Fido2Client(device, client_data_collector=DefaultClientDataCollector(ORIGIN),
                       user_interaction=interaction or NoPinInteraction())


def new_user(name: str | None = None) -> PublicKeyCredentialUserEntity:
    name = name or f"user-{os.urandom(3).hex()}"
    return PublicKeyCredentialUserEntity(id=os.urandom(16), name=name, display_name=name.title())


@dataclasses.dataclass
class Registration:
    user: PublicKeyCredentialUserEntity
    credential: AttestedCredentialData
    fmt: str
    sign_count: int
    user_present: bool
    user_verified: bool


def register(client: Fido2Client, server: Fido2Server, *, resident_key: bool,
             user: PublicKeyCredentialUserEntity | None = None,
             exclude: list[AttestedCredentialData] | None = None) -> Registration:
    """navigator.credentials.create() end to end; Fido2Server.register_complete verifies it."""
    user = user or new_user()
    options, state = server.register_begin(
        user, credentials=exclude,
        resident_key_requirement=ResidentKeyRequirement.REQUIRED if resident_key
        else ResidentKeyRequirement.DISCOURAGED,
        user_verification=UserVerificationRequirement.DISCOURAGED)
    response = client.make_credential(options.public_key)
    auth_data = server.register_complete(state, response)
    assert auth_data.credential_data is not None
    return Registration(
        user=user, credential=auth_data.credential_data,
        fmt=response.response.attestation_object.fmt, sign_count=auth_data.counter,
        user_present=auth_data.is_user_present(), user_verified=auth_data.is_user_verified())


@dataclasses.dataclass
class Authentication:
    credential_id: bytes
    user_handle: bytes | None
    sign_count: int
    count: int  # how many assertions the key offered


def authenticate(client: Fido2Client, server: Fido2Server, credentials: list[AttestedCredentialData],
                 *, allow: bool) -> Authentication:
    """navigator.credentials.get() end to end (with an allow list, or usernameless);
    Fido2Server.authenticate_complete verifies the signature."""
    options, state = server.authenticate_begin(
        credentials if allow else None, user_verification=UserVerificationRequirement.DISCOURAGED)
    selection = client.get_assertion(options.public_key)
    assertions = selection.get_assertions()
    response = selection.get_response(0)
    cred = server.authenticate_complete(state, credentials, response)
    return Authentication(
        credential_id=cred.credential_id, user_handle=response.response.user_handle,
        sign_count=response.response.authenticator_data.counter, count=len(assertions))


# IANA name to COSE id, for the algorithms the tests name.
ALGORITHMS = {"ES256": ES256.ALGORITHM, "EdDSA": EdDSA.ALGORITHM, "ES384": -35, "ES512": -36, "PS256": -37,
              "RS256": -257, "ES256K": -47, "ML-DSA-65": -49, "ML-DSA-87": -50}


def key_algorithm(credential: AttestedCredentialData) -> int:
    key = credential.public_key
    assert isinstance(key, CoseKey)
    return key.ALGORITHM
