"""benchmarks/comparison_finish.py, run as a user runs it, on a tiny random model and a run folder written for it: the
oracle's comparisons are played with the stated comparison, the stage trains, and the summary reads every comparison."""
import json
import subprocess
import sys
from pathlib import Path

from search_r1_course.experiment import ExperimentConfig
from search_r1_course.policy import tiny_random_model

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT/"benchmarks"/"comparison_finish.py"


def _run(*args, tmp_path):
    return subprocess.run([sys.executable, str(SCRIPT), "--runs-dir", str(tmp_path/"runs"), *args], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)


def test_finish_trains_on_stated_comparisons_and_reads_them(tmp_path):
    tiny = str(tiny_random_model())
    run = tmp_path/"runs"/"t"
    run.mkdir(parents=True)
    cfg = ExperimentConfig(model=tiny, dtype="fp32", threads=1, lora_r=4, lora_alpha=8, eval_split="dev",
                           eval_n_per_source=2, eval_batch_size=8, name="t")
    (run/"experiment.json").write_text(json.dumps(cfg.to_dict()))
    done = _run("--name", "t", "--policy", tiny, "--n", "8", "--skill-rows", "16", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run/"comparison_finish"/"summary.json").read_text())
    assert summary["counts"]["played"] == 8 and summary["counts"]["kept"] == 8
    assert summary["stated"]["comparisons"] == 2 and 0 <= summary["stated"]["relation right"] <= summary["stated"]["stated"] <= 2
    assert set(summary["em"]) >= {"em/world_1hop", "em/world_2hop", "em/world_comparison", "em/macro"}
    stage = json.loads((run/"comparison_finish"/"warm_start.json").read_text())
    assert stage["rows"] == {"oracle": 8, "skill": 16} and stage["skill_losses"] and stage["config"]["compare"]
    example = stage["example"]
    assert ", the smaller is " in example or ", the larger is " in example   # the oracle stated its comparison


def test_finish_names_the_run_folder_it_expects(tmp_path):
    done = _run("--name", "missing", tmp_path=tmp_path)
    assert done.returncode != 0 and "experiment.json" in done.stderr and "search-r1-course demo --name missing" in done.stderr
