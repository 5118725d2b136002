"""Peak memory of the main job's GRPO stage under glibc's default heap and with the course's heap settings, in one run.

    python benchmarks/memory_bench.py --model runs/cpu/warm_start/model [--threads 2] [--steps 8] [--mmap-threshold N]

Each variant runs in its own process (a process's peak resident memory only grows): the main job's GRPO stage
(`grpo_config(ExperimentConfig())`, 4 questions x 6 trajectories of every type) from --model, a warm-started policy,
for --steps optimizer steps with the same seed. Printed per variant: the peak resident memory after the first step
and after the last (the trainer's `memory/peak_rss_gb`), the resident memory at the end, and the median step and rollout times.
"course" is the trainer as `build_trainer` makes it, with the `ReleaseMemory` callback (`10_warmstart`: after every
step, garbage collection and glibc's `malloc_trim`, which hands the heap's free pages back to the system); "no
release" is the same trainer without that callback, the heap as glibc keeps it. --mmap-threshold N measures a third
process: the course's trainer with glibc's mmap threshold fixed at N bytes (`MALLOC_MMAP_THRESHOLD_`: every block of
at least N bytes mapped on its own and unmapped when freed). The course's target is a whole main job within 8 GiB.
Run nothing else CPU-heavy meanwhile.
"""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--model", required=True, help="a warm-started policy folder (runs/<name>/warm_start/model)")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--mmap-threshold", type=int, default=None, help="also measure with this fixed glibc mmap threshold")
ap.add_argument("--child", choices=["no release", "course"], help=argparse.SUPPRESS)
args = ap.parse_args()


def child(variant: str) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import dataclasses
    import statistics
    import tempfile

    from search_r1_course.experiment import ExperimentConfig, grpo_config
    from search_r1_course.trainer import build_trainer, read_metrics
    from search_r1_course.warmstart import ReleaseMemory, rss_gb

    with tempfile.TemporaryDirectory() as out:
        job = ExperimentConfig(threads=args.threads)
        cfg = dataclasses.replace(grpo_config(job, args.model), max_steps=args.steps, output_dir=out, save_steps=10_000,
                                  log_rollouts=False)
        trainer = build_trainer(cfg)
        if variant == "no release": trainer.remove_callback(ReleaseMemory)
        trainer.train()
        rows = [r for r in read_metrics(os.path.join(out, "metrics.jsonl")) if "time/step_s" in r]
    print(json.dumps({"first": rows[0]["memory/peak_rss_gb"], "last": rows[-1]["memory/peak_rss_gb"], "end": rss_gb(),
                      "step_s": statistics.median(r["time/step_s"] for r in rows),
                      "rollout_s": statistics.median(r["time/rollout_s"] for r in rows), "steps": len(rows)}))


def main() -> None:
    print(f"GRPO stage of the main job from {args.model}, {args.steps} steps, {args.threads} threads; one process per variant")
    got = {}
    variants = [("no release", "no release", {}), ("course", "course", {})]
    if args.mmap_threshold: variants.append(("course", f"mmap >= {args.mmap_threshold >> 10} KiB",
                                             {"MALLOC_MMAP_THRESHOLD_": str(args.mmap_threshold)}))
    for variant, name, env in variants:
        run = subprocess.run([sys.executable, __file__, "--model", args.model, "--threads", str(args.threads),
                              "--steps", str(args.steps), "--child", variant], capture_output=True, text=True,
                             env={**os.environ, **env})
        if run.returncode != 0: sys.exit(f"{name} failed:\n{run.stderr[-3000:]}")
        got[name] = r = json.loads(run.stdout.strip().splitlines()[-1])
        print(f"{name:>16}: peak {r['first']:.2f} GiB after step 1, {r['last']:.2f} GiB after step {r['steps']}; "
              f"resident at the end {r['end']:.2f} GiB; median step {r['step_s']:.1f} s (rollout {r['rollout_s']:.1f} s)", flush=True)
    a, b = got["no release"], got["course"]
    print(f"peak after step {b['steps']}: {a['last']:.2f} -> {b['last']:.2f} GiB ({a['last'] - b['last']:.2f} GiB less, "
          f"{a['last'] / b['last']:.2f}x); median step {b['step_s'] / a['step_s']:.2f}x that without the release")


if __name__ == "__main__":
    child(args.child) if args.child else main()
