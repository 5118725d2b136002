"""Rollout speed: the batched engine against the same trajectories run one at a time.

    python benchmarks/rollout_bench.py [--threads 2] [--runs 3] [--loop-runs 1] [--questions 8] [--group 4]
                                       [--no-prefix-cache]

Both sides use the same engine code, model (the packaged SmolLM2-135M-Instruct in bfloat16), prompt style
(`demo`, results as a user turn), BM25 top-3 search, sampling settings, seeds and budgets (up to --turns turns of at
most --max-new tokens). "batched" runs all questions x group trajectories together, one generate call per turn
over the live ones; "one at a time" runs each trajectory alone (batch 1), which is what a naive loop over episodes
does. Throughput counts sampled tokens (the policy's own tokens; prefill of prompts and observations is part of the
cost, not of the count). Figures are medians over runs; the table prints both sides and their ratio.
Thread counts are fixed before torch loads; run nothing else CPU-heavy at the same time (on a shared 2-core machine,
--threads 1 is the robust choice: two threads competing with other processes slowed decoding 3-4x here).

Where the time goes (measured with the defaults, one thread, load average about 2 from other work on the two cores).
Each turn re-reads the whole context: a ~320-token prompt with a demonstration (304 tokens shared by every prompt),
then the question, earlier turns and results. With plain left-padded `generate`, prefill was about 40% of the batched
run, batching sped it up only about 2x against 5x for decoding, and the batched engine sampled 23.9 tokens/s against
9.3 one at a time (2.6x). `TransformersGenerator` (nbs/06_generate.ipynb) now
* computes the key/value cache of the prompts' shared prefix once and reuses it for every row of every turn, padding
  in the middle of the row (`--no-prefix-cache` turns this off); one at a time, a turn reuses the previous prompt;
* decodes in chunks of 8 tokens and drops finished rows from the batch (55% of the decoded rows had been padding
  behind rows that had already stopped);
* appends keys and values into spare room instead of `torch.cat` (18% of the run had gone into those copies), and
  builds the stop-string criterion once instead of once per call (~0.1 s each).

Measured in one sitting, the same runs side by side (batched: median of 3 runs; one at a time: 1 run), tokens/s:

    generator                           batched   one at a time   ratio   load average during the runs
    before (plain left padding)            23.9             9.3    2.6x   2.0
    now, --no-prefix-cache                 36.5             9.2    4.0x   2.0-2.1
    now, prefix cache (default)            49.9            10.0    5.0x   2.0-2.1

(In another sitting: 26.8 / 6.8 / 36.4 / 8.6 / 51.0 / 9.1 tokens/s, the "before" ratio inflated to 3.9x by a load
that rose to 2.9 during its one-at-a-time run.) Sampled batched results differ from before because dropping rows
changes the shape the random draws are made for; greedy results do not change. After these changes, prefill (each
row's own question, turns and results; the padded suffix is as long as the longest one) was 35% of the batched run
and decoding 52%: reusing each trajectory's own cache from turn to turn in the batched engine is the next lever.
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
ap.add_argument("--no-prefix-cache", action="store_true",
                help="re-prefill every prompt in full (TransformersGenerator(prefix_cache=False)), for comparison")
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


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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
    generator = TransformersGenerator(model, tok, prefix_cache=not args.no_prefix_cache)
    engine = RolloutEngine(generator, protocol, tool, tok, cfg)
    questions = load_world("test")[:args.questions]
    G = args.group
    print(f"{describe_policy(model)}; {torch.get_num_threads()} threads; {len(questions)} questions x {G} "
          f"trajectories, <= {args.turns} turns of <= {args.max_new} tokens, temperature {args.temperature}; "
          f"prefix cache {'off' if args.no_prefix_cache else 'on'}")

    def batched(seed):
        return engine.run(questions, group_size=G, seed=seed)

    def one_at_a_time(seed):
        # trajectory g of question q gets the same per-run seed offset on both sides
        return [engine.run([q], group_size=1, seed=seed * 1000 + i * G + g)[0]
                for i, q in enumerate(questions) for g in range(G)]

    engine.run(questions[:2], group_size=2, seed=999)  # warm-up (allocator, kernels)
    rows = {"batched": [], "one at a time": []}
    cache = generator.prefix_cache
    for name, fn, runs in (("batched", batched, args.runs), ("one at a time", one_at_a_time, args.loop_runs)):
        for r in range(runs):
            before, start_load = (cache.computed, cache.reused) if cache else (0, 0), load()
            rows[name].append(measure(lambda: fn(r)))
            note = "" if cache is None else (f"; prefix tokens computed {cache.computed - before[0]}, "
                                             f"reused {cache.reused - before[1]}")
            print(f"  {name} run {r}: {rows[name][-1][0]:.1f} s (load average {start_load} -> {load()}{note})",
                  flush=True)

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
