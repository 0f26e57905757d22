#!/usr/bin/env python3
"""Compare a public all_reduce_perf table with vitsim's predicted one (bench/nccl_tests_public.sh).

Usage: nccl_tests_compare.py CASE MEASURED.txt PREDICTED.json [COMMANDS]

MEASURED.txt: bench/data/nccl_tests/*.txt: '#' comments, then rows 'size time_us busbw' (time '-' where the
source publishes busbw only: then time = size x 2(n-1)/n / busbw, nccl-tests' all_reduce busbw rule read
backwards). PREDICTED.json: `vitsim collective --format json` over the same sizes.

Prints a Markdown table per size (measured and predicted time and busbw, the error of the time, what NCCL's
tuner chose in the model and the error of NCCL's own estimate) and a summary: the median and largest absolute
error over the latency-bound sizes (< 1 MiB), the middle ones and the bandwidth-bound ones (>= 64 MiB).
"""

import json
import re
import statistics
import sys

MIB = 1 << 20
UNIT = {"us": 1.0, "ms": 1e3, "s": 1e6}
# One note per size: "<size> all-reduce on <n> ranks: NCCL <v> <Algo>/<Proto>, <c> channel(s)[, simulated as
# ...]; NCCL's estimate <t> <unit> (latency <t> <unit>), simulated <t> <unit>" (sim/collective_cmd notes).
NOTE = re.compile(
    r"all-reduce on \d+ ranks: NCCL [\d.]+ (?P<algo>\w+)/(?P<proto>\w+), (?P<ch>\d+) channels?"
    r"(?:, simulated as (?P<sim>[^;]+))?; NCCL's estimate (?P<est>[\d.]+) (?P<eu>us|ms|s) "
    r"\(latency (?P<lat>[\d.]+) (?P<lu>us|ms|s)\)"
)


def read_measured(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            size, time, busbw = line.split()
            rows.append((int(size), None if time == "-" else float(time), float(busbw)))
    return rows


def size_label(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def err(pred, meas):
    return (pred / meas - 1.0) * 100.0


def summary(label, errors):
    if not errors:
        return f"| {label} | - | - | 0 |"
    a = [abs(e) for e in errors]
    return f"| {label} | {statistics.median(a):.1f}% | {max(a):.1f}% | {len(a)} |"


def main():
    case, measured_path, predicted_path = sys.argv[1:4]
    commands = sys.argv[4] if len(sys.argv) > 4 else None
    measured = read_measured(measured_path)
    with open(predicted_path, encoding="utf-8") as f:
        pred = json.load(f)
    n = pred["config"]["ranks"]
    factor = 2.0 * (n - 1) / n
    notes = [m for m in (NOTE.search(x) for x in pred["notes"]) if m]
    if any("collective 'auto'" in x for x in pred["notes"]) and len(notes) != len(pred["results"]):
        sys.exit(f"{case}: {len(notes)} notes of NCCL's choice for {len(pred['results'])} sizes in {predicted_path}"
                 " (has the notes' format changed? see NOTE above)")
    by_size = {}
    for i, r in enumerate(pred["results"]):
        by_size[r["size"]] = (r["out_of_place"], notes[i] if notes else None)

    print(f"#### {case}: {n} ranks\n")
    if commands:
        print(f"{commands}\n")
    print("| size | measured (us) | predicted (us) | error | busbw meas. | busbw pred. | NCCL's choice (model) "
          "| NCCL's estimate (us) | its error |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    regimes = {"small": ([], []), "middle": ([], []), "large": ([], [])}
    far = []
    for size, time, busbw in measured:
        if size not in by_size:
            sys.exit(f"{case}: size {size} not in the prediction {predicted_path}")
        if time is None:
            if busbw <= 0:
                continue  # nothing to derive a time from
            time = size * factor / (busbw * 1e9) * 1e6
        p, note = by_size[size]
        e = err(p["time"], time)
        choice, est, e_est = "-", "-", None
        if note:
            choice = f"{note['algo']}/{note['proto']}, {note['ch']} ch"
            est_us = float(note["est"]) * UNIT[note["eu"]]
            est, e_est = f"{est_us:.1f}", err(est_us, time)
        regime = "small" if size < MIB else ("large" if size >= 64 * MIB else "middle")
        regimes[regime][0].append(e)
        if e_est is not None:
            regimes[regime][1].append(e_est)
        ratio = p["time"] / time
        if ratio > 2.0 or ratio < 0.5:
            far.append((size, ratio, choice))
        print(f"| {size_label(size)} | {time:.2f} | {p['time']:.2f} | {e:+.1f}% | {busbw:.2f} | {p['bus_bw']:.2f} "
              f"| {choice} | {est} | {'-' if e_est is None else f'{e_est:+.1f}%'} |")
    print("\n| sizes | median abs. error (vitsim) | max | rows |")
    print("| --- | ---: | ---: | ---: |")
    names = (("small", "< 1 MiB (latency-bound)"), ("middle", "1 MiB to < 64 MiB"), ("large", ">= 64 MiB (bandwidth)"))
    for key, label in names:
        print(summary(label, regimes[key][0]))
    print(summary("all", [e for k in regimes for e in regimes[k][0]]))
    print("\n| sizes | median abs. error (NCCL's own estimate) | max | rows |")
    print("| --- | ---: | ---: | ---: |")
    for key, label in names:
        print(summary(label, regimes[key][1]))
    if far:
        print("\nPredicted more than 2x off: " + "; ".join(f"{size_label(s)} ({r:.2f}x, {c})" for s, r, c in far))
    else:
        print("\nNo size predicted more than 2x off.")
    print()


if __name__ == "__main__":
    main()
