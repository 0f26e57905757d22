#!/usr/bin/env python3
"""Summarises REPS validations of each rank count (OUT/validation-<rep>-<ranks>.json, written by
`vitsim validate --format json`): per point the predicted step time, each run's measured one, the
run-to-run spread, the error of the mean and of each run; the step-time MAPE; the breakdown; and, where
OUT/interval.json is (`vitsim predict --interval --format json`), each point's p10-p90 step interval and
how many runs fall inside it, against the interval's stated rate.
usage: validation_table.py OUT REPS RANKS(comma list)"""
import json, os, sys, statistics as st
out, reps, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
rows = {}
for r in range(1, reps + 1):
    for n in ranks:
        v = json.load(open(f"{out}/validation-{r}-{n}.json"))
        for p in v["points"]:
            key = (int(p["params"]["gpus"]), int(p["params"]["micro_batch"]))
            m = {e["metric"]: e for e in p["metrics"]}
            row = rows.setdefault(key, {"pred": m["step_time"]["predicted"], "meas": [], "parts": []})
            row["meas"].append(m["step_time"]["measured"])
            row["parts"].append({k: (m[k]["predicted"], m[k]["measured"]) for k in ("data", "compute_fwd", "compute_bwd", "optimizer", "comm_exposed")})
print("| ranks | micro-batch | predicted step (ms) | measured step, each run (ms) | run-to-run (max-min)/mean | error of the mean | errors of the runs |")
print("| --- | --- | --- | --- | --- | --- | --- |")
errs_mean, errs_all, noise = [], [], []
for (n, mb), row in sorted(rows.items()):
    mean = st.mean(row["meas"])
    e = row["pred"] / mean - 1
    runs = [row["pred"] / x - 1 for x in row["meas"]]
    spread = (max(row["meas"]) - min(row["meas"])) / mean
    errs_mean.append(abs(e)); errs_all += [abs(x) for x in runs]; noise.append(spread)
    print(f"| {n} | {mb} | {1e3*row['pred']:.1f} | {', '.join(f'{1e3*x:.1f}' for x in row['meas'])} | {100*spread:.1f}% | {100*e:+.1f}% | {', '.join(f'{100*x:+.1f}%' for x in runs)} |")
print(f"\nstep-time MAPE: {100*st.mean(errs_mean):.1f}% (prediction vs the mean of the runs), {100*st.mean(errs_all):.1f}% (vs each run); run-to-run spread: median {100*st.median(noise):.1f}%, max {100*max(noise):.1f}%")
print("\nbreakdown, mean of the runs (predicted / measured, ms):")
for (n, mb), row in sorted(rows.items()):
    parts = {k: (row["parts"][0][k][0], st.mean(p[k][1] for p in row["parts"])) for k in row["parts"][0]}
    print(f"  ranks {n} mb {mb}: " + ", ".join(f"{k} {1e3*a:.1f}/{1e3*b:.1f}" for k, (a, b) in parts.items()))

interval = f"{out}/interval.json"
if os.path.exists(interval):
    pts = json.load(open(interval))["points"]
    by_key = {(int(p["gpus"]), int(p["micro_batch"])): p for p in pts}
    inside = total = 0
    print("\nthe prediction's interval (predict --interval: the calibration's spans, and earlier runs with --runs) against each run:")
    for (n, mb), row in sorted(rows.items()):
        p = by_key.get((n, mb))
        if not p or "interval" not in p:
            continue
        iv = p["interval"]
        lo, hi = iv["step_low_s"], iv["step_high_s"]
        ins = [lo <= x <= hi for x in row["meas"]]
        inside += sum(ins); total += len(ins)
        print(f"  ranks {n} mb {mb}: p{100*iv['p_low']:.0f}-p{100*iv['p_high']:.0f} {1e3*lo:.2f} .. {1e3*hi:.2f} ms "
              f"({iv['figures']} figures); runs inside: {sum(ins)} of {len(ins)}")
        rate = iv["p_high"] - iv["p_low"]
    runs = next((p["interval"]["runs"] for p in pts if "interval" in p and "runs" in p["interval"]), None)
    if runs:
        print(f"  (with {runs['count']} earlier runs, predict --runs: x{runs['ratio_low']:.3f} .. x{runs['ratio_high']:.3f} of the "
              f"central value, the ratios at ranks {runs['k_low']} and {runs['k_high']}: a new run between at least "
              f"{100*runs['level']:.0f}% of the time)")
    if total:
        print(f"runs inside their point's interval: {inside} of {total} ({100*inside/total:.0f}%; the interval's stated rate {100*rate:.0f}%)")
