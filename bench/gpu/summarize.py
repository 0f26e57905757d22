#!/usr/bin/env python3
"""Images/s and model FLOP utilisation (MFU) of a `vitsim train --out` report.

    summarize.py SCENARIO.xml REPORT.json [--peak-tflops T] [--gpu NAME]

Model FLOPs per image are core's training workload (core/src/model/vit.cpp, build_workload): forward plus
backward of every layer, 1 MAC = 2 FLOPs; backward is twice forward except the patch embedding's (its
weight gradient only: the image needs no gradient). The usual 3 x forward is printed next to it. The
model's shape is the scenario's <model> (a preset, read from core/src/model/vit.cpp's table, then any explicit
attribute). MFU = FLOPs per image x images/s / the GPU's peak dense BF16 FLOP/s.

Prints a Markdown table row for docs/benchmarks.md and one key=value line; writes nothing.
"""
import argparse
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Peak dense BF16 tensor FLOP/s (without sparsity), from NVIDIA's datasheets. H200 SXM: 989 TFLOP/s
# ("1,979 TFLOPS" BF16 in the H200 datasheet is with 2:4 sparsity; dense is half). H200 NVL: 835.
PEAK_BF16_TFLOPS = [("H200 NVL", 835.0), ("H200", 989.0), ("H100 NVL", 835.0), ("H100 PCIe", 756.0), ("H100", 989.0),
                    ("A100", 312.0)]

FIELDS = ["image_size", "patch", "channels", "width", "depth", "heads", "mlp_ratio", "classes"]


def presets():
    src = open(os.path.join(REPO, "core", "src", "model", "vit.cpp")).read()
    out = {}
    for m in re.finditer(r'\{"(\w+)",\s*\{([^{}]*)\}\}', src):
        vals = [v.strip() for v in m.group(2).split(",")]
        if vals and vals[0].startswith('"'):  # ViTConfig's leading name field ("" in the preset table)
            vals = vals[1:]
        if len(vals) != len(FIELDS):
            continue
        if not all(re.fullmatch(r"[0-9.]+(\s*/\s*[0-9.]+)?", v) for v in vals):
            continue
        # A figure may be a quotient as the table writes it ("48.0 / 11.0": ViT-g's MLP ratio).
        num = [float(a) / float(b) if b else float(a) for a, _, b in (v.partition("/") for v in vals)]
        out[m.group(1)] = {k: (x if k == "mlp_ratio" else int(x)) for k, x in zip(FIELDS, num)}
    return out


def element_of(scenario, sets, element):
    e = ET.parse(scenario).getroot().find(element)
    attrs = dict(e.attrib) if e is not None else {}
    for s in sets:  # --set ELEMENT.KEY=VALUE overrides, as vitsim train applies them
        k, _, v = s.partition("=")
        if k.startswith(element + "."):
            attrs[k[len(element) + 1:]] = v
    return attrs


def model_of(scenario, sets):
    attrs = element_of(scenario, sets, "model")
    cfg = {}
    if "preset" in attrs:
        table = presets()
        if attrs["preset"] not in table:
            sys.exit(f"summarize: preset {attrs['preset']} not in core/src/model/vit.cpp")
        cfg.update(table[attrs["preset"]])
    for k in FIELDS:
        if k in attrs:
            cfg[k] = float(attrs[k]) if k == "mlp_ratio" else int(attrs[k])
    return cfg


def flops_per_image(c):
    """(forward, backward) FLOPs per sample, as core's build_workload counts them."""
    T = (c["image_size"] // c["patch"]) ** 2 + 1
    N = T - 1
    d = c["width"]
    h = round(d * c["mlp_ratio"])
    P = c["patch"] ** 2 * c["channels"]
    fwd = bwd = 0.0
    pe = 2.0 * N * P * d
    fwd += pe
    bwd += pe
    attn = 2.0 * (T * d * 3 * d + T * d * d) + 2.0 * 2 * T * T * d
    mlp = 2.0 * (T * d * h * 2)
    fwd += c["depth"] * (attn + mlp)
    bwd += c["depth"] * 2 * (attn + mlp)
    head = 2.0 * d * c["classes"]
    fwd += head
    bwd += 2 * head
    return fwd, bwd


def peak_for(gpu):
    for name, tf in PEAK_BF16_TFLOPS:
        if name.lower() in gpu.lower():
            return tf
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("report")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--gpu", default="")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="peak dense BF16 TFLOP/s (default: by --gpu name)")
    ap.add_argument("--label", default="")
    a = ap.parse_args()

    cfg = model_of(a.scenario, a.sets)
    fwd, bwd = flops_per_image(cfg)
    rep = json.load(open(a.report))
    p = rep["points"][0]
    ips = p["throughput_img_s"]
    st = p["step_time_s"]
    b = p["breakdown_s"]
    device = p["per_rank"][0].get("device", "?") if p.get("per_rank") else "?"
    peak = a.peak_tflops or peak_for(a.gpu)
    achieved = (fwd + bwd) * ips
    mfu = f"{100 * achieved / (peak * 1e12):.1f}%" if peak > 0 and device.startswith("cuda") else "n/a"
    prec = element_of(a.scenario, a.sets, "training").get("precision", "fp32")
    notes = " ".join(p.get("notes", []))
    # "measured: N steps per rank, statistics over steps after the first W" (or "over all of them" when
    # N <= W: the trainer then leaves none out).
    steps = re.search(r"measured: (\d+) steps per rank, statistics over (?:steps after the first (\d+)|all)", notes)
    if steps:
        n, w = int(steps.group(1)), int(steps.group(2) or 0)
        steps_txt = f"{n - w} of {n}"
    else:
        steps_txt = "?"
    label = a.label or os.path.splitext(os.path.basename(a.scenario))[0]
    mem = p.get("memory_per_gpu_bytes", 0) / 2**30
    print(f"| {label} | {cfg['image_size']} px | {p['micro_batch']} | {prec} | {device} | {steps_txt} | {ips:.1f} | "
          f"{1e3 * st['p50']:.1f} | {1e3 * b['data']:.1f} | {fwd / 1e9:.2f} + {bwd / 1e9:.2f} (3 x fwd {3 * fwd / 1e9:.2f}) | "
          f"{achieved / 1e12:.1f} | {mfu} | {mem:.1f} |")
    print(f"{label}: device={device} images_per_s={ips:.1f} step_ms_mean={1e3 * st['mean']:.2f} "
          f"step_ms_p50={1e3 * st['p50']:.2f} step_ms_p95={1e3 * st['p95']:.2f} data_ms={1e3 * b['data']:.2f} "
          f"h2d_ms={1e3 * b['h2d']:.2f} fwd_ms={1e3 * b['compute_fwd']:.2f} bwd_ms={1e3 * b['compute_bwd']:.2f} "
          f"opt_ms={1e3 * b['optimizer']:.2f} gflop_per_image={(fwd + bwd) / 1e9:.3f} "
          f"model_tflops={achieved / 1e12:.2f} peak_bf16_tflops={peak:g} mfu={mfu} precision={prec}")


if __name__ == "__main__":
    main()
