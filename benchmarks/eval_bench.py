"""Evaluation speed: 600 world questions, greedy, the main job's budgets, streamed with the generator's caches, against
fixed chunks of 32 with the prefix cache only (how evaluation ran before), in one run.

    python benchmarks/eval_bench.py [--threads 2] [--n-per-type 200] [--prompt-styles demo short] [--skip-baseline]
                                    [--ungrouped] [--model DIR]

The policy is the packaged SmolLM2-135M-Instruct in bfloat16 (the main job's base policy), or --model (a warm-started
policy, e.g. runs/cpu/warm_start/model, writes the main job's later-stage turns: more searches); `demo` is the prompt the
base policy is evaluated with (a ~300-token demonstration), `short` the one the warm-started policies get. Questions:
--n-per-type of each world type from the test split (the same ones the main job uses with its seed). Budgets: 3
turns of at most 40 tokens, 384 completion tokens, observations of at most 96, BM25 top-1 (`recipes/cpu.yaml`, as
`ExperimentConfig` evaluates; before this was written down the benchmark took the `cpu` training preset's 256). The target of the
course is at most 3 minutes per 600 questions on two cores; the last column compares with it (scaled to 600 when
--n-per-type is smaller). Greedy answers of the two paths agree up to bfloat16 rounding (batch shapes differ); the
exact-match figures are printed so a difference is visible. --ungrouped adds the streamed path with the generator's
grouped prefill switched off (every row's new tokens padded to the longest, as before it), for the ratio of that one
change. Run nothing else CPU-heavy meanwhile.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--n-per-type", type=int, default=200)
ap.add_argument("--batch-size", type=int, default=32, help="questions in play at once (streamed) / per chunk (baseline)")
ap.add_argument("--prompt-styles", nargs="+", default=["demo", "short"])
ap.add_argument("--skip-baseline", action="store_true", help="measure only the streamed, cached path")
ap.add_argument("--ungrouped", action="store_true", help="also measure the streamed path without grouped prefill")
ap.add_argument("--model", default=None, help="policy folder (default: the packaged model)")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import sys  # noqa: E402
import time  # noqa: E402

from search_r1_course.data import load_named, sample_per_source  # noqa: E402
from search_r1_course.evaluation import EvalConfig, grade, make_eval_engine  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.experiment import ExperimentConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_roof import describe  # noqa: E402

TARGET_S = 180.0  # per 600 questions


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def streamed(engine, samples):
    return engine.run(samples, group_size=1, seed=0, max_active=args.batch_size)


def ungrouped(engine, samples):
    engine.generator.grouped_prefill = False
    return streamed(engine, samples)


def chunked(engine, samples):
    engine.generator.row_cache, engine.generator.fast_attention, engine.generator.grouped_prefill = None, False, False
    engine.generator.packed = None
    out = []
    for i in range(0, len(samples), args.batch_size): out += engine.run(samples[i:i + args.batch_size], group_size=1, seed=0)
    return out


def main():
    model, tok = load_policy(args.model, dtype="bf16", threads=args.threads, merge_adapter=True)
    samples = sample_per_source(load_named("world", "test"), args.n_per_type, seed=0)
    print(f"{args.model or 'packaged model'}: {len(samples)} questions, {args.threads} threads, batch {args.batch_size}; load average {load()}")
    print("calibration:", describe(model, rows=args.batch_size)[1], flush=True)
    print(f"{'prompt':>6} {'path':>34} {'seconds':>8} {'q/s':>6} {'EM':>6} {'searches':>8} {'vs 3 min / 600 q':>16}")
    for style in args.prompt_styles:
        config = EvalConfig.like(ExperimentConfig(), prompt_style=style, n_per_source=args.n_per_type, batch_size=args.batch_size)
        paths = [("streamed, all caches, grouped prefill", streamed)]
        if args.ungrouped: paths.append(("streamed, all caches, one prefill", ungrouped))
        if not args.skip_baseline: paths.append(("chunks of 32, prefix cache only", chunked))
        seconds = {}
        for name, fn in paths:
            engine = make_eval_engine(model, tok, config)
            t0 = time.perf_counter()
            trajs = fn(engine, samples)
            seconds[name] = s = time.perf_counter() - t0
            records = [grade(t, q, tok) for t, q in zip(trajs, samples)]
            em = sum(r["correct"] for r in records) / len(records)
            searches = sum(t.searches for t in trajs) / len(trajs)
            scaled = s * 600 / len(samples)
            print(f"{style:>6} {name:>34} {s:>8.1f} {len(samples) / s:>6.2f} {em:>6.3f} {searches:>8.2f} "
                  f"{scaled / TARGET_S:>15.2f}x   (load average {load()})", flush=True)
        first, *others = seconds
        for name in others:
            print(f"{style:>6} {'speed-up over ' + name.split(',')[-1].strip():>34} {seconds[name] / seconds[first]:>8.2f}x")


if __name__ == "__main__":
    main()
