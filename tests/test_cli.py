"""The `search-r1-course` command line, run as a user runs it: a subprocess of the installed entry point."""
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
    overrides = json.dumps({"dtype": "fp32", "num_generations": 2, "questions_per_step": 2, "gradient_accumulation": 1,
                            "lora_r": 4, "lora_alpha": 8})
    r = run("demo", "--name", "tiny", "--runs-dir", str(tmp_path), "--model", str(tiny_random_model()), "--threads", "1",
            "--eval-n-per-source", "1", "--eval-batch-size", "4", "--warm-samples", "2", "--grpo-steps", "1",
            "--train-overrides", overrides, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "tiny"
    for name in ("eval_base.json", "eval_warm_start.json", "eval_grpo.json", "report.md", "curves.png"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    for row in ("| base |", "| warm start |", "| warm start + GRPO |"):
        assert row in report
    assert f"report: {out / 'report.md'}" in r.stdout


def test_demo_refuses_bad_overrides():
    r = run("demo", "--train-overrides", "num_generations=4")
    assert r.returncode == 1
    assert "expected a JSON object" in r.stderr and "Traceback" not in r.stderr
