"""The `search-r1-course` command line, run as a user runs it: a subprocess of the installed entry point."""
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from search_r1_course.data import Passage, write_corpus

EXE = shutil.which("search-r1-course", path=str(Path(sys.executable).parent)) or "search-r1-course"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def run(*args, timeout=120):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, env=ENV)


def test_help_lists_commands():
    r = run("--help")
    assert r.returncode == 0
    for cmd in ("world", "demo", "serve-retriever", "search"):
        assert cmd in r.stdout


def test_world_prints_questions_with_their_passages():
    r = run("world", "--n", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("world: ")
    for source in ("[world_1hop]", "[world_2hop]", "[world_comparison]"):
        assert source in r.stdout
    assert r.stdout.count("answer: ") == 3


def test_bad_option_is_a_usage_error_not_a_traceback():
    r = run("search", "--topk", "many", "query")
    assert r.returncode == 2
    assert "invalid int value: 'many'" in r.stderr and "Traceback" not in r.stderr


def test_search_on_a_given_corpus(tmp_path):
    corpus = write_corpus([Passage("a", "Ostrigo", "Ostrigo is a river port."),
                           Passage("b", "Velmar", "Velmar is a country whose capital is Dunhallow.")], tmp_path / "c.jsonl")
    r = run("search", "--corpus-path", str(corpus), "--topk", "1", "capital of Velmar")
    assert r.returncode == 0, r.stderr
    assert "Doc 1(Title: Velmar) Velmar is a country whose capital is Dunhallow." in r.stdout


def test_missing_corpus_file_is_a_clear_error(tmp_path):
    r = run("search", "--corpus-path", str(tmp_path / "nope.jsonl"), "x")
    assert r.returncode != 0
    assert "nope.jsonl" in r.stderr and "Traceback" not in r.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_retriever_speaks_search_r1(tmp_path):
    corpus = write_corpus([Passage("a", "Ostrigo", "Ostrigo is a river port."),
                           Passage("b", "Velmar", "Velmar is a country whose capital is Dunhallow.")], tmp_path / "c.jsonl")
    port = _free_port()
    proc = subprocess.Popen([EXE, "serve-retriever", "--backend", "bm25", "--port", str(port), "--corpus-path", str(corpus)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200: break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        r = httpx.post(url + "/retrieve", json={"queries": ["capital of Velmar"], "topk": 1, "return_scores": False})
        assert r.status_code == 200
        assert r.json() == {"result": [[{"id": "b", "contents": "\"Velmar\"\nVelmar is a country whose capital is Dunhallow."}]]}
        assert httpx.post(url + "/retrieve", content=b"\xff garbage").status_code in range(400, 500)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_demo_runs_the_main_job_on_a_tiny_model(tmp_path):
    """`demo` end to end, as `make demo` runs it, shrunk: a tiny random model, one question per type, a warm start
    on two oracle trajectories and one GRPO step. Every stage leaves its result and the report holds three rows."""
    from search_r1_course.policy import tiny_random_model
    r = run("demo", "--name", "tiny", "--runs-dir", str(tmp_path), "--model", str(tiny_random_model()), "--threads", "1",
            "--eval-n-per-source", "1", "--eval-batch-size", "4", "--warm-samples", "2", "--max-steps", "1",
            "--dtype", "fp32", "--num-generations", "2", "--questions-per-step", "2", "--gradient-accumulation", "1",
            "--lora-r", "4", "--lora-alpha", "8", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "tiny"
    for name in ("eval_base.json", "eval_warm_start.json", "eval_grpo.json", "report.md", "curves.png"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    for row in ("| base |", "| warm start |", "| warm start + GRPO |"):
        assert row in report
    assert "* warm start: " in report and " 2 oracle trajectories" in report
    assert f"report: {out / 'report.md'}" in r.stdout
    again = report.split("## Reproduce")[1].split("```bash\n")[1].split("\n")[0].split()    # reruns every option of this run
    assert again[:3] == ["search-r1-course", "demo", "--config"] and again[4:6] == ["--name", "tiny_again"]
    from search_r1_course.cli import parse_command
    (rerun,) = parse_command("demo", again[2:])
    assert dataclasses.asdict(rerun) == {**json.loads((out / "experiment.json").read_text()), "name": "tiny_again"}
    adapter_cfg = json.loads((out / "grpo" / "adapter" / "adapter_config.json").read_text())
    assert adapter_cfg["base_model_name_or_path"] == "../../warm_start/model"     # the run folder can move


def test_demo_without_a_warm_start_reports_two_stages(tmp_path):
    """`--no-warm-start`: GRPO straight from the given policy; the report has no warm-start row and no empty
    warm-start line in its training cost."""
    from search_r1_course.policy import tiny_random_model
    r = run("demo", "--name", "nows", "--runs-dir", str(tmp_path), "--model", str(tiny_random_model()), "--threads", "1",
            "--eval-n-per-source", "1", "--eval-batch-size", "4", "--no-warm-start", "--max-steps", "1",
            "--dtype", "fp32", "--num-generations", "2", "--questions-per-step", "2", "--gradient-accumulation", "1",
            "--lora-r", "4", "--lora-alpha", "8", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    report = (tmp_path / "nows" / "report.md").read_text()
    assert "| base |" in report and "| GRPO |" in report and "| warm start" not in report
    assert "warm start:" not in report
    assert "* GRPO: " in report and "1 steps" in report


def test_demo_refuses_bad_options():
    r = run("demo", "--gradient-accumulation", "5")     # 4 questions x 6 trajectories do not split into 5 micro-batches
    assert r.returncode == 1
    assert "ExperimentConfig.gradient_accumulation: 5 does not divide the 24 trajectories" in r.stderr
    assert "Traceback" not in r.stderr


def test_demo_refuses_a_misspelt_recipe_key(tmp_path):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("num_generation: 4\n")
    r = run("demo", "--config", str(recipe))
    assert r.returncode == 1
    assert "['num_generation'] are not options" in r.stderr and "did you mean 'num_generations'" in r.stderr


def test_every_recipe_loads_from_python_and_the_command_line():
    """Each file in recipes/ is a complete, valid configuration of the command it names, read the same both ways."""
    from search_r1_course.cli import parse_command
    from search_r1_course.config import load_recipe, recipe_names
    from search_r1_course.experiment import ExperimentConfig
    from search_r1_course.rft import RFTConfig
    from search_r1_course.trainer import TrainConfig
    names = recipe_names()
    assert {"cpu", "imitation-cpu", "train-cpu", "rft-cpu", "gpu-qwen2.5-3b", "gpu-qwen3-4b"} <= set(names)
    demo = (ExperimentConfig, "demo")
    for name in names:
        cls, command = {"cpu": demo, "imitation-cpu": demo, "rft-cpu": (RFTConfig, "rft")}.get(name, (TrainConfig, "train"))
        assert load_recipe(name, cls) == parse_command(command, ["--config", name])[0], name
    assert load_recipe("cpu", ExperimentConfig) == ExperimentConfig()     # the main job's file is its defaults
    overridden, = parse_command("demo", ["--config", "cpu", "--seed", "1", "--name", "cpu_seed1"])
    assert (overridden.seed, overridden.name, overridden.max_steps) == (1, "cpu_seed1", 30)
    requery, = parse_command("demo", ["--config", "cpu", "--explore-new-query", "8"])
    assert (requery.explore_new_query, ExperimentConfig().explore_new_query) == (8, 0)   # off unless asked
    with pytest.raises(ValueError, match="explore_new_query"): parse_command("demo", ["--explore-new-query", "-1"])
    main = ExperimentConfig()                                         # never shown a second search; the outcome alone
    assert (main.warm_sources, main.retrieval_score, main.explore_sources) == ("world_1hop", 0.0, "world_2hop")
    imitation = load_recipe("imitation-cpu", ExperimentConfig)      # the oracle's two-search demonstrations
    assert (imitation.warm_sources, imitation.warm_samples, imitation.warm_epochs, imitation.explore_search) == (
        "world_1hop,world_2hop,world_comparison", 720, 3, 0.0)
    from search_r1_course.rft import match_grpo
    rft = load_recipe("rft-cpu", RFTConfig)                         # the RFT baseline samples as the main job's GRPO does
    assert match_grpo(rft, main) == rft


def test_search_reads_a_recipes_search_setup(tmp_path):
    corpus = write_corpus([Passage("a", "Ostrigo", "Ostrigo is a river port of Velmar."),
                           Passage("b", "Velmar", "Velmar is a country whose capital is Dunhallow."),
                           Passage("c", "Dunhallow", "Dunhallow is the capital of Velmar.")], tmp_path / "c.jsonl")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"retriever: bm25\ntopk: 1\ncorpus_path: {corpus}\nwarm_epochs: 2\n")   # warm_epochs: demo's, skipped
    r = run("search", "--config", str(recipe), "capital of Velmar")
    assert r.returncode == 0, r.stderr
    assert "Doc 1(" in r.stdout and "Doc 2(" not in r.stdout     # the recipe's topk 1, not SearchConfig's default 3
    r = run("search", "--config", str(recipe), "--topk", "3", "capital of Velmar")
    assert "Doc 3(" in r.stdout                                   # the command line over the recipe


# --- eval and compare ---------------------------------------------------------------------------------------------

def _tiny_eval_args():
    from search_r1_course.policy import tiny_random_model
    return ["--model", str(tiny_random_model()), "--dtype", "fp32", "--threads", "1", "--n-per-source", "1", "--max-turns", "2",
            "--max-new-tokens-per-turn", "8", "--max-total-tokens", "96", "--max-obs-tokens", "64", "--show-progress", "false"]


def test_eval_help_says_which_data_it_takes():
    r = run("eval", "--help")
    assert r.returncode == 0, r.stderr
    for value in ("'world'", "'search_r1'", ".jsonl", ".parquet", "<split>.parquet", "--n-per-source", "--model", "--out"):
        assert value in r.stdout, value


def test_eval_reports_data_errors_before_loading_the_model(tmp_path):
    """The model path does not exist either: had the model been looked at first, its error would be the one shown."""
    for data_args, expected in [(["--data", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
                                (["--data", "world", "--sources", "world_1hop,nq"], "['nq'] are not in 'world'")]:
        r = run("eval", "--model", str(tmp_path / "no-model"), *data_args)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert expected in r.stderr and "no-model" not in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    "The tiny model evaluated twice on one question per world type: BM25 top-1 into a folder, top-2 into one JSON file."
    d = tmp_path_factory.mktemp("runs")
    r1 = run("eval", *_tiny_eval_args(), "--out", str(d / "top1"))
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = run("eval", *_tiny_eval_args(), "--topk", "2", "--out", str(d / "top2.json"))
    assert r2.returncode == 0, r2.stderr[-3000:]
    return d, r1


def test_eval_writes_one_line_per_trajectory_and_a_summary(two_runs):
    d, r = two_runs
    for row in ("| world_2hop |", "| macro |", "| hops=2 |", "| qtype=comparison |", f"saved: {d / 'top1'}"):
        assert row in r.stdout, row
    records = [json.loads(line) for line in (d / "top1" / "records.jsonl").read_text().splitlines()]
    assert sorted(x["data_source"] for x in records) == ["world_1hop", "world_2hop", "world_comparison"]
    assert {x["hops"] for x in records} == {1, 2} and all("search_errors" in x and "trajectory" in x for x in records)
    summary = json.loads((d / "top1" / "summary.json").read_text())
    assert "records" not in summary
    setup = summary["setup"]
    assert setup["search"]["retriever"] == "bm25" and setup["search"]["topk"] == 1 and setup["search"]["corpus"] == "world"
    assert setup["search"]["passages"] > 1000 and len(setup["search"]["fingerprint"]) == 16
    assert setup["budgets"] == {"max_turns": 2, "max_new_tokens_per_turn": 8, "max_total_tokens": 96, "max_obs_tokens": 64}
    assert (setup["protocol"], setup["prompt_style"], setup["seed"], setup["decoding"]["temperature"]) == ("tag", "demo", 0, 0.0)
    assert "tiny-llama" in setup["model"] and setup["data"] == {"data": "world", "split": "test", "sources": None, "n_per_source": 1,
                                                       "answer_sep": None}
    assert setup["source_mapping"] == {}
    assert setup["questions"] == {x["data_source"]: [x["id"]] for x in records}
    for key in ("em/macro", "f1/macro", "format/macro", "searches/macro", "no_search/macro", "search_error/world_1hop",
                "search_timeout/macro", "em/hops=2", "em/qtype=comparison"):
        assert key in summary["metrics"], key
    single = json.loads((d / "top2.json").read_text())          # the one-file shape keeps working
    assert single["setup"]["search"]["topk"] == 2 and len(single["records"]) == 3


def test_compare_refuses_runs_that_searched_differently(two_runs):
    d, _ = two_runs
    r = run("compare", str(d / "top1"), str(d / "top2.json"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "search topk: 1 in top1, 2 in top2" in r.stderr and "--force" in r.stderr, r.stderr
    r = run("compare", str(d / "top1"), str(d / "top2.json"), "--force", "--markdown", "--metrics", "em,searches")
    assert r.returncode == 0, r.stderr
    assert "warning: search topk: 1 in top1, 2 in top2" in r.stderr
    assert "| group | em top1 | em top2 | em delta | searches top1 | searches top2 | searches delta |" in r.stdout
    assert "| hops=2 |" in r.stdout and "| top2 |" in r.stdout
    assert "paired 95%" not in r.stdout   # runs measured differently are not paired question by question


def test_compare_refuses_different_questions_and_prints_matching_runs(two_runs, tmp_path, capsys):
    from search_r1_course.cli import main
    from search_r1_course.evaluation import EvalResult
    d, _ = two_runs
    res = EvalResult.load(d / "top1")
    EvalResult(res.metrics, res.records[:2], res.config, res.model, res.seconds, res.setup).save(tmp_path / "fewer")
    res.save(tmp_path / "again")
    r = run("compare", str(d / "top1"), str(tmp_path / "fewer"))
    assert r.returncode == 1 and "questions: 1 only in top1, 0 only in fewer, 2 shared" in r.stderr, r.stderr
    capsys.readouterr()
    assert main(["compare", str(d / "top1"), str(tmp_path / "again"), "--metrics", "em,no_search"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and any(l.split() == ["macro", "0.000", "0.000", "0.000", "1.000", "1.000", "0.000"]
                             for l in out.splitlines()), out
    assert "EM change against top1 in points, with its paired 95% bootstrap interval" in out   # same questions: paired
    assert any(l.split() == ["macro", "+0.0", "[+0.0,", "+0.0]"] for l in out.splitlines()), out
    assert main(["compare", str(d / "top1")]) == 1 and "expected at least two runs" in capsys.readouterr().err
    assert main(["compare", str(d / "top1"), str(tmp_path / "nowhere")]) == 1 and "nowhere" in capsys.readouterr().err
    assert main(["compare", str(d / "top1"), str(tmp_path / "again"), "--metrics", "accuracy"]) == 1
    assert "expected some of" in capsys.readouterr().err


def test_eval_reads_the_split_a_file_holds(tmp_path):
    """A JSON array whose rows all say `dev`: with no split asked for, eval reads them and says so; asked for the test
    split, it names the option that would work."""
    rows = [{"id": str(i), "question": f"Who founded the {n} Society?", "golden_answers": ["Ilsa Tarn"], "data_source": "mine",
             "split": "dev"} for i, n in enumerate(["Stinvask", "Orlen"])]
    data = tmp_path / "societies.json"
    data.write_text(json.dumps(rows, indent=1))
    r = run("eval", *_tiny_eval_args(), "--n-per-source", "2", "--data", str(data), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "holds no 'test' questions, only 'dev' ones: reading those (ask for a split to choose: --split dev)" in r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["setup"]["data"]["split"] == "dev" and summary["setup"]["questions"] == {"mine": ["0", "1"]}
    r = run("eval", *_tiny_eval_args(), "--data", str(data), "--split", "test")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "no 'test' rows; its rows' split is one of ['dev']: ask for split='dev' (--split dev on the command line)" in r.stderr
