"""Can the packaged policy learn to compare two values it is given? A supervised probe, apart from search.

    python benchmarks/comparison_probe.py --sizes 1000 4000 16000 [--mode lora16|lora256|full] [--scratchpad [long|short]]
        [--rows generic|world] [--handed values|passages] [--threads 2] [--out benchmarks/results/comparison_curve.jsonl]

The main job's comparisons ("Who was born first, A or B?") stay near chance after warm start and GRPO, although the
policy retrieves both passages on all of them. This probe takes search and reading out: each row states the two
values after the question ("A: 1852. B: 1871.") and the target is `<answer> B </answer>` (with --scratchpad, a line of
working first: `long`, or `short` enough for the main job's 40-token turn). Rows come from `09c_compare_skill`: generic rows (invented names, values over the world's ranges,
balanced by first differing digit, direction and answer position) or the world's own training comparisons. With
--handed passages the values come as in the task: each entity's passage in a search-result turn after the question
(no search turn), the generic entities' passages written by the world's templates with the rows' values.

Each size is one run from the packaged policy: one pass over N rows (batches of --batch, AdamW, linear warm-up over the
first 5% then linear decay, gradients clipped at 1), the weights in fp32 and the matmuls in bf16 (autocast), the LM
head on the target tokens only. --mode picks LoRA on every projection at rank 16 (the main job's) or 256, or every
weight. Then greedy answers are scored on --eval held-out generic rows (names from another world, fresh values) and
on the world's dev comparisons with their values handed, beside the trivial baselines (always the first entity named,
always the second). Figures are one run per point (seed fixed); run nothing else CPU-heavy meanwhile. Each run
appends one JSON line to --out. --save keeps the trained policy (one size); --sizes 0 scores --model as it is.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000], help="training rows per run (one pass)")
ap.add_argument("--mode", default="lora16", help="lora<rank> (lora16, lora256) or full")
ap.add_argument("--scratchpad", nargs="?", const="long", choices=("long", "short"), default=None,
                help="targets write the comparison out before the answer (alone: long)")
ap.add_argument("--rows", choices=("generic", "world"), default="generic", help="training rows")
ap.add_argument("--handed", choices=("values", "passages"), default="values",
                help="the two values stated after the question, or inside the two entities' passages")
ap.add_argument("--style", default=None, help="ask each row in this prompt style (short: the warm-started policy's); "
                                              "default: an empty system message")
ap.add_argument("--trainer", choices=("probe", "warmstart"), default="probe",
                help="probe: this script's loop; warmstart: the warm start's skill stage (10_warmstart: TRL's SFTTrainer on "
                     "the bf16 policy, constant learning rate, LoRA r16), asked in --style (default short)")
ap.add_argument("--lr", type=float, default=None, help="default: 5e-4 for LoRA, 5e-5 for every weight")
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--eval", type=int, default=200, help="held-out generic rows scored (the world's dev: all 204)")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--model", default=None, help="a policy folder (default: the packaged SmolLM2-135M-Instruct)")
ap.add_argument("--out", default=None, help="append one JSON line per run to this file")
ap.add_argument("--save", default=None, help="save the trained policy (merged) to this folder; one size only")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import json  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from search_r1_course.compare_skill import (answer_comparisons, comparison_sft_rows, generic_comparisons,  # noqa: E402
                                            handed_comparisons, position_baselines, with_passages)
from search_r1_course.config import LoraArgs  # noqa: E402
from search_r1_course.data import comma_list  # noqa: E402
from search_r1_course.generate import left_pad  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.warmstart import WarmStartConfig, comparison_skill, skill_sft_rows  # noqa: E402
from search_r1_course.world import build_world  # noqa: E402

WORLD = build_world()


def make_model(mode: str):
    "The packaged policy in fp32, with a fresh LoRA adapter (`lora<rank>`) or every weight trainable (`full`)."
    model, tokenizer = load_policy(args.model, dtype="fp32", threads=args.threads)
    if mode == "full": return model, tokenizer
    if not mode.startswith("lora") or not mode[4:].isdigit():
        raise SystemExit(f"--mode: expected lora<rank> (lora16, lora256) or full, got {mode!r}")
    rank, targets = int(mode[4:]), comma_list(LoraArgs().lora_targets)
    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, task_type="CAUSAL_LM", target_modules=targets)), tokenizer


def train(model, tokenizer, rows: dict, lr: float, batch: int) -> list[float]:
    "One pass of supervised steps on the labelled tokens; the loss of every step."
    torch.manual_seed(args.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    order = random.Random(args.seed).sample(range(len(rows["input_ids"])), len(rows["input_ids"]))
    steps = (len(order) + batch - 1) // batch
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, 1 - s / steps))
    pad, losses = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id, []
    model.train()
    for s in tqdm(range(steps), desc="train", mininterval=30):
        idx = order[s * batch:(s + 1) * batch]
        ids, mask = left_pad([rows["input_ids"][i] for i in idx], pad)
        labels = left_pad([rows["labels"][i] for i in idx], -100)[0]
        keep = int((labels != -100).sum(1).max())   # the targets end every row (left padding): score the last `keep`
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                           logits_to_keep=keep + 1).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels[:, -keep:].flatten(), ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step(); sched.step(); opt.zero_grad()
        losses.append(loss.item())
    return losses


def skill_stage(n: int, lr: float):
    "The warm start's skill stage on `n` generic rows, as `warm_start` runs it: (merged model, tokenizer, losses, tokens)."
    if args.mode != "lora16" or args.rows != "generic":
        raise SystemExit("--trainer warmstart trains the warm start's adapter (--mode lora16) on generic rows (--rows generic)")
    model, tokenizer = load_policy(args.model, threads=args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        config = WarmStartConfig(model=args.model, threads=args.threads, skill_rows=n, skill_scratchpad=args.scratchpad or "none",
                                 skill_handed=args.handed,
                                 skill_learning_rate=lr, skill_batch_size=args.batch, prompt_style=args.style, seed=args.seed,
                                 output_dir=tmp)
        sft = skill_sft_rows(config, tokenizer)
        model, losses = comparison_skill(model, tokenizer, config, Path(tmp)/"skill", sft=sft)
    return model, tokenizer, losses, sum(map(len, sft["input_ids"]))


def training_rows(n: int) -> list:
    "The rows a run of this script's own loop trains on."
    if args.rows == "world": return random.Random(args.seed).sample(handed_comparisons("train", WORLD), n)
    rows = generic_comparisons(n, seed=args.seed, world=WORLD)
    return with_passages(rows, WORLD, seed=args.seed) if args.handed == "passages" else rows


def score(model, tokenizer, rows) -> list[bool]:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return answer_comparisons(model, tokenizer, rows, scratchpad=args.scratchpad, style=args.style, handed=args.handed)


def share(verdicts) -> float: return round(sum(verdicts) / len(verdicts), 3)


def main():
    lr = args.lr or (5e-4 if args.mode.startswith("lora") else 5e-5)
    if args.trainer == "warmstart": args.style = args.style or "short"
    if args.save and len(args.sizes) != 1: raise SystemExit(f"--save keeps one policy: give one size, got {args.sizes}")
    held = generic_comparisons(args.eval, seed=10_000 + args.seed, world=WORLD, name_seeds=[201])
    if args.handed == "passages": held = with_passages(held, WORLD, name_seeds=[201], seed=10_000 + args.seed)
    dev = handed_comparisons("dev", WORLD)
    base = position_baselines(dev)
    print(f"{args.model or 'packaged SmolLM2-135M-Instruct'}, {args.mode}, lr {lr}, batch {args.batch}, one pass, {args.threads} threads, "
          f"{args.rows} rows{f', {args.scratchpad} scratchpad' if args.scratchpad else ''}, {args.handed} handed; world dev comparisons: always first "
          f"{base['always first']:.3f}, always second {base['always second']:.3f}; held-out generic rows: 0.5 by construction")
    for n in args.sizes:
        t0 = time.perf_counter()
        if n == 0:   # score --model as it is
            (model, tokenizer), losses, tokens = load_policy(args.model, threads=args.threads), [], 0
        elif args.trainer == "warmstart":
            model, tokenizer, losses, tokens = skill_stage(n, lr)
        else:
            model, tokenizer = make_model(args.mode)
            sft = comparison_sft_rows(training_rows(n), tokenizer, scratchpad=args.scratchpad, style=args.style, handed=args.handed)
            losses, tokens = train(model, tokenizer, sft, lr, args.batch), sum(map(len, sft["input_ids"]))
            if hasattr(model, "merge_and_unload"): model = model.merge_and_unload()
        train_s = time.perf_counter() - t0
        if args.save:
            model.save_pretrained(args.save); tokenizer.save_pretrained(args.save)
        on_held, on_dev = score(model, tokenizer, held), score(model, tokenizer, dev)
        by_position = defaultdict(list)
        for row, ok in zip(held, on_held): by_position[row.position].append(ok)
        result = dict(model=args.model or "SmolLM2-135M-Instruct", rows=args.rows, n=n, mode=args.mode, scratchpad=args.scratchpad,
                      handed=args.handed, style=args.style, lr=lr, batch=args.batch, trainer=args.trainer, tokens=tokens,
                      last_loss=round(sum(losses[-50:]) / len(losses[-50:]), 4) if losses else None,
                      held_out_generic=share(on_held), world_dev=share(on_dev), **{k: round(v, 3) for k, v in base.items()},
                      held_out_by_position={p: share(v) for p, v in sorted(by_position.items())},
                      train_s=round(train_s), total_s=round(time.perf_counter() - t0), threads=args.threads)
        print(f"N={n:6d} {args.mode}: held-out generic {result['held_out_generic']:.3f}, world dev {result['world_dev']:.3f} "
              f"(train {train_s / 60:.1f} min, {result['tokens']} tokens, last loss {result['last_loss']})", flush=True)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "a") as f: f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
