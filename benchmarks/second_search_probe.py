"""Does a policy that was never shown a second search ever sample one? And what would one be worth?

    python benchmarks/second_search_probe.py [--model base|warm:N:EPOCHS|FOLDER] [--prompt several|several-demo|short|demo]
                                             [--temperature 1.0] [--n 48] [--copies 2] [--sources world_2hop,world_1hop]
                                             [--open-second-turn] [--threads 2]

Reinforcement learning can only reinforce what the policy samples. This probe plays dev questions (--n per type,
each --copies times) at a sampling temperature and counts, per type, how many samples searched 0, 1, 2 times and
how many were right. `--model warm:240:1` first trains the course's warm start on 240 oracle *lookups* (one search
each, never two) for one pass, with the probe's prompt, into runs/probe/; `base` is the packaged model.
`--open-second-turn` opens the turn after the first passage with the search tag, as the trainer's `explore_search`
does, so the figures say what a second search would be worth if the policy made it: the policy writes the query
and everything after it. The `several` prompt is the short prompt's system message plus one sentence saying the
engine may be called several times (no worked example). One run per setting; run nothing else CPU-heavy meanwhile.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--model", default="warm:240:1", help="'base', 'warm:N:EPOCHS' (a 1-hop-only warm start) or a model folder")
ap.add_argument("--prompt", default="several", help="'several', 'several-demo' (with the demo prompt's two one-search "
                                                   "demonstrations; for the base model), or a course prompt style")
ap.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
ap.add_argument("--n", type=int, default=48, help="dev questions per type")
ap.add_argument("--copies", type=int, default=2, help="samples per question")
ap.add_argument("--sources", default="world_2hop,world_1hop")
ap.add_argument("--open-second-turn", action="store_true", help="open the turn after the first passage with the search tag")
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import collections  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from search_r1_course import protocol as P  # noqa: E402
from search_r1_course.data import load_named, sample_per_source  # noqa: E402
from search_r1_course.evaluation import EvalConfig, evaluate_policy, make_eval_engine  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.warmstart import WarmStartConfig, warm_start  # noqa: E402

SEVERAL = P.PromptStyle("several", user_template="Question: {question}", observation="user_turn", system=(
    P.DEMO_SYSTEM.replace(" When you know", " You can search several times: if the results name another person, place "
                          "or organisation you need to know about, search for it. When you know")))
P.PROMPT_STYLES.setdefault("several", SEVERAL)   # this script's prompts, beside the course's styles
P.PROMPT_STYLES.setdefault("several-demo", dataclasses.replace(SEVERAL, name="several-demo", demos=P.DEFAULT_DEMOS))

model = args.model
if model.startswith("warm:"):
    _, n, epochs = model.split(":")
    out = Path("runs/probe")/f"warm_1hop_{args.prompt}_n{n}_e{epochs}"
    if not (out/"model"/"config.json").is_file():
        r = warm_start(WarmStartConfig(prompt_style=args.prompt, sources="world_1hop", n_samples=int(n), epochs=int(epochs),
                                       threads=args.threads, max_total_tokens=384, output_dir=str(out)))
        print(f"warm start on 1-hop lookups only: {r.counts}, {r.seconds:.0f} s", flush=True)
    model = str(out/"model")
elif model == "base": model = None

cfg = EvalConfig(prompt_style=args.prompt, threads=args.threads, max_total_tokens=384, temperature=args.temperature,
                 batch_size=48, seed=1, show_progress=False)
policy, tok = load_policy(model, dtype="bf16", threads=args.threads, merge_adapter=True)
engine = make_eval_engine(policy, tok, cfg)
if args.open_second_turn:   # every sample explores: the trainer's explore_search=1.0
    engine.config = dataclasses.replace(engine.config, explore_search=1.0)
questions = sample_per_source(load_named("world", "dev", args.sources), args.n, seed=0)
questions = [q for q in questions for _ in range(args.copies)]
t0 = time.perf_counter()
res = evaluate_policy(engine, questions, cfg)
print(f"model {args.model}, prompt {args.prompt}, temperature {args.temperature}"
      f"{', second turn opened with the search tag' if args.open_second_turn else ''}: {time.perf_counter() - t0:.0f} s")
by = collections.defaultdict(list)
for r in res.records: by[r["data_source"]].append(r)
for s, rs in sorted(by.items()):
    searches = dict(sorted(collections.Counter(r["searches"] for r in rs).items()))
    print(f"  {s:17} samples {len(rs)}  EM {sum(r['correct'] for r in rs) / len(rs):.3f}  format "
          f"{sum(r['valid_format'] for r in rs) / len(rs):.2f}  searches {searches}  "
          f"right after 2+ searches {sum(r['correct'] and r['searches'] >= 2 for r in rs)}")
