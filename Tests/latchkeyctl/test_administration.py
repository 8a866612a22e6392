"""latchkeyctl's key administration against the fake latchkeyd of test_latchkeyctl.py:
`pin status|set|change`, `credentials update-user`, `config`, `reset` and `keys replug`.

What each command sends, prints and exits with; that PINs come from standard input
(--pin-stdin) or from a terminal that does not echo them (a pseudo-terminal here),
and never reach the output; that a refused PIN exits 3.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import termios
import time

import pytest

from test_latchkeyctl import (
    CREDENTIAL,
    CI_KEY,
    NOT_FOUND,
    OK,
    REFUSED,
    USAGE,
    FakeDaemon,
    Reply,
    Run,
    ctl,
    error,
    expect_not_found,
    latchkeyctl_fixtures,
    run,
)

PIN_REFUSED = 3

binary, daemon = latchkeyctl_fixtures()

PIN_DOC = {"set": True, "retries": 8, "maxRetries": 8, "blocked": False, "powerCycleRequired": False,
           "minPINLength": 4, "forcePINChange": False, "alwaysUv": False}
NO_PIN_DOC = dict(PIN_DOC, set=False)
CONFIG_DOC = {"alwaysUv": False, "minPINLength": 4, "forcePINChange": False, "minPinLengthRPIDs": ["example.com"]}


def ctl_stdin(binary: str, daemon: FakeDaemon, stdin: str, *args: str) -> Run:
    proc = subprocess.run([binary, "--socket", daemon.path, *args], input=stdin, capture_output=True, text=True,
                          timeout=30)
    return Run(proc.returncode, proc.stdout, proc.stderr)


# --------------------------------------------------------------------------
# A pseudo-terminal, for what a person types


def read_until(master: int, done, timeout: float = 10) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while not done(data):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out waiting on the terminal; got {data!r}")
        ready, _, _ = select.select([master], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(master, 1024)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        data += chunk
    return data


def on_terminal(binary: str, daemon: FakeDaemon, answers: list[str], *args: str) -> tuple[Run, bytes]:
    """Runs latchkeyctl with a pseudo-terminal as standard input and standard error; types each
    answer after the next prompt. Returns the run and everything the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([binary, "--socket", daemon.path, *args], stdin=slave, stdout=subprocess.PIPE,
                            stderr=slave, start_new_session=True)
    os.close(slave)
    screen = b""
    try:
        for answer in answers:
            screen += read_until(master, lambda d: d.rstrip().endswith((b":", b"]")))
            os.write(master, answer.encode() + b"\n")
        out, _ = proc.communicate(timeout=20)
        screen += drain(master)
    except AssertionError:
        if proc.poll() is None:
            proc.kill()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)
    return Run(proc.returncode, out.decode(), ""), screen


def drain(master: int) -> bytes:
    """What the terminal still shows once the program has ended."""
    data = b""
    while select.select([master], [], [], 0.2)[0]:
        try:
            chunk = os.read(master, 1024)
        except OSError:  # EIO: nothing holds the other side any more
            break
        if not chunk:
            break
        data += chunk
    return data


# --------------------------------------------------------------------------
# pin status


def test_pin_status_of_the_default_key(binary, daemon):
    daemon.route("GET", "/v1/keys/default/pin", Reply(body=PIN_DOC))
    result = ctl(binary, daemon, "pin", "status")
    assert result.code == OK, result.err
    assert daemon.only().path == "/v1/keys/default/pin"
    for line in ("PIN             set", "retries         8 of 8", "power cycle     not required",
                 "minimum length  4", "force change    no", "alwaysUv        off"):
        assert line in result.out
    # `pin` alone shows the status.
    assert ctl(binary, daemon, "pin").out == result.out


def test_pin_status_of_a_named_key_as_json(binary, daemon):
    blocked = dict(PIN_DOC, retries=0, blocked=True, powerCycleRequired=True, forcePINChange=True, alwaysUv=True)
    daemon.route("GET", "/v1/keys/ci-1/pin", Reply(body=blocked))
    result = ctl(binary, daemon, "pin", "status", "ci-1")
    assert result.code == OK, result.err
    assert "0 of 8: blocked until `latchkeyctl reset`" in result.out
    assert "required: three wrong PINs in a row; replug the key" in result.out
    assert "yes: change the PIN before using it" in result.out and "alwaysUv        on" in result.out
    assert ctl(binary, daemon, "pin", "status", "ci-1", "--json").json() == blocked


def test_pin_status_of_a_missing_key_exits_4(binary, daemon):
    expect_not_found(binary, daemon, "GET", "/v1/keys/nope/pin", "no key named nope", "pin", "status", "nope")


# --------------------------------------------------------------------------
# pin set and pin change from standard input


def test_pin_set_reads_the_pin_from_stdin(binary, daemon):
    daemon.route("PUT", "/v1/keys/ci-1/pin", Reply(body=PIN_DOC))
    result = ctl_stdin(binary, daemon, "correct horse ü\n", "pin", "set", "ci-1", "--pin-stdin")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path) == ("PUT", "/v1/keys/ci-1/pin")
    assert request.json() == {"newPin": "correct horse ü"}
    assert 'Set the PIN of key "ci-1".' in result.out
    assert "horse" not in result.out + result.err


def test_pin_set_json_prints_the_pin_status(binary, daemon):
    daemon.route("PUT", "/v1/keys/default/pin", Reply(body=PIN_DOC))
    result = ctl_stdin(binary, daemon, "1234\r\n", "pin", "set", "--pin-stdin", "--json")
    assert result.code == OK, result.err
    assert result.json() == PIN_DOC
    assert daemon.only().json() == {"newPin": "1234"}, "a CRLF line ending is not part of the PIN"


@pytest.mark.parametrize("stdin", ["", "\n", "\nsecond\n"], ids=["nothing", "empty", "empty-first"])
def test_pin_set_without_a_pin_on_stdin_is_a_usage_error(binary, daemon, stdin):
    result = ctl_stdin(binary, daemon, stdin, "pin", "set", "--pin-stdin")
    assert result.code == USAGE, result
    assert daemon.requests == []


def test_pin_set_without_a_terminal_or_pin_stdin_is_a_usage_error(binary, daemon):
    result = ctl_stdin(binary, daemon, "1234\n", "pin", "set")
    assert result.code == USAGE
    assert "--pin-stdin" in result.err
    assert daemon.requests == []


def test_pin_change_reads_current_then_new_from_stdin(binary, daemon):
    daemon.route("PUT", "/v1/keys/default/pin", Reply(body=PIN_DOC))
    result = ctl_stdin(binary, daemon, "1234\n567890\n", "pin", "change", "--pin-stdin")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"currentPin": "1234", "newPin": "567890"}
    assert 'Changed the PIN of key "default".' in result.out
    assert "1234" not in result.out + result.err and "567890" not in result.out + result.err


def test_pin_change_with_one_line_sends_nothing(binary, daemon):
    result = ctl_stdin(binary, daemon, "1234\n", "pin", "change", "--pin-stdin")
    assert result.code == USAGE
    assert "new PIN" in result.err
    assert daemon.requests == []


@pytest.mark.parametrize("status,code,message", [
    (403, "pin_invalid", "key default: wrong PIN (7 retries left)"),
    (423, "pin_blocked", "key default: the PIN is blocked: no retries are left"),
    (423, "pin_auth_blocked", "key default: three wrong PINs in a row: PIN entry is blocked"),
])
def test_a_refused_pin_exits_3(binary, daemon, status, code, message):
    daemon.route("PUT", "/v1/keys/default/pin", error(status, code, message))
    result = ctl_stdin(binary, daemon, "0000\n5678\n", "pin", "change", "--pin-stdin")
    assert result.code == PIN_REFUSED, result
    assert message in result.err and code in result.err
    assert "0000" not in result.err and "5678" not in result.err
    assert result.out == ""


@pytest.mark.parametrize("status,code", [(400, "pin_policy_violation"), (409, "pin_already_set"),
                                         (409, "pin_not_set")])
def test_other_pin_refusals_exit_1(binary, daemon, status, code):
    daemon.route("PUT", "/v1/keys/default/pin", error(status, code, "key default: no"))
    result = ctl_stdin(binary, daemon, "1234\n", "pin", "set", "--pin-stdin")
    assert result.code == REFUSED, result
    assert code in result.err


# --------------------------------------------------------------------------
# PINs typed on a terminal


def test_pin_set_asks_twice_without_echo(binary, daemon):
    daemon.route("GET", "/v1/keys/default/pin", Reply(body=dict(NO_PIN_DOC, minPINLength=6)))
    daemon.route("PUT", "/v1/keys/default/pin", Reply(body=PIN_DOC))
    result, screen = on_terminal(binary, daemon, ["s3cret-PIN", "s3cret-PIN"], "pin", "set")
    assert result.code == OK, screen
    assert [(r.method, r.path) for r in daemon.requests] == [("GET", "/v1/keys/default/pin"),
                                                             ("PUT", "/v1/keys/default/pin")]
    assert daemon.requests[-1].json() == {"newPin": "s3cret-PIN"}
    assert b'New PIN of key "default" (at least 6 characters):' in screen and b"Repeat the new PIN:" in screen
    assert b"s3cret" not in screen, "the terminal echoed the PIN"
    assert "s3cret" not in result.out


def test_pin_set_with_two_different_pins_sends_nothing(binary, daemon):
    daemon.route("GET", "/v1/keys/default/pin", Reply(body=NO_PIN_DOC))
    result, screen = on_terminal(binary, daemon, ["11112222", "11113333"], "pin", "set")
    assert result.code == USAGE
    assert b"the two new PINs differ" in screen
    assert [r.method for r in daemon.requests] == ["GET"]


def test_pin_change_asks_for_the_current_pin_then_the_new_one_twice(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1/pin", Reply(body=PIN_DOC))
    daemon.route("PUT", "/v1/keys/ci-1/pin", Reply(body=PIN_DOC))
    result, screen = on_terminal(binary, daemon, ["old-pin", "new-pin-1", "new-pin-1"], "pin", "change", "ci-1")
    assert result.code == OK, screen
    assert daemon.requests[-1].json() == {"currentPin": "old-pin", "newPin": "new-pin-1"}
    assert b'Current PIN of key "ci-1":' in screen
    assert b"old-pin" not in screen and b"new-pin" not in screen


@pytest.mark.parametrize("command,doc,code,message", [
    ("set", PIN_DOC, REFUSED, "has a PIN already"),
    ("change", NO_PIN_DOC, REFUSED, "has no PIN"),
    ("change", dict(PIN_DOC, retries=0, blocked=True), PIN_REFUSED, "only `latchkeyctl reset` clears it"),
    ("change", dict(PIN_DOC, retries=5, powerCycleRequired=True), PIN_REFUSED, "keys replug"),
], ids=["set-when-set", "change-when-unset", "blocked", "power-cycle"])
def test_a_person_is_told_before_typing_when_the_pin_cannot_be_set_or_changed(binary, daemon, command, doc, code,
                                                                               message):
    daemon.route("GET", "/v1/keys/default/pin", Reply(body=doc))
    result, screen = on_terminal(binary, daemon, [], "pin", command)
    assert result.code == code, screen
    assert message.encode() in screen and b"PIN of key" not in screen.split(b"Error:")[0]
    assert [r.method for r in daemon.requests] == ["GET"]


def test_the_terminal_echoes_again_afterwards(binary, daemon):
    """After the command, what is typed shows again: the terminal's settings were put back."""
    daemon.route("GET", "/v1/keys/default/pin", Reply(body=NO_PIN_DOC))
    daemon.route("PUT", "/v1/keys/default/pin", Reply(body=PIN_DOC))
    master, slave = pty.openpty()
    proc = subprocess.Popen([binary, "--socket", daemon.path, "pin", "set"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=slave, start_new_session=True)
    try:
        for _ in range(2):
            read_until(master, lambda d: d.rstrip().endswith(b":"))
            os.write(master, b"12345678\n")
        proc.communicate(timeout=20)
        assert proc.returncode == OK
        assert termios.tcgetattr(slave)[3] & termios.ECHO, "echo is still off"
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(slave)
        os.close(master)


# --------------------------------------------------------------------------
# credentials update-user


def test_update_user_sends_only_the_given_fields(binary, daemon):
    path = f"/v1/keys/ci-1/credentials/{CREDENTIAL['id']}/user"
    renamed = dict(CREDENTIAL, userName="alice@example.org")
    daemon.route("PUT", path, Reply(body=renamed))
    result = ctl(binary, daemon, "credentials", "update-user", "ci-1", CREDENTIAL["id"], "--name", "alice@example.org")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path) == ("PUT", path)
    assert request.json() == {"name": "alice@example.org"}
    assert "alice@example.org" in result.out and "Alice Liddell" in result.out
    result = ctl(binary, daemon, "credentials", "update-user", "ci-1", CREDENTIAL["id"], "--display-name", "",
                 "--name", "a", "--json")
    assert daemon.requests[-1].json() == {"name": "a", "displayName": ""}
    assert result.json() == renamed


def test_update_user_accepts_standard_base64(binary, daemon):
    daemon.route("PUT", "/v1/keys/default/credentials/ab-_cd/user", Reply(body=CREDENTIAL))
    assert ctl(binary, daemon, "credentials", "update-user", "default", "ab+/cd==", "--name", "x").code == OK
    assert daemon.only().path == "/v1/keys/default/credentials/ab-_cd/user"


def test_update_user_of_a_missing_credential_exits_4(binary, daemon):
    expect_not_found(binary, daemon, "PUT", "/v1/keys/default/credentials/AAAA/user",
                     "key default: no stored credential has this ID",
                     "credentials", "update-user", "default", "AAAA", "--name", "x")


@pytest.mark.parametrize("args", [["default", "AAAA"], ["default"], ["default", "==", "--name", "x"]],
                         ids=["no-field", "no-id", "empty-id"])
def test_update_user_usage_errors(binary, daemon, args):
    assert ctl(binary, daemon, "credentials", "update-user", *args).code == USAGE
    assert daemon.requests == []


# --------------------------------------------------------------------------
# config


def test_config_without_options_shows_the_settings(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1/config", Reply(body=CONFIG_DOC))
    result = ctl(binary, daemon, "config", "ci-1")
    assert result.code == OK, result.err
    assert "alwaysUv                 off" in result.out and "minimum PIN length       4" in result.out
    assert "RP IDs told the minimum  example.com" in result.out
    assert ctl(binary, daemon, "config", "ci-1", "--json").json() == CONFIG_DOC


@pytest.mark.parametrize("args,body", [
    (["--always-uv", "on"], {"alwaysUv": True}),
    (["--always-uv", "off"], {"alwaysUv": False}),
    (["--min-pin-length", "8"], {"minPINLength": 8}),
    (["--min-pin-length", "8", "--force-pin-change"], {"minPINLength": 8, "forcePINChange": True}),
    (["--force-pin-change"], {"forcePINChange": True}),
    (["--always-uv", "on", "--min-pin-length", "6"], {"alwaysUv": True, "minPINLength": 6}),
    (["--rp-id", "example.com", "--rp-id", "login.example.org"],
     {"minPinLengthRPIDs": ["example.com", "login.example.org"]}),
    (["--min-pin-length", "8", "--rp-id", "example.com"], {"minPINLength": 8, "minPinLengthRPIDs": ["example.com"]}),
])
def test_config_sends_what_is_given(binary, daemon, args, body):
    daemon.route("PUT", "/v1/keys/ci-1/config", Reply(body=dict(CONFIG_DOC, **body)))
    result = ctl(binary, daemon, "config", "ci-1", *args)
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path) == ("PUT", "/v1/keys/ci-1/config")
    assert request.json() == body


def test_config_refused_minimum_exits_1_with_the_reason(binary, daemon):
    message = "key ci-1: the minimum PIN length is 8 and never decreases"
    daemon.route("PUT", "/v1/keys/ci-1/config", error(409, "setting_refused", message))
    result = ctl(binary, daemon, "config", "ci-1", "--min-pin-length", "6")
    assert result.code == REFUSED and message in result.err


@pytest.mark.parametrize("args", [[], ["ci-1", "--always-uv", "maybe"], ["ci-1", "--min-pin-length", "3"],
                                  ["ci-1", "--min-pin-length", "64"]],
                         ids=["no-key", "bad-switch", "too-short", "too-long"])
def test_config_usage_errors(binary, daemon, args):
    assert ctl(binary, daemon, "config", *args).code == USAGE
    assert daemon.requests == []


# --------------------------------------------------------------------------
# reset and replug


def test_reset_with_yes(binary, daemon):
    daemon.route("POST", "/v1/keys/ci-1/reset", Reply(body=CI_KEY))
    result = ctl(binary, daemon, "reset", "ci-1", "--yes")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path, request.body) == ("POST", "/v1/keys/ci-1/reset", b"")
    assert 'Reset key "ci-1"' in result.out and CI_KEY["aaguid"] in result.out
    assert ctl(binary, daemon, "reset", "ci-1", "-y", "--json").json() == CI_KEY


def test_reset_without_a_terminal_needs_yes(binary, daemon):
    result = ctl(binary, daemon, "reset", "ci-1")
    assert result.code == USAGE and "--yes" in result.err
    assert daemon.requests == []


def test_reset_asks_on_a_terminal(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1", Reply(body=dict(CI_KEY, credentials=3)))
    daemon.route("POST", "/v1/keys/ci-1/reset", Reply(body=CI_KEY))
    result, screen = on_terminal(binary, daemon, ["y"], "reset", "ci-1")
    assert result.code == OK, screen
    assert b'Reset key "ci-1"? This erases its 3 stored credentials' in screen and b"[y/N]" in screen
    assert [(r.method, r.path) for r in daemon.requests] == [("GET", "/v1/keys/ci-1"), ("POST", "/v1/keys/ci-1/reset")]


@pytest.mark.parametrize("answer", ["", "n", "no", "yess"])
def test_reset_declined_changes_nothing(binary, daemon, answer):
    daemon.route("GET", "/v1/keys/ci-1", Reply(body=CI_KEY))
    result, screen = on_terminal(binary, daemon, [answer], "reset", "ci-1")
    assert result.code == REFUSED
    assert b"not reset" in screen
    assert [r.method for r in daemon.requests] == ["GET"]


def test_reset_of_a_missing_key_exits_4(binary, daemon):
    daemon.route("POST", "/v1/keys/nope/reset", error(404, "not_found", "no key named nope"))
    assert ctl(binary, daemon, "reset", "nope", "--yes").code == NOT_FOUND


def test_large_blob_size(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1/large-blobs",
                 Reply(body={"serializedSize": 421, "maxSerializedLargeBlobArray": 4096}))
    result = ctl(binary, daemon, "large-blob", "size", "ci-1")
    assert result.code == OK, result.err
    assert (daemon.only().method, daemon.only().path) == ("GET", "/v1/keys/ci-1/large-blobs")
    assert "size   421 bytes" in result.out and "limit  4096 bytes" in result.out
    assert ctl(binary, daemon, "large-blob", "ci-1", "--json").json() == {
        "serializedSize": 421, "maxSerializedLargeBlobArray": 4096}
    daemon.route("GET", "/v1/keys/default/large-blobs",
                 Reply(body={"serializedSize": 17, "maxSerializedLargeBlobArray": 4096}))
    assert "17 bytes (empty)" in ctl(binary, daemon, "large-blob", "size", "default").out
    assert ctl(binary, daemon, "large-blob", "size").code == USAGE, "KEY is required"


def test_keys_replug(binary, daemon):
    daemon.route("POST", "/v1/keys/ci-1/replug", Reply(body=CI_KEY))
    result = ctl(binary, daemon, "keys", "replug", "ci-1")
    assert result.code == OK, result.err
    assert (daemon.only().method, daemon.only().path) == ("POST", "/v1/keys/ci-1/replug")
    assert 'Replugged key "ci-1"' in result.out


# --------------------------------------------------------------------------
# Help

NEW_COMMANDS = [["pin"], ["pin", "status"], ["pin", "set"], ["pin", "change"], ["credentials", "update-user"],
                ["config"], ["reset"], ["keys", "replug"], ["large-blob"], ["large-blob", "size"]]


@pytest.mark.parametrize("command", NEW_COMMANDS, ids=" ".join)
def test_help_of_every_new_command_exits_0_with_examples(binary, command):
    result = run(binary, *command, "--help")
    assert result.code == OK, result.err
    assert "USAGE:" in result.out and "Examples:" in result.out


def test_help_says_how_pins_are_read_and_what_reset_skips(binary):
    pin_help = run(binary, "pin", "set", "--help").out
    assert "--pin-stdin" in pin_help and "without echo" in pin_help
    assert "never from the command line" in run(binary, "pin", "--help").out
    reset_help = " ".join(run(binary, "reset", "--help").out.split())
    assert "10 seconds" in reset_help and "does not apply here" in reset_help and "--yes" in reset_help
    assert "AAGUID" in reset_help
    root = run(binary, "--help").out
    assert "3   the PIN was wrong" in root
