#!/usr/bin/env python3
"""Prints the cross-shape validation table of bench/validate_shapes.sh: per shape the predicted and measured
step time (mean over the measured steps, mean over repetitions), the compute part of each (fwd + bwd +
optimizer), the relative errors, and their mean and maximum.
usage: shapes_table.py OUT_DIR REPS NAME..."""
import json
import sys


def point(path):
    with open(path) as f:
        return json.load(f)["points"][0]


def compute(p):
    b = p["breakdown_s"]
    return b["compute_fwd"] + b["compute_bwd"] + b["optimizer"]


def main():
    out, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rows, errs, cerrs = [], [], []
    for n in names:
        pred = point(f"{out}/predicted-{n}.json")
        meas = [point(f"{out}/measured-{r}-{n}.json") for r in range(1, reps + 1)]
        m_step = sum(p["step_time_s"]["mean"] for p in meas) / reps
        m_comp = sum(compute(p) for p in meas) / reps
        spread = (max(p["step_time_s"]["mean"] for p in meas) - min(p["step_time_s"]["mean"] for p in meas)) / m_step
        p_step, p_comp = pred["step_time_s"]["mean"], compute(pred)
        e, ce = p_step / m_step - 1, p_comp / m_comp - 1
        errs.append(abs(e))
        cerrs.append(abs(ce))
        model = next((x for x in pred.get("notes", []) if x.startswith("compute on")), "")
        rows.append((n, pred["micro_batch"], p_step, m_step, e, p_comp, m_comp, ce, spread, model))
    print("| shape | micro-batch | predicted step (ms) | measured step (ms) | error | predicted compute (ms) "
          "| measured compute (ms) | error | run-to-run spread |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, b, ps, ms, e, pc, mc, ce, sp, _ in rows:
        print(f"| {n} | {b} | {1e3*ps:.1f} | {1e3*ms:.1f} | {100*e:+.1f}% | {1e3*pc:.1f} | {1e3*mc:.1f} | {100*ce:+.1f}% "
              f"| {100*sp:.1f}% |")
    print(f"\nstep time: mean |error| {100*sum(errs)/len(errs):.1f}%, max {100*max(errs):.1f}% over {len(errs)} shapes; "
          f"compute: mean {100*sum(cerrs)/len(cerrs):.1f}%, max {100*max(cerrs):.1f}%")
    print(f"compute model used: {rows[0][9]}")


if __name__ == "__main__":
    main()
