#!/usr/bin/env python3
"""How often the calibrated interval holds the runs already measured, recomputed for a given binary over
stored folders of bench/validate_local.sh (each OUT/run-K: calib.json, calibrated.xml and its validations
validation-<rep>-<ranks>.json). For each folder it runs

  VITSIM predict SCENARIO --calibration DIR/calib.json --set cluster.platform=DIR/calibrated.xml \
      --interval -q --format json [EXTRA...]

(the interval the bench states before its runs, from the calibration's spans alone, no --runs) and holds every
measured step of the folder's validations against its point's p10-p90. Prints per point of each folder the
central value, the interval and each run as a ratio to the central value (-v), then per rank count: the runs
inside, below the p10, above the p90, and the interval's median width (p90 - p10 over the central value), and
the same over all rank counts. The runs do not depend on the binary: only the interval does, so two binaries
(or a change to how calibrate's spans are read) are judged on the same runs.

usage: interval_coverage.py [-v] [--scenario S.xml] VITSIM DIR... [-- EXTRA predict flags]
e.g.:  bench/interval_coverage.py build-sim/app/vitsim /work/val-s5/run-{1..10}"""
import json, os, subprocess, statistics as st, sys, tempfile

args = sys.argv[1:]
extra = []
if "--" in args:
    extra = args[args.index("--") + 1:]
    args = args[:args.index("--")]
verbose = "-v" in args
args = [a for a in args if a != "-v"]
scenario = "scenarios/local/validate-homog.xml"
if "--scenario" in args:
    i = args.index("--scenario")
    scenario = args[i + 1]
    del args[i:i + 2]
if len(args) < 2:
    sys.exit(__doc__)
vitsim, dirs = args[0], args[1:]


def measured_runs(d):
    """(ranks, micro-batch) -> the measured step times of the folder's validations."""
    runs = {}
    for name in sorted(os.listdir(d)):
        if not (name.startswith("validation-") and name.endswith(".json")):
            continue
        for p in json.load(open(os.path.join(d, name)))["points"]:
            key = (int(p["params"]["gpus"]), int(p["params"]["micro_batch"]))
            step = next(m for m in p["metrics"] if m["metric"] == "step_time")
            runs.setdefault(key, []).append(step["measured"])
    return runs


def intervals(d):
    """(ranks, micro-batch) -> (central step, p10, p90) as VITSIM predicts them on the folder's calibration."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "interval.json")
        subprocess.run([vitsim, "predict", scenario, "--calibration", f"{d}/calib.json", "--set",
                        f"cluster.platform={d}/calibrated.xml", "--interval", "-q", "--format", "json", "--out",
                        out] + extra, check=True)
        pts = json.load(open(out))["points"]
    return {(int(p["gpus"]), int(p["micro_batch"])):
            (p["step_time_s"]["mean"], p["interval"]["step_low_s"], p["interval"]["step_high_s"]) for p in pts}


tally = {}  # ranks -> {"inside", "below", "above", "widths"}
for d in dirs:
    runs, iv = measured_runs(d), intervals(d)
    for (n, mb), meas in sorted(runs.items()):
        centre, lo, hi = iv[(n, mb)]
        t = tally.setdefault(n, {"inside": 0, "below": 0, "above": 0, "widths": [], "ratios": []})
        t["widths"].append((hi - lo) / centre)
        for x in meas:
            t["inside" if lo <= x <= hi else "below" if x < lo else "above"] += 1
            t["ratios"].append(x / centre)
        if verbose:
            print(f"{os.path.basename(d.rstrip('/'))} ranks {n} mb {mb}: centre {1e3 * centre:.2f} ms, "
                  f"p10-p90 x{lo / centre:.3f}..x{hi / centre:.3f}, runs " +
                  ", ".join(f"x{x / centre:.3f}" for x in meas))


def line(label, ts):
    inside, below, above = (sum(t[k] for t in ts) for k in ("inside", "below", "above"))
    total = inside + below + above
    widths = [w for t in ts for w in t["widths"]]
    ratios = [r for t in ts for r in t["ratios"]]
    print(f"| {label} | {inside} of {total} ({100 * inside / total:.0f}%) | {below} | {above} | "
          f"{100 * st.median(widths):.1f}% | x{st.median(ratios):.3f} |")


print(f"\n{vitsim} {' '.join(extra)} over {len(dirs)} folder(s); the stated rate 80% (p10-p90)\n")
print("| ranks | runs inside | below p10 | above p90 | median width (p90-p10)/centre | median run/centre |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for n in sorted(tally):
    line(str(n), [tally[n]])
line("all", list(tally.values()))
