#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) training the same ViT as `vitsim train` on synthetic data.

Run by bench/train_vs_ddp.sh through torch.distributed.run; prints one JSON line on rank 0:
{"ranks", "micro_batch", "steps", "step_p50_s", "step_mean_s", "img_s"} (img_s from the median step).
The model mirrors real/src/model/model.cpp layer for layer: conv patch embedding, class token, position
embedding [T, 1, d], pre-norm blocks with nn.MultiheadAttention on [T, B, d] (the layout LibTorch 1.13
uses), GELU MLP, final LayerNorm, linear head on the class token.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, heads)
        self.ln2 = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        y = self.ln1(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        x = x + y
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, image, patch, channels, d, depth, heads, mlp_ratio, classes):
        super().__init__()
        tokens = (image // patch) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embedding = nn.Parameter(torch.empty(tokens, 1, d).normal_(std=0.02))
        self.patch_embed = nn.Conv2d(channels, d, patch, stride=patch)
        self.blocks = nn.ModuleList([Block(d, heads, round(d * mlp_ratio)) for _ in range(depth)])
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        b = x.shape[0]
        x = self.patch_embed(x).flatten(2).permute(2, 0, 1)
        x = torch.cat([self.class_token.expand(1, b, -1), x], 0) + self.pos_embedding
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x)[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--model", default="28,7,1,64,4,4,2.0,10", help="image,patch,channels,width,depth,heads,mlp,classes")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    image, patch, channels, d, depth, heads, mlp, classes = a.model.split(",")
    torch.manual_seed(1)
    model = ViT(int(image), int(patch), int(channels), int(d), int(depth), int(heads), float(mlp), int(classes))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    # Synthetic data in memory: uniform bytes normalised as vitsim's synthetic source (mean 0.5, std 0.2887).
    g = torch.Generator().manual_seed(100 + rank)
    n = a.micro_batch * (a.steps + a.warmup)
    images = ((torch.randint(0, 256, (n, int(channels), int(image), int(image)), generator=g).float() / 255) - 0.5) / 0.2887
    labels = torch.randint(0, int(classes), (n,), generator=g)
    times = []
    for s in range(a.steps + a.warmup):
        t0 = time.perf_counter()
        x = images[s * a.micro_batch:(s + 1) * a.micro_batch]
        y = labels[s * a.micro_batch:(s + 1) * a.micro_batch]
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times = times[a.warmup:]
    # The step of the job is the slowest rank's.
    t = torch.tensor([statistics.median(times), statistics.mean(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"ranks": world, "micro_batch": a.micro_batch, "steps": a.steps,
                          "step_p50_s": t[0].item(), "step_mean_s": t[1].item(),
                          "img_s": a.micro_batch * world / t[0].item()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
