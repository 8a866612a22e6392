#!/usr/bin/env python3
"""CTAP 2.1 through the guest kernel's hidraw with libfido2's fido2-token and
OpenSSH's ssh-keygen (which uses libfido2 too), cross-checked with python-fido2.

    ctap21_checks.py --device /dev/hidrawN [--label uhid]

Runs inside the rig guest (see guest-checks.sh) against a key without a PIN, and
leaves it with one. Every check prints one line on stdout,
    PASS<TAB>name            or    FAIL<TAB>name<TAB>why
and its details (the tools' transcripts) go to stderr. A check whose prerequisite
failed fails too, saying so: nothing is skipped silently. Exit status 0 when every
check passed.

fido2-token and ssh-keygen read PINs from the controlling terminal only
(readpassphrase(3) with RPP_REQUIRE_TTY; ssh-keygen's read_passphrase), so each
runs in a new session on a pseudo-terminal (pty.fork) and gets its PIN when it
prompts for one.

The checks: fido2-token -I shows the versions, extensions, options and PIN
protocols the key's getInfo (read with python-fido2) advertises - compared with
getInfo, not with a list kept here, so new features need no edit; -S sets the PIN
(then getInfo says clientPin and fido2-token -I shows it); -C changes it (the old
PIN then fails, the new one gives a token); ssh-keygen -t ed25519-sk makes a key
that ssh-keygen -Y sign/verify use; ssh-keygen -t ed25519-sk -O resident makes a
resident key with the PIN (OpenSSH demands the credProtect extension for that);
-L -r lists the relying parties and -L -k the credentials of one, as python-fido2's
CredentialManagement sees them; ssh-keygen -K recovers the resident key (same
public key); fido2-cred -M -h -c 3 makes an hmac-secret credential with
credProtect 3 (fido2-cred -V checks both were signed); fido2-assert -G -h -v gives
a stable hmac-secret per salt, the one python-fido2 gets with a PIN token, and
without UV the credential cannot be used; fido2-token -D -i deletes a credential.
"""

from __future__ import annotations

import argparse
import base64
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin, PinProtocolV2
from fido2.hid import CtapHidDevice
from fido2.utils import sha256

from checks import RESULTS, check, log

PIN, NEW_PIN = "4321", "87654321"
RP_ID = "kernel.latchkey.test"
HMAC_RP_ID = "hmac.latchkey.test"
SSH_APPLICATION = "ssh:"
P = ClientPin.PERMISSION
RM = CredentialManagement.RESULT
# a PIN prompt ends what was printed: "Enter new PIN for /dev/hidraw0: ", "Enter PIN for authenticator: "
PIN_PROMPT = re.compile(rb"(?:PIN|pin)[^\n]*: ?\Z")


def run_tty(argv: list[str], pins: list[str], timeout: float = 90,
            cwd: str | None = None) -> tuple[int, str, int]:
    """Runs argv on a new pseudo-terminal as its controlling terminal, answering each
    PIN prompt with the next of `pins`. Returns (exit status, transcript, how many
    PINs it did not ask for). A prompt with no PIN left, or the time limit, kills
    the process and raises."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a new session whose controlling terminal is the pty
        try:
            if cwd:
                os.chdir(cwd)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    transcript = b""
    answered_upto = 0  # the transcript up to here holds no unanswered prompt
    pending = list(pins)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{argv[0]} still running after {timeout} s: {transcript[-400:]!r}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk:
                break
            transcript += chunk
            # a prompt is the end of what was printed: "...PIN...: ", no newline after it
            if PIN_PROMPT.search(transcript, answered_upto):
                if not pending:
                    raise AssertionError(f"{argv[0]} asked for another PIN: {transcript[-300:]!r}")
                os.write(fd, pending.pop(0).encode() + b"\n")
                answered_upto = len(transcript)
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    text = transcript.decode(errors="replace").replace("\r\n", "\n")
    log(f"$ {' '.join(argv)}  (PINs given: {len(pins) - len(pending)})")
    for line in text.splitlines():
        log("   ", line)
    return os.waitstatus_to_exitcode(status), text, len(pending)


def run_ok(argv: list[str], pins: list[str], **kw) -> str:
    """run_tty, which must exit 0 having asked for every PIN given."""
    code, text, unasked = run_tty(argv, pins, **kw)
    assert code == 0, f"{' '.join(argv)} exited {code}: {text[-300:]!r}"
    assert unasked == 0, f"{argv[0]} did not ask for {unasked} of the PINs; it said: {text[-300:]!r}"
    return text


class Key:
    """python-fido2 on the hidraw node, opened per use: the tools open it meanwhile."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self) -> Ctap2:
        for dev in CtapHidDevice.list_devices():
            if dev.descriptor.path == self.path:
                self.dev = dev
            else:
                dev.close()
        assert getattr(self, "dev", None) is not None, f"python-fido2 does not list {self.path}"
        return Ctap2(self.dev)

    def __exit__(self, *exc) -> None:
        self.dev.close()
        self.dev = None


def parse_token_info(text: str) -> dict[str, str]:
    """fido2-token -I: `name: value` lines."""
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep:
            fields[name.strip()] = value.strip()
    return fields


def listed(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def compare_info(text: str, info) -> str:
    """fido2-token -I against getInfo: versions, extensions, options, PIN protocols."""
    fields = parse_token_info(text)
    assert set(listed(fields.get("version strings", ""))) == set(info.versions), \
        f"versions: fido2-token {fields.get('version strings')!r}, getInfo {info.versions}"
    assert set(listed(fields.get("extension strings", ""))) == set(info.extensions or []), \
        f"extensions: fido2-token {fields.get('extension strings')!r}, getInfo {info.extensions}"
    # options: "name" when true, "noname" when false
    shown = {}
    for option in listed(fields.get("options", "")):
        if option in info.options:
            shown[option] = True
        elif option.startswith("no") and option[2:] in info.options:
            shown[option[2:]] = False
        else:
            raise AssertionError(f"fido2-token shows option {option!r}, which getInfo does not have: {info.options}")
    assert shown == dict(info.options), f"options: fido2-token {shown}, getInfo {dict(info.options)}"
    protocols = [int(p) for p in listed(fields.get("pin protocols", ""))]
    assert protocols == list(info.pin_uv_protocols), \
        f"pin protocols: fido2-token {protocols}, getInfo {info.pin_uv_protocols}"
    return f"{len(shown)} options, versions {', '.join(info.versions)}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def stored(dev: str, rp_id: str | None = None):
    """What python-fido2's CredentialManagement enumerates: the relying parties, or
    with `rp_id` that relying party's credentials."""
    with Key(dev) as ctap:
        client_pin = ClientPin(ctap, PinProtocolV2())
        credman = CredentialManagement(ctap, client_pin.protocol, client_pin.get_pin_token(NEW_PIN, P.CREDENTIAL_MGMT))
        if rp_id is None:
            return credman.enumerate_rps()
        return credman.enumerate_creds(sha256(rp_id.encode()))


def listed_lines(text: str) -> list[list[str]]:
    """The numbered lines of fido2-token -L, split into fields."""
    return [line.split() for line in text.splitlines() if re.match(r"^\d+: ", line)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", required=True)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    dev = a.device
    p = f"{a.label}: " if a.label else ""
    work = Path(tempfile.mkdtemp(prefix="ctap21."))
    state: dict = {}

    name_info = f"{p}fido2-token -I shows the versions, extensions, options and PIN protocols of getInfo"

    @check(name_info)
    def _():
        with Key(dev) as ctap:
            info = ctap.get_info()
        assert info.options.get("clientPin") is False, "the key starts without a PIN"
        state["info"] = info
        return compare_info(run_ok(["fido2-token", "-I", dev], []), info)

    name_set = f"{p}fido2-token -S sets the PIN (typed at its prompt); getInfo says clientPin"

    @check(name_set)
    def _():
        run_ok(["fido2-token", "-S", dev], [PIN, PIN])
        with Key(dev) as ctap:
            info = ctap.get_info()
            assert info.options.get("clientPin") is True, f"clientPin {info.options.get('clientPin')}"
            retries = ClientPin(ctap, PinProtocolV2()).get_pin_retries()
        assert retries[0] == 8, f"retries {retries}"
        text = run_ok(["fido2-token", "-I", dev], [])
        compare_info(text, info)
        fields = parse_token_info(text)
        assert fields.get("pin retries") == "8", f"fido2-token -I: pin retries {fields.get('pin retries')!r}"
        return "fido2-token -I agrees again: clientPin, 8 retries"

    name_change = f"{p}fido2-token -C changes the PIN; the old one fails, the new one gives a token"

    @check(name_change, name_set)
    def _():
        run_ok(["fido2-token", "-C", dev], [PIN, NEW_PIN, NEW_PIN])
        with Key(dev) as ctap:
            client_pin = ClientPin(ctap, PinProtocolV2())
            try:
                client_pin.get_pin_token(PIN, P.GET_ASSERTION, RP_ID)
                raise AssertionError("the old PIN still gives a token")
            except CtapError as e:
                assert e.code == CtapError.ERR.PIN_INVALID, f"old PIN: {e.code!r}"
            client_pin.get_pin_token(NEW_PIN, P.GET_ASSERTION, RP_ID)
            assert client_pin.get_pin_retries()[0] == 8

    name_ssh_plain = f"{p}ssh-keygen -t ed25519-sk (not resident) makes a key; -Y sign / -Y verify with it"

    @check(name_ssh_plain, name_change)
    def _():
        key = work / "id_plain"
        run_ok(["ssh-keygen", "-q", "-t", "ed25519-sk", "-N", "", "-C", "plain", "-f", str(key)], [], timeout=120)
        data = work / "signed.txt"
        data.write_text("latchkey kernel test\n")
        run_ok(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", "file", str(data)], [], timeout=120)
        pub = (work / "id_plain.pub").read_text().split()
        (work / "allowed_signers").write_text(f"kernel@latchkey {pub[0]} {pub[1]}\n")
        with open(data, "rb") as message:
            verified = subprocess.run(
                ["ssh-keygen", "-Y", "verify", "-f", str(work / "allowed_signers"), "-I", "kernel@latchkey",
                 "-n", "file", "-s", str(data) + ".sig"], stdin=message, capture_output=True, text=True, timeout=60)
        log("ssh-keygen -Y verify:", verified.stdout.strip(), verified.stderr.strip())
        assert verified.returncode == 0, f"ssh-keygen -Y verify exited {verified.returncode}: {verified.stderr}"
        return verified.stdout.strip()

    name_ssh = f"{p}ssh-keygen -t ed25519-sk -O resident -N '' makes a resident key with the PIN"

    @check(name_ssh, name_change)
    def _():
        # OpenSSH (sk-usbhid.c) refuses to make a resident key on a key without the
        # credProtect extension ("requested feature not supported"): say so if that is why
        with Key(dev) as ctap:
            extensions = ctap.get_info().extensions or []
        try:
            run_ok(["ssh-keygen", "-q", "-t", "ed25519-sk", "-O", "resident", "-O", "user=latchkey", "-N", "",
                    "-C", "latchkey-kernel", "-f", str(work / "id_sk")], [NEW_PIN], timeout=120)
        except AssertionError as e:
            if "credProtect" not in extensions:
                raise AssertionError(f"{e} (getInfo lacks the credProtect extension, without which "
                                     "OpenSSH makes no resident key)") from e
            raise
        pub = (work / "id_sk.pub").read_text().split()
        assert pub[0] == "sk-ssh-ed25519@openssh.com", pub
        state["ssh_pub"] = pub[:2]
        return f"{pub[0]} {pub[1][:24]}..."

    name_seed = (f"{p}python-fido2 makes resident credentials with PIN tokens: ES256 for {RP_ID}, "
                 f"EdDSA for {SSH_APPLICATION} (as ssh-keygen would)")

    @check(name_seed, name_change)
    def _():
        with Key(dev) as ctap:
            client_pin = ClientPin(ctap, PinProtocolV2())
            made = {}
            for rp_id, alg, user_id in ((RP_ID, -7, os.urandom(16)), (SSH_APPLICATION, -8, bytes(32))):
                token = client_pin.get_pin_token(NEW_PIN, P.MAKE_CREDENTIAL, rp_id)
                cdh = os.urandom(32)
                made[rp_id] = ctap.make_credential(
                    cdh, {"id": rp_id, "name": rp_id}, {"id": user_id, "name": "kernel-user", "displayName": "K"},
                    [{"type": "public-key", "alg": alg}], options={"rk": True},
                    pin_uv_param=client_pin.protocol.authenticate(token, cdh), pin_uv_protocol=2).auth_data
                assert made[rp_id].is_user_verified()
                made[rp_id] = (made[rp_id].credential_data, user_id)
        (state["cred"], state["user_id"]), (ssh_cred, _) = made[RP_ID], made[SSH_APPLICATION]
        state["cred_id"] = state["cred"].credential_id
        # the OpenSSH public key of an sk-ssh-ed25519 credential: its Ed25519 point and application
        blob = b"".join(struct.pack(">I", len(part)) + part for part in
                        (b"sk-ssh-ed25519@openssh.com", ssh_cred.public_key[-2], SSH_APPLICATION.encode()))
        state["py_ssh_pub"] = ["sk-ssh-ed25519@openssh.com", b64(blob)]

    # The key may hold credentials of earlier checks (the suite runs fido2-cred -r
    # and python-fido2 on it first): compare with what it enumerates, and look for ours.
    name_rps = f"{p}fido2-token -L -r lists the relying parties credentialManagement enumerates"

    @check(name_rps, name_seed)
    def _():
        text = run_ok(["fido2-token", "-L", "-r", dev], [NEW_PIN])
        expected = {r[RM.RP]["id"]: b64(r[RM.RP_ID_HASH]) for r in stored(dev)}
        assert {RP_ID, SSH_APPLICATION} <= set(expected), f"credentialManagement enumerates {expected}"
        shown = {fields[2]: fields[1] for fields in listed_lines(text) if len(fields) >= 3}
        assert shown == expected, f"fido2-token -L -r shows {shown}, credentialManagement {expected}"
        return ", ".join(sorted(shown))

    name_creds = f"{p}fido2-token -L -k {RP_ID} lists its credentials (ids, user ids) as enumerated"

    @check(name_creds, name_seed)
    def _():
        lines = listed_lines(run_ok(["fido2-token", "-L", "-k", RP_ID, dev], [NEW_PIN]))
        expected = {b64(c[RM.CREDENTIAL_ID]["id"]): b64(c[RM.USER]["id"]) for c in stored(dev, RP_ID)}
        assert b64(state["cred_id"]) in expected, f"credentialManagement lacks ours: {expected}"
        shown = {}
        for fields in lines:  # "NN: <credential id> <user name> <user id> <type> <protection>"
            ids = [f for f in fields if f in expected]
            assert len(ids) == 1 and expected[ids[0]] in fields, f"{fields}: not one of {expected}"
            shown[ids[0]] = expected[ids[0]]
        assert shown == expected, f"fido2-token -L -k shows {shown}, credentialManagement {expected}"
        return f"{len(shown)} credential(s), ours among them"

    name_ssh_listed = f"{p}fido2-token -L -k {SSH_APPLICATION} lists the EdDSA credentials of ssh"

    @check(name_ssh_listed, name_seed)
    def _():
        ssh_lines = [line for line in run_ok(["fido2-token", "-L", "-k", SSH_APPLICATION, dev], [NEW_PIN])
                     .splitlines() if re.match(r"^\d+: ", line)]
        want = 2 if RESULTS.get(name_ssh) else 1  # python-fido2's, and ssh-keygen's if it made one
        assert len(ssh_lines) == want and all("eddsa" in line for line in ssh_lines), \
            f"{want} eddsa credential(s) expected under {SSH_APPLICATION}: {ssh_lines}"
        return f"{len(ssh_lines)} credential(s)"

    name_recover = f"{p}ssh-keygen -K recovers the resident ssh: keys with the PIN: the same public keys"

    @check(name_recover, name_seed)
    def _():
        out = work / "recovered"
        out.mkdir()
        run_ok(["ssh-keygen", "-K", "-N", ""], [NEW_PIN], timeout=120, cwd=str(out))
        recovered = sorted(f.read_text().split()[:2] for f in out.glob("id_*_sk_rk*.pub"))
        want = sorted([state["py_ssh_pub"]] + ([state["ssh_pub"]] if RESULTS.get(name_ssh) else []))
        assert recovered == want, f"recovered {recovered} ({[f.name for f in out.iterdir()]}), expected {want}"
        return f"{len(recovered)} key(s)" + ("" if RESULTS.get(name_ssh) else "; ssh-keygen -O resident made none")

    name_hmac_cred = (f"{p}fido2-cred -M -h -c 3 makes an hmac-secret credential with credProtect 3; "
                      "fido2-cred -V -h -c 3 verifies both were signed")

    @check(name_hmac_cred, name_change)
    def _():
        param, cred = work / "hmac.param", work / "hmac.cred"
        param.write_text(f"{b64(os.urandom(32))}\n{HMAC_RP_ID}\nhmac-user\n{b64(os.urandom(16))}\n")
        # A non-resident credential needs no PIN (makeCredUvNotRqd); give one in case libfido2 asks.
        code, text, _ = run_tty(["fido2-cred", "-M", "-h", "-c", "3", "-i", str(param), "-o", str(cred), dev,
                                 "es256"], [NEW_PIN])
        assert code == 0, f"fido2-cred -M exited {code}: {text[-300:]!r}"
        verified = subprocess.run(["fido2-cred", "-V", "-h", "-c", "3", "-i", str(cred), "es256"],
                                  capture_output=True, text=True, timeout=60)
        log("fido2-cred -V -h -c 3:", verified.stdout.strip(), verified.stderr.strip())
        assert verified.returncode == 0, f"fido2-cred -V -h -c 3 exited {verified.returncode}: {verified.stderr}"
        lines = verified.stdout.splitlines()
        state["hmac_cred_id"] = base64.b64decode(lines[0])
        (work / "hmac.pem").write_text("\n".join(lines[1:]) + "\n")
        return f"credential id of {len(state['hmac_cred_id'])} bytes"

    def fido2_assert_hmac(salt: bytes, uv: bool) -> tuple[int, list[str], str]:
        (work / "hmac.assert.param").write_text(
            f"{b64(os.urandom(32))}\n{HMAC_RP_ID}\n{b64(state['hmac_cred_id'])}\n{b64(salt)}\n")
        argv = ["fido2-assert", "-G", "-h", "-p"] + (["-v"] if uv else []) + [
            "-i", str(work / "hmac.assert.param"), "-o", str(work / "hmac.assert"), dev]
        code, text, _ = run_tty(argv, [NEW_PIN] if uv else [])
        lines = (work / "hmac.assert").read_text().splitlines() if code == 0 else []
        return code, lines, text

    name_hmac_assert = (f"{p}fido2-assert -G -h -v returns the same 32-byte hmac-secret for the same salt, "
                        "another for another salt; fido2-assert -V -h -v verifies the assertion")

    @check(name_hmac_assert, name_hmac_cred)
    def _():
        salt, other = os.urandom(32), os.urandom(32)
        outputs = []
        for s in (salt, salt, other):
            code, lines, text = fido2_assert_hmac(s, uv=True)
            assert code == 0, f"fido2-assert -G -h -v exited {code}: {text[-300:]!r}"
            assert len(lines) == 5, f"expected cdh, rp, authdata, sig, hmac: {lines}"
            outputs.append(base64.b64decode(lines[4]))
        assert len(outputs[0]) == 32, f"hmac-secret of {len(outputs[0])} bytes"
        assert outputs[0] == outputs[1], "the same salt gave two outputs"
        assert outputs[2] != outputs[0], "another salt gave the same output"
        verified = subprocess.run(["fido2-assert", "-V", "-h", "-v", "-p", "-i", str(work / "hmac.assert"),
                                   str(work / "hmac.pem"), "es256"], capture_output=True, text=True, timeout=60)
        assert verified.returncode == 0, f"fido2-assert -V -h -v exited {verified.returncode}: {verified.stderr}"
        state["hmac_salt"], state["hmac_uv_output"] = salt, outputs[0]

    name_hmac_python = (f"{p}python-fido2's hmac-secret with a PIN token (UV) gives what fido2-assert gave "
                        "for the same credential and salt")

    @check(name_hmac_python, name_hmac_assert)
    def _():
        with Key(dev) as ctap:
            client_pin = ClientPin(ctap, PinProtocolV2())
            key_agreement, shared_secret = client_pin._get_shared_secret()
            salt_enc = client_pin.protocol.encrypt(shared_secret, state["hmac_salt"])
            token = client_pin.get_pin_token(NEW_PIN, P.GET_ASSERTION, HMAC_RP_ID)
            cdh = os.urandom(32)
            assertion = ctap.get_assertion(
                HMAC_RP_ID, cdh, [{"type": "public-key", "id": state["hmac_cred_id"]}],
                extensions={"hmac-secret": {1: key_agreement, 2: salt_enc,
                                            3: client_pin.protocol.authenticate(shared_secret, salt_enc), 4: 2}},
                pin_uv_param=client_pin.protocol.authenticate(token, cdh), pin_uv_protocol=2)
        assert assertion.auth_data.is_user_verified()
        output = client_pin.protocol.decrypt(shared_secret, assertion.auth_data.extensions["hmac-secret"])
        assert output == state["hmac_uv_output"], "python-fido2 and libfido2 disagree on hmac-secret"

    name_hmac_protected = f"{p}without UV fido2-assert -G -h cannot use the credProtect-3 credential"

    @check(name_hmac_protected, name_hmac_cred)
    def _():
        code, _, text = fido2_assert_hmac(os.urandom(32), uv=False)
        assert code != 0, "an assertion without user verification used a credProtect 3 credential"
        return f"fido2-assert exited {code}"

    name_delete = f"{p}fido2-token -D -i deletes the credential; credentialManagement no longer has it"

    @check(name_delete, name_creds)
    def _():
        before = {c[RM.CREDENTIAL_ID]["id"] for c in stored(dev, RP_ID)}
        run_ok(["fido2-token", "-D", "-i", b64(state["cred_id"]), dev], [NEW_PIN])
        after = {c[RM.CREDENTIAL_ID]["id"] for c in stored(dev, RP_ID)}
        assert after == before - {state["cred_id"]}, f"{len(before)} credentials before, {len(after)} after"
        code, text, _ = run_tty(["fido2-token", "-L", "-k", RP_ID, dev], [NEW_PIN])
        assert b64(state["cred_id"]) not in text, "fido2-token -L -k still lists it"
        assert len(listed_lines(text)) == len(after), f"fido2-token -L -k lists {listed_lines(text)}"
        return f"{len(after)} credential(s) of {RP_ID} left"

    print(f"DONE\t{len(RESULTS)} checks", flush=True)
    return 0 if all(RESULTS.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
