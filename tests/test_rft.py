"""`search-r1-course rft` end to end on the tiny random model: one round, a few questions, the log and the saved policy."""
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from search_r1_course.policy import load_policy, tiny_random_model  # noqa: E402


def cli(*args, timeout=600):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", "import sys; from search_r1_course.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_cli_rft_one_round(tmp_path):
    out = tmp_path / "rft"
    r = cli("rft", "--config", "rft-cpu", "--model", str(tiny_random_model()), "--dtype", "fp32", "--threads", "1",
            "--rounds", "1", "--questions-per-round", "3", "--num-generations", "2", "--max-turns", "2",
            "--max-new-tokens-per-turn", "8", "--max-total-tokens", "96", "--max-obs-tokens", "64", "--lora-r", "4",
            "--data-sources", "world_1hop", "--output-dir", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1 rounds x 3 questions x 2 samples = 6 sampled trajectories" in r.stdout
    assert "round 1: kept 0 of 6" in r.stdout              # a random policy answers nothing correctly
    assert "none of the 6 sampled trajectories was correct" in r.stderr
    rounds = [json.loads(l) for l in (out / "rounds.jsonl").read_text().splitlines()]
    assert [(x["round"], x["questions"], x["sampled"], x["kept"]) for x in rounds] == [(1, 3, 6, 0)]
    assert rounds[0]["sampled_by_source"] == {"world_1hop": 6}
    assert len((out / "samples.jsonl").read_text().splitlines()) == 6
    assert json.loads((out / "config.json").read_text())["questions_per_round"] == 3
    load_policy(str(out / "model"), dtype="fp32")          # the policy is saved as a plain model folder


def test_cli_rft_bad_setting_is_one_clear_line(capsys):
    from search_r1_course.cli import main
    assert main(["rft", "--rounds", "0"]) == 1
    err = capsys.readouterr().err
    assert "search-r1-course rft: error: RFTConfig.rounds: expected a positive int, got 0" in err and "Traceback" not in err


def test_rft_draws_from_the_selected_questions(tmp_path):
    "select_k: RFT runs the same selection pass as GRPO first; questions answered right always or never are not drawn."
    from search_r1_course.difficulty import ScriptedAnswers
    from search_r1_course.rft import RFTConfig, rft
    from search_r1_course.trainer import build_engine, load_train_samples
    cfg = RFTConfig(model=str(tiny_random_model()), dtype="fp32", threads=1, rounds=1, questions_per_round=2, num_generations=2,
                    data_sources="world_1hop,world_2hop", max_train_samples=None, select_k=2, select_pool=8, lora_r=4, lora_alpha=8,
                    max_turns=2, max_new_tokens_per_turn=40, max_total_tokens=256, max_obs_tokens=96, topk=1,
                    output_dir=str(tmp_path / "rft"))
    model, tok = load_policy(cfg.model, dtype="fp32", threads=1)
    pool = load_train_samples(cfg)
    lookups = [s.question for s in pool if s.data_source == "world_1hop"]
    protocol = build_engine(model, tok, cfg).protocol
    res = rft(cfg, model, tok, generator=ScriptedAnswers(tok, protocol, pool, never=lookups))
    rows = [json.loads(l) for l in (tmp_path / "rft" / "selection.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {r["kept"] for r in rows if r["data_source"] == "world_1hop"} <= {False}
    assert all(r["kept"] for r in rows if r["data_source"] == "world_2hop")   # right in one of two samples: a spread
    assert res.rounds[0]["sampled_by_source"] == {"world_2hop": 4}
