"""The main job end to end, small, with the course's speed-ups and without them, in one run: each stage's time side by
side, as a ratio, beside this CPU's roof.

    python benchmarks/main_job_bench.py [--n-per-type 20] [--warm-samples 48] [--grpo-steps 4] [--threads 2] [--only course]

Both variants run `run_experiment` (`13_experiment`) on the `cpu` recipe (`ExperimentConfig`'s defaults) made small:
--n-per-type dev questions per type evaluated at each of the three stages, --warm-samples questions played by the
oracle for the warm start, --grpo-steps GRPO steps, no dev probe. Each writes into its own temporary folder.

* `course`: as `make demo` runs it;
* `speed-ups off`: every generator (the evaluations' and GRPO's rollouts) is `TransformersGenerator` with each of its
  switches off (no prefix or row cache, sdpa attention, one prefill, no folded LoRA, transformers' sampling, no packed
  weights, the LM head on a strided input: what `06_generate`'s `PlainGenerator` does), the update without
  `FastUpdate`'s cuts (`10c_fast_update`) and TRL's fused head as TRL runs it on a CPU, and every LoRA step without the
  training cuts (`09d_cpu_training`).

Printed per stage: seconds with the speed-ups, without them, and the ratio; the GRPO stage also as its median step.
The two variants answer the same questions and train on the same ones; their GRPO stages sample differently after
the first step (rounding), so the later steps' work differs a little. So few questions teach nothing (the warm start
of 32 questions scored 0 on dev): the times are the point, not the EMs. Run nothing else CPU-heavy meanwhile.

Measured (AMX machine, 1,796 GFLOP/s, `--n-per-type 10 --warm-samples 32 --grpo-steps 3`): the whole job 185 s
against 344 s (1.85x); evaluations 1.23-1.77x, warm start 1.65x, GRPO 2.13x (median step 34.1 s against 75.3 s).
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--n-per-type", type=int, default=20)
ap.add_argument("--warm-samples", type=int, default=48)
ap.add_argument("--grpo-steps", type=int, default=4)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--only", choices=("course", "speed-ups off"), default=None, help="run one variant only")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import functools  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from contextlib import contextmanager, nullcontext  # noqa: E402

import search_r1_course.evaluation as evaluation  # noqa: E402
import search_r1_course.trainer as trainer  # noqa: E402
import search_r1_course.warmstart as warmstart  # noqa: E402
from search_r1_course.cpu_training import CUTS  # noqa: E402
from search_r1_course.experiment import ExperimentConfig, run_experiment  # noqa: E402
from search_r1_course.fast_generate import TransformersGenerator  # noqa: E402
from search_r1_course.warmstart import compact_lm_head_on_cpu  # noqa: E402

warnings.filterwarnings("ignore")
PLAIN = dict(prefix_cache=False, row_cache=False, fast_attention=False, grouped_prefill=False, merge_lora=False,
             cdf_sampling=False, contiguous_head=False, packed_linear=False)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


@contextmanager
def speed_ups_off():
    "Every speed-up of the course switched off for the block; restored after it."
    plain = functools.partial(TransformersGenerator, **PLAIN)
    fast_update = {k: getattr(trainer.SearchR1GRPOTrainer, k) for k in ("skip_tool_tokens", "trim_micro_batches", "sort_micro_batches")}
    evaluation.TransformersGenerator = trainer.TransformersGenerator = plain
    for k in fast_update: setattr(trainer.SearchR1GRPOTrainer, k, False)
    trainer.compact_lm_head_on_cpu = warmstart.compact_lm_head_on_cpu = lambda enabled=True: compact_lm_head_on_cpu(False)   # TRL's own
    CUTS.lora_inputs = CUTS.whole_vocab_head = False
    try: yield
    finally:
        evaluation.TransformersGenerator = trainer.TransformersGenerator = TransformersGenerator
        for k, v in fast_update.items(): setattr(trainer.SearchR1GRPOTrainer, k, v)
        trainer.compact_lm_head_on_cpu = warmstart.compact_lm_head_on_cpu = compact_lm_head_on_cpu
        compact_lm_head_on_cpu(True)
        CUTS.lora_inputs = CUTS.whole_vocab_head = True


def run(name: str, root: str) -> dict:
    config = ExperimentConfig(name=name.replace(" ", "_"), runs_dir=root, threads=args.threads, eval_split="dev",
                              eval_n_per_source=args.n_per_type, warm_samples=args.warm_samples,
                              max_steps=args.grpo_steps, probe_every=0)
    start, t0 = load(), time.perf_counter()
    with speed_ups_off() if name == "speed-ups off" else nullcontext():
        result = run_experiment(config)
    t, evals = result.timings, result.timings.get("eval_s", {})
    stages = {f"evaluation, {k}": v for k, v in evals.items()}
    stages.update({"warm start": t.get("warm_start_s"), "GRPO": t.get("grpo_s"), "GRPO median step": t.get("grpo_step_median_s"),
                   "the whole job": time.perf_counter() - t0})
    print(f"{name}: done in {stages['the whole job']:.0f} s (load average {start} -> {load()}); macro EM "
          + ", ".join(f"{k} {r.metrics['em/macro']:.3f}" for k, r in result.results.items()), flush=True)
    return {"stages": stages, "roof": t.get("roof")}


def main():
    names = [args.only] if args.only else ["course", "speed-ups off"]
    with tempfile.TemporaryDirectory() as root:
        runs = {name: run(name, root) for name in names}
    roof = next(iter(runs.values()))["roof"]
    print(f"\nthis machine, {roof['threads']} thread(s): bfloat16 matmul {roof['matmul_gflops']:.0f} GFLOP/s, read "
          f"{roof['read_gbs']:.1f} GB/s; {args.n_per_type} dev questions per type, {args.warm_samples} oracle questions, "
          f"{args.grpo_steps} GRPO steps")
    print(f"{'stage':<30}" + "".join(f"{n:>16}" for n in names) + ("           ratio" if len(names) == 2 else ""))
    for stage in runs[names[0]]["stages"]:
        secs = [runs[n]["stages"].get(stage) for n in names]
        line = f"{stage:<30}" + "".join(f"{s:>14.1f} s" if s else f"{'':>16}" for s in secs)
        if len(names) == 2 and all(secs): line += f"{secs[1] / secs[0]:>15.2f}x"
        print(line)


if __name__ == "__main__":
    main()
