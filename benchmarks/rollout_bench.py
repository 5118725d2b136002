"""Rollout speed against this CPU's roof: the batched engine with and without its caches, and one trajectory at a time.

    python benchmarks/rollout_bench.py [--threads 1 2] [--runs 3] [--loop-runs 1] [--questions 8] [--group 4]

What is measured (one run of the script measures everything it prints, so ratios compare like with like):

* **the roofs** (`machine_roof.py`): bfloat16 matrix products of 2048 x 2048 (GFLOP/s) divided by what
  SmolLM2-135M costs per token (2 x 134.5M parameters = 0.27 GFLOP), and the read bandwidth (a 1 GiB tensor) times the
  32 rows in flight divided by the 270 MB of weights a decoding step reads; the lower binds, and each throughput is
  printed as a share of both;
* **batched**: all questions x group trajectories played together by `RolloutEngine`, one `generate` call per turn
  over the live ones, with `TransformersGenerator`'s defaults (shared-prefix cache, each row's cache kept between
  turns, `decode_attention`, prefill in groups of similar length, tokens drawn by inverting the cumulative
  distribution);
* **batched, weights not packed**: the same with `packed_linear=False` (the linear layers reorder their weights for
  the kernel at every call, as plain PyTorch does), the ratio of that one speed-up;
* **batched, prefix cache only**: the same with `packed_linear=False`, `row_cache=False, fast_attention=False, grouped_prefill=False,
  cdf_sampling=False` (the generator before those four were added), to show what they bring;
* **one at a time**: each trajectory alone (batch 1), what a naive loop over episodes does.

All use the same model (the packaged SmolLM2-135M-Instruct in bfloat16), the main job's prompt style (`short`),
BM25 top-1, budgets (up to 3 turns of up to 40 sampled tokens, 256 completion tokens, observations of at most 96),
temperature 1.0 and seeds. Throughput counts sampled tokens (the policy's own; prefill of prompts and observations is
part of the cost, not of the count). Because the inserted search results make most of a trajectory's context, a
second figure counts all the work: every token position the model ran (prompts, observations, sampled tokens and
padding, from a forward hook), times the cost per token, as a share of the matmul roof in GFLOP/s. Figures are medians
over --runs runs. Run nothing else CPU-heavy meanwhile:
the load average before and after each block is printed, and on a shared 2-core machine two threads competing with
another process slow down several times.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts to measure, in turn")
ap.add_argument("--runs", type=int, default=3, help="batched runs per configuration (the median is reported)")
ap.add_argument("--loop-runs", type=int, default=1, help="one-at-a-time runs (slow: several times the batched time; 0: skip)")
ap.add_argument("--questions", type=int, default=8)
ap.add_argument("--group", type=int, default=4, help="trajectories per question")
ap.add_argument("--prompt-style", default="short", help="'short' (the main job's) or 'demo' (a ~300-token demonstration)")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(max(args.threads))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from search_r1_course.data import load_world  # noqa: E402
from search_r1_course.fast_generate import TransformersGenerator  # noqa: E402
from search_r1_course.policy import describe_policy, load_policy  # noqa: E402
from search_r1_course.protocol import TagProtocol  # noqa: E402
from search_r1_course.rollout import RolloutConfig, RolloutEngine  # noqa: E402
from search_r1_course.search import SearchTool, make_retriever  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_roof import describe  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main():
    model, tok = load_policy(dtype="bf16", threads=max(args.threads))
    gflop_per_token = 2 * sum(p.numel() for p in model.parameters()) / 1e9
    protocol = TagProtocol(args.prompt_style, tokenizer=tok)
    tool = SearchTool(make_retriever("bm25"), topk=1)
    cfg = RolloutConfig(max_turns=3, max_new_tokens_per_turn=40, max_total_tokens=256, max_obs_tokens=96, temperature=1.0)
    engines = {"batched": TransformersGenerator(model, tok),
               "batched, weights not packed": TransformersGenerator(model, tok, packed_linear=False),
               "batched, prefix cache only": TransformersGenerator(model, tok, row_cache=False, fast_attention=False,
                                                                   grouped_prefill=False, cdf_sampling=False,
                                                                   packed_linear=False)}
    engines = {name: RolloutEngine(g, protocol, tool, tok, cfg) for name, g in engines.items()}
    questions = load_world("test")[:args.questions]
    G = args.group
    print(f"{describe_policy(model)}; {gflop_per_token:.3f} GFLOP per token; {len(questions)} questions x {G} "
          f"trajectories, <= 3 turns of <= 40 tokens, temperature 1.0, prompt style {args.prompt_style!r}")

    ran = [0]   # token positions through the model (batch x new positions per forward), padding included
    model.register_forward_pre_hook(lambda m, a, kw: ran.__setitem__(0, ran[0] + kw["input_ids"].numel()), with_kwargs=True)

    def batched(engine, seed):
        return engine.run(questions, group_size=G, seed=seed)

    def one_at_a_time(engine, seed):
        return [engine.run([q], group_size=1, seed=seed * 1000 + i * G + g)[0] for i, q in enumerate(questions) for g in range(G)]

    for threads in args.threads:
        torch.set_num_threads(threads)
        roofs, line = describe(model, rows=len(questions) * G)
        roof_gflops, roof = roofs["gflops"], roofs["roof"]
        print(f"\n{line} (load average {load()})")
        for engine in engines.values(): engine.run(questions[:2], group_size=2, seed=999)  # warm-up
        speed = {}
        plan = [(name, batched, engine, args.runs) for name, engine in engines.items()]
        if args.loop_runs: plan.append(("one at a time", one_at_a_time, engines["batched"], args.loop_runs))
        for name, fn, engine, runs in plan:
            tps, work = [], []
            for r in range(runs):
                ran[0] = 0
                t0 = time.perf_counter()
                trajs = fn(engine, r)
                seconds = time.perf_counter() - t0
                tps.append(sum(t.n_sampled for t in trajs) / seconds)
                work.append(ran[0] * gflop_per_token / seconds)
            speed[name] = statistics.median(tps)
            print(f"  rollout {name}: {speed[name]:.1f} tok/s = {100 * speed[name] / roof:.1f}% of the binding roof, "
                  f"{100 * speed[name] / roofs['matmul']:.1f}% of the matmul one "
                  f"(median of {runs}; runs {', '.join(f'{x:.1f}' for x in tps)}; load average {load()})", flush=True)
            print(f"    all positions the model ran: {statistics.median(work):.0f} GFLOP/s = "
                  f"{100 * statistics.median(work) / roof_gflops:.1f}% of the matmul roof", flush=True)
        print(f"  batched / weights not packed: {speed['batched'] / speed['batched, weights not packed']:.2f}x;  "
              f"batched / prefix cache only: {speed['batched'] / speed['batched, prefix cache only']:.2f}x"
              + (f";  batched / one at a time: {speed['batched'] / speed['one at a time']:.1f}x" if args.loop_runs else ""))


if __name__ == "__main__":
    main()
