"""`search-r1-course ask`, run as a user runs it (a subprocess of the installed entry point), and its error paths."""
import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from search_r1_course.cli import main
from search_r1_course.data import load_world

EXE = shutil.which("search-r1-course", path=str(Path(sys.executable).parent)) or "search-r1-course"
SMALL = ["--dtype", "fp32", "--threads", "1", "--max-new-tokens-per-turn", "8"]
ANSI = "\x1b["


def ask(*args, cwd=None, stdin="", env=None):
    return subprocess.run([EXE, "ask", *args], capture_output=True, text=True, timeout=300, cwd=cwd, input=stdin,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})})


@pytest.fixture(scope="module")
def tiny():
    from search_r1_course.policy import tiny_random_model
    return tiny_random_model()


@pytest.fixture(scope="module")
def world_question():
    return next(q for q in load_world("test") if q.data_source == "world_1hop")


def test_ask_plays_the_newest_trained_policy_in_its_runs_setup(tiny, world_question, tmp_path):
    """A run folder as `make demo` leaves it (its warm start only): found from the repository root without --model,
    its recipe's budgets used (two turns), a world question's answers and verdict shown; a pipe gets no colour."""
    shutil.copytree(tiny, tmp_path / "runs" / "tiny" / "warm_start" / "model")
    (tmp_path / "runs" / "tiny" / "experiment.json").write_text(json.dumps({"max_turns": 2, "prompt_style": "short",
                                                                           "temperature": 1.0, "name": "tiny"}))
    r = ask(*SMALL, world_question.question, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == ("model: runs/tiny/warm_start/model (the newest trained policy under runs/: run 'tiny', warm start); "
                        "setup from runs/tiny/experiment.json"), lines[0]
    assert lines[1] == f"question: {world_question.question}"
    assert lines[-2] == f"golden: {' | '.join(world_question.golden_answers)}  wrong"     # a random model
    assert lines[-1].startswith("0 searches, 2 turns, ")                                 # the run's max_turns, greedy
    assert ANSI not in r.stdout and "Traceback" not in r.stderr


def test_json_records_from_standard_input(tiny, world_question, tmp_path):
    """`-` reads one question per line; `--json` prints eval's record per question (the model line goes to stderr);
    a question of one's own has no golden answers and no verdict."""
    r = ask("--model", str(tiny), *SMALL, "--max-turns", "1", "--json", "--sample", "-", cwd=tmp_path,
            stdin=f"{world_question.question}\n\nWho founded the Stinvask Society?\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.startswith(f"model: {tiny} (given)")
    world, own = [json.loads(line) for line in r.stdout.splitlines()]
    assert (world["id"], world["golden_answers"], world["correct"]) == (world_question.id, world_question.golden_answers, False)
    assert (own["id"], own["data_source"], own["golden_answers"], own["correct"], own["f1"]) == (None, "asked", [], None, None)
    assert own["question"] == "Who founded the Stinvask Society?" and own["turns"] == 1 and "trajectory" in own


def test_without_a_question_it_reads_until_the_end_of_input(tiny, tmp_path):
    r = ask("--model", str(tiny), *SMALL, "--max-turns", "1", cwd=tmp_path, stdin="Where is Elleirvond?\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "question: Where is Elleirvond?" in r.stdout and r.stdout.rstrip().endswith("s")


def test_bad_input_is_one_line(tiny, tmp_path, capsys):
    for args, expected in [([" "], "empty question: expected the text of a question"),
                           (["--model", str(tmp_path), "q?"], "not a model folder (expected config.json, or adapter_config.json"),
                           (["--model", str(tiny), "--max-turns", "0", "q?"], "EvalConfig.max_turns: expected a positive int")]:
        assert main(["ask", *args]) == 1
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1 and err.startswith("search-r1-course ask: error: "), err


class Tty(io.StringIO):
    def isatty(self): return True


def test_colour_on_a_terminal_unless_no_color(tiny, monkeypatch):
    for no_color, coloured in [("", True), ("1", False)]:
        monkeypatch.setenv("NO_COLOR", no_color)
        out = Tty()
        monkeypatch.setattr(sys, "stdout", out)
        assert main(["ask", "--model", str(tiny), *SMALL, "--max-turns", "1", "Where is Elleirvond?"]) == 0
        assert (ANSI in out.getvalue()) == coloured, out.getvalue()


def test_a_server_that_does_not_answer_is_shown_as_the_policy_saw_it(tiny, world_question):
    """The oracle searches a retrieval server nobody runs: each search comes back as the failure the policy reads."""
    from search_r1_course.ask import Asker, TurnPrinter, load_engine, world_questions
    from search_r1_course.data import load_world_corpus
    from search_r1_course.evaluation import EvalConfig
    from search_r1_course.rollout import RolloutEngine
    from search_r1_course.warmstart import OracleGenerator, oracle_turns
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                                       # free, and nobody listens once closed
    cfg = EvalConfig(model=str(tiny), dtype="fp32", threads=1, retriever="http", retriever_url=f"http://127.0.0.1:{port}/retrieve",
                     max_turns=3, max_new_tokens_per_turn=32)
    engine = load_engine(cfg)
    corpus = {p.id: p for p in load_world_corpus()}
    script = {world_question.question: oracle_turns(world_question, corpus, protocol=engine.protocol)}
    oracle = RolloutEngine(OracleGenerator(engine.tokenizer, engine.protocol, script), engine.protocol, engine.tool,
                           engine.tokenizer, engine.config)
    out = io.StringIO()
    record = Asker(cfg, engine=oracle, known=world_questions()).ask(world_question.question, TurnPrinter(out, color=False))
    assert record["search_errors"] == 1 and record["correct"] is True, out.getvalue()
    assert "    search failed: " in out.getvalue() and "cannot reach http://127.0.0.1" in out.getvalue(), out.getvalue()
