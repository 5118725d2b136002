"""This CPU's two roofs, measured with the current torch thread count, so that figures from two machines compare
(the measurements are `search_r1_course.cpu_training`'s, `09d_cpu_training`).

* the **matmul roof**: bfloat16 matrix products of 2048 x 2048 (GFLOP/s, median of 10);
* the **bandwidth roof**: a read of a 1 GiB bfloat16 tensor (GB/s, median of 5), as the maximum of its bits read as
  16-bit integers: the cheapest reduction per element, so memory, not arithmetic, sets its pace (a bfloat16 `max` or
  `sum` over the same tensor measured 13 and 16 GB/s where this measured 23 on one machine).

A decoding step reads every weight once whatever the number of rows in flight, so `decode_roof` is the lower of the
matmul rate (tokens/s = GFLOP/s / GFLOP per token) and the bandwidth times the rows divided by the weights' bytes.
"""
import torch

from search_r1_course.cpu_training import decode_roof, matmul_gflops, read_gbs  # noqa: F401 (the benchmarks import them from here)


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
