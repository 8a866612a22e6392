#!/usr/bin/env python3
"""Verify latchkey's raw authenticator outputs with python-fido2 (PyPI `fido2`,
2.x), independently of latchkey's own code.

Reads a JSON document on stdin (all byte strings hex) written by the Swift test
`CTAPTests/RelyingPartyVerificationTests`:

  {"registrations": [{"rpId", "origin", "challenge", "clientDataJSON", "fmt",
                      "authData", "attStmt" (CBOR), "aaguid",
                      "assertion": {"challenge", "clientDataJSON",
                                    "authenticatorData", "signature",
                                    "credentialId", "userHandle"?}}],
   "u2f": [{"application", "challenge", "registrationData", "signatureData"}]}

Each registration goes through `Fido2Server.register_complete`, its attestation
statement through python-fido2's verifier for its format (and the x5c chain
through `verify_x509_chain`), and its assertion through
`Fido2Server.authenticate_complete`. U2F messages are checked with
`fido2.ctap1.RegistrationData.verify` / `SignatureData.verify`. Exits non-zero
on the first failure.
"""

import json
import sys

from fido2 import cbor
from fido2.attestation import Attestation, NoneAttestation, verify_x509_chain
from fido2.ctap1 import RegistrationData, SignatureData
from fido2.server import Fido2Server
from fido2.utils import sha256, websafe_encode
from fido2.webauthn import (
    AttestationObject,
    AuthenticationResponse,
    AuthenticatorAssertionResponse,
    AuthenticatorAttestationResponse,
    AuthenticatorData,
    CollectedClientData,
    PublicKeyCredentialRpEntity,
    RegistrationResponse,
)


def b(value: str) -> bytes:
    return bytes.fromhex(value)


def verify_registration(case: dict) -> None:
    rp = PublicKeyCredentialRpEntity(id=case["rpId"], name="latchkey test RP")
    server = Fido2Server(rp, attestation="direct", verify_origin=lambda origin: origin == case["origin"])
    auth_data = AuthenticatorData(b(case["authData"]))
    att_stmt = cbor.decode(b(case["attStmt"]))
    attestation_object = AttestationObject.create(case["fmt"], auth_data, att_stmt)
    client_data = CollectedClientData(b(case["clientDataJSON"]))
    response = RegistrationResponse(
        raw_id=auth_data.credential_data.credential_id,
        response=AuthenticatorAttestationResponse(client_data=client_data, attestation_object=attestation_object),
    )
    state = {"challenge": websafe_encode(b(case["challenge"])), "user_verification": "discouraged"}
    registered = server.register_complete(state, response)
    credential = registered.credential_data
    assert credential is not None, "no attested credential data"
    assert bytes(credential.aaguid) == b(case["aaguid"]), "AAGUID differs"

    # The attestation statement, by format.
    verifier = Attestation.for_type(case["fmt"])()
    result = verifier.verify(att_stmt, auth_data, sha256(client_data))
    if case["fmt"] == "packed" and "x5c" in att_stmt:
        verify_x509_chain(att_stmt["x5c"])
        assert len(result.trust_path) >= 1
    elif case["fmt"] == "none":
        assert isinstance(verifier, NoneAttestation)

    assertion = case["assertion"]
    login_state = {"challenge": websafe_encode(b(assertion["challenge"])), "user_verification": "discouraged"}
    login = AuthenticationResponse(
        raw_id=b(assertion["credentialId"]),
        response=AuthenticatorAssertionResponse(
            client_data=CollectedClientData(b(assertion["clientDataJSON"])),
            authenticator_data=AuthenticatorData(b(assertion["authenticatorData"])),
            signature=b(assertion["signature"]),
            user_handle=b(assertion["userHandle"]) if assertion.get("userHandle") else None,
        ),
    )
    server.authenticate_complete(login_state, [credential], login)
    # A tampered signature must not pass.
    bad = AuthenticationResponse(
        raw_id=login.raw_id,
        response=AuthenticatorAssertionResponse(
            client_data=login.response.client_data,
            authenticator_data=login.response.authenticator_data,
            signature=bytes(login.response.signature[:-1]) + bytes([login.response.signature[-1] ^ 1]),
        ),
    )
    try:
        server.authenticate_complete(login_state, [credential], bad)
    except Exception:
        pass
    else:
        raise AssertionError("a tampered assertion verified")


def verify_u2f(case: dict) -> None:
    registration = RegistrationData(b(case["registrationData"]))
    registration.verify(b(case["application"]), b(case["challenge"]))
    signature = SignatureData(b(case["signatureData"]))
    signature.verify(b(case["application"]), b(case["challenge"]), registration.public_key)


def main() -> int:
    document = json.load(sys.stdin)
    for case in document.get("registrations", []):
        verify_registration(case)
    for case in document.get("u2f", []):
        verify_u2f(case)
    print(
        f"python-fido2 verified {len(document.get('registrations', []))} registrations with their assertions"
        f" and {len(document.get('u2f', []))} U2F exchanges"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
