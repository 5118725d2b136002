"""Can the packaged policy learn to compare two values it is given? A supervised probe, apart from search.

    python benchmarks/comparison_probe.py [--threads 2] [--sizes 80 400 1400] [--epochs 3] [--eval 100]

The main job's comparisons ("Who was born first, A or B?") stay near chance after warm start and GRPO, although the
policy retrieves both passages on all of them. This probe takes search and reading out of the question: each row is
the comparison question followed by the two values, stated with their names ("A: 1852. B: 1871."), and the target
is the answer `<answer> B </answer>`. A LoRA adapter (the main job's: r16 on every projection, lr 2e-4, batches of
8, bf16) is trained on N training-split comparisons for --epochs passes, then the greedy answers are scored on --eval
rows it trained on and on --eval dev comparisons. Chance is 0.5: the answer is one of the two names. If the policy
cannot learn the comparison when the values are handed to it, no recipe of the main job can teach it within its
budget. Figures are one run per size (the seed is fixed); run nothing else CPU-heavy meanwhile.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--sizes", type=int, nargs="+", default=[80, 400, 1400], help="training rows per run")
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--eval", type=int, default=100, help="rows scored on train and on dev")
ap.add_argument("--model", default=None, help="a policy folder (default: the packaged SmolLM2-135M-Instruct)")
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import random  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402

from search_r1_course.config import LoraArgs  # noqa: E402
from search_r1_course.data import comma_list, load_named  # noqa: E402
from search_r1_course.generate import left_pad  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.reward import exact_match, extract_answer  # noqa: E402
from search_r1_course.world import build_world  # noqa: E402

WORLD = build_world()


def rows(tokenizer, split: str, n: int, seed: int) -> list[tuple[list[int], list[int], list[str]]]:
    "(prompt ids, target ids, golden answers) for `n` comparisons of `split`, the two values stated after the question."
    questions = load_named("world", split, "world_comparison")
    out = []
    for q in random.Random(seed).sample(questions, min(n, len(questions))):
        ids, relation = q.meta["supporting_ids"], q.meta["relation"]
        values = " ".join(f"{WORLD.entity(i).name}: {WORLD.entity(i).facts[relation]}." for i in ids)
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": f"{q.question}\n{values}"}],
                                               add_generation_prompt=True, return_dict=True)["input_ids"]
        target = tokenizer(f"<answer> {q.golden_answers[0]} </answer>", add_special_tokens=False).input_ids
        out.append((list(prompt), target + [tokenizer.eos_token_id], list(q.golden_answers)))
    return out


@torch.no_grad()
def accuracy(model, tokenizer, data, batch: int = 25) -> float:
    "Share of rows whose greedy answer is exactly one of the golden answers."
    model.eval()
    right = 0
    for i in range(0, len(data), batch):
        chunk = data[i:i + batch]
        ids, mask = left_pad([p for p, _, _ in chunk], tokenizer.pad_token_id or tokenizer.eos_token_id)
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=24, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
        for (_, _, golds), row in zip(chunk, out[:, ids.shape[1]:]):
            right += exact_match(extract_answer(tokenizer.decode(row, skip_special_tokens=True)) or "", golds) == 1.0
    return right / len(data)


def train(model, tokenizer, data, epochs: int, lr: float = 2e-4, batch: int = 8) -> float:
    "Supervised steps on the targets only (the prompt is masked); returns the last epoch's mean loss."
    torch.manual_seed(0)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    pad = tokenizer.pad_token_id or tokenizer.eos_token_id
    for epoch in range(epochs):
        model.train()
        order = random.Random(epoch).sample(data, len(data))
        losses = []
        for i in range(0, len(order), batch):
            chunk = order[i:i + batch]
            width = max(len(p) + len(t) for p, t, _ in chunk)
            ids = torch.full((len(chunk), width), pad)
            labels = torch.full((len(chunk), width), -100)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for j, (p, t, _) in enumerate(chunk):
                ids[j, :len(p) + len(t)] = torch.tensor(p + t)
                labels[j, len(p):len(p) + len(t)] = torch.tensor(t)
                mask[j, :len(p) + len(t)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    return sum(losses) / len(losses)


def main():
    lora = LoraArgs()
    print(f"model {args.model or 'packaged SmolLM2-135M-Instruct'}, bf16, {args.threads} threads, LoRA r{lora.lora_r} on "
          f"{lora.lora_targets}, {args.epochs} epochs; chance is 0.50")
    for n in args.sizes:
        t0 = time.perf_counter()
        model, tokenizer = load_policy(args.model, dtype="bf16", threads=args.threads)
        model = get_peft_model(model, LoraConfig(r=lora.lora_r, lora_alpha=lora.lora_alpha, task_type="CAUSAL_LM",
                                                 target_modules=comma_list(lora.lora_targets)))
        data = rows(tokenizer, "train", n, seed=0)
        loss = train(model, tokenizer, data, args.epochs)
        seen = accuracy(model, tokenizer, data[:args.eval])
        dev = accuracy(model, tokenizer, rows(tokenizer, "dev", args.eval, seed=1))
        print(f"N={n:5d}: last-epoch loss {loss:.3f}; accuracy on {min(n, args.eval)} trained rows {seen:.2f}, "
              f"on {args.eval} dev rows {dev:.2f} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
