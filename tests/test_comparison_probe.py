"""benchmarks/comparison_probe.py, run as a user runs it, on a tiny random model: one JSON line per size, the
baselines beside the scores, and a clear error for a mode it does not know."""
import json
import subprocess
import sys
from pathlib import Path

from search_r1_course.policy import tiny_random_model

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT/"benchmarks"/"comparison_probe.py"


def _run(*args, tmp_path):
    return subprocess.run([sys.executable, str(PROBE), "--model", str(tiny_random_model()), "--threads", "1", "--eval", "8",
                           *args], capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_probe_writes_one_line_per_size(tmp_path):
    out = tmp_path/"curve.jsonl"
    done = _run("--sizes", "32", "48", "--batch", "16", "--out", str(out), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["n"] for r in lines] == [32, 48]
    for r in lines:
        assert r["mode"] == "lora16" and r["rows"] == "generic" and not r["scratchpad"]
        assert 0 <= r["held_out_generic"] <= 1 and 0 <= r["world_dev"] <= 1
        assert abs(r["always first"] + r["always second"] - 1) < 1e-6
        assert r["tokens"] > 32 * 30 and r["last_loss"] > 0
    assert "always first" in done.stdout and "N=    32" in done.stdout


def test_probe_trains_every_weight_with_a_scratchpad(tmp_path):
    out = tmp_path/"curve.jsonl"
    done = _run("--sizes", "16", "--mode", "full", "--scratchpad", "short", "--rows", "world", "--out", str(out), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (r,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert r["mode"] == "full" and r["scratchpad"] == "short" and r["rows"] == "world" and r["lr"] == 5e-5


def test_probe_names_the_modes_it_knows(tmp_path):
    done = _run("--sizes", "16", "--mode", "lorax", tmp_path=tmp_path)
    assert done.returncode != 0 and "expected lora<rank> (lora16, lora256) or full" in done.stderr


def test_probe_runs_the_warm_starts_skill_stage(tmp_path):
    out = tmp_path/"curve.jsonl"
    done = _run("--sizes", "16", "--batch", "8", "--trainer", "warmstart", "--scratchpad", "short", "--out", str(out),
                tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (r,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert r["trainer"] == "warmstart" and r["style"] == "short" and r["scratchpad"] == "short" and r["tokens"] > 16 * 60
    wrong = _run("--sizes", "16", "--trainer", "warmstart", "--mode", "full", tmp_path=tmp_path)
    assert wrong.returncode != 0 and "--trainer warmstart trains the warm start's adapter" in wrong.stderr


def test_probe_hands_passages_saves_the_policy_and_scores_a_saved_one(tmp_path):
    out, saved = tmp_path/"curve.jsonl", tmp_path/"skilled"
    done = _run("--sizes", "16", "--batch", "8", "--trainer", "warmstart", "--scratchpad", "short", "--handed", "passages",
                "--save", str(saved), "--out", str(out), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (r,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert r["handed"] == "passages" and r["tokens"] > 16 * 150   # two passages make a row about 240 tokens long
    assert (saved/"model.safetensors").exists() and (saved/"tokenizer.json").exists()
    again = subprocess.run([sys.executable, str(PROBE), "--model", str(saved), "--threads", "1", "--eval", "8", "--sizes", "0",
                            "--handed", "passages", "--scratchpad", "short", "--out", str(out)],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    scored = json.loads(out.read_text().splitlines()[-1])
    assert scored["n"] == 0 and scored["tokens"] == 0 and scored["last_loss"] is None and scored["model"] == str(saved)
    two = _run("--sizes", "16", "32", "--save", str(saved), tmp_path=tmp_path)
    assert two.returncode != 0 and "--save keeps one policy" in two.stderr
