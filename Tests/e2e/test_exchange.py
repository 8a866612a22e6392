"""Signals and passkey export/import through the real latchkeyd.

Each WebAuthn signal is sent to the control API and its effect checked both in the
credential listing and on the key itself (a usernameless getAssertion through python-fido2).
A CXF export of one key, imported into a fresh key, must sign for the public key the RP
registered with the first: python-fido2's Fido2Server verifies the assertion with the
original credential. Duplicates are refused and reported; a wrong passphrase or a changed
file imports nothing; plaintext only when asked for. latchkeyctl's `export` and `import`
run against the same daemon with --passphrase-stdin.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_der_private_key
from fido2.client import ClientError
from fido2.cose import ES256, CoseKey
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

import rp
from conftest import REPO, APIError, latchkeyctl_command, owned_directory

PASSPHRASE = "correct horse battery staple"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Key:
    """A key created through the API, with python-fido2 attached to it over USB/IP."""

    def __init__(self, doc, usb, control):
        self.name = doc["name"]
        self.control = control
        self.device = usb.ctap(doc["usbip"]["busid"])
        self.client = rp.make_client(self.device)

    def credentials(self) -> list[dict]:
        return self.control.get(f"/v1/keys/{self.name}/credentials")

    def ids(self) -> set[bytes]:
        return {unb64url(c["id"]) for c in self.credentials()}

    def signal(self, kind: str, body: dict, expect=200):
        return self.control.post(f"/v1/keys/{self.name}/signals/{kind}", body, expect=expect)

    def discoverable_handles(self, rp_id: str = rp.RP_ID) -> set[bytes]:
        """The user handles a usernameless getAssertion offers (getNextAssertion included)."""
        ctap = Ctap2(self.device)
        try:
            first = ctap.get_assertion(rp_id, os.urandom(32))
        except CtapError as e:
            assert e.code == CtapError.ERR.NO_CREDENTIALS, e
            return set()
        handles = {first.user["id"]}
        for _ in range((first.number_of_credentials or 1) - 1):
            handles.add(ctap.get_next_assertion().user["id"])
        return handles


@pytest.fixture
def make(make_key, usb, control):
    # Exportable: these tests are about the exchange format, not who may export
    # (test_access.py is; docs/access.md).
    return lambda: Key(make_key(options={"exportable": True}), usb, control)


def register(key: Key, server, user=None) -> rp.Registration:
    return rp.register(key.client, server, resident_key=True, user=user)


# ---- signals -------------------------------------------------------------------------------


def test_unknown_credential_deletes_that_credential(make):
    key = make()
    server = rp.make_server()
    alice, bob = register(key, server), register(key, server)
    assert key.discoverable_handles() == {alice.user.id, bob.user.id}

    answer = key.signal("unknown-credential",
                        {"rpId": rp.RP_ID, "credentialId": b64url(alice.credential.credential_id)})
    assert [c["id"] for c in answer["deleted"]] == [b64url(alice.credential.credential_id)]
    assert answer["updated"] == []
    assert key.ids() == {bob.credential.credential_id}
    assert key.discoverable_handles() == {bob.user.id}
    # The deleted credential no longer signs, even by its ID.
    with pytest.raises(ClientError):
        rp.authenticate(key.client, server, [alice.credential], allow=True)

    # Again, or for another RP: nothing changes, and the answer says so.
    for body in ({"rpId": rp.RP_ID, "credentialId": b64url(alice.credential.credential_id)},
                 {"rpId": "other.example", "credentialId": b64url(bob.credential.credential_id)}):
        assert key.signal("unknown-credential", body) == {"deleted": [], "updated": []}
    assert key.ids() == {bob.credential.credential_id}


def test_accepted_credentials_deletes_the_users_others(make):
    key = make()
    server = rp.make_server()
    alice, bob = register(key, server), register(key, server)

    kept = key.signal("accepted-credentials", {
        "rpId": rp.RP_ID, "userId": b64url(alice.user.id),
        "allAcceptedCredentialIds": [b64url(alice.credential.credential_id)]})
    assert kept == {"deleted": [], "updated": []}

    gone = key.signal("accepted-credentials", {
        "rpId": rp.RP_ID, "userId": b64url(alice.user.id),
        "allAcceptedCredentialIds": [b64url(os.urandom(32))]})
    assert [c["userId"] for c in gone["deleted"]] == [b64url(alice.user.id)]
    assert key.ids() == {bob.credential.credential_id}, "bob is another user: his credential stays"
    assert key.discoverable_handles() == {bob.user.id}
    rp.authenticate(key.client, server, [bob.credential], allow=False)


def test_current_user_details_renames_the_user(make):
    key = make()
    server = rp.make_server()
    alice, bob = register(key, server), register(key, server)

    answer = key.signal("current-user-details", {
        "rpId": rp.RP_ID, "userId": b64url(alice.user.id), "name": "alice@example.com",
        "displayName": "Alice Liddell"})
    assert answer["deleted"] == []
    assert [(c["userName"], c["userDisplayName"]) for c in answer["updated"]] == [
        ("alice@example.com", "Alice Liddell")]
    listed = {unb64url(c["userId"]): c for c in key.credentials()}
    assert listed[alice.user.id]["userName"] == "alice@example.com"
    assert listed[alice.user.id]["userDisplayName"] == "Alice Liddell"
    assert listed[bob.user.id]["userName"] == bob.user.name
    # The key still signs for alice, now under her new name.
    assert key.discoverable_handles() == {alice.user.id, bob.user.id}
    rp.authenticate(key.client, server, [alice.credential], allow=True)


def test_signal_errors(make, control):
    key = make()
    with pytest.raises(APIError) as missing:
        control.post("/v1/keys/no-such-key/signals/unknown-credential", {"rpId": "a", "credentialId": "AA"})
    assert missing.value.status == 404
    for body in ({"rpId": "a", "credentialId": "!!"}, {"rpId": "a"}, {"rpId": "a", "credentialId": ""}):
        with pytest.raises(APIError) as bad:
            key.signal("unknown-credential", body)
        assert bad.value.status == 400, body
    reg = register(key, rp.make_server())
    with pytest.raises(APIError) as long_name:
        key.signal("current-user-details", {"rpId": rp.RP_ID, "userId": b64url(reg.user.id), "name": "n" * 65,
                                            "displayName": ""})
    assert long_name.value.status == 400
    assert key.credentials()[0]["userName"] == reg.user.name


# ---- export and import ---------------------------------------------------------------------


def export(control, name: str, **body) -> dict:
    return control.post(f"/v1/keys/{name}/export", body)


def import_(control, name: str, document, passphrase: str | None = None, expect=200):
    body = {"document": document}
    if passphrase is not None:
        body["passphrase"] = passphrase
    return control.post(f"/v1/keys/{name}/import", body, expect=expect)


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA", "ES384", "ES512", "ES256K", "RS256", "PS256", "ML-DSA-65",
                                       "ML-DSA-87"])
def test_export_then_import_signs_for_the_original_public_key(make, control, algorithm):
    if rp.ALGORITHMS[algorithm] not in CoseKey.supported_algorithms():
        pytest.skip("this cryptography cannot verify ML-DSA (47+ on OpenSSL 3.5+ can)")
    source, target = make(), make()
    server = rp.make_server(rp.ALGORITHMS[algorithm])
    reg = register(source, server)
    rp.authenticate(source.client, server, [reg.credential], allow=True)

    envelope = export(control, source.name, passphrase=PASSPHRASE)
    assert set(envelope) == {"format", "kdf", "cipher", "ciphertext"}
    assert envelope["format"] == "latchkey-cxf-scrypt-aes256gcm-v1"
    assert envelope["kdf"] == {"name": "scrypt", "salt": envelope["kdf"]["salt"], "N": 2 ** 17, "r": 8, "p": 1}
    assert envelope["cipher"]["name"] == "AES-256-GCM"
    assert len(unb64url(envelope["kdf"]["salt"])) == 16 and len(unb64url(envelope["cipher"]["nonce"])) == 12

    report = import_(control, target.name, envelope, PASSPHRASE)
    assert report["skipped"] == []
    assert [unb64url(i["credential"]["id"]) for i in report["imported"]] == [reg.credential.credential_id]
    imported = report["imported"][0]["credential"]
    assert imported["rpId"] == rp.RP_ID and unb64url(imported["userId"]) == reg.user.id
    assert imported["userName"] == reg.user.name and imported["algorithm"] == rp.ALGORITHMS[algorithm]

    # The RP verifies the new key's assertion with the public key it registered on the old one.
    usernameless = rp.authenticate(target.client, server, [reg.credential], allow=False)
    assert usernameless.credential_id == reg.credential.credential_id
    assert usernameless.user_handle == reg.user.id
    assert usernameless.sign_count == 1, "an imported passkey's counter starts afresh"
    by_id = rp.authenticate(target.client, server, [reg.credential], allow=True)
    assert by_id.sign_count > usernameless.sign_count


def test_plaintext_export_only_when_asked(make, control):
    key = make()
    server = rp.make_server(ES256.ALGORITHM)
    reg = register(key, server)
    for body in ({}, {"plaintext": False}, {"passphrase": PASSPHRASE, "plaintext": True}, {"passphrase": ""}):
        with pytest.raises(APIError) as refused:
            export(control, key.name, **body)
        assert refused.value.status == 400, body

    cxf = export(control, key.name, plaintext=True)
    assert cxf["version"] == {"major": 1, "minor": 0}
    [account] = cxf["accounts"]
    [item] = account["items"]
    [passkey] = item["credentials"]
    assert passkey["type"] == "passkey"
    assert unb64url(passkey["credentialId"]) == reg.credential.credential_id
    assert unb64url(passkey["userHandle"]) == reg.user.id
    assert passkey["rpId"] == rp.RP_ID and passkey["username"] == reg.user.name
    # The key is PKCS#8 and its public half is the registered credential's.
    private = load_der_private_key(unb64url(passkey["key"]), password=None)
    public = ES256.from_cryptography_key(private.public_key())
    registered = reg.credential.public_key
    assert (public[-2], public[-3]) == (registered[-2], registered[-3])


def test_duplicates_are_refused_and_reported(make, control):
    source, target = make(), make()
    server = rp.make_server()
    first, second = register(source, server), register(source, server)
    cxf = export(control, source.name, plaintext=True)

    report = import_(control, target.name, cxf)
    assert len(report["imported"]) == 2 and report["skipped"] == []

    again = import_(control, target.name, cxf)
    assert again["imported"] == []
    assert sorted(unb64url(s["credentialId"]) for s in again["skipped"]) == sorted(
        [first.credential.credential_id, second.credential.credential_id])
    assert {s["reason"] for s in again["skipped"]} == {"the key has a credential with this ID already"}
    assert all(s["location"].startswith("accounts[0].items[") for s in again["skipped"])

    # A different credential for a user the key already has a passkey for, and a malformed one.
    crafted = copy.deepcopy(cxf)
    items = crafted["accounts"][0]["items"]
    items[0]["credentials"][0]["credentialId"] = b64url(os.urandom(32))
    items[1]["credentials"][0]["key"] = b64url(b"not a key")
    items.append({"id": "AA", "title": "mail", "credentials": [{"type": "basic-auth"}]})
    crafted_report = import_(control, target.name, crafted)
    assert crafted_report["imported"] == []
    reasons = [s["reason"] for s in crafted_report["skipped"]]
    assert reasons[0] == "the key has a passkey for this user at this RP already"
    assert reasons[1].startswith("malformed passkey: key is not a PKCS#8")
    assert reasons[2] == "a basic-auth credential, not a passkey"
    assert len(target.credentials()) == 2


def test_wrong_passphrase_or_changed_file_imports_nothing(make, control):
    source, target = make(), make()
    register(source, rp.make_server())
    envelope = export(control, source.name, passphrase=PASSPHRASE)

    with pytest.raises(APIError) as wrong:
        import_(control, target.name, envelope, "not the passphrase")
    assert wrong.value.status == 400 and wrong.value.body["error"]["code"] == "decryption_failed"

    changed = copy.deepcopy(envelope)
    sealed = bytearray(unb64url(changed["ciphertext"]))
    sealed[10] ^= 1
    changed["ciphertext"] = b64url(bytes(sealed))
    with pytest.raises(APIError) as tampered:
        import_(control, target.name, changed, PASSPHRASE)
    assert tampered.value.body["error"]["code"] == "decryption_failed"

    with pytest.raises(APIError) as no_passphrase:
        import_(control, target.name, envelope)
    assert no_passphrase.value.body["error"]["code"] == "passphrase_required"

    for document in ({"version": {"major": 2, "minor": 0}, "accounts": []}, {"hello": 1}, [1, 2]):
        with pytest.raises(APIError) as not_cxf:
            import_(control, target.name, document)
        assert not_cxf.value.status == 400, document
    assert target.credentials() == []


# ---- latchkeyctl against the real daemon ----------------------------------------------------


def ctl(daemon, *args, stdin: str = ""):
    return subprocess.run([*latchkeyctl_command(daemon.control.path), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_latchkeyctl_export_and_import(make, control, daemon, tmp_path):
    source, target = make(), make()
    server = rp.make_server()
    reg = register(source, server)
    path = owned_directory(tmp_path, 0o750) / "passkeys.cxf.json"  # latchkeyctl writes it as the owner

    exported = ctl(daemon, "export", "--key", source.name, "--format", "cxf", "-o", str(path),
                   "--passphrase-stdin", stdin=PASSPHRASE + "\n")
    assert exported.returncode == 0, exported.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["format"] == "latchkey-cxf-scrypt-aes256gcm-v1"
    assert PASSPHRASE not in exported.stdout + exported.stderr

    wrong = ctl(daemon, "import", "--key", target.name, str(path), "--passphrase-stdin", stdin="nope\n")
    assert wrong.returncode == 1 and "passphrase" in wrong.stderr
    assert target.credentials() == []

    imported = ctl(daemon, "import", "--key", target.name, str(path), "--passphrase-stdin", "--json",
                   stdin=PASSPHRASE + "\n")
    assert imported.returncode == 0, imported.stderr
    assert len(json.loads(imported.stdout)["imported"]) == 1
    rp.authenticate(target.client, server, [reg.credential], allow=False)

    again = ctl(daemon, "import", "--key", target.name, str(path), "--passphrase-stdin", stdin=PASSPHRASE + "\n")
    assert again.returncode == 1
    assert "already" in again.stdout

    plain = tmp_path / "plain.json"
    refused = ctl(daemon, "export", "--key", source.name, "-o", str(plain), "--plaintext")
    assert refused.returncode == 0 and "NOT encrypted" in refused.stderr
    assert stat.S_IMODE(plain.stat().st_mode) == 0o600
    assert json.loads(plain.read_text())["accounts"][0]["items"]


def test_latchkeyctl_signals(make, daemon):
    key = make()
    server = rp.make_server()
    alice, bob = register(key, server), register(key, server)

    renamed = ctl(daemon, "signal", "current-user-details", "--key", key.name, "--rp-id", rp.RP_ID,
                  "--user-id", b64url(alice.user.id), "--name", "alice@example.com", "--display-name", "Alice")
    assert renamed.returncode == 0, renamed.stderr
    assert "updated" in renamed.stdout and "alice@example.com" in renamed.stdout

    kept = ctl(daemon, "signal", "accepted-credentials", "--key", key.name, "--rp-id", rp.RP_ID,
               "--user-id", b64url(bob.user.id), "--credential-id", b64url(bob.credential.credential_id))
    assert kept.returncode == 0 and kept.stdout.strip() == "Nothing changed."

    gone = ctl(daemon, "signal", "unknown-credential", "--key", key.name, "--rp-id", rp.RP_ID,
               "--credential-id", b64url(alice.credential.credential_id), "--json")
    assert gone.returncode == 0, gone.stderr
    assert [c["id"] for c in json.loads(gone.stdout)["deleted"]] == [b64url(alice.credential.credential_id)]
    assert key.discoverable_handles() == {bob.user.id}
