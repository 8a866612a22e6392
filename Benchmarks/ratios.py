#!/usr/bin/env python3
"""Prints one package-benchmark run of the Latchkey benchmarks as multiples of raw-sign.

    Benchmarks/ratios.py RUN.jmh.json [LATCHKEYD]

RUN.jmh.json is the run exported with `benchmark baseline read NAME --format jmh`, as
scripts/bench.sh does. On a shared machine absolute times drift from run to run; ratios
within one run hold much better, so every time is also printed divided by raw-sign's median
from the same run, and the USB/IP getAssertion is also given net of a CTAPHID_PING of as many
reports through the same daemon (the transport's share).
"""

import json
import sys

ORDER = [
    "raw-sign",
    "getAssertion-memory",
    "getAssertion-sqlite",
    "makeCredential-rk-sqlite",
    "getAssertion-usbip",
    "ping-usbip",
]
WALL_CLOCK = "Time (wall clock)"
MALLOCS = "Malloc (total)"
REPORTS = "USB reports"


def load(path):
    """{name: (iterations, median µs, p90 µs, median mallocs, USB reports or None)} from a JMH export."""
    rows = {}
    with open(path) as file:
        for element in json.load(file):
            # "package.benchmark.<target>.<name>", the name's spaces made underscores
            name = element["benchmark"].split(".", 3)[3]
            metrics = element["secondaryMetrics"]
            time = metrics[WALL_CLOCK]["scorePercentiles"]
            mallocs = metrics.get(MALLOCS, {}).get("scorePercentiles", {}).get("50.0")
            reports = metrics.get(REPORTS, {}).get("scorePercentiles", {}).get("50.0")
            rows[name] = (element["measurementIterations"], time["50.0"], time["90.0"], mallocs, reports)
    return rows


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    if "raw-sign" not in rows:
        sys.exit(f"ratios.py: no raw-sign in {sys.argv[1]}: nothing to divide by")
    baseline = rows["raw-sign"][1]
    names = [name for name in ORDER if name in rows] + sorted(n for n in set(rows) - set(ORDER) if not n.startswith("alg-"))

    print("latchkey benchmarks, one run (package-benchmark, release build)")
    if len(sys.argv) == 3:
        print(f"USB/IP through {sys.argv[2]} on 127.0.0.1")
    print(f"{'name':<26} {'iterations':>10} {'median µs':>10} {'p90 µs':>9} {'mallocs':>8} {'× raw-sign':>10}")
    for name in names:
        iterations, median, p90, mallocs, _ = rows[name]
        mallocs = "-" if mallocs is None else f"{mallocs:.0f}"
        print(f"{name:<26} {iterations:>10} {median:>10.1f} {p90:>9.1f} {mallocs:>8} {median / baseline:>10.2f}")

    algorithm_table(rows)

    if "getAssertion-usbip" in rows and "ping-usbip" in rows:
        usbip, ping = rows["getAssertion-usbip"][1], rows["ping-usbip"][1]
        net = usbip - ping
        line = f"getAssertion-usbip − ping-usbip: {net:.1f} µs = {net / baseline:.2f}× raw-sign"
        if "getAssertion-sqlite" in rows:
            line += f" (in process on the same SQLite store: {rows['getAssertion-sqlite'][1] / baseline:.2f}×)"
        print(line)
        print(
            f"  (64-byte reports per round trip, both ways: getAssertion {rows['getAssertion-usbip'][4]:.0f},"
            f" PING {rows['ping-usbip'][4]:.0f})"
        )
    else:
        print("getAssertion-usbip, ping-usbip: not run (no latchkeyd in $LATCHKEYD; scripts/bench.sh sets it)")


def algorithm_table(rows):
    """Per key type: the raw signature, then getAssertion and makeCredential in process, each
    as a multiple of that algorithm's own raw signature."""
    algorithms = []
    for name in rows:
        if name.startswith("alg-") and name.endswith("-raw-sign"):
            algorithms.append(name[len("alg-"):-len("-raw-sign")])
    if not algorithms:
        return
    order = ["ES256", "EdDSA", "ES384", "ES512", "ES256K", "RS256", "PS256", "ML-DSA-65", "ML-DSA-87"]
    algorithms.sort(key=lambda a: order.index(a) if a in order else len(order))
    print()
    print("per algorithm, in process (memory store); × is a multiple of that algorithm's raw signature")
    print(f"{'algorithm':<10} {'raw sign µs':>11} {'getAssertion µs':>15} {'×':>6} {'mallocs':>8}"
          f" {'makeCredential µs':>17} {'×':>8} {'mallocs':>8}")
    for algorithm in algorithms:
        raw = rows[f"alg-{algorithm}-raw-sign"][1]
        cells = [f"{algorithm:<10} {raw:>11.1f}"]
        for operation, width in (("getAssertion", 15), ("makeCredential", 17)):
            row = rows.get(f"alg-{algorithm}-{operation}")
            if row is None:
                cells.append(f"{'-':>{width}} {'-':>6} {'-':>8}")
                continue
            mallocs = "-" if row[3] is None else f"{row[3]:.0f}"
            cells.append(f"{row[1]:>{width}.1f} {row[1] / raw:>{6 if operation == 'getAssertion' else 8}.2f} {mallocs:>8}")
        print(" ".join(cells))


if __name__ == "__main__":
    main()
