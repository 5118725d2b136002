"""After GRPO, teach the comparisons on the policy's own kind of context: does the stated comparison carry over?

    python benchmarks/comparison_finish.py --name dev49 [--n 480] [--lr 2e-4] [--epochs 1] [--skill-rows 0]
                                           [--policy FOLDER] [--out FOLDER]

The comparison skill rows (`09c_compare_skill`) hand the two values, or the two passages, without a search, and the
policy never writes their comparison out after its own passages (`13b_attempts`, probes 31 and 42). Here the rows are
the task itself: the oracle plays --n of the world's *training* comparisons through the real engine (two searches, the
two passages as the main job shows them) and writes the comparison before its answer, word for word the skill rows'
short scratchpad ("1852 < 1871, the smaller is A. <answer> A </answer>"; `WarmStartConfig.compare`, `10_warmstart`).
One LoRA pass over them starts from the run's GRPO policy (runs/NAME/grpo/adapter), which was never shown a second
search. With --skill-rows N the warm start's comparison skill stage comes first (N generic rows, the values handed, the
same short scratchpad, no search; `09c_compare_skill`), so that the relation is taught before the task's form. The
result is evaluated as the run evaluated its stages (runs/NAME/experiment.json: split, questions, prompt) and set
against the run's own GRPO evaluation with paired intervals. For each comparison answer the script also
reads the line of working: was it written, does its `<` or `>` match the two numbers it wrote, and was the answer
right. One run per setting; run nothing else CPU-heavy meanwhile.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--name", required=True, help="the run folder under runs/ (its experiment.json, GRPO adapter, evaluations)")
ap.add_argument("--runs-dir", default="runs")
ap.add_argument("--policy", default=None, help="the policy to start from (default: runs/NAME/grpo/adapter)")
ap.add_argument("--n", type=int, default=480, help="training comparisons the oracle plays")
ap.add_argument("--lr", type=float, default=2e-4)
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--skill-rows", type=int, default=0, help="generic comparison rows (values handed, the short scratchpad, no "
                                                          "search; the warm start's skill stage) trained on first; 0: none")
ap.add_argument("--out", default=None, help="default: runs/NAME/comparison_finish")
args = ap.parse_args()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import dataclasses  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from search_r1_course.data import load_named, sample_per_source  # noqa: E402
from search_r1_course.evaluation import EvalResult, evaluate_policy, markdown_table, paired_table  # noqa: E402
from search_r1_course.experiment import ExperimentConfig, eval_config, results_table, warm_config  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.warmstart import warm_start  # noqa: E402

run = Path(args.runs_dir)/args.name
if not (run/"experiment.json").is_file():
    raise SystemExit(f"expected {run/'experiment.json'} (a run folder written by `search-r1-course demo --name {args.name}`)")
cfg = ExperimentConfig(**json.loads((run/"experiment.json").read_text()))
policy = args.policy or str(run/"grpo"/"adapter")
out = Path(args.out or run/"comparison_finish")
wcfg = dataclasses.replace(warm_config(cfg), sources="world_comparison", n_samples=args.n, compare=True, refine=False,
                           learning_rate=args.lr, epochs=args.epochs, skill_rows=args.skill_rows,
                           skill_handed="values", skill_scratchpad="short", skill_mix=False, output_dir=str(out))

STATED = re.compile(r"(\d+) ([<>]) (\d+), the (smaller|larger) is")


def stated_comparisons(records) -> dict:
    "Comparison answers that state the comparison, those whose relation matches the two numbers written, and EM of each."
    rows = [r for r in records if r["data_source"] == "world_comparison"]
    found = [(r, STATED.findall(r["trajectory"])) for r in rows]
    stated = [(r, m[-1]) for r, m in found if m]
    right = [r for r, (a, op, b, _) in stated if (int(a) < int(b)) == (op == "<") and a != b]
    return {"comparisons": len(rows), "stated": len(stated), "relation right": len(right),
            "EM": sum(r["correct"] for r in rows), "EM stated": sum(r["correct"] for r, _ in stated),
            "EM relation right": sum(r["correct"] for r in right)}


t0 = time.perf_counter()
model, tokenizer = load_policy(policy, dtype=cfg.dtype, device=cfg.device, threads=cfg.threads, merge_adapter=True)
res = warm_start(wcfg, model, tokenizer)
stage_s = time.perf_counter() - t0
print(f"oracle comparisons {res.counts}, stage {stage_s / 60:.1f} min, last losses {[round(x, 3) for x in res.losses[-3:]]}",
      flush=True)
samples = sample_per_source(load_named("world", cfg.eval_split), cfg.eval_n_per_source, seed=cfg.seed)
after = evaluate_policy(str(res.model_dir), samples, eval_config(cfg, cfg.prompt_style), out=out/"eval.json")
results = {"GRPO": EvalResult.load(run/"eval_grpo.json")} if (run/"eval_grpo.json").is_file() else {}
results["GRPO + comparison finish"] = after
print(markdown_table(results_table(results)))
if len(results) > 1: print(markdown_table(paired_table(results)))
summary = {"name": args.name, "policy": policy, "n": args.n, "lr": args.lr, "epochs": args.epochs,
           "skill_rows": args.skill_rows, "counts": res.counts,
           "stage_s": stage_s, "em": {k: v for k, v in after.metrics.items() if k.startswith("em/")},
           "searches": after.metrics["search/avg_calls"], "stated": stated_comparisons(after.records)}
if "GRPO" in results: summary["stated before"] = stated_comparisons(results["GRPO"].records)
print(json.dumps(summary))
(out/"summary.json").write_text(json.dumps(summary, indent=1))
