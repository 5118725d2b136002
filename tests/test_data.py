"""Tests for `search_r1_course.data` that a notebook holds badly: random round trips, the hub path,
resumption at every stopping point, and the shipped world against a fresh export."""
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from search_r1_course import data
from search_r1_course.data import (CorpusFormatError, Passage, QAFormatError, QASample, canonical_source,
                                   load_named, load_parquet, load_qa, load_search_r1, read_corpus, sample_per_source,
                                   source_mapping, write_corpus)

titles = st.text().filter(lambda t: "\n" not in t)
passages = st.builds(Passage, id=st.text(min_size=1), title=titles, text=st.text())


@given(passages)
def test_passage_contents_round_trip(p):
    assert Passage.from_contents(p.id, p.contents) == p
    assert p.contents.startswith('"') and p.contents.count("\n") == p.text.count("\n") + 1


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(st.lists(passages, unique_by=lambda p: p.id, max_size=20))
def test_corpus_file_round_trip(tmp_path, ps):
    path = write_corpus(ps, tmp_path/"c.jsonl")
    assert read_corpus(path) == ps
    first = path.read_bytes()
    assert write_corpus(ps, tmp_path/"c.jsonl").read_bytes() == first  # same passages, same bytes
    assert first.count(b"\n") == len(ps)  # one line per passage, whatever the text holds (\r, U+2028, ...)


def test_corpus_errors_name_file_and_line(tmp_path):
    path = tmp_path/"wiki.jsonl"
    good = [json.dumps({"id": str(i), "contents": f'"T{i}"\nx'}) for i in range(5)]
    cases = {b'{"id": "9", "contents": 3}': "'contents' must be a string, found int",
             b'{"contents": "x"}': "missing key 'id'",
             b'{"id": "9", "contents": "\xff"}': "not valid UTF-8 (byte 0xff",
             b'{"id": "9", "contents": ': "invalid JSON",
             b'{"id": "2", "contents": "\\"T\\"\\nx"}': "duplicate id '2': also on line 4"}
    for bad, message in cases.items():
        lines = [g.encode() for g in good[:2]] + [b""] + [g.encode() for g in good[2:]] + [bad]
        path.write_bytes(b"\n".join(lines) + b"\n")
        with pytest.raises(CorpusFormatError) as e: read_corpus(path)
        assert e.value.line == 7 and str(e.value).startswith(f"{path}:7: ") and message in str(e.value)


def test_write_corpus_refuses_duplicates(tmp_path):
    with pytest.raises(ValueError, match="duplicate passage id 'a'"):
        write_corpus([Passage("a", "t", "x"), Passage("a", "u", "y")], tmp_path/"c.jsonl")


def _search_r1_table(n=4, split="train"):
    "A table with exactly the columns and types of PeterJinGo/nq_hotpotqa_train."
    rows = []
    for i in range(n):
        answers = [f"answer {i}", f"alias {i}"][: 1 + i % 2]
        rows.append({"id": f"{split}_{i}", "question": f"question {i}?", "golden_answers": answers,
                     "data_source": "nq" if i % 2 else "hotpotqa",
                     "prompt": [{"content": f"Answer it. Question: question {i}?\n", "role": "user"}],
                     "ability": "fact-reasoning", "reward_model": {"ground_truth": {"target": answers}, "style": "rule"},
                     "extra_info": {"index": i, "split": split}})
    return pa.Table.from_pylist(rows)


def test_load_search_r1_from_the_hub_path(tmp_path, monkeypatch):
    import huggingface_hub
    pq.write_table(_search_r1_table(5, "test"), tmp_path/"downloaded.parquet")
    calls = []
    def fake_download(**kwargs):
        calls.append(kwargs)
        return str(tmp_path/"downloaded.parquet")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    samples = load_search_r1("test")
    assert calls == [{"repo_id": "PeterJinGo/nq_hotpotqa_train", "filename": "test.parquet", "repo_type": "dataset"}]
    assert [s.id for s in samples] == [f"test_{i}" for i in range(5)]
    assert samples[1].golden_answers == ["answer 1", "alias 1"] and samples[1].data_source == "nq"
    assert all(type(a) is str for s in samples for a in s.golden_answers)
    load_search_r1("train")
    assert calls[-1]["filename"] == "train.parquet"


def test_load_search_r1_offline_says_what_to_do(monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError
    def offline(**kwargs): raise LocalEntryNotFoundError("offline")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(FileNotFoundError, match="pass data_path="): load_search_r1("train")


def test_load_search_r1_local_directory(tmp_path):
    for split in ("train", "test"): pq.write_table(_search_r1_table(3, split), tmp_path/f"{split}.parquet")
    assert [s.id for s in load_search_r1("test", data_path=tmp_path)] == ["test_0", "test_1", "test_2"]
    assert load_search_r1("train", data_path=tmp_path) == load_qa(tmp_path/"train.parquet")


def test_answers_as_numpy_scalars_and_tuples():
    rows = [{"question": "q?", "golden_answers": np.int64(1931)}, {"question": "r?", "golden_answers": ("a", np.str_("b"))},
            {"question": "s?", "golden_answers": np.array([1.0, 2.5])}]
    got = data.qa_from_records(rows, "x.jsonl")
    assert [s.golden_answers for s in got] == [["1931"], ["a", "b"], ["1", "2.5"]]
    assert [s.id for s in got] == ["x_0", "x_1", "x_2"]


def test_missing_column_names_file_expected_and_found(tmp_path):
    pq.write_table(pa.Table.from_pylist([{"query": "q?", "answers": ["a"]}]), tmp_path/"odd.parquet")
    with pytest.raises(QAFormatError) as e: load_parquet(tmp_path/"odd.parquet")
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path/'odd.parquet'}: expected columns ['question', 'golden_answers']")
    assert "found ['answers', 'query']" in msg and "'answers' -> 'golden_answers'" in msg and "'query' -> 'question'" in msg


def test_jsonl_row_missing_a_column_names_its_line(tmp_path):
    rows = [{"question": "q?", "golden_answers": ["a"]}, {"question": "r?", "answer": "b"}]
    (tmp_path/"qa.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    with pytest.raises(QAFormatError, match=r"qa\.jsonl:2: missing column 'golden_answers' \(found \['answer', 'question'\]\)"):
        load_qa(tmp_path/"qa.jsonl")


def test_sample_per_source():
    pool = [QASample(f"{src}-{i}", "q?", ["a"], src) for src, k in [("nq", 100), ("bamboogle", 7), ("musique", 30)] for i in range(k)]
    picked = sample_per_source(pool, 10, seed=5)
    assert [s.data_source for s in picked] == ["bamboogle"] * 7 + ["musique"] * 10 + ["nq"] * 10
    assert len({s.id for s in picked}) == len(picked)
    assert sample_per_source(pool, 10, seed=5) == picked
    nq_idx = [int(s.id.split("-")[1]) for s in picked if s.data_source == "nq"]
    assert nq_idx == sorted(nq_idx)  # file order within a source
    everything = sample_per_source(pool, 1000)
    assert sorted(s.id for s in everything) == sorted(s.id for s in pool)
    with pytest.raises(ValueError): sample_per_source(pool, 0)


def test_same_id_in_two_sources_is_two_questions(tmp_path):
    table = _search_r1_table(4)
    ids = pa.array(["train_0", "train_0", "train_1", "train_1"])  # NQ and HotpotQA both number their rows from 0
    pq.write_table(table.set_column(0, "id", ids), tmp_path/"merged.parquet")
    assert [(s.data_source, s.id) for s in load_parquet(tmp_path/"merged.parquet")] == [
        ("hotpotqa", "train_0"), ("nq", "train_0"), ("hotpotqa", "train_1"), ("nq", "train_1")]


# The offline world on disk ---------------------------------------------------------------------------

def _tiny_world():
    from search_r1_course.world import WorldConfig, build_world
    return build_world(WorldConfig.tiny())


def test_export_world_is_byte_identical_and_loads_back(tmp_path):
    world = _tiny_world()
    a, b = data.export_world(world, tmp_path/"a"), data.export_world(_tiny_world(), tmp_path/"b")
    assert list(a) == ["corpus", "train", "dev", "test"]
    for key in a: assert a[key].read_bytes() == b[key].read_bytes(), key
    assert [p.id for p in data.load_world_corpus(tmp_path/"a")] == [p.id for p in world.passages]
    for split in data.SPLITS:
        qs = [q for q in world.questions if q.split == split]
        samples = data.load_world(split, tmp_path/"a")
        assert [s.id for s in samples] == [q.id for q in qs] and samples
        for s, q in zip(samples, qs):
            assert s.golden_answers == list(q.answers) and s.data_source == f"world_{q.qtype}"
            assert s.meta == {"hops": q.hops, "qtype": q.qtype, "relation": q.relation, "supporting_ids": list(q.supporting_ids)}
    assert pq.read_schema(a["train"]).names == ["id", "question", "golden_answers", "data_source", "hops", "qtype",
                                                "relation", "supporting_ids"]


def test_shipped_world_equals_a_fresh_export(tmp_path):
    from search_r1_course.world import WorldConfig, build_world
    shipped = Path(data.__file__).resolve().parent.parent/"data"/"world"
    assert all((shipped/f).is_file() for f in data.WORLD_FILES), "data/world is missing: run the export cell of nbs/01b_data.ipynb"
    fresh = data.export_world(build_world(WorldConfig.default()), tmp_path)
    assert (shipped/"corpus.jsonl").read_bytes() == fresh["corpus"].read_bytes()
    for split in ("train", "dev", "test"):
        # Compare contents: the bytes also carry the writer's version string, which changes with pyarrow upgrades.
        assert pq.read_table(shipped/f"{split}.parquet").equals(pq.read_table(fresh[split]))
        if pq.read_metadata(shipped/f"{split}.parquet").created_by == pq.read_metadata(fresh[split]).created_by:
            assert (shipped/f"{split}.parquet").read_bytes() == fresh[split].read_bytes()
    assert data.world_dir() == shipped


def test_world_dir_generates_the_cache_once(tmp_path, monkeypatch):
    from search_r1_course import world
    monkeypatch.setattr(data, "_shipped_world_dir", lambda: tmp_path/"no-checkout"/"data"/"world")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path/"cache"))
    monkeypatch.setattr(world.WorldConfig, "default", classmethod(lambda cls: cls.tiny()))
    d = data.world_dir()
    # keyed by the generator's source: a changed generator never reads an old copy
    assert d.parent == tmp_path/"cache"/"search_r1_course" and d.name.startswith("world-")
    assert sorted(p.name for p in d.iterdir()) == sorted(data.WORLD_FILES)
    assert [p.name for p in d.parent.iterdir()] == [d.name]  # no staging directory left behind
    def no_rebuild(*a, **k): raise AssertionError("the cached world was rebuilt")
    monkeypatch.setattr(world, "build_world", no_rebuild)
    assert data.world_dir() == d
    assert data.load_world("test") == data.load_world("test", d)


def test_gzipped_corpus_bytes_do_not_depend_on_the_clock(tmp_path, monkeypatch):
    import time
    ps = [Passage("a", "Title", "text"), Passage("b", "Other", "more text")]
    monkeypatch.setattr(time, "time", lambda: 1_000_000_000.0)
    first = write_corpus(ps, tmp_path/"one.jsonl.gz").read_bytes()
    monkeypatch.setattr(time, "time", lambda: 2_000_000_000.0)
    assert write_corpus(ps, tmp_path/"two.jsonl.gz").read_bytes() == first
    assert read_corpus(tmp_path/"two.jsonl.gz") == ps


def test_export_world_writes_only_the_splits_it_has(tmp_path):
    from types import SimpleNamespace
    world = _tiny_world()
    no_dev = SimpleNamespace(passages=world.passages, questions=[q for q in world.questions if q.split != "dev"])
    data.export_world(world, tmp_path)
    paths = data.export_world(no_dev, tmp_path)  # over an export that had dev: the old dev.parquet must go
    assert list(paths) == ["corpus", "train", "test"] and not (tmp_path/"dev.parquet").exists()
    with pytest.raises(FileNotFoundError, match="has no dev.parquet.*Re-export it"): data.load_world("dev", tmp_path)
    assert [s.id for s in data.load_world("test", tmp_path)] == [q.id for q in world.questions if q.split == "test"]
    odd = SimpleNamespace(passages=[], questions=[SimpleNamespace(id="q9", split="val")])
    with pytest.raises(ValueError, match=r"question 'q9' has split 'val'; expected one of \('train', 'dev', 'test'\)"):
        data.export_world(odd, tmp_path/"odd")


def test_a_world_folder_from_before_dev(tmp_path, monkeypatch):
    "A shipped or cached world without dev.parquet still serves train and test; dev says to re-export, never crashes."
    old = tmp_path/"data"/"world"
    data.export_world(_tiny_world(), old)
    (old/"dev.parquet").unlink()
    monkeypatch.setattr(data, "_shipped_world_dir", lambda: old)
    assert data.world_dir() == old
    assert data.load_named("world", "test") == data.load_world("test", old)
    for load in (lambda: data.load_world("dev"), lambda: data.load_named("world", "dev")):
        with pytest.raises(FileNotFoundError, match="nbs/01b_data.ipynb"): load()


def test_world_cache_key_covers_the_export_layout(tmp_path, monkeypatch):
    "A cache folder keyed by the generator alone (what older versions wrote, without dev.parquet) is not read."
    import hashlib
    from search_r1_course import world
    monkeypatch.setattr(data, "_shipped_world_dir", lambda: tmp_path/"no-checkout")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path/"cache"))
    monkeypatch.setattr(world.WorldConfig, "default", classmethod(lambda cls: cls.tiny()))
    old_key = hashlib.sha1(Path(world.__file__).read_bytes()).hexdigest()[:12]
    old = tmp_path/"cache"/"search_r1_course"/f"world-{old_key}"
    data.export_world(_tiny_world(), old)
    (old/"dev.parquet").unlink()
    d = data.world_dir()
    assert d != old and (d/"dev.parquet").is_file()
    assert data.load_world("dev") == data.load_world("dev", d)


def test_world_cache_key_covers_the_text_tables(tmp_path, monkeypatch):
    "The world's wording lives in world_text: editing a template gives a new cache key, as editing the generator does."
    from search_r1_course import world_text
    key = data._world_cache_key()
    edited = tmp_path/"world_text.py"
    source = Path(world_text.__file__).read_text()
    assert "{n} is a country." in source
    edited.write_text(source.replace("{n} is a country.", "{n} is a nation."))
    monkeypatch.setattr(world_text, "__file__", str(edited))
    assert data._world_cache_key() != key

# Loading other projects' files --------------------------------------------------------------------------

def _verl_rows(ground_truths, source="nq", index=None):
    return [{"data_source": source, "question": f"question {i}?", "reward_model": {"style": "rule", "ground_truth": gt},
             "extra_info": {"index": i if index is None else index[i], "split": "test"}} for i, gt in enumerate(ground_truths)]


def test_answer_strings_split_only_on_the_marker_or_a_named_separator(tmp_path):
    path = tmp_path/"nq_dev_verl.parquet"
    gts = ["Paul Simon<|answer_split|>Simon", "Simon; Garfunkel duo", "1931", "Art Garfunkel <|answer_split|> Garfunkel"]
    pq.write_table(pa.Table.from_pylist(_verl_rows(gts)), path)
    with pytest.warns(UserWarning) as caught: samples = load_qa(path)
    assert [s.golden_answers for s in samples] == [["Paul Simon", "Simon"], ["Simon; Garfunkel duo"], ["1931"],
                                                   ["Art Garfunkel", "Garfunkel"]]
    assert len(caught) == 1
    message = str(caught[0].message)
    assert str(path) in message and "'<|answer_split|>'" in message and "2 of 4 rows" in message
    # a separator the user names is used instead, through every loader, and said as well
    # (the marker still splits too: a marker is never part of an answer)
    with pytest.warns(UserWarning, match=r"split the answer strings of 3 of 4 rows on '<\|answer_split\|>' or ';'"):
        named = load_parquet(path, answer_sep=";")
    assert [s.golden_answers for s in named] == [["Paul Simon", "Simon"], ["Simon", "Garfunkel duo"], ["1931"],
                                                 ["Art Garfunkel", "Garfunkel"]]
    with pytest.warns(UserWarning, match="or ';'"):
        assert load_named(path, "test", answer_sep=";")[1].golden_answers == ["Simon", "Garfunkel duo"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = load_qa(path, answer_sep="")  # '' never splits, so nothing is said
    assert [s.golden_answers for s in whole][:2] == [["Paul Simon<|answer_split|>Simon"], ["Simon; Garfunkel duo"]]
    # no marker anywhere: nothing is split, whatever characters the answers hold
    pq.write_table(pa.Table.from_pylist(_verl_rows(["Simon; Garfunkel duo", "AC|DC", "1931"])), tmp_path/"unmarked.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [s.golden_answers for s in load_qa(tmp_path/"unmarked.parquet")] == [["Simon; Garfunkel duo"], ["AC|DC"], ["1931"]]
    assert data.answers_from_reward_model({"ground_truth": "Simon; Garfunkel duo"}) == ["Simon; Garfunkel duo"]
    assert not hasattr(data, "detect_answer_sep") and not hasattr(data, "ANSWER_SEPARATORS")


def test_no_separator_is_guessed_in_golden_answer_strings(tmp_path):
    path = tmp_path/"one_string.jsonl"
    rows = [{"question": "Which duo?", "golden_answers": "Simon; Garfunkel duo"}, {"question": "Which band?", "golden_answers": "AC|DC"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [s.golden_answers for s in load_qa(path)] == [["Simon; Garfunkel duo"], ["AC|DC"]]


def test_r1_searcher_eval_set(tmp_path):
    "R1-Searcher's data/eval_set/*.jsonl: idx, question, one answer string (and a gen_text_store field)."
    path = tmp_path/"eval_set"/"hotpotqa_500.jsonl"
    path.parent.mkdir()
    rows = [{"idx": 1, "question": "In which stadium was the 1973 Pro Bowl played?", "answer": "Arrowhead Stadium", "gen_text_store": ""},
            {"idx": 2, "question": "What party campaigned for Home Rule?", "answer": "The Home Rule League", "gen_text_store": ""}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    samples = load_qa(path)
    assert [(s.id, s.data_source, s.golden_answers) for s in samples] == [
        ("hotpotqa_1", "hotpotqa", ["Arrowhead Stadium"]), ("hotpotqa_2", "hotpotqa", ["The Home Rule League"])]
    assert source_mapping(samples) == {"hotpotqa_500": "hotpotqa"}
    assert "answer" not in samples[0].meta and samples[0].meta["idx"] == 1
    assert load_named(path, "test", "hotpot_qa") == samples  # no split in its name: usable for evaluation


@pytest.mark.parametrize("given,canonical", [
    ("tq", "triviaqa"), ("trivia_qa", "triviaqa"), ("TriviaQA", "triviaqa"), ("2wiki", "2wikimultihopqa"),
    ("2WikiMultihopQA", "2wikimultihopqa"), ("Bamboogle", "bamboogle"), ("hotpot_qa", "hotpotqa"), ("HotpotQA", "hotpotqa"),
    ("nq_open", "nq"), ("natural_questions", "nq"), ("NQ", "nq"), ("popQA", "popqa"), ("MuSiQue", "musique"),
    ("musique_ans", "musique"), ("2wiki_500", "2wikimultihopqa"), ("bamboogle_test", "bamboogle"),
    ("world_1hop", "world_1hop"), ("tq_qg", "tq_qg"), ("nq_hotpotqa", "nq_hotpotqa"), ("My-Set", "My-Set")])
def test_source_names_map_to_the_canonical_ones(given, canonical):
    assert canonical_source(given) == canonical


def test_loaded_sources_are_canonical_and_the_mapping_is_kept(tmp_path):
    path = tmp_path/"mixed.parquet"
    rows = _verl_rows([["a"], ["b"], ["c"], ["d"]], source="nq")
    for row, src in zip(rows, ["tq", "Bamboogle", "hotpot_qa", "nq"]): row["data_source"] = src
    pq.write_table(pa.Table.from_pylist(rows), path)
    samples = load_qa(path)
    assert [s.data_source for s in samples] == ["triviaqa", "bamboogle", "hotpotqa", "nq"]
    assert source_mapping(samples) == {"Bamboogle": "bamboogle", "hotpot_qa": "hotpotqa", "tq": "triviaqa"}
    assert "source_alias" not in samples[3].meta
    # the sources a user names are read the same way
    assert [s.data_source for s in load_named(path, "test", "trivia_qa,nq")] == ["triviaqa", "nq"]
    suite = data.benchmark_suite(samples, n_per_source=1, sources=["tq", "nq"])
    assert [s.data_source for s in suite] == ["triviaqa", "nq"]
    with pytest.raises(ValueError, match=r"benchmarks \['popqa', '2wikimultihopqa', 'musique'\] are not in"):
        data.benchmark_suite(samples)


def test_benchmark_suite_is_the_70_question_sample():
    pool = [QASample(f"{src}-{i}", "q?", ["a"], src) for src in data.EVAL_SOURCES + ("world_1hop",) for i in range(30)]
    suite = data.benchmark_suite(pool, n_per_source=10, seed=3)
    assert len(suite) == 70 and [s.data_source for s in suite[::10]] == list(data.EVAL_SOURCES)
    assert sorted(s.id for s in suite) == sorted(s.id for s in sample_per_source([s for s in pool if s.data_source != "world_1hop"], 10, seed=3))
    assert data.benchmark_suite(pool, 10, seed=3) == suite and data.benchmark_suite(pool, 10, seed=4) != suite


def test_ids_that_already_name_their_source_are_kept(tmp_path):
    path = tmp_path/"tq_verl.parquet"
    pq.write_table(pa.Table.from_pylist(_verl_rows([["a"], ["b"], ["c"]], source="tq", index=["tq_qg_3477", "3478", "triviaqa-9"])), path)
    assert [s.id for s in load_qa(path)] == ["tq_qg_3477", "triviaqa_3478", "triviaqa-9"]
    world_rows = _verl_rows([["a"]], source="world_1hop", index=["world_1hop_4"])
    assert [s.id for s in data.qa_from_records(world_rows)] == ["world_1hop_4"]


def test_load_named_honours_a_split_column(tmp_path):
    path = tmp_path/"merged.parquet"
    table = _search_r1_table(6)
    splits = ["train", "test", "train", "validation", "test", "train"]
    pq.write_table(table.append_column("split", pa.array(splits)), path)
    assert [s.id for s in load_named(path, "train")] == ["train_0", "train_2", "train_5"]
    assert [s.id for s in load_named(path, "test")] == ["train_1", "train_4"]
    assert [s.id for s in load_named(path, "dev")] == ["train_3"]
    # Search-R1's own files carry the split in extra_info
    pq.write_table(_search_r1_table(3, "test"), tmp_path/"search_r1_test.parquet")
    assert len(load_named(tmp_path/"search_r1_test.parquet", "test")) == 3
    with pytest.raises(ValueError, match=r"no 'train' rows; its rows' split is one of \['test'\]"):
        load_named(tmp_path/"search_r1_test.parquet", "train")


def test_load_named_refuses_a_file_of_another_split(tmp_path):
    (tmp_path/"nq").mkdir()
    (tmp_path/"nq"/"test.jsonl").write_text(json.dumps({"question": "q?", "golden_answers": ["a"]}) + "\n")
    with pytest.raises(ValueError, match=r"holds the 'test' split \(its name says so.*not 'train'"):
        load_named(tmp_path/"nq"/"test.jsonl", "train")
    assert [s.data_source for s in load_named(tmp_path/"nq"/"test.jsonl", "test")] == ["nq"]
    (tmp_path/"hotpotqa_dev.jsonl").write_text(json.dumps({"question": "q?", "golden_answers": ["a"]}) + "\n")
    with pytest.raises(ValueError, match="ask for split='dev'"): load_named(tmp_path/"hotpotqa_dev.jsonl", "test")
    assert len(load_named(tmp_path/"hotpotqa_dev.jsonl", "dev")) == 1
    # a folder: one file per split, jsonl as well as parquet
    assert load_named(tmp_path/"nq", "test") == load_named(tmp_path/"nq"/"test.jsonl", "test")
    with pytest.raises(FileNotFoundError, match=r"no train file \(expected train.parquet or train.jsonl\); found \['test.jsonl'\]"):
        load_named(tmp_path/"nq", "train")
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'dev', 'test'\), got 'valid'"):
        load_named(tmp_path/"nq", "valid")
