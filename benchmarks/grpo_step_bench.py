"""GRPO step time at the main job's settings, split into rollout and update, with the generator's caches and without
them, in one run.

    python benchmarks/grpo_step_bench.py [--threads 2] [--steps 6] [--model DIR] [--skip-baseline] [--micro-batches 4 2]

Settings: the `cpu` preset (2 questions x 8 trajectories per step, LoRA r16 on all projections, bfloat16, micro-batches
of 4, 3 turns of at most 40 tokens, BM25 top-1, the `short` prompt) on the world's 1-hop and comparison questions,
as the main job's GRPO stage. --model should be a warm-started policy (a folder written by the main job's warm start,
e.g. runs/cpu/warm_start/model); the default, the untrained packaged model, writes other (often longer) turns.
Per variant: --steps optimizer steps after one warm-up step (not counted); the medians of the training log's
`time/step_s`, `time/rollout_s` and `time/update_s` (everything but the rollout: rewards, the loss's forward and
backward passes, the optimizer). "baseline" is the same trainer with the course's speed-ups switched off: the rollout
generator's row cache, decode attention, grouped prefill, folded LoRA weights, packed weights, cumulative-distribution
sampling and the contiguous input of the LM head (without it torch copies the frozen head once per row); in the update, the completion-only LM head (TRL then scores every
position of each sequence, prompt and padding included, as it does on any device without Triton), the skipped
observation tokens, the micro-batches' trimmed padding and their order by length, and the CPU training cuts of
`09d_cpu_training` (LoRA inputs as they are, the whole-vocabulary head). --no-cuts measures the cached trainer again
without those two cuts only. --compiled measures it again with its decoder layers compiled for the update's passes
(`compile_layers`, `09d_cpu_training`; the rollout stays eager), the compilation in the warm-up step. --unsorted measures the cached trainer
again with TRL's shuffle instead of that order. --main-job takes the main job's GRPO stage instead of the preset
(4 questions x 6 trajectories of every type, lr 1e-4, 384-token completions: `grpo_config(ExperimentConfig())`). --micro-batches measures the cached trainer again with the step's 16 trajectories split into
that many micro-batches (the preset's `gradient_accumulation`, 4: micro-batches of 4; fewer, larger micro-batches make
larger matrix products and cost more memory). The course's target is a median step of at most 10 s. Run nothing else
CPU-heavy meanwhile.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--model", default=None)
ap.add_argument("--skip-baseline", action="store_true")
ap.add_argument("--micro-batches", type=int, nargs="+", default=[4], help="gradient_accumulation values to measure")
ap.add_argument("--main-job", action="store_true", help="the main job's GRPO stage (4 x 6, every type) instead of the cpu preset")
ap.add_argument("--unsorted", action="store_true", help="also measure the cached trainer with TRL's shuffled micro-batches")
ap.add_argument("--no-cuts", action="store_true", help="also measure the cached trainer without the CPU training cuts (09d_cpu_training)")
ap.add_argument("--compiled", action="store_true", help="also measure the cached trainer with its decoder layers compiled for the update")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import dataclasses  # noqa: E402

from search_r1_course.cpu_training import CUTS  # noqa: E402
from search_r1_course.experiment import ExperimentConfig, grpo_config  # noqa: E402
from search_r1_course.fast_generate import contiguous_head_input  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.trainer import build_trainer, compact_lm_head_on_cpu, get_preset, peak_rss_gb, read_metrics  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_roof import describe  # noqa: E402

TARGET_S = 10.0


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def settings(out: str, accumulation: int, compiled: bool = False):
    if args.main_job:
        job = ExperimentConfig(threads=args.threads, gradient_accumulation=accumulation, compile_layers=compiled)
        return dataclasses.replace(grpo_config(job, args.model), max_steps=args.steps + 1, output_dir=out, save_steps=10_000,
                                   log_rollouts=False)
    return get_preset("cpu", model=args.model, threads=args.threads, max_steps=args.steps + 1, output_dir=out,
                      gradient_accumulation=accumulation, compile_layers=compiled,
                      data_sources="world_1hop,world_comparison", learning_rate=2e-4, save_steps=10_000, log_rollouts=False)


def measure(name: str, cached: bool, out: str, accumulation: int = 4, sort: bool = True, cuts: bool = True,
            compiled: bool = False) -> dict:
    CUTS.lora_inputs = CUTS.whole_vocab_head = cuts and cached   # applied by build_trainer
    trainer = build_trainer(settings(out, accumulation, compiled))   # switches the completion-only LM head on
    trainer.sort_micro_batches = sort and cached
    if not cached:
        generator = trainer.rollout_recorder.engine.generator
        generator.row_cache, generator.fast_attention, generator.grouped_prefill = None, False, False
        generator.merged_lora, generator.cdf_sampling, generator.packed = None, False, None
        contiguous_head_input(generator.model, enabled=False)
        compact_lm_head_on_cpu(False)
        trainer.skip_tool_tokens = trainer.trim_micro_batches = False
    start = load()
    trainer.train()
    rows = [r for r in read_metrics(os.path.join(out, "metrics.jsonl")) if "time/step_s" in r][1:]  # drop the warm-up step
    med = {k: statistics.median(r[k] for r in rows if k in r) for k in ("time/step_s", "time/rollout_s", "time/update_s")}
    print(f"{name:>9}: step {med['time/step_s']:5.1f} s = rollout {med['time/rollout_s']:5.1f} s + update "
          f"{med['time/update_s']:5.1f} s (medians of {len(rows)} steps; {med['time/step_s'] / TARGET_S:.2f}x the 10 s target; "
          f"load average {start} -> {load()}; peak RSS so far {peak_rss_gb():.2f} GiB)", flush=True)
    return med


def main():
    print(f"model {args.model or 'packaged SmolLM2-135M-Instruct'}, {args.threads} threads, {args.steps} measured steps, "
          f"{'the main job' if args.main_job else 'the cpu preset'}")
    model, _ = load_policy(args.model, dtype="bf16", threads=args.threads)
    print("calibration:", describe(model, rows=24 if args.main_job else 16)[1], f"(load average {load()})", flush=True)
    del model
    with tempfile.TemporaryDirectory() as d:
        new = measure("cached", True, os.path.join(d, "cached"), args.micro_batches[0])
        if not args.skip_baseline:
            old = measure("baseline", False, os.path.join(d, "baseline"))
            print(f"rollout: {old['time/rollout_s'] / new['time/rollout_s']:.2f}x faster with the caches; "
                  f"update: {old['time/update_s'] / new['time/update_s']:.2f}x with the LM head on the policy's tokens and trimmed padding; "
                  f"step: {old['time/step_s'] / new['time/step_s']:.2f}x")
        if args.no_cuts:
            plain = measure("no cuts", True, os.path.join(d, "no_cuts"), args.micro_batches[0], cuts=False)
            print(f"update without / with the CPU training cuts (LoRA inputs as they are, the whole-vocabulary head): "
                  f"{plain['time/update_s'] / new['time/update_s']:.2f}x; step {plain['time/step_s'] / new['time/step_s']:.2f}x")
        if args.compiled:
            fused = measure("compiled", True, os.path.join(d, "compiled"), args.micro_batches[0], compiled=True)
            print(f"update eager / with the layers compiled (the warm-up step, not counted, holds the compilation): "
                  f"{new['time/update_s'] / fused['time/update_s']:.2f}x; step {new['time/step_s'] / fused['time/step_s']:.2f}x")
        if args.unsorted:
            shuffled = measure("shuffled", True, os.path.join(d, "shuffled"), args.micro_batches[0], sort=False)
            print(f"update with TRL's shuffled micro-batches / by length: {shuffled['time/update_s'] / new['time/update_s']:.2f}x")
        for n in args.micro_batches[1:]:
            other = measure(f"{n} micro", True, os.path.join(d, f"micro{n}"), n)
            print(f"update with {n} micro-batches / with {args.micro_batches[0]}: "
                  f"{other['time/update_s'] / new['time/update_s']:.2f}x")


if __name__ == "__main__":
    main()
