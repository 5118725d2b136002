"""One SFT step of the warm start (TRL's SFTTrainer, LoRA, bfloat16 autocast) with the CPU training cuts of
`09d_cpu_training` and without them, in one run, beside this CPU's matmul roof.

    python benchmarks/sft_step_bench.py [--rows skill|oracle] [--steps 4] [--threads 2] [--variants all] [--grad-check]

Rows:
* `skill` (default): the comparison skill stage's rows (`--warm-skill-rows N --warm-skill-handed passages`: generic
  comparisons asked with both passages, answered with the short scratchpad; about 240 tokens a row), 16 a step;
* `oracle`: the main job's warm start, the oracle's one-search lookups (`warm_config(ExperimentConfig())`), 8 a step.

Variants, each on a freshly loaded packaged model and the same rows, in this order: `both cuts` (the course's
default), `TRL's head` (`CUTS.whole_vocab_head = False`), `PEFT's casts` (`CUTS.lora_inputs = False`) and `neither`;
on request (`--variants compiled`), `compiled`: both cuts, and every decoder layer compiled by `torch.compile`
(inductor's C++ kernels) before the first step, whose time then includes the compilation; `float32`: both cuts, the
model in float32 and no autocast: the reference for the other variants' losses (with it, the run ends with each
variant's losses minus float32's, step by step).
Per variant: the median time of the --steps steps after a first one (not counted), the tokens a second (the rows' own
tokens, not padding), the matrix-product work as a share of the roof (4 x 134.5M FLOP a token: the forward pass and
the backward pass to the activations; LoRA's own products are left out), and the losses (the first agrees to rounding
across variants; after an update bfloat16's rounding moves them: see `float32`). Run nothing else CPU-heavy meanwhile: the load average before and after each variant is printed.

--grad-check: before the variants, one forward and backward pass over the first step's rows with a fresh LoRA adapter
(rank 16 on every projection, its B initialised at random so every gradient is non-zero), in bfloat16 autocast with
the layers as they are and with them compiled, each against the same pass in float32: the relative error of all LoRA
gradients together (|g - g_fp32| / |g_fp32|), and the worst layer's. A speed-up that moves the gradients further from
float32 than bfloat16 itself does changes what is learned, and is not taken.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--rows", choices=("skill", "oracle"), default="skill")
ap.add_argument("--steps", type=int, default=4, help="measured steps per variant, after one that is not counted")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--variants", nargs="+", default=["both cuts", "TRL's head", "PEFT's casts", "neither"],
                help="any of: both cuts, TRL's head, PEFT's casts, neither, compiled, float32")
ap.add_argument("--grad-check", action="store_true", help="compare the gradients of the eager and compiled layers with float32")
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

from search_r1_course.cpu_training import CUTS, compile_layers  # noqa: E402
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
VARIANTS = {"both cuts": (True, True), "TRL's head": (True, False), "PEFT's casts": (False, True), "neither": (False, False),
            "compiled": (True, True), "float32": (True, True)}


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


def grad_check(rows, tokenizer, n_rows: int):
    "Relative error of the LoRA gradients against float32: eager bfloat16 autocast, and compiled layers."
    from peft import LoraConfig, get_peft_model
    model, _ = load_policy(dtype="bf16", threads=args.threads)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"))
    torch.manual_seed(0)
    for name, p in model.named_parameters():
        if "lora_B" in name: torch.nn.init.normal_(p, std=0.02)
    model.train()
    batch = [list(r) for r in rows["input_ids"][:n_rows]]
    width, pad = max(map(len, batch)), tokenizer.pad_token_id or 0
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in batch])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in batch])
    labels = ids.masked_fill(mask == 0, -100)
    def grads(autocast: bool) -> dict:
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        return {n: p.grad.float().clone() for n, p in model.named_parameters() if p.requires_grad}
    model.float()
    exact = grads(False)
    model.to(torch.bfloat16)
    for p in model.parameters():
        if p.requires_grad: p.data = p.data.float()   # the adapter in float32, as lora_sft trains it
    def error(g) -> tuple[float, float, str]:
        whole = sum((g[n] - exact[n]).norm() ** 2 for n in exact) ** 0.5 / sum(exact[n].norm() ** 2 for n in exact) ** 0.5
        per_layer = {}
        for n in exact:
            layer = n.split(".layers.")[1].split(".")[0]
            d, e = per_layer.get(layer, (0.0, 0.0))
            per_layer[layer] = (d + (g[n] - exact[n]).norm() ** 2, e + exact[n].norm() ** 2)
        worst = max(((d / e) ** 0.5, k) for k, (d, e) in per_layer.items())
        return float(whole), float(worst[0]), worst[1]
    eager = error(grads(True))
    compile_layers(model)
    compiled = error(grads(True))
    print(f"gradients against float32 ({len(batch)} rows of up to {width} tokens): relative error, all LoRA weights / worst layer")
    for name, (whole, worst, layer) in (("eager bf16", eager), ("compiled bf16", compiled)):
        print(f"  {name:>14}: {whole:.4f} / {worst:.4f} (layer {layer})")


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
    if args.grad_check: grad_check(rows, tokenizer, per_step)
    seconds, all_losses = {}, {}
    with tempfile.TemporaryDirectory() as d:
        for name in args.variants:
            CUTS.lora_inputs, CUTS.whole_vocab_head = VARIANTS[name]
            model, _ = load_policy(dtype="fp32" if name == "float32" else "bf16", threads=args.threads)
            clock, start = StepTimes(), load()
            run = dataclasses.replace(cfg, compile_layers=name == "compiled")   # compile_layers: 09d_cpu_training
            _, losses = lora_sft(rows, model, tokenizer, run, os.path.join(d, name.replace(" ", "_")), [clock])
            med = statistics.median(clock.times[1:])
            tok_s = sum(tokens[per_step:]) / sum(clock.times[1:])
            seconds[name], all_losses[name] = med, losses
            print(f"  {name:>12}: step {med:5.2f} s (steps {', '.join(f'{t:.1f}' for t in clock.times)}); {tok_s:5.0f} tokens/s "
                  f"= {100 * tok_s * flop_per_token / 1e9 / roofs['gflops']:.1f}% of the matmul roof; losses "
                  f"{', '.join(f'{x:.4f}' for x in losses)}; load average {start} -> {load()}", flush=True)
            del model
    base = seconds.get("neither")
    if base:
        print("  step time of 'neither' / each: " + ", ".join(f"{n} {base / s:.2f}x" for n, s in seconds.items()))
    if "compiled" in seconds and "both cuts" in seconds:
        print(f"  step time of 'both cuts' / 'compiled': {seconds['both cuts'] / seconds['compiled']:.2f}x "
              "(the first step, not counted, holds the compilation)")
    if "float32" in all_losses:
        ref = all_losses["float32"]
        print("  losses against float32's, step by step (largest |difference|): " + "; ".join(
            f"{n} {', '.join(f'{a - b:+.3f}' for a, b in zip(l, ref))} ({max(abs(a - b) for a, b in zip(l, ref)):.3f})"
            for n, l in all_losses.items() if n != "float32"))
    CUTS.lora_inputs = CUTS.whole_vocab_head = True


if __name__ == "__main__":
    main()
