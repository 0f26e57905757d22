"""How NCCL cuts one call into loops and steps, and what a band of a measured table says about its ramp.

Used by nccl_tests_corpus.py --ramp (docs/benchmarks.md, "nccl-tests corpus (issue 36)", "What is left below
64 MiB"). Nothing here is fitted or enters a prediction: it is NCCL's own chunking, read at v2.18.3-1 (the
corpus's most common release; v2.27.7-1 has the same rules for Ring and NVLS), and a straight line through a
table's measured times.

NCCL's chunking (x86 defaults; NCCL_BUFFSIZE and friends unset):
- buffSizes: Simple DEFAULT_BUFFSIZE 4 MiB, LL128 DEFAULT_LL128_BUFFSIZE 120 x 640 x 8 x 8 B, LL
  DEFAULT_LL_BUFFSIZE 8 x 512 x 8 x 16 B (v2.18.3-1 src/init.cc:500-502), NCCL_STEPS 8 slots
  (src/include/devcomm.h:34); a step is buffSize / NCCL_STEPS, of which LL carries half and LL128 120/128 as
  data (src/collectives/device/primitives.h:34-66).
- Ring all-reduce and all-gather: a chunk is a step, x ALLREDUCE_CHUNKSTEPS (= ALLGATHER_CHUNKSTEPS =
  NCCL_STEPS / 2) under Simple (src/include/collectives.h:114-117); a loop moves channels x ranks chunks
  (src/collectives/device/all_reduce.h:20-22, all_gather.h:20-24), and a size below one loop is cut into
  channels x ranks smaller chunks (all_reduce.h:39-43): one loop, whatever the size. A channel runs 2(n-1)
  (all-reduce) or n-1 (all-gather) steps per loop.
- NVLS all-reduce: chunks of 128 KiB, 64 KiB below 64 x ops x 128 KiB, 32 KiB below 8 x ops x 64 KiB, 16 KiB
  below 2 x ops x 32 KiB, ops = channels x NVLS heads (src/enqueue.cc:1338-1346; v2.27.7-1
  src/enqueue.cc:2003-2017 with nvlsChunkSize 128 KiB); a loop is ops chunks, one step per chunk and head.
  Heads: one per GPU on a node without NICs (src/graph/search.cc:834-836); ASSUMPTION: a node with NICs the
  same (its NVLS graph's channels; the corpus's NVLS nodes have a NIC per GPU).
- Tree, CollNet, NVLSTree, PAT: not here (their chunk follows the tree's depth; NCCL corrects the tree's
  medium sizes itself, treeCorrectionFactor).
"""

import math

KIB, MIB = 1 << 10, 1 << 20
NCCL_STEPS = 8
STEP_BYTES = {  # data bytes of one step per protocol (module docstring)
    "Simple": (4 * MIB) // NCCL_STEPS,
    "LL128": (120 * 640 * 8 * 8) // NCCL_STEPS * 15 // 16,
    "LL": (8 * 512 * 8 * 16) // NCCL_STEPS // 2,
}


def nvls_chunk(size, channels, heads):
    """NVLS all-reduce's chunk for SIZE bytes (src/enqueue.cc:1338-1346 at v2.18.3-1)."""
    ops, chunk = channels * heads, 128 * KIB
    if size < 64 * ops * chunk:
        chunk = 64 * KIB
    if size < 8 * ops * chunk:
        chunk = 32 * KIB
    if size < 2 * ops * chunk:
        chunk = 16 * KIB
    return chunk


def loops(algo, proto, op, ranks, channels, size):
    """(loops, steps a channel runs) NCCL cuts SIZE bytes (nccl-tests' size) into; None where not modelled."""
    if algo == "Ring" and op in ("all_reduce", "all_gather") and proto in STEP_BYTES:
        chunk = STEP_BYTES[proto] * (NCCL_STEPS // 2 if proto == "Simple" else 1)
        n = math.ceil(size / (channels * ranks * chunk))
        return n, n * (2 if op == "all_reduce" else 1) * (ranks - 1)
    if algo == "NVLS" and op == "all_reduce":
        n = math.ceil(size / (channels * ranks * nvls_chunk(size, channels, ranks)))
        return n, n * ranks
    return None


def line(points):
    """Least squares time = a + size / r over (size bytes, time us): (a us, r GB/s); None under 3 points or a
    slope <= 0."""
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx  # us per byte
    if slope <= 0:
        return None
    return my - slope * mx, 1e-3 / slope


def nvls_regimes(points, channels, heads):
    """Over (size bytes, time us) of an NVLS all-reduce from 1 MiB: per chunk NCCL picks (nvls_chunk), the
    marginal cost in us per MiB (line()) and the steps a channel runs per MiB, 1 MiB / (channels x chunk) (a
    loop of channels x heads chunks is heads steps a channel), as [(chunk, us per MiB, steps per MiB)], the
    regimes of at least 3 sizes."""
    by_chunk = {}
    for size, t in points:
        if size >= MIB:
            by_chunk.setdefault(nvls_chunk(size, channels, heads), []).append((size, t))
    out = []
    for chunk, pts in sorted(by_chunk.items()):
        fit = line(pts)
        if fit:
            out.append((chunk, MIB / (fit[1] * 1e3), MIB / (channels * chunk)))
    return out


def self_test():
    """Known answers, worked from the rules above."""
    # Two ranks, 24 channels, Ring/Simple: a loop is 24 x 2 x 2 MiB = 96 MiB.
    assert loops("Ring", "Simple", "all_reduce", 2, 24, 96 * MIB) == (1, 2)
    assert loops("Ring", "Simple", "all_reduce", 2, 24, 96 * MIB + 1) == (2, 4)
    # LL128: 614400 B steps, 576000 of data; 8 ranks, 24 channels: 110,592,000 B a loop.
    assert loops("Ring", "LL128", "all_reduce", 8, 24, 110592000) == (1, 14)
    # NVLS, 16 channels x 8 heads = 128 ops: 16 KiB below 8 MiB, 32 KiB below 64 MiB, 64 KiB below 1 GiB.
    assert [nvls_chunk(s, 16, 8) for s in (4 * MIB, 32 * MIB, 512 * MIB, 1 << 30)] == [16 * KIB, 32 * KIB,
                                                                                       64 * KIB, 128 * KIB]
    assert loops("NVLS", "Simple", "all_reduce", 8, 16, 32 * MIB) == (8, 64)
    assert loops("Tree", "LL128", "all_reduce", 16, 16, MIB) is None
    # 1 us per step of a channel on top of 100 GB/s: 16 KiB chunks run 4 steps a MiB (16 channels x 8
    # heads), 32 KiB 2.
    sizes = (MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB)
    regimes = nvls_regimes([(s, s / 1e5 + 1.0 * s * 8 / (16 * 8 * nvls_chunk(s, 16, 8))) for s in sizes], 16, 8)
    assert [(c, round(u, 6), k) for c, u, k in regimes] == [(16 * KIB, round(MIB / 1e5 + 4, 6), 4.0),
                                                           (32 * KIB, round(MIB / 1e5 + 2, 6), 2.0)]
    # time = 10 us + size / (100 GB/s)
    a, r = line([(s, 10 + s / 1e5) for s in (MIB, 4 * MIB, 16 * MIB)])
    assert abs(a - 10) < 1e-9 and abs(r - 100) < 1e-9
    assert line([(1, 1.0), (2, 1.0), (3, 0.5)]) is None and line([(1, 1.0), (2, 2.0)]) is None
