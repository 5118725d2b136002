"""Rollout speed: the batched engine against the same trajectories run one at a time.

    python benchmarks/rollout_bench.py [--threads 2] [--runs 3] [--loop-runs 1] [--questions 8] [--group 4]

Both sides use the same engine code, model (the packaged SmolLM2-135M-Instruct in bfloat16), prompt style
(`demo`, results as a user turn), BM25 top-3 search, sampling settings, seeds and budgets (up to --turns turns of at
most --max-new tokens). "batched" runs all questions x group trajectories together, one generate call per turn
over the live ones; "one at a time" runs each trajectory alone (batch 1), which is what a naive loop over episodes
does. Throughput counts sampled tokens (the policy's own tokens; prefill of prompts and observations is part of the
cost, not of the count). Figures are medians over runs; the table prints both sides and their ratio.
Thread counts are fixed before torch loads; run nothing else CPU-heavy at the same time (on a shared 2-core machine,
--threads 1 is the robust choice: two threads competing with other processes slowed decoding 3-4x here).

Where the time goes (measured with the defaults): each turn re-reads the whole context (a ~320-token prompt with
demonstrations, plus earlier turns and results), and that prefill is compute-bound at batch 1 already, so batching
speeds it up about 2x, while decoding speeds up about 5x; prefill was about 40% of the batched run. Reusing the
key/value cache of the shared prompt prefix, and of each trajectory across turns, is the next lever.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, default=2, help="torch / OpenMP threads")
ap.add_argument("--runs", type=int, default=3, help="batched runs (the median is reported)")
ap.add_argument("--loop-runs", type=int, default=1, help="one-at-a-time runs (slow: about 3x the batched time)")
ap.add_argument("--questions", type=int, default=8)
ap.add_argument("--group", type=int, default=4, help="trajectories per question")
ap.add_argument("--turns", type=int, default=3, help="max turns per trajectory")
ap.add_argument("--max-new", type=int, default=48, help="max sampled tokens per turn")
ap.add_argument("--temperature", type=float, default=1.0)
ap.add_argument("--dtype", default="bf16")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from search_r1_course.data import load_world  # noqa: E402
from search_r1_course.generate import TransformersGenerator  # noqa: E402
from search_r1_course.policy import describe_policy, load_policy  # noqa: E402
from search_r1_course.protocol import TagProtocol  # noqa: E402
from search_r1_course.rollout import RolloutConfig, RolloutEngine, rollout_metrics  # noqa: E402
from search_r1_course.search import SearchTool, make_retriever  # noqa: E402


def measure(fn):
    t0 = time.perf_counter()
    trajs = fn()
    return time.perf_counter() - t0, trajs


def main():
    torch.set_num_threads(args.threads)
    model, tok = load_policy(dtype=args.dtype, threads=args.threads)
    protocol = TagProtocol("demo", observation="user_turn", tokenizer=tok)
    tool = SearchTool(make_retriever("bm25"), topk=3)
    cfg = RolloutConfig(max_turns=args.turns, max_new_tokens_per_turn=args.max_new, max_total_tokens=1024,
                        max_obs_tokens=256, temperature=args.temperature)
    engine = RolloutEngine(TransformersGenerator(model, tok), protocol, tool, tok, cfg)
    questions = load_world("test")[:args.questions]
    G = args.group
    print(f"{describe_policy(model)}; {torch.get_num_threads()} threads; {len(questions)} questions x {G} "
          f"trajectories, <= {args.turns} turns of <= {args.max_new} tokens, temperature {args.temperature}")

    def batched(seed):
        return engine.run(questions, group_size=G, seed=seed)

    def one_at_a_time(seed):
        # trajectory g of question q gets the same per-run seed offset on both sides
        return [engine.run([q], group_size=1, seed=seed * 1000 + i * G + g)[0]
                for i, q in enumerate(questions) for g in range(G)]

    engine.run(questions[:2], group_size=2, seed=999)  # warm-up (allocator, kernels)
    rows = {"batched": [], "one at a time": []}
    for r in range(args.runs):
        rows["batched"].append(measure(lambda: batched(r)))
        print(f"  batched run {r}: {rows['batched'][-1][0]:.1f} s", flush=True)
    for r in range(args.loop_runs):
        rows["one at a time"].append(measure(lambda: one_at_a_time(r)))
        print(f"  one-at-a-time run {r}: {rows['one at a time'][-1][0]:.1f} s", flush=True)

    print()
    print(f"{'':>14} {'runs':>4} {'seconds':>8} {'sampled tok':>11} {'tok/s':>7} {'traj/s':>7} {'turns':>5} "
          f"{'searches':>8} {'answered':>8}")
    speed = {}
    for name, results in rows.items():
        secs = [s for s, _ in results]
        toks = [sum(t.n_sampled for t in trajs) for _, trajs in results]
        tps = [n / s for n, s in zip(toks, secs)]
        m = rollout_metrics(results[-1][1])
        speed[name] = statistics.median(tps)
        print(f"{name:>14} {len(results):>4} {statistics.median(secs):>8.1f} {statistics.median(toks):>11.0f} "
              f"{speed[name]:>7.1f} {len(results[-1][1]) / statistics.median(secs):>7.2f} {m['rollout/turns']:>5.2f} "
              f"{m['rollout/search_calls']:>8.2f} {m['rollout/answered_rate']:>8.2f}")
    ratio = speed["batched"] / speed["one at a time"]
    print(f"\nbatched / one at a time: {ratio:.1f}x sampled tokens per second (target >= 4x on 2 cores)")


if __name__ == "__main__":
    main()
