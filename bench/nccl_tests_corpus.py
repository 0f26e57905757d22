#!/usr/bin/env python3
"""Hold `vitsim collective` against the public nccl-tests corpus, table by table (issue 36 item 1).

Usage: nccl_tests_corpus.py [--vitsim PATH] [--data DIR] [--table NAME ...] [--json OUT] [--detail]
                            [--smoke] [--self-test] [--fit NAME --values V1,V2,...]

The corpus is bench/data/nccl_tests/*.txt: each file is one published nccl-tests table with its metadata in
'# key: value' header lines (a line '#   ...' continues the key above), then rows 'size time_us busbw'
('-' for the time where the source publishes busbw only). The keys this script reads:
  source, hardware, nccl, env   what was measured, as published (docs/sources.md lists them)
  fabric      one of FABRICS below
  op          all_reduce, all_gather or reduce_scatter (nccl-tests' *_perf binary)
  ranks       ranks of the run (checked against vitsim's)
  platform    the `vitsim platform` flags that write the hardware
  collective  the `vitsim collective` flags: --func, -b/-e/-f, --nccl-version, --nccl-algo/--nccl-proto where the
              run set NCCL_ALGO/NCCL_PROTO, --gpus-per-thread G where one process drove G GPUs (nccl-tests' -g G)
  described   'faithful', or 'approximate: why' (only faithful tables count toward the 25% target)
Nothing here is per table: a new table is a new file.

For each table it writes the platform with `vitsim platform`, runs `vitsim collective ... --format json` over
the table's sweep and compares the out-of-place time size by size: error = predicted / measured - 1. A time the
source does not publish is derived from its busbw by nccl-tests' rule for the op (src/all_reduce.cu: busbw =
size / t x 2(n-1)/n; src/all_gather.cu and src/reduce_scatter.cu: size / t x (n-1)/n, where the printed size is
the whole gathered or scattered buffer, n x the per-rank count); a derived row whose printed busbw carries more
than ROUNDING_LIMIT of rounding (half a unit of its last digit over its value) is left out and counted.

Per table and per size band (BANDS) it prints n, the median |error| and the signed median; over the corpus, per
band, the median over tables of their median |error| and of their signed medians (each table one vote, so that
no table's sign hides another's), the tables over TARGET at >= 64 MiB (faithful ones toward the target), and
the same per fabric kind. A table vitsim refuses ('vitsim: error: ...' from a flag or value the binary does not
know yet) is listed as refused with vitsim's message and the run goes on. Exit status: 0 when every table ran
or was refused, 1 when any failed another way (a crash, a size missing from the prediction, bad metadata).

--fit NAME --values V1,...: leave one table out. NAME is a fittable figure of FITTABLE (or 'platform:--flag' /
'collective:--flag' for any flag); for each table the value minimising the median over the OTHER tables of
their median |error| (sizes of --fit-band) is picked, and the held-out table's error with it is reported.
--self-test: checks this script's arithmetic and its whole path on a known answer (a table vitsim predicted
itself has 0% error) and exits.
--ramp: per table, the 1-64 MiB band as a straight line time = a + size / r through the measured and the
predicted times (a: the time a size costs beyond its bytes; r as busbw: what each further byte costs), beside
the busbw of the table's largest size and the loops and steps NCCL cuts the band's sizes into
(nccl_pipeline.py), and for NVLS the measured cost of a MiB under each chunk NCCL picks; nothing is fitted
to a prediction.
--smoke (or VITSIM_BENCH_SMOKE=1): only the tables of at most SMOKE_RANKS ranks (one node), in seconds (ctest:
tests/bench/smoke.sh via bench/nccl_tests_public.sh).
"""

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

from corpus_files import corpus_rows  # bench/corpus_files.py: the corpus file format, shared
import nccl_pipeline  # bench/nccl_pipeline.py: NCCL's loops and steps, a band's straight line (--ramp)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KIB, MIB = 1 << 10, 1 << 20
# Size bands (bytes): [low, high).
BANDS = (("< 64 KiB", 0, 64 * KIB), ("64 KiB-1 MiB", 64 * KIB, MIB), ("1-64 MiB", MIB, 64 * MIB),
         (">= 64 MiB", 64 * MIB, float("inf")))
LARGE = BANDS[-1][0]
TARGET = 25.0  # issue 36: no faithful table over 25% at >= 64 MiB
ROUNDING_LIMIT = 0.05
SMOKE_RANKS = 8
FABRICS = ("nvswitch", "nvlink-bridge", "pcie-p2p", "pcie-host", "ib", "ib-sharp", "roce", "efa", "tcpx", "tcpxo",
           "sockets", "mnnvl", "mnnvl-multirack")
OPS = {  # nccl-tests' busbw factor per op (src/*.cu GetBw)
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}
REQUIRED = ("source", "hardware", "nccl", "env", "fabric", "op", "ranks", "platform", "collective", "described")
# Figures a corpus may fit: name -> (command, flag). None is fitted: launch-cost is a public measurement
# (kNcclLaunchPerGpuS), here to report what leaving one table out would pick (docs/benchmarks.md, "nccl-tests
# corpus"). nic-lat is harmless: it exercises the facility.
FITTABLE = {
    "nic-lat": ("platform", "--nic-lat"),
    "staging-bw": ("platform", "--staging-bw"),
    "intranode-bw": ("platform", "--intranode-bw"),
    "launch-cost": ("collective", "--launch-cost"),
}
UNIT = {"us": 1.0, "ms": 1e3, "s": 1e6}
# One note per size (sim/collective_cmd): "<size> all-reduce on <n> ranks: NCCL <v> <Algo>/<Proto>, <c> channel(s)
# [, simulated as ...]; NCCL's estimate <t> <unit> (latency <t> <unit>), simulated <t> <unit>".
NOTE = re.compile(
    r"(?:all-reduce|all-gather|reduce-scatter|broadcast|all-to-all|alltoall) on \d+ ranks: NCCL [\d.]+ "
    r"(?P<algo>\w+)/(?P<proto>\w+), (?P<ch>\d+) channels?(?:, simulated as (?P<sim>[^;]+))?; "
    r"NCCL's estimate (?P<est>[\d.]+) (?P<eu>us|ms|s) \(latency (?P<lat>[\d.]+) (?P<lu>us|ms|s)\)"
)


class Failed(Exception):
    """A table that could not be compared for a reason other than vitsim refusing it."""


class Refused(Exception):
    """vitsim refused the table's flags: its one-line message."""


def read_table(path):
    """The metadata (dict of str) and rows [(size, time or None, busbw, busbw as printed)] of a corpus file."""
    meta, rows = {}, []
    for lineno, line in corpus_rows(path, meta):
        parts = line.split()
        if len(parts) != 3:
            raise Failed(f"{path}:{lineno}: row '{line}': want 'size time busbw'")
        size, time, busbw = parts
        rows.append((int(size), None if time == "-" else float(time), float(busbw), busbw))
    return meta, rows


def check_meta(name, meta):
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise Failed(f"metadata lacks {', '.join('# ' + k + ':' for k in missing)}")
    if meta["fabric"] not in FABRICS:
        raise Failed(f"fabric '{meta['fabric']}' is not one of {', '.join(FABRICS)}")
    if meta["op"] not in OPS:
        raise Failed(f"op '{meta['op']}' is not one of {', '.join(OPS)}")
    func = re.search(r"--func\s+(\S+)", meta["collective"])
    if not func or func.group(1) != meta["op"]:
        raise Failed(f"'# collective:' must name --func {meta['op']}")
    if not (meta["described"] == "faithful" or meta["described"].startswith(("faithful (", "approximate:"))):
        raise Failed("'# described:' is 'faithful' or 'approximate: why'")


def faithful(meta):
    return meta["described"].startswith("faithful")


def rounding(printed):
    """Half a unit of the last printed digit of a busbw, over its value (inf for 0)."""
    value = float(printed)
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return float("inf") if value <= 0 else 0.5 * 10 ** -decimals / value


def measured_time(size, time, busbw, printed, factor):
    """The out-of-place time in us, derived from busbw where not published; None when too rounded."""
    if time is not None:
        return time
    if rounding(printed) > ROUNDING_LIMIT:
        return None
    return size * factor / (busbw * 1e9) * 1e6


def err(pred, meas):
    return (pred / meas - 1.0) * 100.0


def band_of(size):
    for label, low, high in BANDS:
        if low <= size < high:
            return label
    raise AssertionError(size)


def stats(errors):
    """n, median |error| and signed median of a list of errors (%), or None when empty."""
    if not errors:
        return None
    return {"n": len(errors), "median_abs": statistics.median(abs(e) for e in errors),
            "median_signed": statistics.median(errors)}


def run(cmd):
    """Runs a vitsim command; a one-line 'vitsim: error:' with a non-zero status is a refusal."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 0:
        return
    msg = [x for x in p.stderr.splitlines() if x.startswith("vitsim: error:")]
    if p.returncode in (1, 2) and msg:
        raise Refused(msg[0][len("vitsim: error: "):])
    tail = " | ".join(p.stderr.strip().splitlines()[:3])[:400]
    raise Failed(f"`{' '.join(shlex.quote(c) for c in cmd)}` exited {p.returncode}: {tail}")


def with_flag(flags, flag, value):
    """The flag list with FLAG set to VALUE (an existing occurrence replaced)."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
            continue
        if f == flag:
            skip = True
            continue
        if f.startswith(flag + "="):
            continue
        out.append(f)
    return out + [flag, value]


def predict(vitsim, name, meta, tmp, fit=None):
    """vitsim's JSON for the table (fit: (command, flag, value) set on top of the table's flags)."""
    pflags, cflags = shlex.split(meta["platform"]), shlex.split(meta["collective"])
    if fit:
        where, flag, value = fit
        if where == "platform":
            pflags = with_flag(pflags, flag, value)
        else:
            cflags = with_flag(cflags, flag, value)
    xml, out = os.path.join(tmp, name + ".xml"), os.path.join(tmp, name + ".json")
    run([vitsim, "platform", "--id", re.sub(r"[^A-Za-z0-9_-]", "_", name)] + pflags + ["--out", xml])
    run([vitsim, "collective", xml] + cflags + ["-q", "--format", "json", "--out", out])
    try:
        with open(out, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Failed(f"no JSON from vitsim collective: {e}") from e


def compare(name, meta, rows, pred):
    """Per-size comparison rows and the count of rows left out for rounding."""
    n = pred["config"]["ranks"]
    if n != int(meta["ranks"]):
        raise Failed(f"vitsim ran {n} ranks, the table says {meta['ranks']}")
    factor = OPS[meta["op"]](n)
    notes = [m for m in (NOTE.search(x) for x in pred["notes"]) if m]
    auto = any("collective 'auto'" in x for x in pred["notes"])
    if auto and len(notes) != len(pred["results"]):
        raise Failed(f"{len(notes)} notes of NCCL's choice for {len(pred['results'])} sizes "
                     "(has the notes' format changed? see NOTE)")
    by_size = {r["size"]: (r, notes[i] if auto else None) for i, r in enumerate(pred["results"])}
    out, rounded = [], 0
    for size, time, busbw, printed in rows:
        if size not in by_size:
            raise Failed(f"size {size} not in vitsim's sweep (check '# collective:' -b/-e/-f)")
        meas = measured_time(size, time, busbw, printed, factor)
        if meas is None:
            rounded += 1
            continue
        r, note = by_size[size]
        p = r["out_of_place"]
        row = {"size": size, "band": band_of(size), "measured_us": meas, "derived": time is None,
               "predicted_us": p["time"], "error": err(p["time"], meas), "busbw": busbw, "predicted_busbw": p["bus_bw"],
               "choice": None, "nccl_estimate_us": None}
        if note:
            row["choice"] = f"{note['algo']}/{note['proto']}, {note['ch']} ch"
            row["nccl_estimate_us"] = float(note["est"]) * UNIT[note["eu"]]
        out.append(row)
    return out, rounded


def summarise(rows):
    return {label: stats([r["error"] for r in rows if r["band"] == label]) for label, _, _ in BANDS}


def evaluate(vitsim, name, meta, rows, tmp, fit=None):
    """One table's result: status ok / refused / failed, its rows and bands."""
    res = {"table": name, "fabric": meta.get("fabric"), "op": meta.get("op"), "ranks": meta.get("ranks"),
           "described": meta.get("described"), "faithful": faithful(meta) if "described" in meta else False,
           "source": meta.get("source"), "platform": meta.get("platform"), "collective": meta.get("collective")}
    try:
        check_meta(name, meta)
        pred = predict(vitsim, name, meta, tmp, fit)
        res["rows"], res["rounded_out"] = compare(name, meta, rows, pred)
        res["bands"] = summarise(res["rows"])
        res["status"] = "ok"
    except Refused as e:
        res["status"], res["message"] = "refused", str(e)
    except Failed as e:
        res["status"], res["message"] = "failed", str(e)
    return res


def fmt(s):
    return "-" if s is None else f"{s['median_abs']:5.1f}% {s['median_signed']:+6.1f}% ({s['n']})"


def corpus_bands(results):
    """Per band: the median over tables of their median |error| and of their signed medians."""
    out = {}
    for label, _, _ in BANDS:
        per = [r["bands"][label] for r in results if r["status"] == "ok" and r["bands"][label]]
        out[label] = None if not per else {
            "tables": len(per), "median_abs": statistics.median(s["median_abs"] for s in per),
            "median_signed": statistics.median(s["median_signed"] for s in per)}
    return out


def fmt_corpus(c):
    return "-" if c is None else f"{c['median_abs']:5.1f}% {c['median_signed']:+6.1f}% ({c['tables']} t)"


def print_detail(res):
    print(f"\n#### {res['table']}: {res['ranks']} ranks, {res['op']}, {res['fabric']}\n")
    print(f"`vitsim platform {res['platform']}`, then `vitsim collective PLATFORM {res['collective']}`\n")
    print("| size | measured (us) | predicted (us) | error | busbw meas. | busbw pred. | NCCL's choice (model) "
          "| NCCL's estimate (us) | its error |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for r in res["rows"]:
        est = r["nccl_estimate_us"]
        est_s, est_e = ("-", "-") if est is None else (f"{est:.1f}", f"{err(est, r['measured_us']):+.1f}%")
        print(f"| {size_label(r['size'])} | {r['measured_us']:.2f}{'*' if r['derived'] else ''} | "
              f"{r['predicted_us']:.2f} | {r['error']:+.1f}% | {r['busbw']:.2f} | {r['predicted_busbw']:.2f} | "
              f"{r['choice'] or '-'} | {est_s} | {est_e} |")
    if res["rounded_out"]:
        print(f"\n{res['rounded_out']} row(s) left out: their busbw carries more than {ROUNDING_LIMIT:.0%} rounding")
    print("(* derived from the published busbw)")


def size_label(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def report(results, detail):
    ok = [r for r in results if r["status"] == "ok"]
    print("Per table: median |error| of the out-of-place time, signed median (rows), per size band")
    print("| table | fabric | op | ranks | described | " + " | ".join(b[0] for b in BANDS) + " |")
    print("| --- | --- | --- | ---: | --- | " + " | ".join("---:" for _ in BANDS) + " |")
    for r in results:
        desc = "faithful" if r["faithful"] else "approx."
        if r["status"] == "ok":
            cells = " | ".join(fmt(r["bands"][b[0]]) for b in BANDS)
        else:
            cells = f"{r['status']}: {r['message']}" + " |" * (len(BANDS) - 1)
        print(f"| {r['table']} | {r['fabric']} | {r['op']} | {r['ranks']} | {desc} | {cells} |")
    if detail:
        for r in ok:
            print_detail(r)
    print("\nOver the corpus, per band: median over tables of their median |error|, of their signed medians (tables)")
    cb = corpus_bands(results)
    print("| band | median abs., signed (tables) |")
    print("| --- | ---: |")
    for label, _, _ in BANDS:
        print(f"| {label} | {fmt_corpus(cb[label])} |")
    large = [r for r in ok if r["bands"][LARGE]]
    over = [r for r in large if r["bands"][LARGE]["median_abs"] > TARGET]
    fl = [r for r in large if r["faithful"]]
    fover = [r for r in fl if r["bands"][LARGE]["median_abs"] > TARGET]
    share = f"{len(fover)} of {len(fl)}" if fl else "0 of 0"
    print(f"\nAt >= 64 MiB: {share} faithful tables over {TARGET:.0f}% (target: none); all tables: {len(over)} of "
          f"{len(large)} over" + (": " + ", ".join(r["table"] for r in over) if over else ""))
    print("\nPer fabric kind: median over its tables of their median |error|, of their signed medians (tables)")
    print("| fabric | " + " | ".join(b[0] for b in BANDS) + " | refused |")
    print("| --- | " + " | ".join("---:" for _ in BANDS) + " | ---: |")
    per_fabric = {}
    for fab in FABRICS:
        mine = [r for r in results if r["fabric"] == fab]
        if not mine:
            continue
        fb = corpus_bands(mine)
        per_fabric[fab] = fb
        refused = sum(r["status"] == "refused" for r in mine)
        print(f"| {fab} | " + " | ".join(fmt_corpus(fb[b[0]]) for b in BANDS) + f" | {refused} of {len(mine)} |")
    refused = [r for r in results if r["status"] == "refused"]
    failed = [r for r in results if r["status"] == "failed"]
    print(f"\n{len(ok)} tables compared, {len(refused)} refused, {len(failed)} failed")
    for r in refused:
        print(f"refused: {r['table']}: {r['message']}")
    for r in failed:
        print(f"failed: {r['table']}: {r['message']}")
    return {"corpus": cb, "per_fabric": per_fabric,
            "large_over_target": {"faithful_over": [r["table"] for r in fover], "faithful": len(fl),
                                  "all_over": [r["table"] for r in over], "all": len(large)}}


RAMP_BAND = "1-64 MiB"


def ramp(res):
    """One table's RAMP_BAND as straight lines (module docstring, --ramp); None under 3 rows."""
    rows = [r for r in res["rows"] if r["band"] == RAMP_BAND]
    meas = nccl_pipeline.line([(r["size"], r["measured_us"]) for r in rows])
    pred = nccl_pipeline.line([(r["size"], r["predicted_us"]) for r in rows])
    if not meas or not pred:
        return None
    n, factor = int(res["ranks"]), OPS[res["op"]](int(res["ranks"]))
    top = max(res["rows"], key=lambda r: r["size"])
    choices, steps = [], []
    for r in (rows[0], rows[-1]):
        m = re.fullmatch(r"(\w+)/(\w+), (\d+) ch", r["choice"] or "")
        if m and m.group(0) not in choices:
            choices.append(m.group(0))
        cut = m and nccl_pipeline.loops(m.group(1), m.group(2), res["op"], n, int(m.group(3)), r["size"])
        steps.append("-" if not cut else f"{cut[0]} / {cut[1]}")
    nvls = [m for m in (re.fullmatch(r"NVLS/\w+, (\d+) ch", c) for c in choices) if m]
    regimes = None
    if nvls and res["op"] == "all_reduce":  # the rows from 1 MiB, by the chunk NCCL picks
        regimes = nccl_pipeline.nvls_regimes([(r["size"], r["measured_us"]) for r in res["rows"]],
                                             int(nvls[0].group(1)), n)
    return {"table": res["table"], "choices": choices, "loops_steps": steps, "nvls_regimes": regimes,
            "measured_us": meas[0],
            "measured_busbw": meas[1] * factor, "predicted_us": pred[0], "predicted_busbw": pred[1] * factor,
            "top_size": top["size"], "top_busbw": top["busbw"]}


def print_ramp(results):
    out = [x for x in (ramp(r) for r in results if r["status"] == "ok") if x]
    print(f"\nThe {RAMP_BAND} band as straight lines, time = a + size / r (r as busbw, GB/s); NCCL's loops / steps "
          "a channel runs at the band's smallest and largest size (nccl_pipeline.py; '-': a tree or not modelled)")
    print("| table | NCCL's choice (model) | loops / steps | measured a (us), busbw | predicted a (us), busbw "
          "| measured busbw at its largest size |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for x in out:
        print(f"| {x['table']} | {'; '.join(x['choices']) or '-'} | {', '.join(x['loops_steps'])} | "
              f"{x['measured_us']:.1f}, {x['measured_busbw']:.1f} | {x['predicted_us']:.1f}, "
              f"{x['predicted_busbw']:.1f} | {x['top_busbw']:.1f} ({size_label(x['top_size'])}) |")
    for x in out:
        if x["nvls_regimes"]:
            print(f"{x['table']}: measured us per MiB by NVLS chunk (a channel's steps per MiB): " + ", ".join(
                f"{c // 1024} KiB {u:.2f} ({k:g})" for c, u, k in x["nvls_regimes"]))
    if out:
        print(f"median over {len(out)} tables: measured a - predicted a "
              f"{statistics.median(x['measured_us'] - x['predicted_us'] for x in out):+.1f} us; measured busbw / "
              f"predicted {statistics.median(x['measured_busbw'] / x['predicted_busbw'] for x in out):.2f}; "
              f"measured busbw / its largest size's "
              f"{statistics.median(x['measured_busbw'] / x['top_busbw'] for x in out):.2f}")
    return out


def fit_target(results, exclude, band):
    """The median over the tables but EXCLUDE of their median |error| in BAND (all sizes when None)."""
    meds = []
    for r in results:
        if r["table"] == exclude or r["status"] != "ok":
            continue
        errs = [x["error"] for x in r["rows"] if band is None or x["band"] == band]
        if errs:
            meds.append(statistics.median(abs(e) for e in errs))
    return statistics.median(meds) if meds else None


def leave_one_out(by_value, band):
    """For each table: the value fitted on the others and the held-out table's errors with it."""
    values = list(by_value)
    tables = [r["table"] for r in by_value[values[0]]]
    out = []
    for t in tables:
        # ties go to the value listed first
        scored = [(fit_target(by_value[v], t, band), i, v) for i, v in enumerate(values)]
        scored = [s for s in scored if s[0] is not None]
        held = {v: next(r for r in by_value[v] if r["table"] == t) for v in values}
        if not scored or any(h["status"] != "ok" for h in held.values()):
            status = next(h for h in held.values() if h["status"] != "ok") if scored else None
            out.append({"table": t, "status": status["status"] if status else "no other tables",
                        "message": status.get("message") if status else None})
            continue
        best = min(scored)[2]
        h = held[best]
        errs = [x["error"] for x in h["rows"] if band is None or x["band"] == band]
        out.append({"table": t, "status": "ok", "value": best, "others_median_abs": min(scored)[0],
                    "held_out": stats(errs), "held_out_bands": h["bands"]})
    return out


def self_test(vitsim, tmp):
    """Known answers: the busbw rules, the rounding rule, and a table vitsim predicted itself (0% error)."""
    assert abs(OPS["all_reduce"](8) - 1.75) < 1e-12 and abs(OPS["all_gather"](16) - 0.9375) < 1e-12
    assert abs(measured_time(1 << 30, None, 100.0, "100.00", OPS["all_reduce"](8)) - (1 << 30) * 1.75 / 1e5) < 1e-6
    assert rounding("0.01") == 0.5 and abs(rounding("478.87") - 0.005 / 478.87) < 1e-15
    assert measured_time(1024, None, 0.01, "0.01", 1.0) is None and measured_time(1024, 9.5, 0.0, "0.00", 1.0) == 9.5
    assert stats([-10.0, 20.0, 30.0]) == {"n": 3, "median_abs": 20.0, "median_signed": 20.0}
    assert band_of(64 * KIB - 1) == "< 64 KiB" and band_of(64 * MIB) == LARGE and band_of(MIB) == "1-64 MiB"
    nccl_pipeline.self_test()
    assert with_flag(["--nics", "8", "--nic-lat", "5us"], "--nic-lat", "2us") == ["--nics", "8", "--nic-lat", "2us"]
    by_value = {v: [{"table": t, "status": "ok", "bands": {}, "rows": [{"band": LARGE, "error": e}]}
                    for t, e in zip("abc", es)] for v, es in (("1", (10, 50, -30)), ("2", (-5, 5, 100)))}
    loo = {x["table"]: x for x in leave_one_out(by_value, None)}
    # a: others (b, c) give 40 with 1 and 52.5 with 2 -> 1, a's error 10; c: others (a, b) 30 vs 5 -> 2, c's 100.
    assert loo["a"]["value"] == "1" and loo["a"]["held_out"]["median_signed"] == 10
    assert loo["c"]["value"] == "2" and loo["c"]["held_out"]["median_abs"] == 100
    # The whole path on a known answer: vitsim's own prediction written as a table has 0% error.
    meta = {"source": "self-test", "hardware": "-", "nccl": "-", "env": "-", "fabric": "ib", "ranks": "16",
            "platform": "--nodes 2 --gpus-per-node 8 --gpu a100-sxm-80gb --nics 8 --nic-speed hdr",
            "described": "faithful"}
    checked = 0
    for op, flags in (("all_reduce", "-b 8 -e 256M -f 4"), ("all_gather", "-b 1K -e 256M -f 4")):
        meta["op"], meta["collective"] = op, f"--func {op} {flags} --nccl-version 2.18"
        pred = predict(vitsim, "selftest_" + op, meta, tmp)
        n = pred["config"]["ranks"]
        rows = []
        for r in pred["results"]:  # half the rows as published times, half as busbw only (printed to 6 digits)
            t = r["out_of_place"]["time"]
            bus = r["size"] * OPS[op](n) / (t * 1e-6) / 1e9
            rows.append((r["size"], t, bus, f"{bus:.2f}") if len(rows) % 2 else
                        (r["size"], None, bus, f"{bus:.6f}"))
        res = evaluate(vitsim, "selftest_" + op, meta, rows, tmp)
        assert res["status"] == "ok", res.get("message")
        worst = max(abs(x["error"]) for x in res["rows"])
        assert worst < 1e-3, f"{op}: a table vitsim predicted itself is {worst}% off"
        checked += len(res["rows"])
    print(f"self-test: arithmetic, busbw rules, NCCL's loops, leave-one-out and {checked} rows of vitsim's own tables: "
          "0.0% error, OK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vitsim", default=os.path.join(ROOT, "build", "app", "vitsim"))
    ap.add_argument("--data", default=os.path.join(HERE, "data", "nccl_tests"))
    ap.add_argument("--table", action="append", help="a table (file name without .txt); repeatable")
    ap.add_argument("--json", help="write everything, machine-readable, to this file")
    ap.add_argument("--detail", action="store_true", help="per-size comparison of every table")
    ap.add_argument("--ramp", action="store_true", help="the 1-64 MiB band of every table as straight lines")
    ap.add_argument("--smoke", action="store_true", default=os.environ.get("VITSIM_BENCH_SMOKE") == "1")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--fit", help="leave one table out over this figure: " + ", ".join(FITTABLE) +
                    ", or platform:--flag / collective:--flag")
    ap.add_argument("--values", help="--fit's candidate values, comma-separated")
    ap.add_argument("--fit-band", choices=[b[0] for b in BANDS], help="--fit on this band's sizes (default: all)")
    a = ap.parse_args()
    vitsim = os.path.realpath(a.vitsim)
    if not os.access(vitsim, os.X_OK):
        sys.exit(f"nccl_tests_corpus.py: no vitsim binary at {vitsim}: build it or pass --vitsim PATH")
    with tempfile.TemporaryDirectory() as tmp:
        if a.self_test:
            self_test(vitsim, tmp)
            return 0
        names = sorted(f[:-4] for f in os.listdir(a.data) if f.endswith(".txt"))
        if a.table:
            unknown = [t for t in a.table if t not in names]
            if unknown:
                sys.exit(f"nccl_tests_corpus.py: unknown table {', '.join(unknown)}; valid: {', '.join(names)}")
            names = a.table
        tables = {}
        for n in names:
            try:
                tables[n] = read_table(os.path.join(a.data, n + ".txt"))
            except Failed as e:
                tables[n] = ({}, str(e))
        if a.smoke and not a.table:
            names = [n for n in names
                     if isinstance(tables[n][1], list) and int(tables[n][0].get("ranks", "0")) <= SMOKE_RANKS]
            print(f"# smoke mode (VITSIM_BENCH_SMOKE=1): the {len(names)} tables of at most {SMOKE_RANKS} ranks")
        version = subprocess.run([vitsim, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"nccl-tests corpus: {len(names)} tables from {os.path.relpath(a.data, ROOT)}; "
              f"binary: {vitsim} ({version})\n")

        def all_tables(fit=None):
            out = []
            for n in names:
                meta, rows = tables[n]
                if isinstance(rows, str):
                    out.append({"table": n, "status": "failed", "message": rows, "fabric": None, "op": None,
                                "ranks": None, "described": None, "faithful": False})
                    continue
                out.append(evaluate(vitsim, n, meta, rows, tmp, fit))
            return out

        results = all_tables()
        summary = report(results, a.detail)
        doc = {"binary": vitsim, "bands": [b[0] for b in BANDS], "target_percent": TARGET,
               "rounding_limit": ROUNDING_LIMIT, "tables": results, **summary}
        if a.ramp:
            doc["ramp"] = print_ramp(results)
        if a.fit:
            if not a.values:
                sys.exit("nccl_tests_corpus.py: --fit needs --values V1,V2,...")
            if a.fit in FITTABLE:
                where, flag = FITTABLE[a.fit]
            elif re.fullmatch(r"(platform|collective):--[a-z0-9-]+", a.fit):
                where, flag = a.fit.split(":")
            else:
                sys.exit(f"nccl_tests_corpus.py: unknown --fit '{a.fit}'; valid: {', '.join(FITTABLE)}, "
                         "platform:--flag, collective:--flag")
            values = [v for v in a.values.split(",") if v]
            by_value = {v: all_tables((where, flag, v)) for v in values}
            loo = leave_one_out(by_value, a.fit_band)
            print(f"\nLeave one table out: {where} {flag} in {{{', '.join(values)}}}, fitted on the median over the "
                  f"other tables of their median |error| ({a.fit_band or 'all sizes'})")
            print("| held-out table | value fitted on the others | others' median abs. "
                  "| held-out: median abs., signed (rows) |")
            print("| --- | --- | ---: | ---: |")
            for x in loo:
                if x["status"] == "ok":
                    print(f"| {x['table']} | {x['value']} | {x['others_median_abs']:.1f}% | {fmt(x['held_out'])} |")
                else:
                    print(f"| {x['table']} | {x['status']} | - | - |")
            held = [x["held_out"]["median_abs"] for x in loo if x["status"] == "ok" and x["held_out"]]
            if held:
                print(f"held-out tables' median |error|: {statistics.median(held):.1f}% over {len(held)} tables")
            doc["fit"] = {"name": a.fit, "command": where, "flag": flag, "values": values, "band": a.fit_band,
                          "leave_one_out": loo}
        if a.json:
            with open(a.json, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)
        return 1 if any(r["status"] == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
