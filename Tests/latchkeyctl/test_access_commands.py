"""latchkeyctl and key owners (docs/access.md) against the fake latchkeyd of
test_latchkeyctl.py: listings show each key's owner, `keys create` sends --owner and
--exportable, `export` sends the key's PIN from standard input (--pin-stdin, before the
passphrase) or a terminal that does not echo it, never from argv, and a refused PIN exits 3.
"""

from __future__ import annotations

from test_administration import ctl_stdin, on_terminal
from test_exchange_commands import ENVELOPE, PASSPHRASE
from test_latchkeyctl import CI_KEY, DEFAULT_KEY, OK, REFUSED, USAGE, Reply, ctl, error, latchkeyctl_fixtures

binary, daemon = latchkeyctl_fixtures()

PIN_REFUSED = 3
PIN = "4821 ünï"
OWNED = {**DEFAULT_KEY, "owner": {"uid": 1001, "name": "alice"}, "exportable": False}
NAMELESS = {**CI_KEY, "owner": {"uid": 4242}, "exportable": True}


def test_keys_list_shows_the_owner_column(binary, daemon):
    daemon.route("GET", "/v1/keys", Reply(body=[OWNED, NAMELESS]))
    result = ctl(binary, daemon, "keys")
    assert result.code == OK, result.err
    lines = result.out.splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    default = next(line for line in lines if line.startswith("default"))
    ci = next(line for line in lines if line.startswith("ci-1 "))
    assert header.index("OWNER") == default.index("alice") == ci.index("uid 4242")


def test_keys_show_names_the_owner_and_exportable(binary, daemon):
    daemon.route("GET", "/v1/keys/default", Reply(body=OWNED))
    result = ctl(binary, daemon, "keys", "show", "default")
    assert result.code == OK, result.err
    assert "alice (uid 1001)" in result.out
    assert "no: private keys leave only with its PIN" in result.out


def test_keys_create_sends_owner_and_exportable(binary, daemon):
    daemon.route("POST", "/v1/keys", Reply(201, NAMELESS))
    result = ctl(binary, daemon, "keys", "create", "ci-1", "--owner", "alice", "--exportable")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"name": "ci-1", "uhid": True, "usbip": True, "owner": "alice",
                                    "exportable": True}


def test_keys_create_for_another_refused_exits_1_with_the_rule(binary, daemon):
    message = "uid 1002 (bob) may not create key ci-1 for uid 1001 (alice) (rule root-names-owner)"
    daemon.route("POST", "/v1/keys", error(403, "forbidden", message))
    result = ctl(binary, daemon, "keys", "create", "ci-1", "--owner", "alice")
    assert result.code == REFUSED
    assert "root-names-owner" in result.err and "403" in result.err


def test_export_reads_the_pin_then_the_passphrase_from_stdin(binary, daemon):
    daemon.route("POST", "/v1/keys/default/export", Reply(200, ENVELOPE))
    result = ctl_stdin(binary, daemon, f"{PIN}\n{PASSPHRASE}\n", "export", "--pin-stdin", "--passphrase-stdin")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"pin": PIN, "passphrase": PASSPHRASE}
    assert PIN not in result.out + result.err


def test_export_asks_for_the_pin_without_echo(binary, daemon, tmp_path):
    daemon.route("POST", "/v1/keys/default/export", Reply(200, ENVELOPE))
    result, screen = on_terminal(binary, daemon, [PIN, PASSPHRASE, PASSPHRASE], "export", "--pin",
                                 "-o", str(tmp_path / "out.json"))
    assert result.code == OK, screen
    assert b'PIN of key "default"' in screen
    assert PIN.encode() not in screen, "the PIN is never echoed"
    assert daemon.only().json() == {"pin": PIN, "passphrase": PASSPHRASE}


def test_export_with_a_refused_pin_exits_3(binary, daemon):
    message = "key default is not exportable and refused the PIN given: wrong PIN (7 retries left)"
    daemon.route("POST", "/v1/keys/default/export",
                 Reply(403, {"error": {"code": "forbidden", "message": message, "rule": "export-pin-refused"}}))
    result = ctl_stdin(binary, daemon, "0000\n", "export", "--pin-stdin", "--plaintext")
    assert result.code == PIN_REFUSED, result
    assert "7 retries left" in result.err


def test_export_pin_usage_errors(binary, daemon):
    assert ctl_stdin(binary, daemon, "", "export", "--pin", "--pin-stdin", "--plaintext").code == USAGE
    assert ctl_stdin(binary, daemon, "", "export", "--pin-stdin", "--plaintext").code == USAGE, "no PIN line"
    assert daemon.requests == []
