"""`search-r1-course view`, run as a user runs it (a subprocess of the installed entry point): the trajectory page of a
main-job run folder, of an evaluation folder and of one `.json` result, and its error paths."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from search_r1_course.evaluation import EvalResult

EXE = shutil.which("search-r1-course", path=str(Path(sys.executable).parent)) or "search-r1-course"
SCRIPT = "<script>document.title='pwned'</script>"


def view(*args, cwd=None):
    return subprocess.run([EXE, "view", *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def record(qid, source, pred, gold, searches, passage=""):
    "A record in the shape `12_eval` writes; the environment's text between ⟦ and ⟧."
    question = f"Question {qid} about {source}?"
    traj = "".join(f"<search> q{k} </search>⟦<information>Doc 1(Title: T) {passage}</information>⟧" for k in range(searches))
    return {"id": qid, "data_source": source, "question": question, "golden_answers": [gold], "prediction": pred,
            "correct": pred == gold, "searches": searches, "queries": [f"q{k}" for k in range(searches)],
            "status": "answered", "trajectory": traj + f"<answer> {pred} </answer>"}


STAGES = {   # q1 right everywhere; q2 right after GRPO only; q3's base answer holds a script; q4 wrong everywhere
    "eval_base.json": [record("q1", "world_1hop", "Orsk", "Orsk", 1, "Orsk"), record("q2", "world_2hop", "Varn", "Velmar", 1, "Varn"),
                       record("q3", "world_2hop", SCRIPT, "Tam Ro", 0), record("q4", "world_comparison", "Ada", "Bo", 1, "Ada")],
    "eval_warm_start.json": [record("q1", "world_1hop", "Orsk", "Orsk", 1, "Orsk"), record("q2", "world_2hop", "Varn", "Velmar", 2, "Varn"),
                             record("q3", "world_2hop", "Kel", "Tam Ro", 2, "Kel"), record("q4", "world_comparison", "Ada", "Bo", 1, "Ada")],
    "eval_grpo.json": [record("q1", "world_1hop", "Orsk", "Orsk", 1, "Orsk"), record("q2", "world_2hop", "Velmar", "Velmar", 2, "Velmar"),
                       record("q3", "world_2hop", "Kel", "Tam Ro", 1, "Kel"), record("q4", "world_comparison", "Ada", "Bo", 1, "Ada")],
}


def make_run(folder: Path) -> Path:
    "A main-job run folder: one evaluation file per stage and the job's configuration."
    for name, records in STAGES.items(): EvalResult(metrics={"em/macro": 0.0}, records=records).save(folder/name)
    (folder/"experiment.json").write_text(json.dumps({"name": folder.name, "warm_start": True}))
    return folder


def test_view_of_a_run_folder_shows_every_stage_side_by_side(tmp_path):
    run = make_run(tmp_path/"cpu")
    r = view(str(run))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == (f"wrote {run/'trajectories.html'}: 4 questions; base (4 answers), warm start (4 answers), "
                                "warm start + GRPO (4 answers)")
    page = (run/"trajectories.html").read_text()
    assert page.count('<div class="q"') == 4 and page.count('<td class="rec"') == 12
    for stage in ("base", "warm-start", "warm-start-grpo"): assert f'data-stage="{stage}"' in page
    assert SCRIPT not in page and "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert page.count("<script>") == 1 and "https://" not in page and "http://" not in page   # its own script; nothing fetched


def test_view_of_an_eval_folder_and_of_a_json_file(tmp_path):
    records = STAGES["eval_base.json"]
    EvalResult(metrics={}, records=records).save(tmp_path/"base")          # records.jsonl + summary.json
    r = view(str(tmp_path/"base"), "--out", str(tmp_path/"pages"/"base.html"))
    assert r.returncode == 0, r.stderr[-3000:]
    page = (tmp_path/"pages"/"base.html").read_text()
    assert page.count('<td class="rec"') == 4 and '<select id="f-stage">' not in page     # one evaluation: no stage filter
    EvalResult(metrics={}, records=records).save(tmp_path/"base.json")
    r = view("base.json", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("wrote base.html: 4 questions; base (4 answers)"), (r.stdout, r.stderr)


def test_a_folder_without_an_evaluation_is_one_clear_line(tmp_path):
    (tmp_path/"empty").mkdir()
    for path, expected in [(tmp_path/"empty", "holds no evaluation"), (tmp_path/"nowhere", "no such file or folder")]:
        r = view(str(path))
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert r.stderr.startswith(f"search-r1-course view: error: {path}: {expected}"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
