"""latchkeyctl's `signal`, `export` and `import` against the fake latchkeyd of
test_latchkeyctl.py: what each sends, prints and exits with; that passphrases come from
standard input (--passphrase-stdin) or a terminal that does not echo them, never from
argv, and never reach the output; that export files are mode 0600 and plaintext only with
--plaintext (and a warning).
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from test_administration import ctl_stdin, on_terminal
from test_latchkeyctl import (
    CREDENTIAL,
    NOT_FOUND,
    OK,
    REFUSED,
    USAGE,
    Reply,
    Run,
    ctl,
    error,
    latchkeyctl_fixtures,
)

binary, daemon = latchkeyctl_fixtures()

PASSPHRASE = "tr0ub4dor &3"
ENVELOPE = {
    "format": "latchkey-cxf-scrypt-aes256gcm-v1",
    "kdf": {"name": "scrypt", "salt": "c2FsdHNhbHRzYWx0c2FsdA", "N": 131072, "r": 8, "p": 1},
    "cipher": {"name": "AES-256-GCM", "nonce": "bm9uY2Vub25jZTEy"},
    "ciphertext": "Y2lwaGVydGV4dA",
}
CXF = {"version": {"major": 1, "minor": 0}, "exporterRpId": "latchkey", "exporterDisplayName": "x",
       "timestamp": 1, "accounts": [{"id": "AA", "username": "", "email": "", "collections": [], "items": []}]}
REPORT = {"imported": [{"location": "accounts[0].items[0].credentials[0]", "credential": CREDENTIAL}],
          "skipped": []}
SKIPPED = {"imported": [], "skipped": [{"location": "accounts[0].items[0].credentials[0]",
                                        "credentialId": CREDENTIAL["id"], "rpId": "example.com",
                                        "reason": "the key has a credential with this ID already"}]}




# --------------------------------------------------------------------------
# signal


def test_signal_unknown_credential_sends_the_webauthn_members(binary, daemon):
    daemon.route("POST", "/v1/keys/ci-1/signals/unknown-credential",
                 Reply(200, {"deleted": [CREDENTIAL], "updated": []}))
    result = ctl(binary, daemon, "signal", "unknown-credential", "--key", "ci-1", "--rp-id", "example.com",
                 "--credential-id", "q83v+w==")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"rpId": "example.com", "credentialId": "q83v-w"}
    assert "deleted" in result.out and CREDENTIAL["id"] in result.out


def signal_accepted_credentials(binary, daemon, user_id: str, *credential_ids: str) -> Run:
    """`signal accepted-credentials` at example.com, one --credential-id a given ID, that
    changes nothing; checks that the body sent carries the IDs as given."""
    daemon.route("POST", "/v1/keys/default/signals/accepted-credentials", Reply(200, {"deleted": [], "updated": []}))
    options = [word for id in credential_ids for word in ("--credential-id", id)]
    result = ctl(binary, daemon, "signal", "accepted-credentials", "--rp-id", "example.com", "--user-id", user_id,
                 *options)
    assert result.code == OK, result.err
    assert daemon.only().json() == {"rpId": "example.com", "userId": user_id,
                                    "allAcceptedCredentialIds": list(credential_ids)}
    return result


def test_signal_accepted_credentials_repeats_the_id_option(binary, daemon):
    result = signal_accepted_credentials(binary, daemon, "dXNlcg", "AAEC", "AwQF")
    assert result.out.strip() == "Nothing changed."


def test_signal_current_user_details_json(binary, daemon):
    answer = {"deleted": [], "updated": [CREDENTIAL]}
    daemon.route("POST", "/v1/keys/default/signals/current-user-details", Reply(200, answer))
    result = ctl(binary, daemon, "signal", "current-user-details", "--rp-id", "example.com", "--user-id", "dXNlcg",
                 "--name", "alice@example.com", "--display-name", "Alice Liddell", "--json")
    assert result.code == OK, result.err
    assert result.json() == answer
    assert daemon.only().json() == {"rpId": "example.com", "userId": "dXNlcg", "name": "alice@example.com",
                                    "displayName": "Alice Liddell"}


def test_signal_errors_map_to_exit_codes(binary, daemon):
    daemon.route("POST", "/v1/keys/ci-1/signals/current-user-details",
                 error(400, "bad_request", "the user name is over 64 bytes of UTF-8"))
    result = ctl(binary, daemon, "signal", "current-user-details", "--key", "ci-1", "--rp-id", "a",
                 "--user-id", "AA", "--name", "n" * 65, "--display-name", "")
    assert result.code == REFUSED and "64 bytes" in result.err
    missing = ctl(binary, daemon, "signal", "unknown-credential", "--key", "gone", "--rp-id", "a",
                  "--credential-id", "AA")
    assert missing.code == NOT_FOUND
    usage = ctl(binary, daemon, "signal", "unknown-credential", "--rp-id", "a")
    assert usage.code == USAGE, "--credential-id is required"
    assert len(daemon.requests) == 2


@pytest.mark.parametrize("command", ["signal", "export", "import"])
def test_help_describes_each_command(binary, daemon, command):
    result = ctl(binary, daemon, command, "--help")
    assert result.code == OK
    assert "Examples:" in result.out or "SUBCOMMANDS" in result.out


# --------------------------------------------------------------------------
# export


def test_export_reads_the_passphrase_from_stdin_and_writes_0600(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/ci-1/export", Reply(200, ENVELOPE))
    path = tmp_path / "out.json"
    path.write_text("old contents")
    os.chmod(path, 0o644)
    result = ctl_stdin(binary, daemon, PASSPHRASE + "\n", "export", "--key", "ci-1", "--format", "cxf",
                       "-o", str(path), "--passphrase-stdin")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"passphrase": PASSPHRASE}
    assert json.loads(path.read_text()) == ENVELOPE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert PASSPHRASE not in result.out + result.err
    assert "encrypted" in result.out


def test_export_to_stdout(binary, daemon):
    daemon.route("POST", "/v1/keys/default/export", Reply(200, ENVELOPE))
    result = ctl_stdin(binary, daemon, PASSPHRASE + "\n", "export", "--passphrase-stdin")
    assert result.code == OK, result.err
    assert json.loads(result.out) == ENVELOPE


def test_export_plaintext_needs_the_flag_and_warns(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/export", Reply(200, CXF))
    path = tmp_path / "plain.json"
    result = ctl(binary, daemon, "export", "--plaintext", "-o", str(path))
    assert result.code == OK, result.err
    assert daemon.only().json() == {"plaintext": True}
    assert "NOT encrypted" in result.err
    assert json.loads(path.read_text()) == CXF and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_export_asks_twice_without_echo(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/export", Reply(200, ENVELOPE))
    path = tmp_path / "out.json"
    result, screen = on_terminal(binary, daemon, [PASSPHRASE, PASSPHRASE], "export", "-o", str(path))
    assert result.code == OK, screen
    assert PASSPHRASE.encode() not in screen, "the passphrase is never echoed"
    assert b"Repeat the passphrase" in screen
    assert daemon.only().json() == {"passphrase": PASSPHRASE}


def test_export_with_two_different_passphrases_sends_nothing(binary, daemon, tmp_path):
    result, _ = on_terminal(binary, daemon, [PASSPHRASE, "other"], "export", "-o", str(tmp_path / "x"))
    assert result.code == USAGE
    assert daemon.requests == []
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args", [
    ["export", "--format", "csv", "--passphrase-stdin"],
    ["export", "--plaintext", "--passphrase-stdin"],
    ["export"],  # no terminal, no --passphrase-stdin
])
def test_export_usage_errors(binary, daemon, args):
    result = ctl_stdin(binary, daemon, "", *args)
    assert result.code == USAGE, result
    assert daemon.requests == []


def test_export_refused_by_the_daemon_exits_1(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/export", error(400, "bad_request", "the passphrase is empty"))
    result = ctl_stdin(binary, daemon, "x\n", "export", "--passphrase-stdin", "-o", str(tmp_path / "x"))
    assert result.code == REFUSED
    assert not (tmp_path / "x").exists(), "nothing is written when the daemon refuses"


# --------------------------------------------------------------------------
# import


def test_import_encrypted_sends_the_file_and_the_passphrase(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/ci-1/import", Reply(200, REPORT))
    path = tmp_path / "in.json"
    path.write_text(json.dumps(ENVELOPE))
    result = ctl_stdin(binary, daemon, PASSPHRASE + "\n", "import", "--key", "ci-1", str(path), "--passphrase-stdin")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"document": ENVELOPE, "passphrase": PASSPHRASE}
    assert "Imported 1, skipped 0" in result.out and CREDENTIAL["id"] in result.out
    assert PASSPHRASE not in result.out + result.err


def test_import_plaintext_asks_for_no_passphrase(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/import", Reply(200, REPORT))
    path = tmp_path / "in.json"
    path.write_text(json.dumps(CXF))
    result = ctl(binary, daemon, "import", str(path), "--json")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"document": CXF}
    assert result.json() == REPORT


def test_import_reports_skipped_items_and_exits_1(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/import", Reply(200, SKIPPED))
    path = tmp_path / "in.json"
    path.write_text(json.dumps(CXF))
    result = ctl(binary, daemon, "import", str(path))
    assert result.code == REFUSED
    assert "already" in result.out and "skipped" in result.err


def test_import_wrong_passphrase_exits_1_with_the_reason(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/import",
                 error(400, "decryption_failed", "cannot decrypt: the passphrase is wrong, or the file was changed"))
    path = tmp_path / "in.json"
    path.write_text(json.dumps(ENVELOPE))
    result = ctl_stdin(binary, daemon, "wrong\n", "import", str(path), "--passphrase-stdin")
    assert result.code == REFUSED and "passphrase is wrong" in result.err


@pytest.mark.parametrize("contents", [None, "not json", "[1, 2]"])
def test_import_of_an_unreadable_file_is_a_usage_error(binary, daemon, tmp_path, contents):
    path = tmp_path / "in.json"
    if contents is not None:
        path.write_text(contents)
    result = ctl(binary, daemon, "import", str(path))
    assert result.code == USAGE
    assert daemon.requests == []


def test_import_of_an_encrypted_file_without_a_terminal_needs_passphrase_stdin(binary, daemon, tmp_path):
    path = tmp_path / "in.json"
    path.write_text(json.dumps(ENVELOPE))
    result = ctl_stdin(binary, daemon, "", "import", str(path))
    assert result.code == USAGE and "--passphrase-stdin" in result.err
    assert daemon.requests == []


def test_signal_ids_may_begin_with_a_dash(binary, daemon):
    """base64url uses "-": an ID like "-Zm9v" is a value, not an option."""
    signal_accepted_credentials(binary, daemon, "-dXNl", "-AEC", "AwQF")
