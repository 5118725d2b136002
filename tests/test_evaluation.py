"""Evaluation bookkeeping that the notebook does not show: search timeouts per source, results saved before setups were
recorded, and the errors of a damaged result folder."""
import json
import os
import time

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from search_r1_course.data import load_world_corpus  # noqa: E402
from search_r1_course.evaluation import (EvalConfig, EvalResult, differences, evaluate_policy, load_eval_samples,  # noqa: E402
                                         setup_of, side_by_side)
from search_r1_course.policy import packaged_tokenizer  # noqa: E402
from search_r1_course.rollout import RolloutEngine, make_protocol, rollout_config, search_config  # noqa: E402
from search_r1_course.retrievers import Retriever  # noqa: E402
from search_r1_course.search import SearchTool, make_search_tool  # noqa: E402
from search_r1_course.warmstart import OracleGenerator, oracle_turns  # noqa: E402

CFG = EvalConfig(n_per_source=2, max_total_tokens=320, show_progress=False)


class SlowRetriever(Retriever):
    "A backend that answers after the search tool's deadline."
    name = "slow"
    def _retrieve(self, queries, topk):
        time.sleep(0.3)
        return [[] for _ in queries]


@pytest.fixture(scope="module")
def oracle_on():
    "`oracle_on(tool)`: the world oracle (searches every supporting passage, then answers) as an engine over `tool`."
    tok = packaged_tokenizer()
    protocol = make_protocol(CFG, tok)
    passages = {p.id: p for p in load_world_corpus()}
    scripts = {q.question: oracle_turns(q, passages) for q in load_eval_samples(CFG)}
    return lambda tool: RolloutEngine(OracleGenerator(tok, protocol, scripts), protocol, tool, tok, rollout_config(CFG))


def test_timeouts_are_counted_per_source_and_agree_with_the_tool(oracle_on):
    res = evaluate_policy(oracle_on(SearchTool(SlowRetriever(), timeout_s=0.02)), load_eval_samples(CFG), CFG)
    for s in res.sources:
        assert res.metrics[f"search_timeout/{s}"] == 1.0 and res.metrics[f"search_error/{s}"] == 0.0, s
    assert res.metrics["search/timeout_rate"] == 1.0 and res.metrics["search_timeout/macro"] == 1.0
    assert all(r["search_timeouts"] == r["searches"] > 0 for r in res.records)
    assert res.metrics["searches/hops=2"] == 2.0 and res.setup["search"]["retriever"] == "slow"
    assert res.metrics["em/macro"] == 1.0     # the oracle answers without reading the passages


def test_a_result_saved_before_setups_were_recorded(oracle_on, tmp_path):
    """13_experiment's stage files (`eval_*.json`) predate the setup and the per-record fault counts: they still load,
    tabulate and compare with a new result on the same questions and config."""
    new = evaluate_policy(oracle_on(make_search_tool(search_config(CFG))), load_eval_samples(CFG), CFG)
    old_records = [{k: v for k, v in r.items() if k not in ("hops", "qtype", "search_errors", "search_timeouts")}
                   for r in new.records]
    path = tmp_path / "eval_base.json"
    path.write_text(json.dumps({"metrics": {"em/macro": 1.0}, "records": old_records, "config": CFG.to_dict(),
                                "model": "base", "seconds": 1.0}))
    old = EvalResult.load(path)
    assert old.setup == {} and setup_of(old)["search"] == {"retriever": "bm25", "topk": 1, "corpus": "world"}
    assert list(old.table().index) == ["world_1hop", "world_2hop", "world_comparison", "macro"]
    assert old.table().loc["macro", "search_error"] == 0.0
    assert differences({"old": old, "new": new}) == []
    table = side_by_side({"old": old, "new": new}, metrics=("em",))
    assert table.loc["macro", "em delta"] == 0.0 and table.loc["hops=2", "em old"] is None   # old records carry no hops
    wider = {**CFG.to_dict(), "topk": 3, "max_turns": 4}
    assert differences({"old": old, "wider": EvalResult({}, old_records, wider)}) == [
        "search topk: 1 in old, 3 in wider", "budgets max_turns: 3 in old, 4 in wider"]


def test_a_damaged_result_folder_is_a_clear_error(tmp_path):
    res = EvalResult({"em/macro": 0.0}, [{"id": "q1", "data_source": "a"}, {"id": "q2", "data_source": "a"}])
    folder = res.save(tmp_path / "run")
    assert EvalResult.load(folder).records == res.records
    (folder / "records.jsonl").write_text('{"id": "q1", "data_source": "a"}\nnot json\n')
    with pytest.raises(ValueError, match=r"records.jsonl, line 2"): EvalResult.load(folder)
    (folder / "summary.json").unlink()
    with pytest.raises(FileNotFoundError, match="not an evaluation folder"): EvalResult.load(folder)
    (tmp_path / "x.json").write_text('{"rows": []}')
    with pytest.raises(ValueError, match=r"missing \['metrics', 'records'\]"): EvalResult.load(tmp_path / "x.json")
