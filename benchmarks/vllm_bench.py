"""Rollout throughput and GRPO step time with the vLLM backend against the transformers backend, on the CPU, in one run.

    .venv/bin/python benchmarks/vllm_bench.py [--threads 2] [--runs 2] [--steps 3] [--vllm-python .venv-vllm/bin/python]

Run it with the main environment's python: the transformers backend is measured in this process (the transformers the
course is written for), the vLLM backend in child processes of the vLLM environment (`make vllm-dev`; README "Two
environments"), one for the rollout and one for GRPO, because each starts its own engine. Everything else is the same
on both sides: the packaged SmolLM2-135M-Instruct in bfloat16, the same number of threads (torch's, and vLLM's CPU
workers bound to the same cores), the main job's prompt style (`short`), BM25 top-1, the same questions and seeds.

* **rollout**: `RolloutEngine.run` on --questions world test questions x --group trajectories, up to 3 turns of up to
  40 sampled tokens, 256 completion tokens, observations of at most 96, temperature 1.0. Throughput counts sampled
  tokens per second of `run` (median of --runs, after one warm-up); the engine's start-up is printed apart.
* **GRPO step**: `build_trainer` on the `cpu` preset (2 questions x 8 trajectories, LoRA r16, micro-batches of 4,
  bfloat16), --steps optimizer steps; the medians of the training log's `time/step_s`, `time/rollout_s` and
  `time/update_s` over the steps after the first. With vLLM: TRL's colocated engine (`use_vllm=True`); the weight sync
  before each step's rollout counts in the step time (not in the rollout's), and TRL's importance-sampling correction,
  on, costs one more forward pass per step.

The last lines print both backends side by side and their ratio (vLLM / transformers for throughput, transformers /
vLLM for time: above 1 means vLLM is faster). Run nothing else CPU-heavy meanwhile.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2, help="timed rollout runs per backend (median reported)")
    ap.add_argument("--steps", type=int, default=3, help="GRPO steps per backend (the first is not counted)")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--vllm-python", default=str(ROOT/".venv-vllm/bin/python"))
    ap.add_argument("--part", choices=["rollout", "grpo"], help=argparse.SUPPRESS)       # child: one part ...
    ap.add_argument("--backend", choices=["transformers", "vllm"], help=argparse.SUPPRESS)  # ... on one backend
    ap.add_argument("--out", help=argparse.SUPPRESS)
    return ap.parse_args()


def set_threads(n: int):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ[var] = str(n)
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{n - 1}" if n > 1 else "0"   # vLLM's CPU workers: the same cores
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def rollout(args) -> dict:
    from search_r1_course.data import load_world
    from search_r1_course.fast_generate import TransformersGenerator
    from search_r1_course.policy import load_policy, packaged_model_dir
    from search_r1_course.protocol import TagProtocol
    from search_r1_course.rollout import RolloutConfig, RolloutEngine
    from search_r1_course.search import SearchConfig, make_search_tool
    model, tok = load_policy(dtype="bf16", threads=args.threads)
    t0 = time.perf_counter()
    if args.backend == "vllm":
        from search_r1_course.vllm_generator import VLLMGenerator, vllm_engine
        del model
        gen = VLLMGenerator(vllm_engine(packaged_model_dir(), dtype="bfloat16", max_model_len=2048), tok)
    else:
        gen = TransformersGenerator(model, tok)
    startup = time.perf_counter() - t0
    cfg = RolloutConfig(max_turns=3, max_new_tokens_per_turn=40, max_total_tokens=256, max_obs_tokens=96, temperature=1.0)
    engine = RolloutEngine(gen, TagProtocol("short", tokenizer=tok), make_search_tool(SearchConfig(kind="bm25", topk=1)), tok, cfg)
    questions = load_world("test")[:args.questions]
    engine.run(questions[:2], group_size=2, seed=999)   # warm-up
    tps, secs, tokens = [], [], []
    for r in range(args.runs):
        t0 = time.perf_counter()
        trajs = engine.run(questions, group_size=args.group, seed=r)
        secs.append(time.perf_counter() - t0)
        tokens.append(sum(t.n_sampled for t in trajs))
        tps.append(tokens[-1] / secs[-1])
    return {"tokens_per_s": statistics.median(tps), "runs": tps, "seconds": secs, "tokens": tokens, "startup_s": startup}


def grpo(args) -> dict:
    from search_r1_course.trainer import build_trainer, get_preset, peak_rss_gb, read_metrics
    with tempfile.TemporaryDirectory() as d:
        cfg = get_preset("cpu", max_steps=args.steps, save_steps=10_000, threads=args.threads, output_dir=d,
                         log_rollouts=False, use_vllm=args.backend == "vllm", vllm_gpu_memory_utilization=0.1)
        t0 = time.perf_counter()
        trainer = build_trainer(cfg)
        build = time.perf_counter() - t0
        trainer.train()
        rows = read_metrics(Path(d)/"metrics.jsonl")[1:]
    med = lambda k: statistics.median(r[k] for r in rows if r.get(k) is not None)
    out = {"build_s": build, "step_s": med("time/step_s"), "rollout_s": med("time/rollout_s"),
           "update_s": med("time/update_s") if any("time/update_s" in r for r in rows) else None,
           "steps": [r.get("time/step_s") for r in rows], "peak_rss_gb": peak_rss_gb()}
    if args.backend == "vllm":
        out.update({k: med(k) for k in ("sampling/importance_sampling_ratio/mean", "sampling/sampling_logp_difference/mean")})
    return out


def child(args):
    set_threads(args.threads)
    import torch
    torch.set_num_threads(args.threads)
    result = rollout(args) if args.part == "rollout" else grpo(args)
    Path(args.out).write_text(json.dumps(result))


def run_child(args, part: str, backend: str) -> dict:
    python = sys.executable if backend == "transformers" else args.vllm_python
    if not Path(python).is_file(): raise SystemExit(f"{python} not found: make the vLLM environment first (`make vllm-dev`)")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)/"result.json"
        cmd = [python, __file__, "--part", part, "--backend", backend, "--out", str(out), "--threads", str(args.threads),
               "--runs", str(args.runs), "--steps", str(args.steps), "--questions", str(args.questions), "--group", str(args.group)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0: raise SystemExit(f"{part} on {backend} failed:\n{r.stderr[-4000:]}")
        result = json.loads(out.read_text())
    print(f"  {part:7s} {backend:12s} done in {time.perf_counter() - t0:.0f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
    return result


def main():
    args = parse()
    if args.part: return child(args)
    set_threads(args.threads)
    print(f"SmolLM2-135M-Instruct, bfloat16, {args.threads} thread(s); rollout: {args.questions} questions x {args.group} "
          f"trajectories, <= 3 turns of <= 40 tokens; GRPO: the cpu preset, {args.steps} steps (first not counted)", flush=True)
    res = {(part, b): run_child(args, part, b) for part in ("rollout", "grpo") for b in ("transformers", "vllm")}
    t, v = res["rollout", "transformers"], res["rollout", "vllm"]
    gt, gv = res["grpo", "transformers"], res["grpo", "vllm"]
    rows = [("rollout, sampled tokens/s", t["tokens_per_s"], v["tokens_per_s"], v["tokens_per_s"] / t["tokens_per_s"]),
            ("generator start-up, s", t["startup_s"], v["startup_s"], None),
            ("GRPO step, s (median)", gt["step_s"], gv["step_s"], gt["step_s"] / gv["step_s"]),
            ("  of which rollout, s", gt["rollout_s"], gv["rollout_s"], gt["rollout_s"] / gv["rollout_s"])]
    if gt["update_s"] and gv["update_s"]:
        rows.append(("  of which update, s", gt["update_s"], gv["update_s"], gt["update_s"] / gv["update_s"]))
    rows += [("trainer build, s", gt["build_s"], gv["build_s"], None),
             ("peak RSS of the GRPO process, GiB", gt["peak_rss_gb"], gv["peak_rss_gb"], None)]
    print(f"\n{'':36s} {'transformers':>13s} {'vLLM':>9s} {'vLLM speed-up':>14s}")
    for name, a, b, ratio in rows:
        print(f"{name:36s} {a:13.2f} {b:9.2f} {('%.2fx' % ratio) if ratio else '':>14s}")
    print(f"\nvLLM GRPO: importance-sampling ratio {gv['sampling/importance_sampling_ratio/mean']:.3f}, "
          f"mean |log-prob difference| {gv['sampling/sampling_logp_difference/mean']:.4f}")
    print(f"rollout runs, tokens/s: transformers {[round(x, 1) for x in t['runs']]}, vLLM {[round(x, 1) for x in v['runs']]}")
    print(f"GRPO steps counted, s: transformers {[round(x, 1) for x in gt['steps']]}, vLLM {[round(x, 1) for x in gv['steps']]}")


if __name__ == "__main__":
    main()
