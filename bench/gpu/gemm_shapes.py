#!/usr/bin/env python3
"""Times, on one device, the GEMMs a ViT training step runs, shaped as vitsim's op model shapes them
(core/src/model/ops.cpp), plus the square torch.mm sizes the catalogue's GEMM efficiency comes from, and
writes one JSON table (schema vitsim.gemm_table/1) that `vitsim calibrate --from-gemm-table` fits the op
model's GEMM figures to (docs/calibrate-validate.md "A GEMM table"). Needs PyTorch only: no vitsim build.

  python3 bench/gpu/gemm_shapes.py --out gemms.json                 # a CUDA GPU: about 1-2 minutes
  python3 bench/gpu/gemm_shapes.py --device cpu --out gemms.json    # a CPU: a few small shapes

Per ViT (its width d, heads H, MLP width h), token count T and micro-batch b, with R = b T rows:
- every linear layer (qkv d->3d, out_proj d->d, fc1 d->h, fc2 h->d, the head d->classes at b rows): the
  forward GEMM y[R, out] = x[R, in] W^T (torch.mm with the weight transposed, as F.linear's addmm; the
  bias is not in it: vitsim models the bias as its own bytes), the data gradient dX[R, in] = dY W and the
  weight gradient dW[out, in] = dY^T X (dY transposed, as autograd's mm backward);
- attention's batched matmuls (PyTorch 1.13's multi_head_attention_forward, the math path): q, k, v are
  [T, b H, hd] views transposed to [b H, T, hd] (batch stride hd, row stride b H hd), QK^T = bmm(q, k^T),
  PV = bmm(p, v) with p contiguous [b H, T, T]; backward dQ = bmm(dS, k), dK^T = bmm(q^T, dS) ([b H, hd,
  T]: vitsim shapes it as its transpose, the same tiles), dP = bmm(dO, v^T) and dV = bmm(p^T, dO), dO the
  transposed view the output's layout copy hands back.
Each shape in each dtype: fp16, bf16 (where the device has it), fp32 with TF32 off (PyTorch's default for
matmuls since 1.12, what vitsim's fp32 peak is), and tf32 (fp32 with TF32 on; compute capability >= 8.0).
Timing: warm-up calls, then `--repeats` blocks of back-to-back calls (enough for --block-ms each) timed
with CUDA events on a GPU (perf_counter around a synchronised block on a CPU); each repeat's time per
call is its block over its calls; the table keeps the median (and min, max) of the repeats. Operands are
random normal, allocated once per shape (warm in the L2 cache, as in a loop).
"""
import argparse
import functools
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

torch = None  # imported in main(), after the CPU thread counts are in the environment

SCHEMA = "vitsim.gemm_table/1"

# vitsim's presets (core/src/model/vit.cpp vit_preset): width, heads, MLP ratio, classes.
MODELS = {
    "vit_b_16": (768, 12, 4.0, 1000),
    "vit_l_16": (1024, 16, 4.0, 1000),
    "vit_h_14": (1280, 16, 4.0, 1000),
    "vit_tiny_patch16_224": (192, 3, 4.0, 1000),
    "vit_fmnist_tiny": (64, 4, 2.0, 10),
}
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "float32"}  # torch's names

# What a run measures unless told otherwise: on a GPU ViT-B/16 and ViT-L/16 at 224 px (197 tokens) and
# 384 px (577 tokens), three micro-batches each, squares 1024..10240; on a CPU a small ViT and a few
# small squares, so that the flow can be tested anywhere.
DEFAULTS = {
    "cuda": dict(models="vit_b_16,vit_l_16", tokens="197,577", micro_batches="8,32,128",
                 squares="1024,2048,3072,4096,5120,6144,7168,8192,9216,10240", dtypes="fp16,bf16,fp32,tf32"),
    "cpu": dict(models="vit_fmnist_tiny", tokens="17,65", micro_batches="2,8", squares="64,128,256",
                dtypes="fp32"),
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="the JSON table to write")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    p.add_argument("--models", help=f"comma list of {', '.join(MODELS)}")
    p.add_argument("--tokens", help="comma list of token counts (197: 224 px at patch 16; 577: 384 px)")
    p.add_argument("--micro-batches", help="comma list of micro-batch sizes")
    p.add_argument("--squares", help="comma list of square torch.mm sizes n (n x n x n); '' for none")
    p.add_argument("--dtypes", help="comma list of fp16, bf16, fp32, tf32 (those the device lacks are left "
                                    "out and said so)")
    p.add_argument("--warmup", type=int, default=3, help="calls before timing (default 3)")
    p.add_argument("--repeats", type=int, default=7, help="timed blocks per shape (default 7)")
    p.add_argument("--block-ms", type=float, default=5.0, help="least time of one timed block (default 5 ms)")
    p.add_argument("--max-calls", type=int, default=200, help="most calls in one block (default 200)")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads (torch.set_num_threads; default 1; 0 = torch's own)")
    p.add_argument("--wall", action="store_true",
                   help="on a CPU, wall time even with one thread (default there: the thread's CPU time)")
    p.add_argument("--quiet", action="store_true", help="no table on stdout")
    a = p.parse_args(argv)
    kind = "cpu" if a.device == "cpu" else "cuda"
    for key, value in DEFAULTS[kind].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.warmup < 0 or a.repeats < 1 or a.block_ms <= 0 or a.max_calls < 1:
        p.error("--warmup >= 0, --repeats >= 1, --block-ms > 0, --max-calls >= 1")
    for m in split(a.models):
        if m not in MODELS:
            p.error(f"--models: unknown model '{m}'; valid: {', '.join(MODELS)}")
    for d in split(a.dtypes):
        if d not in DTYPES:
            p.error(f"--dtypes: unknown dtype '{d}'; valid: {', '.join(DTYPES)}")
    return a


def split(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def ints(text, what):
    out = []
    for t in split(text):
        if not t.isdigit() or int(t) < 1:
            sys.exit(f"gemm_shapes.py: error: {what}: '{t}' is not a positive integer")
        out.append(int(t))
    return out


# ---- the shapes ----

def linear_shapes(name, rows, fan_in, fan_out):
    """Forward, data and weight gradient of y = x W^T: (op, pass, m, n, k, make) with make(dtype, device)
    returning the operands as eager PyTorch passes them and the call."""
    def fwd(dt, dev):
        x, w = rand(rows, fan_in, dt, dev), rand(fan_out, fan_in, dt, dev)
        return x, w.t(), torch.mm

    def dgrad(dt, dev):
        dy, w = rand(rows, fan_out, dt, dev), rand(fan_out, fan_in, dt, dev)
        return dy, w, torch.mm

    def wgrad(dt, dev):
        dy, x = rand(rows, fan_out, dt, dev), rand(rows, fan_in, dt, dev)
        return dy.t(), x, torch.mm

    return [(name, "fwd", rows, fan_out, fan_in, 1, fwd),
            (name + ".dgrad", "bwd", rows, fan_in, fan_out, 1, dgrad),
            (name + ".wgrad", "bwd", fan_out, fan_in, rows, 1, wgrad)]


def attention_shapes(b, heads, tokens, hd):
    bh, t = b * heads, tokens

    def heads_view(dt, dev):  # [T, b H, hd] transposed to [b H, T, hd], as 1.13's MHA makes q, k, v
        return rand(t, bh, hd, dt, dev).transpose(0, 1)

    def qk(dt, dev):
        return heads_view(dt, dev), heads_view(dt, dev).transpose(1, 2), torch.bmm

    def av(dt, dev):
        return rand(bh, t, t, dt, dev), heads_view(dt, dev), torch.bmm

    def qk_dq(dt, dev):  # dQ = dS k
        return rand(bh, t, t, dt, dev), heads_view(dt, dev), torch.bmm

    def qk_dk(dt, dev):  # dK^T = q^T dS
        return heads_view(dt, dev).transpose(1, 2), rand(bh, t, t, dt, dev), torch.bmm

    def av_dprobs(dt, dev):  # dP = dO v^T
        return heads_view(dt, dev), heads_view(dt, dev).transpose(1, 2), torch.bmm

    def av_dv(dt, dev):  # dV = p^T dO
        return rand(bh, t, t, dt, dev).transpose(1, 2), heads_view(dt, dev), torch.bmm

    return [("qk", "fwd", t, t, hd, bh, qk), ("av", "fwd", t, hd, t, bh, av),
            ("qk.dq", "bwd", t, hd, t, bh, qk_dq), ("qk.dk", "bwd", hd, t, t, bh, qk_dk),
            ("av.dprobs", "bwd", t, t, hd, bh, av_dprobs), ("av.dv", "bwd", t, hd, t, bh, av_dv)]


def vit_shapes(model, tokens, b):
    d, heads, ratio, classes = MODELS[model]
    h, rows = int(d * ratio), b * tokens
    out = []
    for op, fan_in, fan_out in (("qkv", d, 3 * d), ("out_proj", d, d), ("fc1", d, h), ("fc2", h, d)):
        out += [(o, "gemm", p, m, n, k, batch, f) for o, p, m, n, k, batch, f in
                linear_shapes(op, rows, fan_in, fan_out)]
    out += [(o, "attn_matmul", p, m, n, k, batch, f) for o, p, m, n, k, batch, f in
            attention_shapes(b, heads, tokens, d // heads)]
    out += [(o, "gemm", p, m, n, k, batch, f) for o, p, m, n, k, batch, f in
            linear_shapes("head", b, d, classes)]
    return out


def square_shape(n):
    def make(dt, dev):
        return rand(n, n, dt, dev), rand(n, n, dt, dev), torch.mm
    return ("square", "gemm", "fwd", n, n, n, 1, make)


def rand(*shape_dt_dev):
    *shape, dt, dev = shape_dt_dev
    return torch.randn(*shape, dtype=dt, device=dev)


# ---- timing ----

class Timer:
    """CUDA events on a GPU; on a CPU with one thread the process's CPU time (a shared machine's other
    work then does not count: it takes time slices, not this process's cycles), else wall time."""

    def __init__(self, device, wall):
        self.cuda = device.type == "cuda"
        self.device = device
        self.clock = time.perf_counter if wall or torch.get_num_threads() > 1 else time.process_time
        self.method = ("cuda events" if self.cuda else
                       "perf_counter (wall)" if self.clock is time.perf_counter else "process_time (CPU time)")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def block(self, call, n):
        """Seconds per call of n back-to-back calls."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                call()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3 / n
        t0 = self.clock()
        for _ in range(n):
            call()
        return (self.clock() - t0) / n


def time_shape(timer, call, a):
    for _ in range(a.warmup):
        call()
    timer.sync()
    one = max(timer.block(call, 1), 1e-7)
    calls = max(1, min(a.max_calls, math.ceil(a.block_ms * 1e-3 / one)))
    per_call = [timer.block(call, calls) for _ in range(a.repeats)]
    return statistics.median(per_call), min(per_call), max(per_call), calls


# ---- the device ----

def nvidia_smi(gpu_index):
    """Clocks and limits nvidia-smi reports now (None where it cannot be read)."""
    if not shutil.which("nvidia-smi"):
        return None
    fields = ["clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.draw", "power.limit",
              "temperature.gpu", "driver_version"]
    try:
        text = subprocess.run(["nvidia-smi", f"--id={gpu_index}", "--query-gpu=" + ",".join(fields),
                               "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    values = [v.strip() for v in text.split(",")]
    if len(values) != len(fields):
        return None
    return dict(zip(fields, values))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_record(device):
    rec = {"kind": device.type, "torch": torch.__version__, "python": platform.python_version(),
           "host": platform.node()}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        prop = torch.cuda.get_device_properties(index)
        rec.update(name=prop.name, sm_count=prop.multi_processor_count,
                   capability=f"{prop.major}.{prop.minor}", memory_bytes=prop.total_memory,
                   cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                   cublas_workspace=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
                   clocks_before=nvidia_smi(index))
    else:
        rec.update(name=cpu_name(), sm_count=torch.get_num_threads(),
                   threads=torch.get_num_threads(), cuda=None)
    return rec


def dtypes_for(device, wanted):
    """The dtypes this device runs, and a line per one left out."""
    keep, notes = [], []
    for d in wanted:
        if device.type == "cuda":
            major = torch.cuda.get_device_properties(device).major
            if d == "bf16" and not torch.cuda.is_bf16_supported():
                notes.append("bf16 left out: the device does not run it")
                continue
            if d == "tf32" and major < 8:
                notes.append("tf32 left out: no TF32 before compute capability 8.0")
                continue
        elif d == "tf32":
            notes.append("tf32 left out: a CPU has no TF32")
            continue
        keep.append(d)
    return keep, notes


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


# ---- main ----

def measure(a, device, timer, dtypes, done_dtype):
    jobs = []
    for model in split(a.models):
        for tokens in ints(a.tokens, "--tokens"):
            for b in ints(a.micro_batches, "--micro-batches"):
                for shape in vit_shapes(model, tokens, b):
                    jobs.append((model, tokens, b, shape))
    for n in ints(a.squares, "--squares") if a.squares.strip() else []:
        jobs.append((None, None, None, square_shape(n)))
    rows = []
    for dtype in dtypes:
        set_tf32(dtype == "tf32")
        for model, tokens, b, (op, cls, pas, m, n, k, batch, make) in jobs:
            x, y, fn = make(getattr(torch, DTYPES[dtype]), device)
            median, low, high, calls = time_shape(timer, functools.partial(fn, x, y), a)
            rows.append({"op": op, "class": cls, "pass": pas, "model": model, "tokens": tokens,
                         "micro_batch": b, "batch": batch, "m": m, "n": n, "k": k, "dtype": dtype,
                         "tf32": dtype == "tf32", "strides": {"a": list(x.stride()), "b": list(y.stride())},
                         "median_s": median, "min_s": low, "max_s": high, "repeats": a.repeats,
                         "calls_per_repeat": calls, "flops": 2.0 * batch * m * n * k})
            del x, y
        if device.type == "cuda":
            torch.cuda.empty_cache()
        done_dtype(rows, dtypes[:dtypes.index(dtype) + 1])
    set_tf32(False)
    return rows


def print_table(rows):
    print(f"{'dtype':<5} {'model':<16} {'T':>4} {'b':>4} {'op':<10} {'batch':>6} {'m':>7} {'n':>6} {'k':>7} "
          f"{'median':>10} {'TFLOP/s':>8}")
    for r in rows:
        print(f"{r['dtype']:<5} {r['model'] or '-':<16} {r['tokens'] or '-':>4} {r['micro_batch'] or '-':>4} "
              f"{r['op']:<10} {r['batch']:>6} {r['m']:>7} {r['n']:>6} {r['k']:>7} "
              f"{r['median_s'] * 1e3:>8.4f}ms {r['flops'] / r['median_s'] / 1e12:>8.2f}")
    for dtype in sorted({r["dtype"] for r in rows}):
        squares = [r for r in rows if r["dtype"] == dtype and r["op"] == "square"]
        if squares:
            best = max(squares, key=lambda r: r["flops"] / r["median_s"])
            print(f"best square torch.mm {dtype}: n = {best['m']}, {best['flops'] / best['median_s'] / 1e12:.2f} "
                  f"TFLOP/s")


def main(argv):
    global torch
    a = parse_args(argv)
    if a.device == "cpu" and a.threads > 0:  # the BLAS and OpenMP pools read these when torch loads
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(a.threads)
    import torch as torch_module
    torch = torch_module
    if a.device != "cpu" and not torch.cuda.is_available():
        sys.exit(f"gemm_shapes.py: error: --device {a.device}: torch {torch.__version__} sees no CUDA device "
                 "(--device cpu times a CPU)")
    if a.threads > 0 and a.device == "cpu":
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    wanted = split(a.dtypes)
    dtypes, notes = dtypes_for(device, wanted)
    for line in notes:
        print(f"gemm_shapes.py: {line}", file=sys.stderr)
    if not dtypes:
        sys.exit("gemm_shapes.py: error: --dtypes: none of " + ", ".join(wanted) + " runs on " + a.device)
    rec = device_record(device)
    timer = Timer(device, a.wall)
    t0 = time.time()
    index = device.index if device.index is not None else (torch.cuda.current_device() if device.type == "cuda"
                                                             else 0)

    def write(rows, done, final=False):
        """The table so far (after each dtype: a run cut short keeps what it measured), atomically."""
        if final and device.type == "cuda":
            rec["clocks_after"] = nvidia_smi(index)
        table = {
            "schema": SCHEMA,
            "generator": "bench/gpu/gemm_shapes.py",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join([os.path.basename(sys.argv[0])] + argv),
            "device": rec,
            "timing": {"method": timer.method,
                       "warmup": a.warmup, "repeats": a.repeats, "block_ms": a.block_ms, "statistic": "median",
                       "seconds": time.time() - t0},
            "dtypes": done,
            "complete": final,
            "notes": notes,
            "shapes": rows,
        }
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(table, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.out)
        return table

    rows = measure(a, device, timer, dtypes, write)
    table = write(rows, dtypes, final=True)
    if not a.quiet:
        print_table(rows)
    print(f"gemm_shapes.py: {len(rows)} shapes on {rec['name']} ({', '.join(dtypes)}) in "
          f"{table['timing']['seconds']:.1f} s; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
