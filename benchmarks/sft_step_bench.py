"""One SFT step of the warm start (TRL's SFTTrainer, LoRA, bfloat16 autocast) with the CPU training cuts of
`09d_cpu_training` and without them, in one run, beside this CPU's matmul roof.

    python benchmarks/sft_step_bench.py [--rows skill|oracle] [--steps 4] [--threads 2] [--variants all]

Rows:
* `skill` (default): the comparison skill stage's rows (`--warm-skill-rows N --warm-skill-handed passages`: generic
  comparisons asked with both passages, answered with the short scratchpad; about 240 tokens a row), 16 a step;
* `oracle`: the main job's warm start, the oracle's one-search lookups (`warm_config(ExperimentConfig())`), 8 a step.

Variants, each on a freshly loaded packaged model and the same rows, in this order: `both cuts` (the course's
default), `TRL's head` (`CUTS.whole_vocab_head = False`), `PEFT's casts` (`CUTS.lora_inputs = False`) and `neither`.
Per variant: the median time of the --steps steps after a first one (not counted), the tokens a second (the rows' own
tokens, not padding), the matrix-product work as a share of the roof (4 x 134.5M FLOP a token: the forward pass and
the backward pass to the activations; LoRA's own products are left out), and the losses, which agree to rounding
across variants. Run nothing else CPU-heavy meanwhile: the load average before and after each variant is printed.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--rows", choices=("skill", "oracle"), default="skill")
ap.add_argument("--steps", type=int, default=4, help="measured steps per variant, after one that is not counted")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--variants", nargs="+", default=["both cuts", "TRL's head", "PEFT's casts", "neither"])
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import dataclasses  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from search_r1_course.cpu_training import CUTS  # noqa: E402
from search_r1_course.data import load_world_corpus  # noqa: E402
from search_r1_course.experiment import ExperimentConfig, warm_config  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.rollout import RolloutEngine, make_protocol, rollout_config, search_config  # noqa: E402
from search_r1_course.search import make_search_tool  # noqa: E402
from search_r1_course.warmstart import (WarmStartConfig, _sample, lora_sft, oracle_trajectories, skill_sft_rows,  # noqa: E402
                                        sft_rows)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_roof import describe  # noqa: E402

warnings.filterwarnings("ignore")
VARIANTS = {"both cuts": (True, True), "TRL's head": (True, False), "PEFT's casts": (False, True), "neither": (False, False)}


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def rows_and_config(tokenizer):
    "The SFT rows of (--steps + 1) steps and the config `lora_sft` trains them with."
    if args.rows == "skill":
        cfg = WarmStartConfig(skill_rows=16 * (args.steps + 1), skill_handed="passages", threads=args.threads)
        step = dataclasses.replace(cfg, learning_rate=cfg.skill_learning_rate, batch_size=cfg.skill_batch_size, epochs=1)
        return skill_sft_rows(cfg, tokenizer), step
    cfg = dataclasses.replace(warm_config(ExperimentConfig(threads=args.threads)), n_samples=8 * (args.steps + 1))
    engine = RolloutEngine(None, make_protocol(cfg, tokenizer), make_search_tool(search_config(cfg)), tokenizer,
                           rollout_config(cfg))
    pool = _sample(cfg)   # the questions warm_start would play
    kept, _ = oracle_trajectories(pool, engine, {p.id: p for p in load_world_corpus()})
    return sft_rows(kept), cfg


class StepTimes(TrainerCallback):
    def __init__(self): self.times = []
    def on_step_begin(self, *a, **k): self.t0 = time.perf_counter()
    def on_step_end(self, *a, **k): self.times.append(time.perf_counter() - self.t0)


def main():
    model, tokenizer = load_policy(dtype="bf16", threads=args.threads)
    roofs, line = describe(model, rows=1)
    print(f"calibration: {line} (load average {load()})")
    rows, cfg = rows_and_config(tokenizer)
    tokens = [len(r) for r in rows["input_ids"]]
    per_step = cfg.batch_size
    print(f"rows: {args.rows}, {len(tokens)} rows of {statistics.median(tokens):.0f} tokens (median), {per_step} a step, "
          f"{args.steps} measured steps per variant, {args.threads} threads")
    flop_per_token = 4 * sum(p.numel() for p in model.parameters())
    del model
    seconds = {}
    with tempfile.TemporaryDirectory() as d:
        for name in args.variants:
            CUTS.lora_inputs, CUTS.whole_vocab_head = VARIANTS[name]
            model, _ = load_policy(dtype="bf16", threads=args.threads)
            clock, start = StepTimes(), load()
            _, losses = lora_sft(rows, model, tokenizer, cfg, os.path.join(d, name.replace(" ", "_")), [clock])
            med = statistics.median(clock.times[1:])
            tok_s = sum(tokens[per_step:]) / sum(clock.times[1:])
            seconds[name] = med
            print(f"  {name:>12}: step {med:5.2f} s (steps {', '.join(f'{t:.1f}' for t in clock.times)}); {tok_s:5.0f} tokens/s "
                  f"= {100 * tok_s * flop_per_token / 1e9 / roofs['gflops']:.1f}% of the matmul roof; losses "
                  f"{', '.join(f'{x:.4f}' for x in losses)}; load average {start} -> {load()}", flush=True)
            del model
    base = seconds.get("neither")
    if base:
        print("  step time of 'neither' / each: " + ", ".join(f"{n} {base / s:.2f}x" for n, s in seconds.items()))
    CUTS.lora_inputs = CUTS.whole_vocab_head = True


if __name__ == "__main__":
    main()
