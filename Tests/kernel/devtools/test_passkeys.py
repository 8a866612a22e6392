"""Passkey tests written the way Playwright users write them today: connect over CDP, a
CDP session per page, WebAuthn.enable and addVirtualAuthenticator, register, sign in
usernameless, getCredentials with the sign count, setUserVerified(false) and a sign-in
that requires UV fails, removeVirtualAuthenticator; every result verified by a relying
party library (python-fido2's Fido2Server).

    LK_CDP_URL=http://127.0.0.1:9223 python3 -m pytest -v test_passkeys.py

The same file runs against the DevTools gateway (the authenticator is a latchkey key the
browser reaches through HID: LK_EXPECT_HID=1 checks it with fido2-token -L while the test
runs, and that its hidraw node is the browser's account's alone) and against Chromium's
own debugging port (its in-browser virtual authenticator: the control).
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys

import pytest
from fido2.server import Fido2Server
from fido2.utils import websafe_decode
from fido2.webauthn import (
    AuthenticatorAttachment,
    AuthenticatorData,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)
from playwright.sync_api import sync_playwright

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

EXPECT_HID = os.environ.get("LK_EXPECT_HID") == "1"


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as playwright:
        yield playwright.chromium.connect_over_cdp(os.environ["LK_CDP_URL"])


@pytest.fixture(scope="session")
def origin():
    return f"http://localhost:{harness.serve_page()}/"


@pytest.fixture
def page(browser, origin):
    context = browser.contexts[0]
    page = context.new_page()
    page.goto(origin)
    yield page
    page.close()


@pytest.fixture
def cdp(page):
    client = page.context.new_cdp_session(page)
    client.send("WebAuthn.enable")
    yield client
    client.detach()


@pytest.fixture
def authenticator(cdp):
    return cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "ctap2Version": "ctap2_1", "transport": "usb", "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True, "automaticPresenceSimulation": True}})["authenticatorId"]


@pytest.fixture
def server():
    return Fido2Server(PublicKeyCredentialRpEntity(name="latchkey devtools", id="localhost"))


def register(page, server, user):
    options, state = server.register_begin(
        user, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
        user_verification=UserVerificationRequirement.REQUIRED,
        authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
    result = harness.webauthn(page, "create", options)
    assert result["ok"], result["error"]
    return server.register_complete(state, result["credential"]).credential_data


def sign_in(page, server, credentials, uv=UserVerificationRequirement.REQUIRED, ms=60000):
    options, state = server.authenticate_begin(user_verification=uv)
    result = harness.webauthn(page, "get", options, ms)
    if not result["ok"]:
        return result, None
    server.authenticate_complete(state, credentials, result["credential"])
    return result, AuthenticatorData(websafe_decode(result["credential"]["response"]["authenticatorData"]))


def the_key_on_hid(authenticator: str) -> str:
    """The key's hidraw node, listed by fido2-token -L (libfido2 through the kernel), owned
    by the browser's account alone."""
    code, key = harness.ctl("keys", "show", authenticator)
    assert code == 0, f"latchkeyctl keys show {authenticator}: {code} {key}"
    node = key["uhid"]["hidraw"]
    listed = subprocess.run(["fido2-token", "-L"], capture_output=True, text=True, timeout=30).stdout
    assert node and node in listed, f"fido2-token -L does not list {node}: {listed!r}"
    info = os.stat(node)
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == key["owner"]["uid"], \
        f"{node}: mode {oct(info.st_mode)}, uid {info.st_uid}; the key's owner is {key['owner']}"
    return f"{node} ({[line for line in listed.splitlines() if node in line][0]})"


def test_register_sign_in_and_uv(page, cdp, authenticator, server):
    added = []
    cdp.on("WebAuthn.credentialAdded", lambda event: added.append(event))
    if EXPECT_HID:
        print("the key on HID while the test runs:", the_key_on_hid(authenticator))

    user = PublicKeyCredentialUserEntity(id=os.urandom(16), name="alice", display_name="Alice")
    credential = register(page, server, user)
    page.wait_for_timeout(500)
    assert [base64.b64decode(e["credential"]["credentialId"]) for e in added] == [bytes(credential.credential_id)]

    # Usernameless: no allowCredentials; the key finds the passkey and returns the user.
    result, auth_data = sign_in(page, server, [credential])
    assert result["ok"], result["error"]
    assert websafe_decode(result["credential"]["response"]["userHandle"]) == bytes(user.id)
    assert auth_data.is_user_verified() and auth_data.is_user_present()

    [listed] = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert base64.b64decode(listed["credentialId"]) == bytes(credential.credential_id)
    assert listed["rpId"] == "localhost" and listed["isResidentCredential"] is True
    assert listed["signCount"] == auth_data.counter

    # UV no longer succeeds: a sign-in that requires it fails.
    cdp.send("WebAuthn.setUserVerified", {"authenticatorId": authenticator, "isUserVerified": False})
    result, auth_data = sign_in(page, server, [credential], ms=20000)
    assert not result["ok"], f"a UV-required sign-in succeeded with UV off: flags {auth_data and auth_data.flags}"
    print("UV-required sign-in with isUserVerified false:", result["error"])

    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator})
    if EXPECT_HID:
        code, _ = harness.ctl("keys", "show", authenticator)
        assert code == 4, f"the key {authenticator} is still there after removeVirtualAuthenticator"
