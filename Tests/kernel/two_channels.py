#!/usr/bin/env python3
"""Two CTAPHID channels on one key must never get each other's data.

    python3 Tests/kernel/two_channels.py [/dev/hidrawN [/dev/hidrawM]] [--rounds N] [--pin PIN]

Two clients, each with its own CTAPHID channel (two open file descriptors, as two
processes or libfido2 and a browser have), interleave in a seeded random order:

* getAssertion / getNextAssertion sequences over discoverable credentials of two
  relying parties (client A asks for RP A's, client B for RP B's); every assertion is
  verified with the credential's public key against the asking client's clientDataHash,
  must name the asking client's RP and user, and each sequence must yield each of its
  credentials exactly once;
* credentialManagement enumerations (A: enumerateRPs, B: enumerateCredentials of RP B),
  each item checked against what that enumeration lists;
* a getNextAssertion / GetNext on a channel whose own sequence is over: it must be
  CTAP2_ERR_NOT_ALLOWED, never the other channel's next item.

With one path both clients open that hidraw node; with two (the same key over uhid and
over USB/IP through vhci-hcd), one client each: two transport connections whose channel
numbers may coincide. Without a path, the first FIDO device python-fido2 lists is used.

The key needs presence answered (latchkeyd --presence auto) and a PIN for credential
management: given with --pin, or, on a key without one, set to that value (default
"two-channels-1234"). The credentials made are deleted at the end; the PIN stays.
Exits 0 when nothing crossed over, 1 with every problem printed otherwise, 2 on a
usage or setup error.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import random
import select
import sys
import threading
import time

from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin
from fido2.hid import CtapHidDevice, list_descriptors
from fido2.hid.base import CtapHidConnection, HidDescriptor

REPORT_SIZE = 64
BROADCAST = b"\xff\xff\xff\xff"
INIT = 0x86
RP_A = "a.two-channels.latchkey.test"
RP_B = "b.two-channels.latchkey.test"
DEFAULT_PIN = "two-channels-1234"


class HidrawConnection(CtapHidConnection):
    """One open file descriptor on a hidraw node. A thread reads every input report as it
    comes: the kernel keeps only 64 unread reports per reader and drops newer ones, and a
    client that waits while the other one talks would otherwise lose its own answers."""

    def __init__(self, path: str, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        self.fd = os.open(path, os.O_RDWR)
        self.reports: queue.Queue[bytes | OSError] = queue.Queue()
        self.closing = threading.Event()
        self.reader = threading.Thread(target=self._read_all, name=f"hidraw reader {path}", daemon=True)
        self.reader.start()

    def _read_all(self) -> None:
        while not self.closing.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    self.reports.put(os.read(self.fd, REPORT_SIZE))
            except OSError as e:
                if not self.closing.is_set():
                    self.reports.put(e)
                return

    def write_packet(self, data: bytes) -> None:
        os.write(self.fd, b"\0" + bytes(data))  # report ID 0, then the 64-byte report

    def read_packet(self) -> bytes:
        try:
            report = self.reports.get(timeout=self.timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.path}: no input report in {self.timeout} s") from None
        if isinstance(report, OSError):
            raise report
        return report

    def close(self) -> None:
        if not self.closing.is_set():
            self.closing.set()
            self.reader.join(2)
            os.close(self.fd)


class OwnChannelOnly(CtapHidConnection):
    """Lets through only the reports of the channel this client writes on (and the answer
    to its own INIT), as libfido2 does: every reader of a hidraw node gets every report."""

    def __init__(self, inner: CtapHidConnection):
        self.inner = inner
        self.channel = BROADCAST
        self.nonce = b""
        self.dropped = 0

    def write_packet(self, data: bytes) -> None:
        data = bytes(data)
        if data[4] & 0x80:
            self.channel = data[:4]
            if data[:4] == BROADCAST and data[4] == INIT:
                self.nonce = data[7:15]
        self.inner.write_packet(data)

    def read_packet(self) -> bytes:
        while True:
            report = self.inner.read_packet()
            if report[:4] == self.channel and (report[:4] != BROADCAST or report[7:15] == self.nonce):
                return report
            self.dropped += 1

    def close(self) -> None:
        self.inner.close()


def open_hidraw(path: str) -> CtapHidDevice:
    descriptor = HidDescriptor(path, 0, 0, REPORT_SIZE, REPORT_SIZE, None, None)
    return CtapHidDevice(descriptor, OwnChannelOnly(HidrawConnection(path)))


class Problems(Exception):
    pass


class Client:
    """One channel: its CTAP2 session, its relying party and the credentials made there."""

    def __init__(self, name: str, device: CtapHidDevice, rp_id: str):
        self.name = name
        self.device = device
        self.ctap = Ctap2(device)
        self.rp_id = rp_id
        self.rp_id_hash = hashlib.sha256(rp_id.encode()).digest()
        self.credentials: dict[bytes, tuple[object, bytes]] = {}  # id -> (public key, user id)

    @property
    def channel(self) -> int:
        return self.device._channel_id

    def __str__(self) -> str:
        return f"client {self.name} (channel 0x{self.channel:08x})"


class TwoChannels:
    def __init__(self, a: Client, b: Client, pin: str, seed: int, log=print):
        self.a, self.b = a, b
        self.pin = pin
        self.random = random.Random(seed)
        self.log = log
        self.problems: list[str] = []
        self.assertions = 0
        self.enumerated = 0

    def fail(self, message: str) -> None:
        self.problems.append(message)
        if len(self.problems) >= 20:
            raise Problems()

    # -- setup -----------------------------------------------------------------------

    def token(self, client: Client, permissions, rp_id: str | None = None) -> tuple[ClientPin, bytes]:
        client_pin = ClientPin(client.ctap)
        return client_pin, client_pin.get_pin_token(self.pin, permissions, rp_id)

    def ensure_pin(self) -> None:
        if not self.a.ctap.get_info().options.get("clientPin"):
            ClientPin(self.a.ctap).set_pin(self.pin)
            self.log(f"the key had no PIN: set it to {self.pin!r} for credential management")

    def delete_credentials(self, client: Client) -> None:
        client_pin, token = self.token(client, ClientPin.PERMISSION.CREDENTIAL_MGMT)
        credman = CredentialManagement(client.ctap, client_pin.protocol, token)
        try:
            found = credman.enumerate_creds(client.rp_id_hash)
        except CtapError as e:
            if e.code != CtapError.ERR.NO_CREDENTIALS:
                raise
            found = []
        for credential in found:
            credman.delete_cred(credential[CredentialManagement.RESULT.CREDENTIAL_ID])

    def make_credentials(self, client: Client, count: int) -> None:
        for index in range(count):
            user_id = f"{client.name}-user-{index}".encode()
            client_data_hash = os.urandom(32)
            client_pin, token = self.token(client, ClientPin.PERMISSION.MAKE_CREDENTIAL, client.rp_id)
            response = client.ctap.make_credential(
                client_data_hash, {"id": client.rp_id, "name": client.rp_id},
                {"id": user_id, "name": f"{client.name}{index}", "displayName": f"User {client.name}{index}"},
                [{"type": "public-key", "alg": -7}], options={"rk": True},
                pin_uv_param=client_pin.protocol.authenticate(token, client_data_hash),
                pin_uv_protocol=client_pin.protocol.VERSION,
            )
            data = response.auth_data.credential_data
            client.credentials[data.credential_id] = (data.public_key, user_id)

    # -- getAssertion / getNextAssertion -------------------------------------------------

    def check_assertion(self, client: Client, response, client_data_hash: bytes, seen: set[bytes],
                        what: str) -> None:
        self.assertions += 1
        credential_id = response.credential["id"]
        if response.auth_data.rp_id_hash != client.rp_id_hash:
            self.fail(f"{client} {what}: an assertion for another RP (credential {credential_id.hex()[:16]}…)")
            return
        if credential_id not in client.credentials:
            self.fail(f"{client} {what}: credential {credential_id.hex()[:16]}… is not one of its RP's")
            return
        public_key, user_id = client.credentials[credential_id]
        try:
            response.verify(client_data_hash, public_key)
        except Exception:  # noqa: BLE001 - any verification failure is the finding
            self.fail(f"{client} {what}: the signature does not verify over its own clientDataHash "
                      "(signed for another client's request?)")
        if response.user is None or response.user.get("id") != user_id:
            self.fail(f"{client} {what}: user {response.user!r} is not the credential's")
        if credential_id in seen:
            self.fail(f"{client} {what}: credential {credential_id.hex()[:16]}… asserted twice in one sequence")
        seen.add(credential_id)

    def expect_not_allowed(self, client: Client, call, what: str) -> None:
        try:
            result = call()
        except CtapError as e:
            if e.code != CtapError.ERR.NOT_ALLOWED:
                self.fail(f"{client} {what} with no sequence of its own: {e.code.name}, not NOT_ALLOWED")
            return
        self.fail(f"{client} {what} with no sequence of its own answered data: {result!r:.200}")

    def assertion_round(self) -> None:
        sequences = {}
        for client in self.random.sample([self.a, self.b], 2):
            client_data_hash = os.urandom(32)
            response = client.ctap.get_assertion(client.rp_id, client_data_hash)
            seen: set[bytes] = set()
            self.check_assertion(client, response, client_data_hash, seen, "getAssertion")
            if response.number_of_credentials != len(client.credentials):
                self.fail(f"{client} getAssertion: numberOfCredentials {response.number_of_credentials}, "
                          f"its RP has {len(client.credentials)}")
            sequences[client.name] = (client, client_data_hash, seen, len(client.credentials) - 1)
        while sequences:
            name = self.random.choice(sorted(sequences))
            client, client_data_hash, seen, left = sequences[name]
            if left == 0:
                self.expect_not_allowed(client, client.ctap.get_next_assertion, "getNextAssertion")
                del sequences[name]
                continue
            try:
                response = client.ctap.get_next_assertion()
            except CtapError as e:
                self.fail(f"{client} getNextAssertion lost its own sequence ({e.code.name}) with {left} left")
                del sequences[name]
                continue
            self.check_assertion(client, response, client_data_hash, seen, "getNextAssertion")
            sequences[name] = (client, client_data_hash, seen, left - 1)
            if left == 1 and seen != set(client.credentials):
                self.fail(f"{client}: its sequence missed {len(set(client.credentials) - seen)} credentials")

    # -- credentialManagement enumerations ----------------------------------------------

    def enumeration_round(self, all_rps: set[str]) -> None:
        R = CredentialManagement.RESULT
        order = self.random.sample(["rps", "creds"], 2)
        steps = {}
        for kind in order:
            client = self.a if kind == "rps" else self.b
            client_pin, token = self.token(client, ClientPin.PERMISSION.CREDENTIAL_MGMT)
            credman = CredentialManagement(client.ctap, client_pin.protocol, token)
            if kind == "rps":
                first = credman.enumerate_rps_begin()
                total = first.get(R.TOTAL_RPS)
                expected = all_rps
            else:
                first = credman.enumerate_creds_begin(client.rp_id_hash)
                total = first.get(R.TOTAL_CREDENTIALS)
                expected = set(client.credentials)
            if total != len(expected):
                self.fail(f"{client} {kind} enumeration: total {total}, expected {len(expected)}")
            seen: set = set()
            self.check_item(client, kind, first, expected, seen)
            steps[kind] = (client, credman, expected, seen, len(expected) - 1)
        while steps:
            kind = self.random.choice(sorted(steps))
            client, credman, expected, seen, left = steps[kind]
            next_call = credman.enumerate_rps_next if kind == "rps" else credman.enumerate_creds_next
            if left == 0:
                self.expect_not_allowed(client, next_call, f"{kind} GetNext")
                del steps[kind]
                continue
            try:
                item = next_call()
            except CtapError as e:
                self.fail(f"{client} {kind} GetNext lost its own enumeration ({e.code.name}) with {left} left")
                del steps[kind]
                continue
            self.check_item(client, kind, item, expected, seen)
            steps[kind] = (client, credman, expected, seen, left - 1)

    def check_item(self, client: Client, kind: str, item: dict, expected: set, seen: set) -> None:
        R = CredentialManagement.RESULT
        self.enumerated += 1
        if kind == "rps":
            rp = item.get(R.RP)
            if rp is None or R.CREDENTIAL_ID in item:
                self.fail(f"{client} enumerateRPs answered something else: {sorted(item)}")
                return
            key = rp["id"]
        else:
            descriptor = item.get(R.CREDENTIAL_ID)
            if descriptor is None or R.RP in item:
                self.fail(f"{client} enumerateCredentials answered something else: {sorted(item)}")
                return
            key = descriptor["id"]
        if key not in expected:
            self.fail(f"{client} {kind} enumeration: {key!r:.60} is not in its enumeration")
        if key in seen:
            self.fail(f"{client} {kind} enumeration: {key!r:.60} twice")
        seen.add(key)

    # -- the whole check -----------------------------------------------------------------

    def run(self, rounds: int) -> list[str]:
        self.ensure_pin()
        for client in (self.a, self.b):
            self.delete_credentials(client)  # a previous run that was interrupted
        self.make_credentials(self.a, 3)
        self.make_credentials(self.b, 4)
        try:
            client_pin, token = self.token(self.a, ClientPin.PERMISSION.CREDENTIAL_MGMT)
            all_rps = {rp[CredentialManagement.RESULT.RP]["id"] for rp in
                       CredentialManagement(self.a.ctap, client_pin.protocol, token).enumerate_rps()}
            for _ in range(rounds):
                self.assertion_round()
                self.enumeration_round(all_rps)
        except Problems:
            pass
        finally:
            for client in (self.a, self.b):
                self.delete_credentials(client)
        return self.problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="hidraw node(s); two: one client on each")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--pin", default=DEFAULT_PIN)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args(argv)
    if len(args.paths) > 2:
        parser.error("one or two hidraw paths")
    try:
        if args.paths:
            paths = args.paths if len(args.paths) == 2 else args.paths * 2
            devices = [open_hidraw(path) for path in paths]
        else:
            descriptors = list(list_descriptors())
            if not descriptors:
                print("two_channels: no FIDO HID device found", file=sys.stderr)
                return 2
            devices = [open_hidraw(descriptors[0].path) for _ in range(2)]
    except OSError as e:
        print(f"two_channels: cannot open the device: {e}", file=sys.stderr)
        return 2
    a = Client("A", devices[0], RP_A)
    b = Client("B", devices[1], RP_B)
    print(f"two_channels: {a} on {devices[0].descriptor.path}, {b} on {devices[1].descriptor.path}, "
          f"{args.rounds} rounds, seed {args.seed}")
    check = TwoChannels(a, b, args.pin, args.seed)
    problems = check.run(args.rounds)
    print(f"two_channels: {check.assertions} assertions and {check.enumerated} enumerated items checked")
    if problems:
        print(f"two_channels: FAILED: {len(problems)} problem(s), cross-talk between channels:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print("two_channels: OK: no channel got another channel's data")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
