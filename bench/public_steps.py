#!/usr/bin/env python3
"""Hold `vitsim predict` against published whole-step throughput of transformer encoders (issue 37 items 1 and 3).

Usage: public_steps.py [--vitsim PATH] [--data DIR] [--file NAME ...] [--json OUT] [--detail] [--smoke]
                       [--self-test] [--conformal] [--write-residuals [PATH]] [--check-residuals [PATH]]

The corpus is bench/data/public/*.txt: each file is one published table (one source), its metadata in '# key: value'
header lines (a line '#   ...' continues the key above), then one row per measurement:
    name model micro_batch grad_accum nodes gpus_per_node value [key=value ...]
name is the source's; model is the vitsim preset of the same shape, or 'unsupported' (the file's '# unsupported:'
says why: the row is listed, never approximated); value is in the file's measure. The keys a row may carry: gpu=,
nic=, precision= (the platform's --gpu, --nic-speed, --precision; precision also sets training.precision) and any
scenario key (model.classes=21841). The header keys this script reads:
  source, origin    where the numbers were read (repository, path and commit, or URL) and the independent source it
                    belongs to (files of one origin are one group of the leave-one-source-out below)
  hardware, software, pytorch, precision, optimizer   as published (docs/sources.md lists every file)
  mode        train (the whole optimizer step) or forward (inference: held against the forward pass the prediction
              has for the step, breakdown compute_fwd per micro-batch)
  input       device (batches made on the GPU: the predicted step less its loader wait and host-to-device copy) or
              loader (the whole predicted step)
  measure     samples_per_s (all GPUs together) or latency_ms (one batch)
  platform    `vitsim platform` flags ('-': none); the bench adds --nodes, --gpus-per-node and the row's keys
  scenario    scenario keys (KEY=VALUE) of every row
  described   'faithful', or 'approximate: why'
Nothing is fitted and nothing is per row in code: each row is predicted from the catalogue's figures alone (`vitsim
platform --gpu`), with vitsim's defaults for every figure the source does not state.

error = predicted / measured - 1 on the time of a step (or of a forward pass): > 0 predicts slower. Per file, per
origin, per GPU band (BANDS) and per mode it prints n, the median |error| and the signed median, never a pooled
signed median (opposite signs would cancel): the corpus line takes the median over files of their medians (each file
one vote). Rows vitsim refuses ('vitsim: error: ...') are listed with its message and the run goes on.

--conformal (issue 37 item 3, a computation only: no model change): split-conformal intervals from the corpus'
residuals (log of measured / predicted), leave one origin out: for each origin, the p10-p90 of the other origins'
residuals at the finite-sample ranks floor((n+1) x 0.1) and ceil((n+1) x 0.9) is the band its rows are judged in;
it prints each origin's coverage and the band's width as a share of the central value, the pooled coverage, and the
half-width (log, symmetric around the other origins' median) that would hold 80% of the held-out rows.
It also prints the same with each origin one vote (CDF pooling), the band vitsim applies to an uncalibrated point,
and the narrowest band that holds 80% of the corpus in-sample with each origin one vote (no hold-out): no single band
is narrower at that level, so a width target below it needs the model's errors to shrink, not another interval method.
--write-residuals [PATH] (the whole corpus): writes data/corpus_residuals.txt, the rows' measured and predicted times
that vitsim compiles in (core/results/corpus_error.hpp). --check-residuals [PATH] (the ctest corpus_residuals, seconds):
every table row against its corpus row (origin, measured time), every predictable corpus row in the table, and the
first and last row of each file predicted again; exit 1 naming what is stale.
--self-test: checks the arithmetic and the whole path on a known answer (a row whose value is vitsim's own
prediction has 0% error) and exits. --smoke (or VITSIM_BENCH_SMOKE=1): the first row of two files, in seconds.
A row whose measured time is shorter than its model's FLOPs take at its GPU's datasheet peak in the stated precision
(beyond_peak) measured something its file does not say (a faster precision, a timer that did not wait for the GPU): it
is listed as inconsistent with its description, with the arithmetic, and kept out of every error and of the band.
Exit status: 0 when every row ran, was refused, is unsupported or inconsistent; 1 when any failed another way.
"""

import argparse
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

from corpus_files import corpus_rows  # bench/corpus_files.py: the corpus file format, shared

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REQUIRED = ("source", "origin", "hardware", "software", "pytorch", "precision", "mode", "optimizer", "input",
            "measure", "platform", "scenario", "described")
MODES = ("train", "forward")
INPUTS = ("device", "loader")
MEASURES = ("samples_per_s", "latency_ms")
# GPU bands (issue 37: a power-capped part, a consumer GPU, a data-centre Ampere, a Hopper), by catalogue name.
BANDS = (("power-capped", ("T4", "L4", "A2", "P4")), ("consumer", ("RTX", "GTX")),
         ("data-centre pre-Ampere", ("V100", "P100")), ("data-centre Ampere", ("A100", "A10", "A40")),
         ("Hopper", ("H100", "H200")))
ROW_PLATFORM_KEYS = {"gpu": "--gpu", "nic": "--nic-speed", "precision": "--precision"}
SMOKE_FILES = ("timm_train_rtx3090_pt112", "fastertransformer_vit_t4_a100")
STEPS, WARMUP = 4, 1  # steady state: the step repeats exactly after the warm-up (docs/model.md, Epoch time)
COVER = 0.8
P_LOW, P_HIGH = 0.1, 0.9


class Failed(Exception):
    """A row or file that could not be compared for a reason other than vitsim refusing it."""


class Refused(Exception):
    """vitsim refused the row: its one-line message."""


def read_file(path):
    """The metadata (dict of str) and rows [dict] of a corpus file; bad input names the file and line."""
    meta, rows = {}, []
    for lineno, line in corpus_rows(path, meta):
        where = f"{path}:{lineno}"
        if "source" not in meta:
            raise Failed(f"{where}: a row before the file's '# source:' (every row needs its source)")
        parts = line.split()
        if len(parts) < 7:
            raise Failed(f"{where}: row '{line}': want 'name model micro_batch grad_accum nodes gpus value'")
        try:
            micro, accum, nodes, gpus = (int(x) for x in parts[2:6])
            value = float(parts[6])
        except ValueError:
            raise Failed(f"{where}: row '{line}': micro_batch, grad_accum, nodes and gpus are integers, value a "
                         "number") from None
        if min(micro, accum, nodes, gpus) < 1 or not value > 0:
            raise Failed(f"{where}: row '{line}': counts >= 1 and a value > 0")
        keys = {}
        for kv in parts[7:]:
            if "=" not in kv:
                raise Failed(f"{where}: '{kv}': row keys are KEY=VALUE")
            k, v = kv.split("=", 1)
            keys[k] = v
        rows.append({"name": parts[0], "model": parts[1], "micro": micro, "accum": accum, "nodes": nodes,
                     "gpus": gpus, "value": value, "keys": keys, "line": lineno})
    check_meta(path, meta)
    return meta, rows


def check_meta(path, meta):
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise Failed(f"{path}: metadata lacks {', '.join('# ' + k + ':' for k in missing)}")
    for key, valid in (("mode", MODES), ("input", INPUTS)):
        meta[key + "_word"] = meta[key].split()[0] if meta[key].split() else ""
        if meta[key + "_word"] not in valid:
            raise Failed(f"{path}: '# {key}: {meta[key]}' does not start with one of {', '.join(valid)}")
    if meta["measure"].split()[0] not in MEASURES:
        raise Failed(f"{path}: '# measure:' starts with one of {', '.join(MEASURES)}")
    if not (meta["described"].startswith(("faithful", "approximate:"))):
        raise Failed(f"{path}: '# described:' is 'faithful' or 'approximate: why'")


def scenario_keys(text, where):
    keys = {}
    for kv in shlex.split(text):
        if "=" not in kv or "." not in kv.split("=", 1)[0]:
            raise Failed(f"{where}: '# scenario:' takes KEY=VALUE scenario keys, not '{kv}'")
        k, v = kv.split("=", 1)
        keys[k] = v
    return keys


def band_of(gpu_name):
    for band, prefixes in BANDS:
        if gpu_name.upper().startswith(prefixes):
            return band
    return "other"


def err(pred, meas):
    return pred / meas - 1.0


def stats(errors):
    """n, median |error|, signed median (None when empty)."""
    if not errors:
        return None
    return (len(errors), statistics.median(abs(e) for e in errors), statistics.median(errors))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        line = next((x for x in p.stderr.splitlines() if x.startswith("vitsim: error:")), None)
        if line and p.returncode in (1, 2):
            raise Refused(line)
        raise Failed(f"{' '.join(cmd[:2])} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return p.stdout


def write_scenario(path, name, keys):
    """A scenario file of KEY=VALUE keys: one element per key's group, the key's field an attribute."""
    groups = {}
    for k, v in keys.items():
        group, field = k.split(".", 1)
        groups.setdefault(group, {})[field] = v
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'<scenario name="{name}">\n')
        for group, fields in groups.items():
            attrs = " ".join(f'{k}="{v}"' for k, v in fields.items())
            f.write(f"  <{group} {attrs}/>\n")
        f.write("</scenario>\n")


def row_setup(meta, row, where):
    """The row's `vitsim platform` flags and scenario keys."""
    flags = [] if meta["platform"].strip() == "-" else shlex.split(meta["platform"])
    keys = scenario_keys(meta["scenario"], where)
    for k, v in row["keys"].items():
        if k in ROW_PLATFORM_KEYS:
            flags += [ROW_PLATFORM_KEYS[k], v]
            if k == "precision":
                keys["training.precision"] = v
        elif "." in k:
            keys[k] = v
        else:
            raise Failed(f"{where}: row key '{k}' is a scenario key or one of {', '.join(ROW_PLATFORM_KEYS)}")
    if "--gpu" not in flags:
        raise Failed(f"{where}: no --gpu (the file's '# platform:' or the row's gpu=)")
    flags += ["--nodes", str(row["nodes"]), "--gpus-per-node", str(row["gpus"])]
    keys.update({"cluster.platform": "p.xml", "cluster.nodes": str(row["nodes"]),
                 "cluster.gpus_per_node": str(row["gpus"]), "model.preset": row["model"],
                 "training.micro_batch": str(row["micro"]), "training.grad_accum": str(row["accum"]),
                 "simulation.steps": str(STEPS), "simulation.warmup": str(WARMUP)})
    if "dataset.name" not in keys:
        # Synthetic images of the model's input size (dataset.resize defaults to it); enough for the steps.
        keys.update({"dataset.name": "synthetic", "dataset.image_size": "224", "dataset.channels": "3",
                     "dataset.train_samples": str(row["micro"] * row["accum"] * row["nodes"] * row["gpus"] * 1000)})
    return flags, keys


def measured_time(meta, row):
    """The measured time (s) of one step (train) or one forward pass of a micro-batch (forward)."""
    if meta["measure"].startswith("latency_ms"):
        return row["value"] / 1e3
    samples = row["micro"] * row["accum"] * row["nodes"] * row["gpus"]
    if meta["mode_word"] == "forward":
        samples = row["micro"] * row["nodes"] * row["gpus"]
    return samples / row["value"]


def predicted_time(meta, row, point):
    b = point["breakdown_s"]
    if meta["mode_word"] == "forward":
        return b["compute_fwd"] / row["accum"]
    step = point["step_time_s"]["p50"]
    if meta["input_word"] == "device":
        step -= b.get("data", 0.0) + b.get("h2d", 0.0)
    return step


def beyond_peak(meta, row, measured_s, point):
    """Why a row cannot be what its file says ran, or None: its measured time is shorter than its model's FLOPs
    take at the datasheet peak of its GPU in its stated precision (the platform's peak_flops_per_gpu). The FLOPs
    are vitsim's op-level count of the step on one GPU (flops_per_gpu_step.model, forward and backward of every
    micro-batch); a forward pass is a third of one micro-batch's (a GEMM's backward is two GEMMs of its size).
    Such a row measured something else (a faster precision, a timer that did not wait for the GPU): it cannot
    test the model and stays out of every error and of the band, listed with the arithmetic."""
    flops = point["flops_per_gpu_step"]["model"]
    if meta["mode_word"] == "forward":
        flops /= 3 * row["accum"]
    peak = point["peak_flops_per_gpu"]
    if not (peak > 0 and flops > 0) or flops / measured_s <= peak:
        return None
    return (f"{1e3 * measured_s:.3g} ms for {flops / 1e9:.4g} GFLOP a GPU is {flops / measured_s / 1e12:.3g} "
            f"TFLOP/s, beyond the {peak / 1e12:.3g} TFLOP/s peak of the stated precision "
            f"({flops / peak * 1e3:.3g} ms at least)")


def predict_row(vitsim, meta, row, tmp, where):
    flags, keys = row_setup(meta, row, where)
    os.makedirs(tmp, exist_ok=True)
    run([vitsim, "platform", *flags, "--out", os.path.join(tmp, "p.xml")])
    scen = os.path.join(tmp, "s.xml")
    write_scenario(scen, row["name"], keys)
    out = json.loads(run([vitsim, "predict", scen, "--format", "json", "-q", "-j", "1"]))
    point = out["points"][0]
    return predicted_time(meta, row, point), point


def evaluate(vitsim, name, path, tmp, only_first=False):
    meta, rows = read_file(path)
    gpu_default = re.search(r"--gpu\s+(\S+)", meta["platform"])
    results = []
    for row in rows[:1] if only_first else rows:
        where = f"{path}:{row['line']}"
        gpu = row["keys"].get("gpu", gpu_default.group(1) if gpu_default else "?")
        res = {"file": name, "line": row["line"], "origin": meta["origin"], "mode": meta["mode_word"], "row": row["name"],
               "model": row["model"], "micro_batch": row["micro"], "grad_accum": row["accum"],
               "nodes": row["nodes"], "gpus_per_node": row["gpus"], "gpu": gpu,
               "faithful": meta["described"].startswith("faithful"), "measured_s": measured_time(meta, row),
               "pytorch2_optimizer": meta["mode_word"] == "train" and meta["optimizer"].startswith("torch.optim")
               and meta["pytorch"][:1].isdigit() and int(meta["pytorch"].split(".")[0]) >= 2}
        if row["model"] == "unsupported":
            res["status"] = "unsupported"
            res["why"] = meta.get("unsupported", "the file's '# unsupported:' says why")
        else:
            try:
                pred, point = predict_row(vitsim, meta, row, os.path.join(tmp, name), where)
                beyond = beyond_peak(meta, row, res["measured_s"], point)
                if beyond:
                    res.update(status="inconsistent", why=beyond)
                else:
                    res.update(status="ok", predicted_s=pred, error=err(pred, res["measured_s"]),
                               device=point["per_rank"][0]["device"], bound=point["bound"])
            except Refused as e:
                res.update(status="refused", why=str(e))
            except Failed as e:
                res.update(status="failed", why=f"{where}: {e}")
        results.append(res)
    return meta, results


def fmt(s, errors=None):
    if s is None:
        return "    -"
    signs = f"  {sum(e > 0 for e in errors):3d}+ {sum(e < 0 for e in errors):3d}-" if errors is not None else ""
    return f"{s[0]:3d} {100 * s[1]:7.1f}% {100 * s[2]:+8.1f}%{signs}"


def group(results, key):
    out = {}
    for r in results:
        if r["status"] == "ok":
            out.setdefault(key(r), []).append(r["error"])
    return out


def report(results, metas, detail, failed_files=0):
    ok = [r for r in results if r["status"] == "ok"]
    if detail:
        print(f"{'file':34} {'row':28} {'gpu':15} {'N':>4} {'meas':>10} {'pred':>10} {'error':>8}")
        for r in results:
            n = r["nodes"] * r["gpus_per_node"]
            if r["status"] == "ok":
                print(f"{r['file']:34} {r['row']:28} {r['gpu']:15} {n:4d} {1e3 * r['measured_s']:8.2f}ms "
                      f"{1e3 * r['predicted_s']:8.2f}ms {100 * r['error']:+7.1f}%")
            else:
                print(f"{r['file']:34} {r['row']:28} {r['gpu']:15} {n:4d} {r['status']}: {r['why']}")
        print()
    print(f"{'per file':34} {'origin':18} {'mode':8} {'described':11}   n  med|err|  signed med    min..max"
          "        med|pred-meas|")
    by_file = group(results, lambda r: r["file"])
    for name, meta in metas.items():
        e = by_file.get(name, [])
        span = f"{100 * min(e):+6.1f}..{100 * max(e):+6.1f}%" if e else ""
        desc = "faithful" if meta["described"].startswith("faithful") else "approximate"
        dt = [abs(r["predicted_s"] - r["measured_s"]) for r in results if r["file"] == name and r["status"] == "ok"]
        absolute = f"{1e3 * statistics.median(dt):9.2f} ms" if dt else ""
        print(f"{name:34} {meta['origin']:18} {meta['mode_word']:8} {desc:11} {fmt(stats(e))}  {span:18} {absolute}")
    for title, key in (("per origin (independent source)", lambda r: r["origin"]),
                       ("per GPU band", lambda r: band_of(r["device"])),
                       ("per GPU", lambda r: r["device"]),
                       ("per mode", lambda r: r["mode"]),
                       ("per scale", lambda r: "1 GPU" if r["nodes"] * r["gpus_per_node"] == 1
                        else "1 node" if r["nodes"] == 1 else "several nodes")):
        print(f"\n{title:52}   n  med|err|  signed med  slower faster")
        for k, e in sorted(group(results, key).items()):
            print(f"  {k:50} {fmt(stats(e), e)}")
    votes = [stats(e) for e in by_file.values()]
    if votes:
        print(f"\ncorpus, each file one vote ({len(votes)} files): median of |error| medians "
              f"{100 * statistics.median(v[1] for v in votes):.1f}%, of signed medians "
              f"{100 * statistics.median(v[2] for v in votes):+.1f}% (files slower {sum(v[2] > 0 for v in votes)}, "
              f"faster {sum(v[2] < 0 for v in votes)}); rows predicted slower {sum(r['error'] > 0 for r in ok)}"
              f", faster {sum(r['error'] < 0 for r in ok)}; median |error| of all rows "
              f"{100 * statistics.median(abs(r['error']) for r in ok):.1f}% (unsigned: no sign cancels)")
    pt2 = [r for r in results if r["pytorch2_optimizer"]]
    print(f"rows whose step would use PyTorch 2.x's foreach/fused optimizer: {len(pt2)}"
          + (f" ({', '.join(sorted({r['file'] for r in pt2}))})" if pt2 else
             " (no training row runs torch.optim under PyTorch >= 2; the 2.x rows are forward passes)"))
    for r in results:
        if r["status"] in ("refused", "failed"):
            print(f"{r['status']}: {r['file']} {r['row']}: {r['why']}")
    for name in metas:
        rows = [r for r in results if r["file"] == name and r["status"] == "unsupported"]
        if rows:
            print(f"unsupported: {name}, {len(rows)} rows: {rows[0]['why']}")
    for r in results:
        if r["status"] == "inconsistent":
            print(f"inconsistent with its description: {r['file']} {r['row']}: {r['why']}")
    counts = {s: sum(r["status"] == s for r in results)
              for s in ("ok", "refused", "unsupported", "inconsistent", "failed")}
    counts["failed"] += failed_files
    print(f"{counts['ok']} rows compared, {counts['refused']} refused, {counts['unsupported']} unsupported, "
          f"{counts['inconsistent']} beyond their stated precision's peak, {counts['failed']} failed")
    return counts


def conformal_band(residuals, p_low=P_LOW, p_high=P_HIGH):
    """Split-conformal ends of residuals at the finite-sample ranks; (-inf, inf) where too few to hold the level."""
    r = sorted(residuals)
    n = len(r)
    lo_rank, hi_rank = math.floor((n + 1) * p_low), math.ceil((n + 1) * p_high)
    lo = r[lo_rank - 1] if lo_rank >= 1 else -math.inf
    hi = r[hi_rank - 1] if hi_rank <= n else math.inf
    return lo, hi


def pooled_band(rows, p_low=P_LOW, p_high=P_HIGH):
    """Each origin one vote (CDF pooling, Dunn, Wasserman and Ramdas, JASA 2023): a row of an origin with n rows
    weighs 1/(n x origins); the ends are the smallest residuals whose pooled weight at or below reaches p_low and
    p_high. rows: (origin, residual). What vitsim does (core/src/results/corpus_error.cpp corpus_band)."""
    count = {}
    for o, _ in rows:
        count[o] = count.get(o, 0) + 1
    weighted = sorted((x, 1.0 / (count[o] * len(count))) for o, x in rows)

    def at(p):
        total = 0.0
        for x, w in weighted:
            total += w
            if total >= p - 1e-12:
                return x
        return weighted[-1][0]
    return at(p_low), at(p_high)


def narrowest_band(rows, cover):
    """The narrowest band (ends on rows' residuals, width exp(hi) - exp(lo) of the central value) that holds
    `cover` of the rows in-sample, each origin one vote (a row of an origin with n rows weighs 1/(n x origins)):
    no band applied to every row, wherever it is placed and however it is found, holds that share of the corpus
    narrower (a bound on the interval method, not a hold-out). rows: (origin, residual). Returns (lo, hi)."""
    count = {}
    for o, _ in rows:
        count[o] = count.get(o, 0) + 1
    weighted = sorted((x, 1.0 / (count[o] * len(count))) for o, x in rows)
    best = None
    for i in range(len(weighted)):
        total = 0.0
        for j in range(i, len(weighted)):
            total += weighted[j][1]
            if total >= cover - 1e-12:
                if best is None or math.exp(weighted[j][0]) - math.exp(weighted[i][0]) < best[1] - best[0]:
                    best = (math.exp(weighted[i][0]), math.exp(weighted[j][0]))
                break
    return best


def pooled_holdout(ok):
    """Leave one origin out with pooled_band: (held, rows, origins held, origins, median width); prints a table."""
    origins = sorted({r["origin"] for r in ok})
    print(f"\neach origin one vote (CDF pooling; what vitsim predict --interval uses for an uncalibrated point), "
          "leave one origin out")
    print(f"{'held-out origin':24} {'n':>3} {'band (x predicted)':>22} {'width':>8} {'inside':>8}")
    held, rows, holds, widths = 0, 0, 0, []
    for o in origins:
        lo, hi = pooled_band([(r["origin"], r["residual"]) for r in ok if r["origin"] != o])
        mine = [r["residual"] for r in ok if r["origin"] == o]
        inside = sum(lo <= x <= hi for x in mine)
        held, rows = held + inside, rows + len(mine)
        holds += inside >= (P_HIGH - P_LOW) * len(mine) - 1e-9
        widths.append(math.exp(hi) - math.exp(lo))
        print(f"{o:24} {len(mine):3d} {math.exp(lo):9.3f} .. {math.exp(hi):7.3f} {100 * widths[-1]:7.0f}% "
              f"{inside:3d}/{len(mine):<3d}")
    lo, hi = pooled_band([(r["origin"], r["residual"]) for r in ok])
    print(f"held-out rows inside their band: {held}/{rows} ({100 * held / rows:.0f}%; stated "
          f"{100 * (P_HIGH - P_LOW):.0f}%); median width {100 * statistics.median(widths):.0f}% of the central value; "
          f"origins held at >= {100 * (P_HIGH - P_LOW):.0f}%: {holds} of {len(origins)}")
    print(f"the band vitsim applies (every origin): x{math.exp(lo):.3f} .. x{math.exp(hi):.3f}, a width of "
          f"{100 * (math.exp(hi) - math.exp(lo)):.0f}% of the central value")
    level = P_HIGH - P_LOW
    nlo, nhi = narrowest_band([(r["origin"], r["residual"]) for r in ok], level)
    print(f"the narrowest band that holds {100 * level:.0f}% of the corpus in-sample (each origin one vote, no "
          f"hold-out: a bound on any one band, not a method): x{nlo:.3f} .. x{nhi:.3f}, a width of "
          f"{100 * (nhi - nlo):.0f}% of the central value")
    return {"held": held, "rows": rows, "origins_held": holds, "origins": len(origins),
            "median_width": statistics.median(widths), "band": [math.exp(lo), math.exp(hi)],
            "narrowest_in_sample": [nlo, nhi]}


def conformal(results):
    """Leave one origin out: coverage of the other origins' p10-p90 band, and the half-width that holds COVER."""
    ok = [r for r in results if r["status"] == "ok"]
    for r in ok:
        r["residual"] = math.log(r["measured_s"] / r["predicted_s"])
    origins = sorted({r["origin"] for r in ok})
    if len(origins) < 2:
        print("conformal: fewer than two origins; nothing to hold out")
        return None
    print(f"\nsplit-conformal p{round(100 * P_LOW)}-p{round(100 * P_HIGH)} of log(measured/predicted), "
          "leave one origin out")
    print(f"{'held-out origin':24} {'n':>3} {'band (x predicted)':>22} {'width':>8} {'inside':>8}")
    held, widths, offsets, holds = [], [], [], 0
    for o in origins:
        rest = [r["residual"] for r in ok if r["origin"] != o]
        mine = [r["residual"] for r in ok if r["origin"] == o]
        lo, hi = conformal_band(rest)
        inside = [lo <= x <= hi for x in mine]
        width = math.exp(hi) - math.exp(lo)
        held += inside
        holds += sum(inside) >= COVER * len(inside)
        widths.append(width)
        centre = statistics.median(rest)
        offsets += [abs(x - centre) for x in mine]
        print(f"{o:24} {len(mine):3d} {math.exp(lo):9.3f} .. {math.exp(hi):7.3f} {100 * width:7.0f}% "
              f"{sum(inside):3d}/{len(inside):<3d}")
    cov = sum(held) / len(held)
    need = sorted(offsets)[max(0, math.ceil(COVER * len(offsets)) - 1)]
    print(f"held-out rows inside their band: {sum(held)}/{len(held)} ({100 * cov:.0f}%; stated {100 * (P_HIGH - P_LOW):.0f}%)"
          f"; median width {100 * statistics.median(widths):.0f}% of the central value; origins held at >= "
          f"{100 * COVER:.0f}%: {holds} of {len(origins)}")
    print(f"to hold {100 * COVER:.0f}% of held-out rows: log half-width {need:.3f} around the other origins' median "
          f"residual, x{math.exp(-need):.3f}..x{math.exp(need):.3f}, a width of "
          f"{100 * (math.exp(need) - math.exp(-need)):.0f}% of the central value")
    nlo, nhi = narrowest_band([(i, r["residual"]) for i, r in enumerate(ok)], P_HIGH - P_LOW)
    print(f"the narrowest band that holds {100 * (P_HIGH - P_LOW):.0f}% of the rows in-sample (each row one vote, no "
          f"hold-out): x{nlo:.3f} .. x{nhi:.3f}, a width of {100 * (nhi - nlo):.0f}% of the central value")
    pooled = pooled_holdout(ok)
    return {"coverage": cov, "median_width": statistics.median(widths), "half_width_for_cover": need,
            "origins_held": holds, "origins": len(origins), "pooled": pooled}


RESIDUALS = os.path.join(ROOT, "data", "corpus_residuals.txt")
RESIDUALS_HEADER = """\
# vitsim's own error on the public corpus (issue 37 item 3; docs/predict.md "The model's own error"): every row of
# bench/data/public/*.txt that vitsim predicts, from the catalogue's figures alone (no calibration), its measured
# and predicted time of a step (or of a forward pass) in seconds. Compiled into vitsim (core/CMakeLists.txt):
# predict --interval takes an uncalibrated point's band from it (core/results/corpus_error.hpp), vitsim fit its
# bounds. Written by `bench/public_steps.sh PATH/TO/vitsim --write-residuals`; do not edit. The ctest
# corpus_residuals (public_steps.py --check-residuals) fails when it is stale against the corpus or the model.
# columns: origin file line measured_s predicted_s
"""


def write_residuals(results, path):
    """The table of every predicted row (origin file line measured_s predicted_s); refused rows as comments."""
    lines = [RESIDUALS_HEADER]
    for r in results:
        if r["status"] == "ok":
            lines.append(f"{r['origin']} {r['file']}.txt {r['line']} {r['measured_s']:.12g} {r['predicted_s']:.12g}\n")
        elif r["status"] in ("refused", "inconsistent"):
            lines.append(f"# {r['status']}: {r['file']}.txt:{r['line']}: {r['why']}\n")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    print(f"wrote {path}: {sum(r['status'] == 'ok' for r in results)} rows")


def check_residuals(vitsim, data, path, tmp):
    """The table against the corpus (every row, cheap: no prediction) and today's model (the first and the last
    row of each file predicted again). Returns the list of what is stale (empty: current)."""
    table, refused, stale = {}, set(), []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            for status in ("refused", "inconsistent"):  # rows predicted but not in the table, as written
                if line.startswith(f"# {status}: "):
                    name, row = line[len(f"# {status}: "):].split(":")[:2]
                    refused.add(f"{name}:{row}")
            if line.startswith("#") or not line.strip():
                continue
            origin, name, row, measured, predicted = line.split()
            table[(name, int(row))] = (origin, float(measured), float(predicted), f"{path}:{lineno}")
    seen = set()
    for name in sorted(f for f in os.listdir(data) if f.endswith(".txt")):
        meta, rows = read_file(os.path.join(data, name))
        mine = [r for r in rows if r["model"] != "unsupported" and f"{name}:{r['line']}" not in refused]
        for r in mine:
            key = (name, r["line"])
            if key not in table:
                stale.append(f"{name}:{r['line']}: a corpus row the table lacks")
                continue
            seen.add(key)
            origin, measured, predicted, where = table[key]
            if origin != meta["origin"]:
                stale.append(f"{where}: origin {origin}, the corpus file says {meta['origin']}")
            want = measured_time(meta, r)
            if abs(measured - want) > 1e-9 * want:
                stale.append(f"{where}: measured {measured:.12g} s, the corpus row gives {want:.12g} s")
        for r in {id(x): x for x in (mine[:1] + mine[-1:])}.values():
            if (name, r["line"]) not in table:
                continue
            got, _ = predict_row(vitsim, meta, r, os.path.join(tmp, name), f"{name}:{r['line']}")
            origin, measured, predicted, where = table[(name, r["line"])]
            if abs(got - predicted) > 1e-9 * got:
                stale.append(f"{where}: predicted {predicted:.12g} s, today's model {got:.12g} s")
    stale += [f"{table[k][3]}: no such row in the corpus" for k in table if k not in seen]
    return stale


def self_test(vitsim, tmp):
    assert abs(err(1.1, 1.0) - 0.1) < 1e-12 and stats([0.1, -0.3, 0.2]) == (3, 0.2, 0.1)
    assert band_of("T4") == "power-capped" and band_of("RTX3090") == "consumer" and band_of("H100-SXM") == "Hopper"
    # Ranks of 9 residuals at p10-p90: floor(10 x .1) = 1st and ceil(10 x .9) = 9th; of 5: floor(.6) = 0, -inf.
    assert conformal_band(list(range(9))) == (0, 8)
    assert conformal_band(list(range(5)))[0] == -math.inf
    # Each origin one vote: a's two rows weigh 1/4 each, b's one 1/2. In order 0 (1/4), 0.5 (3/4), 1 (1): p10 is 0,
    # p90 1; with b at 2: 0 (1/4), 1 (1/2), 2 (1), and p60 (0.6) is b's 2 where one vote a row would give 1 (2/3).
    assert pooled_band([("a", 0.0), ("a", 1.0), ("b", 0.5)]) == (0.0, 1.0)
    assert pooled_band([("a", 0.0), ("a", 1.0), ("b", 2.0)], 0.1, 0.6) == (0.0, 2.0)
    # The narrowest band holding 80%: a's four rows weigh 1/8 each, b's one 1/2. b's row (log 2) and three of
    # a's are 7/8 >= 0.8; a's rows at 0 and b's at log 2 span x1..x2 (a width of 1); four of a's alone are 1/2.
    nb = narrowest_band([("a", 0.0), ("a", 0.0), ("a", 0.0), ("a", 0.0), ("b", math.log(2))], 0.8)
    assert abs(nb[0] - 1) < 1e-12 and abs(nb[1] - 2) < 1e-12, nb
    # One vote a row (one origin): four of five rows at 0 hold 80% at a width of 0.
    assert narrowest_band([("a", 0.0)] * 4 + [("a", 1.0)], 0.8) == (1.0, 1.0)
    base = ("# source: self-test\n# origin: self\n# hardware: -\n# software: -\n# pytorch: -\n# precision: fp16\n"
            "# mode: {mode}\n# optimizer: none\n# input: device\n# measure: {measure}\n"
            "# platform: --gpu rtx3090 --precision fp16\n# scenario: training.precision=fp16 model.attention=math\n"
            "# described: faithful\n")
    for mode, measure, value in (("train", "samples_per_s", 1.0), ("forward", "latency_ms", 1.0)):
        path = os.path.join(tmp, f"self_{mode}.txt")
        with open(path, "w") as f:
            f.write(base.format(mode=mode, measure=measure) + f"r vit_tiny_patch16_224 32 1 1 1 {value}\n")
        meta, rows = read_file(path)
        pred, _ = predict_row(vitsim, meta, rows[0], os.path.join(tmp, mode), path)
        # The row vitsim predicted itself: its value written back has 0% error.
        exact = 32 / pred if measure == "samples_per_s" else pred * 1e3
        with open(path, "w") as f:
            f.write(base.format(mode=mode, measure=measure) + f"r vit_tiny_patch16_224 32 1 1 1 {exact!r}\n")
        _, res = evaluate(vitsim, "self", path, tmp)
        assert res[0]["status"] == "ok" and abs(res[0]["error"]) < 1e-9, res
    # A row faster than its precision's peak allows: a forward pass of 3 GFLOP (a third of a 9 GFLOP step of one
    # micro-batch) on a 10 TFLOP/s peak takes 0.3 ms at least; 0.2 ms is beyond it, 0.3 ms is not.
    point = {"flops_per_gpu_step": {"model": 9e9}, "peak_flops_per_gpu": 10e12}
    forward = {"mode_word": "forward"}
    assert "0.3 ms at least" in beyond_peak(forward, {"accum": 1}, 0.2e-3, point)
    assert beyond_peak(forward, {"accum": 1}, 0.3e-3, point) is None
    assert beyond_peak({"mode_word": "train"}, {"accum": 1}, 0.9e-3, point) is None  # 9 GFLOP: 0.9 ms at least
    assert beyond_peak({"mode_word": "train"}, {"accum": 1}, 0.8e-3, point) is not None
    for bad, want in (("r vit_tiny_patch16_224 32 1 1 1 1\n", "before the file's '# source:'"),
                      ("# source: x\nr vit_tiny_patch16_224 32 1 1 1\n", "want 'name model"),
                      ("# source: x\nr vit_tiny_patch16_224 32 1 1 1 0\n", "a value > 0")):
        path = os.path.join(tmp, "bad.txt")
        with open(path, "w") as f:
            f.write(bad)
        try:
            read_file(path)
            raise AssertionError(f"accepted: {bad!r}")
        except Failed as e:
            assert want in str(e) and f"{path}:" in str(e), e
    print("public_steps.py self-test: ok (arithmetic, conformal ranks, the narrowest band, a row predicted by vitsim itself at 0% error, "
          "rows beyond their precision's peak, bad rows refused with file and line)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vitsim", default=os.path.join(ROOT, "build", "app", "vitsim"))
    ap.add_argument("--data", default=os.path.join(HERE, "data", "public"))
    ap.add_argument("--file", action="append", help="only this corpus file (name without .txt); repeatable")
    ap.add_argument("--json", help="write every row's result here")
    ap.add_argument("--detail", action="store_true", help="print every row")
    ap.add_argument("--smoke", action="store_true", default=os.environ.get("VITSIM_BENCH_SMOKE") == "1")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--conformal", action="store_true", help="leave-one-origin-out split-conformal coverage")
    ap.add_argument("--write-residuals", nargs="?", const=RESIDUALS, metavar="PATH",
                    help="write the table vitsim compiles in (default data/corpus_residuals.txt); the whole corpus")
    ap.add_argument("--check-residuals", nargs="?", const=RESIDUALS, metavar="PATH",
                    help="exit 1 when the table is stale against the corpus or today's model (fast: the first "
                    "and last row of each file predicted)")
    a = ap.parse_args()
    if not os.access(a.vitsim, os.X_OK):
        sys.exit(f"public_steps.py: no vitsim binary at {a.vitsim}: build it or pass --vitsim")
    with tempfile.TemporaryDirectory() as tmp:
        if a.self_test:
            self_test(a.vitsim, tmp)
            return 0
        if a.check_residuals:
            stale = check_residuals(a.vitsim, a.data, a.check_residuals, tmp)
            for line in stale:
                print(f"stale: {line}")
            print(f"{a.check_residuals}: " + (f"{len(stale)} stale: regenerate it with bench/public_steps.sh "
                                              "PATH/TO/vitsim --write-residuals" if stale else "current"))
            return 1 if stale else 0
        names = sorted(f[:-4] for f in os.listdir(a.data) if f.endswith(".txt"))
        if a.file:
            unknown = [f for f in a.file if f not in names]
            if unknown:
                sys.exit(f"public_steps.py: no corpus file {', '.join(unknown)}; valid: {', '.join(names)}")
            names = a.file
        if a.smoke:
            names = [n for n in names if n in SMOKE_FILES]
        metas, results = {}, []
        for name in names:
            try:
                meta, res = evaluate(a.vitsim, name, os.path.join(a.data, name + ".txt"), tmp, only_first=a.smoke)
            except Failed as e:
                print(f"failed: {e}")
                results.append({"file": name, "status": "failed", "why": str(e), "row": "-"})
                continue
            metas[name] = meta
            results += res
    counts = report([r for r in results if "origin" in r], metas, a.detail,
                    failed_files=sum(1 for r in results if "origin" not in r))
    summary = conformal([r for r in results if "origin" in r]) if a.conformal else None
    if a.write_residuals:
        if a.smoke or a.file:
            sys.exit("public_steps.py: --write-residuals takes the whole corpus (no --smoke, no --file)")
        write_residuals([r for r in results if "origin" in r], a.write_residuals)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": results, "conformal": summary}, f, indent=1)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
