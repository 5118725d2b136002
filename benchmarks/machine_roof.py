"""This CPU's two roofs, measured with the current torch thread count, so that figures from two machines compare.

* the **matmul roof**: bfloat16 matrix products of 2048 x 2048 (GFLOP/s, median of 10);
* the **bandwidth roof**: a read of a 1 GiB bfloat16 tensor (GB/s, median of 5), as the maximum of its bits read as
  16-bit integers: the cheapest reduction per element, so memory, not arithmetic, sets its pace (a bfloat16 `max` or
  `sum` over the same tensor measured 13 and 16 GB/s where this measured 23 on one machine).

A decoding step reads every weight once whatever the number of rows in flight, so `decode_roof` is the lower of the
matmul rate (tokens/s = GFLOP/s / GFLOP per token) and the bandwidth times the rows divided by the weights' bytes.
"""
import statistics
import time

import torch


def _median_seconds(fn, reps: int, warmup: int = 2) -> float:
    for _ in range(warmup): fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_gflops(n: int = 2048, reps: int = 20) -> float:
    "Median bf16 GFLOP/s of an n x n matrix product."
    a, b = torch.randn(n, n, dtype=torch.bfloat16), torch.randn(n, n, dtype=torch.bfloat16)
    return 2 * n ** 3 / _median_seconds(lambda: a @ b, reps, warmup=5) / 1e9


def read_gbs(gib: float = 1.0, reps: int = 5) -> float:
    "Median GB/s of reading a `gib` GiB bf16 tensor once (a max over its bits: one read, no write)."
    x = torch.ones(int(gib * 2 ** 30) // 2, dtype=torch.bfloat16).view(torch.int16)
    return x.numel() * 2 / _median_seconds(lambda: x.max(), reps) / 1e9


def decode_roof(gflops: float, gbs: float, gflop_per_token: float, weight_bytes: int, rows: int) -> dict:
    "Tokens/s a perfect decoder could sample with `rows` in flight: both roofs and which binds."
    by_matmul, by_bandwidth = gflops / gflop_per_token, gbs * 1e9 * rows / weight_bytes
    return {"matmul": by_matmul, "bandwidth": by_bandwidth, "roof": min(by_matmul, by_bandwidth),
            "binds": "matmul" if by_matmul <= by_bandwidth else "bandwidth"}


def describe(model, rows: int) -> tuple[dict, str]:
    "Measure both roofs for `model` at `rows` in flight; a one-line summary."
    gflop_per_token = 2 * sum(p.numel() for p in model.parameters()) / 1e9
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    gflops, gbs = matmul_gflops(), read_gbs()
    roof = decode_roof(gflops, gbs, gflop_per_token, weight_bytes, rows)
    roof.update(gflops=gflops, gbs=gbs, gflop_per_token=gflop_per_token, weight_bytes=weight_bytes, rows=rows)
    line = (f"{torch.get_num_threads()} thread(s): bf16 matmul {gflops:.0f} GFLOP/s -> {roof['matmul']:.0f} tokens/s; "
            f"read {gbs:.1f} GB/s x {rows} rows / {weight_bytes / 1e6:.0f} MB of weights per step -> "
            f"{roof['bandwidth']:.0f} tokens/s; the {roof['binds']} roof binds: {roof['roof']:.0f} tokens/s")
    return roof, line
