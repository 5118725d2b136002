"""How sure is a policy, after its first passage comes back, that it should answer rather than search again?

    python benchmarks/decision_point.py MODEL [MODEL ...] [--warm SHARE OUT] [--soup A B ALPHA OUT] [--n 40]
                                        [--prompt short] [--threads 2]

Reinforcement learning can only strengthen a choice the policy sometimes makes. This measures that choice directly:
for --n dev questions per type, the policy plays its own greedy first turn (a search) and gets the passage; then,
at the start of its next turn, we read the log-probability it gives to each of the two tags that can open that turn,
`<search>` and `<answer>` (each tag is three tokens; the sum of their log-probabilities). Printed per type: the median
log-probability of each tag, and how many questions give the second search a chance above 10%.

MODEL is a model folder (a warm start's `model/`), an adapter folder, or `base` for the packaged model.
`--warm SHARE OUT` first trains dev probe 20's warm start (240 oracle lookups, one search each, one pass, the short
prompt) into OUT with `teach_decision=SHARE`: only that share of its rows has the tag opening the turn after the
passage in the loss (10_warmstart), and measures OUT/model too.
`--soup A B ALPHA OUT` first writes OUT, the weights (1 - ALPHA) * A + ALPHA * B of two model folders of the same
architecture (a "model soup"), and measures it too. Run nothing else CPU-heavy meanwhile.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("models", nargs="*", help="model folders, adapter folders or 'base'")
ap.add_argument("--warm", nargs=2, metavar=("SHARE", "OUT"), help="train a lookup-only warm start first")
ap.add_argument("--soup", nargs=4, metavar=("A", "B", "ALPHA", "OUT"), help="average two model folders first")
ap.add_argument("--n", type=int, default=40, help="dev questions per type")
ap.add_argument("--sources", default="world_1hop,world_2hop,world_comparison")
ap.add_argument("--prompt", default="short", help="the course prompt style the policy was trained with")
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
os.environ.update({var: str(args.threads) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import statistics  # noqa: E402

import torch  # noqa: E402

from search_r1_course.data import load_named, sample_per_source  # noqa: E402
from search_r1_course.evaluation import EvalConfig, make_eval_engine  # noqa: E402
from search_r1_course.policy import load_policy  # noqa: E402
from search_r1_course.protocol import ANSWER, SEARCH, open_tag  # noqa: E402
from search_r1_course.warmstart import WarmStartConfig, warm_start  # noqa: E402

torch.set_num_threads(args.threads)


def soup(a: str, b: str, alpha: float, out: str) -> str:
    "Write the weights (1 - alpha) * a + alpha * b to `out` (with a's tokenizer)."
    ma, tok = load_policy(a, dtype="fp32", threads=args.threads)
    mb, _ = load_policy(b, dtype="fp32", threads=args.threads)
    other = mb.state_dict()
    with torch.no_grad():
        for k, v in ma.state_dict().items(): v.copy_((1 - alpha) * v + alpha * other[k])
    ma.to(torch.bfloat16).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tag_logprob(model, context: list[int], tag: list[int]) -> float:
    "Sum of the log-probabilities of `tag`'s tokens right after `context`."
    with torch.no_grad():
        logits = model(torch.tensor([context + tag])).logits[0, len(context) - 1:-1].float().log_softmax(-1)
    return float(sum(logits[i, t] for i, t in enumerate(tag)))


def measure(name: str) -> dict[str, tuple]:
    model, tok = load_policy(None if name == "base" else name, dtype="bf16", threads=args.threads, merge_adapter=True)
    model.eval()
    cfg = EvalConfig(prompt_style=args.prompt, threads=args.threads, max_turns=2, max_total_tokens=384, temperature=0,
                     show_progress=False)
    engine = make_eval_engine(model, tok, cfg)
    tags = {kind: tok(open_tag(kind), add_special_tokens=False)["input_ids"] for kind in (SEARCH, ANSWER)}
    out = {}
    for source in args.sources.split(","):
        questions = sample_per_source(load_named("world", "dev", source), args.n, seed=0)
        rows = []
        for t in engine.run(questions, group_size=1, seed=0):
            segments = t.segments()
            if t.searches < 1 or len(segments) < 2 or segments[1][1]: continue   # no passage came back
            context = list(t.prompt_ids) + segments[0][0] + segments[1][0]   # first turn, then the passage
            rows.append({kind: tag_logprob(model, context, ids) for kind, ids in tags.items()})
        if rows:
            out[source] = (len(rows), statistics.median(r[SEARCH] for r in rows), statistics.median(r[ANSWER] for r in rows),
                           sum(r[SEARCH] > -2.303 for r in rows))
    return out


def warm(share: float, out: str) -> str:
    if not os.path.isfile(os.path.join(out, "model", "config.json")):
        r = warm_start(WarmStartConfig(prompt_style=args.prompt, sources="world_1hop", n_samples=240, epochs=1,
                                       teach_decision=share, threads=args.threads, max_total_tokens=384, output_dir=out))
        print(f"warm start on 1-hop lookups, choice after the passage taught on a share {share}: {r.counts}, {r.seconds:.0f} s")
    return os.path.join(out, "model")


names = list(args.models) + ([warm(float(args.warm[0]), args.warm[1])] if args.warm else []) + ([soup(args.soup[0], args.soup[1], float(args.soup[2]), args.soup[3])] if args.soup else [])
if not names: ap.error("name at least one model (or --soup)")
for name in names:
    print(name)
    for source, (n, search, answer, open_) in measure(name).items():
        print(f"  {source:17} questions {n:3}  median log-prob <search> {search:7.2f}  <answer> {answer:7.2f}  "
              f"second search above 10%: {open_}")
