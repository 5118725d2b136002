"""Where one decoding step of the rollout goes: the packaged policy in bfloat16, --rows rows with a cache of --cache
positions each, one new token per row, as the course's generator runs it (decode attention, packed linear weights),
beside what the step must read from memory.

    python benchmarks/decode_step_bench.py [--threads 2] [--rows 32] [--cache 330] [--steps 16] [--compiled]

A decoding step reads every weight once, and every row's keys and values in every layer once. At --rows 32 and a
cache of 330 positions (a rollout's third turn) the two are about the same size, so the step's floor is their bytes
divided by the read bandwidth, not the matmul roof (the step's products are ~8.6 GFLOP). Printed: the median step
(wall clock, --steps steps after two not counted), the floor and its share, and the profiler's split of the operators'
own time into the linear layers, attention over the cache, the LM head (with the embedding) and the rest (small
elementwise operators: norms, rotary embeddings, activations, casts, copies). Run nothing else CPU-heavy meanwhile.

--compiled: then every decoder layer compiled by `torch.compile` (inductor, shapes dynamic), on the plain weights:
inductor cannot take the packed ones, which are not constants of its graph, and freezing the weights into the graph
would be wrong for GRPO, whose weights change every step. Printed beside the packed eager step: the compilation time,
the compiled step's median and the share of greedy tokens that agree with the eager run's.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rows", type=int, default=32)
ap.add_argument("--cache", type=int, default=330, help="positions already in each row's cache")
ap.add_argument("--steps", type=int, default=16)
ap.add_argument("--compiled", action="store_true", help="also time the decoder layers compiled by torch.compile")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from search_r1_course.cpu_training import compile_layers, matmul_gflops, read_gbs  # noqa: E402
from search_r1_course.fast_generate import PackedLinears, use_decode_attention  # noqa: E402
from search_r1_course.kv_cache import _new_cache  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402

GROUPS = {"linear layers": ("mkldnn::_linear_pointwise", "aten::addmm", "aten::linear"),
          "attention over the cache": ("aten::bmm", "aten::_softmax", "aten::masked_fill", "aten::nan_to_num")}
HEAD = "LM head and embedding"   # every operator with an input as wide as the vocabulary


def steps(model, n: int, prof=None, tokens: list | None = None) -> list[float]:
    "Prefill --rows rows of --cache random tokens, then time `n` one-token steps (greedy; their tokens go to `tokens`)."
    torch.manual_seed(0)
    ids = torch.randint(100, model.config.vocab_size - 100, (args.rows, args.cache))
    cache, mask = _new_cache(model.config, args.cache + n + 8), torch.ones(args.rows, args.cache, dtype=torch.long)
    out = model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True, logits_to_keep=1)
    times = []
    if prof is not None: prof.start()
    for _ in range(n):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        if tokens is not None: tokens.append(nxt)
        mask = torch.cat([mask, mask.new_ones(args.rows, 1)], 1)
        t0 = time.perf_counter()
        out = model(input_ids=nxt, attention_mask=mask, cache=cache, use_cache=True, logits_to_keep=1)
        times.append(time.perf_counter() - t0)
    if prof is not None: prof.stop()
    return times


@torch.no_grad()
def main():
    model, _ = load_policy(dtype="bf16", threads=args.threads)
    model.eval()
    cfg = model.config
    params = list(model.parameters())   # the head is tied to the embedding
    weight_bytes, flop = sum(p.numel() * p.element_size() for p in params), 2 * sum(p.numel() for p in params) * args.rows
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv_bytes = 2 * cfg.num_hidden_layers * args.rows * cfg.num_key_value_heads * head_dim * (args.cache + args.steps // 2) * 2
    gbs, gflops = read_gbs(), matmul_gflops()
    floor_ms = (weight_bytes + kv_bytes) / (gbs * 1e9) * 1e3
    print(f"{args.threads} thread(s): read {gbs:.1f} GB/s, bf16 matmul {gflops:.0f} GFLOP/s; {args.rows} rows, cache of "
          f"{args.cache} positions")
    print(f"a step reads {weight_bytes / 1e6:.0f} MB of weights and {kv_bytes / 1e6:.0f} MB of keys and values: "
          f"at least {floor_ms:.1f} ms at the read bandwidth; its products need "
          f"{flop / 1e9 / gflops * 1e3:.1f} ms at the matmul roof")
    use_decode_attention(model, True)
    eager_tokens = []
    with PackedLinears(rows=args.rows).applied(model):
        wall = steps(model, args.steps + 2, tokens=eager_tokens)[2:]
        med = statistics.median(wall) * 1e3
        print(f"step: median {med:.1f} ms of {args.steps} ({', '.join(f'{t * 1e3:.0f}' for t in wall)}); the floor is "
              f"{100 * floor_ms / med:.0f}% of it; {args.rows / med * 1e3:.0f} tokens/s")
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        n = max(4, args.steps // 2)
        steps(model, n, prof)
    split, total = dict.fromkeys([*GROUPS, HEAD], 0.0), 0.0
    for e in prof.key_averages(group_by_input_shape=True):
        ms = e.self_cpu_time_total / 1e3 / n   # ms a step
        total += ms
        if any(cfg.vocab_size in shape for shape in e.input_shapes if shape): split[HEAD] += ms
        else:
            group = next((g for g, keys in GROUPS.items() if e.key in keys), None)
            if group: split[group] += ms
    split["the rest (small operators)"] = total - sum(split.values())
    print(f"operators' own time under the profiler: {total:.1f} ms a step")
    for g, ms in split.items(): print(f"  {g:>28}: {ms:6.1f} ms ({100 * ms / total:4.1f}%)")
    if args.compiled: compiled(model, med, torch.cat(eager_tokens, 1))
    use_decode_attention(model, False)


def compiled(model, eager_ms: float, eager_tokens: torch.Tensor) -> None:
    "Compile every decoder layer, then time the same steps and compare their greedy tokens with the eager run's."
    compile_layers(model, grad_only=False)   # decoding records no gradients
    t0 = time.perf_counter()
    steps(model, 2)   # the prefill's and the decoding step's graphs
    compile_s = time.perf_counter() - t0
    tokens = []
    wall = steps(model, args.steps + 2, tokens=tokens)[2:]
    med = statistics.median(wall) * 1e3
    same = (torch.cat(tokens, 1) == eager_tokens).float().mean().item()
    print(f"compiled layers: {compile_s:.0f} s to compile; step median {med:.1f} ms against {eager_ms:.1f} ms packed and "
          f"eager ({eager_ms / med:.2f}x); greedy tokens equal to the eager run's: {100 * same:.0f}%")


if __name__ == "__main__":
    main()
