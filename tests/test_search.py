"""Retrievers, the observation format and the search tool's fault accounting (no network: loopback only)."""
import json
import re
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from search_r1_course.data import CorpusFormatError, Passage, write_corpus
from search_r1_course.remote import (RetrieveLimits, RetrieveRequest, SearchResponseError, WikipediaRetriever,
                                     parse_retrieve_response, request_model, retrieve_request, retrieve_response)
from search_r1_course.retrievers import (BM25Retriever, E5Encoder, Hit, Retriever, SearchError, SearchUnavailable,
                                         SentenceEncoder, build_faiss_index, faiss_to_gpu, minilm_path)
from search_r1_course.search import (EMPTY_QUERY, NO_RESULTS, NOT_TEXT_QUERY, TIMEOUT, TRUNCATION_MARK, SearchConfig,
                                     SearchTool, format_observation, make_retriever, make_search_tool)

PASSAGES = [Passage(f"p{i}", title, text) for i, (title, text) in enumerate([
    ("Varoda Pell", "Varoda Pell is a painter born in Ostrigo."),
    ("Ostrigo", "Ostrigo is a river port in the north of Velmar."),
    ("Velmar", "Velmar is a country whose capital is Dunhallow."),
    ("Ermin Tasko", "Ermin Tasko is a chemist born in Dunhallow who founded the Tasko Institute."),
    ("Tasko Institute", "The Tasko Institute is a research organisation in Ostrigo."),
    ("Brisk Lantern", "Brisk Lantern is a novel written by Ermin Tasko in 1950.")])]


@pytest.fixture(scope="module")
def bm25():
    return BM25Retriever.build(PASSAGES)


@pytest.fixture
def corpus_file(tmp_path):
    return write_corpus(PASSAGES, tmp_path / "corpus.jsonl")


# --- corpus-format errors surface through the retriever build -----------------------------------------------

GOOD_LINE = json.dumps({"id": "x1", "contents": '"X"\nSome text.'}).encode()
BAD_CORPORA = {
    "invalid JSON": (b'{"id": "x2", "contents": ', "invalid JSON"),
    "missing contents": (b'{"id": "x2", "text": "no contents field"}', "missing key 'contents'"),
    "contents not a string": (b'{"id": "x2", "contents": 7}', "'contents' must be a string"),
    "non-UTF-8 bytes": (b'{"id": "x2", "contents": "caf\xe9"}', "not valid UTF-8"),
    "duplicate id": (b'{"id": "x1", "contents": "\\"Y\\"\\nagain"}', "duplicate id 'x1'"),
}


@pytest.mark.parametrize("kind", ["bm25", "dense"])
@pytest.mark.parametrize("case", sorted(BAD_CORPORA))
def test_corpus_errors_name_file_and_line(tmp_path, kind, case):
    line, message = BAD_CORPORA[case]
    path = tmp_path / "broken.jsonl"
    path.write_bytes(GOOD_LINE + b"\n" + GOOD_LINE.replace(b"x1", b"x0") + b"\n" + line + b"\n")
    with pytest.raises(CorpusFormatError) as e:
        make_retriever(kind, corpus_path=str(path), device="cpu")
    assert f"broken.jsonl:3" in str(e.value) and message in str(e.value)


def test_empty_corpus_and_missing_file(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty corpus"):
        make_retriever("bm25", corpus_path=str(tmp_path / "empty.jsonl"))
    with pytest.raises(FileNotFoundError):
        make_retriever("bm25", corpus_path=str(tmp_path / "nowhere.jsonl"))


def test_index_dir_builds_once_then_loads(tmp_path, corpus_file):
    index_dir = tmp_path / "index"
    built = make_retriever("bm25", corpus_path=str(corpus_file), index_dir=str(index_dir))
    assert (index_dir / "meta.json").exists()
    corpus_file.unlink()  # a saved index no longer needs the corpus
    loaded = make_retriever("bm25", corpus_path=str(corpus_file), index_dir=str(index_dir))
    queries = ["Who founded the Tasko Institute?", "river port", "1950 novel"]
    assert loaded.retrieve(queries, 3) == built.retrieve(queries, 3)


def test_tampered_index_is_refused(tmp_path, bm25):
    bm25.save(tmp_path)
    write_corpus(PASSAGES[:4], tmp_path / "passages.jsonl")
    with pytest.raises(ValueError, match="holds 6 documents but 4 passages"):
        BM25Retriever.load(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({"kind": "dense"}))
    with pytest.raises(ValueError, match="holds a 'dense' index, not a 'bm25' one"):
        BM25Retriever.load(tmp_path)


def test_config_errors():
    with pytest.raises(ValueError, match="unknown retriever kind 'elastic'"):
        make_retriever("elastic")
    with pytest.raises(TypeError, match=r"unknown SearchConfig field\(s\) \['top_k'\]"):
        make_retriever("bm25", top_k=3)
    with pytest.raises(ValueError, match="unknown encoder"):
        make_retriever(SearchConfig(kind="dense", encoder="glove"))
    with pytest.raises(ValueError, match="unknown index_type 'lsh'"):
        make_retriever("dense", index_type="lsh")


# --- retrieval behaviour --------------------------------------------------------------------------------------

def test_bm25_batch_equals_single_queries(bm25):
    queries = ["Varoda Pell", "Where is the Tasko Institute?", "capital Velmar", "unknownword", "", "the of and"]
    batch = bm25.retrieve(queries, 2)
    assert batch == [bm25.retrieve([q], 2)[0] for q in queries]
    assert batch[0][0].id == "p0" and batch[3] == [] and batch[4] == [] and batch[5] == []
    for hits in batch:
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bm25_indexes_titles():
    r = BM25Retriever.build([Passage("a", "Quillon", "A small town by the sea."), Passage("b", "Harbour", "A small port.")])
    assert [h.id for h in r.retrieve(["Quillon"], 2)[0]] == ["a"]


def test_retriever_checks_arguments(bm25):
    with pytest.raises(TypeError, match="wrap it in a list"):
        bm25.retrieve("Varoda Pell", 3)
    with pytest.raises(ValueError, match="topk must be a positive integer, got 0"):
        bm25.retrieve(["Varoda Pell"], 0)
    with pytest.raises(ValueError, match="got True"):
        bm25.retrieve(["Varoda Pell"], True)


def test_e5_code_path_matches_sentence_transformers_on_local_files():
    "E5Encoder (transformers, mean pooling, normalised) reproduces sentence-transformers' MiniLM vectors."
    st_enc = SentenceEncoder(device="cpu")
    e5 = E5Encoder(minilm_path(), device="cpu", query_prefix="", passage_prefix="")
    np.testing.assert_allclose(e5.encode_passages(PASSAGES), st_enc.encode_passages(PASSAGES), atol=1e-4)
    with_prefix = E5Encoder(minilm_path(), device="cpu")
    assert not np.allclose(with_prefix.encode_queries(["Varoda Pell"]), e5.encode_queries(["Varoda Pell"]), atol=1e-3)


def test_dense_save_load_and_approximate_indexes(tmp_path):
    dense = make_retriever("dense", corpus_path=str(write_corpus(PASSAGES, tmp_path / "c.jsonl")),
                           index_dir=str(tmp_path / "dense"), device="cpu")
    queries = ["painter born in a port", "who wrote a book in 1950?"]
    again = make_retriever("dense", index_dir=str(tmp_path / "dense"), device="cpu")
    assert [[h.id for h in hs] for hs in again.retrieve(queries, 2)] == [[h.id for h in hs] for hs in dense.retrieve(queries, 2)]
    assert dense.retrieve(queries, 1)[1][0].id == "p5"
    assert len(dense.retrieve(["x"], 50)[0]) == len(PASSAGES)  # topk above the corpus size: every passage once


def test_faiss_gpu_request_without_gpu_is_explained():
    import faiss
    if faiss.get_num_gpus() > 0:
        pytest.skip("a GPU build of faiss with a visible GPU")
    index = build_faiss_index(np.eye(4, dtype=np.float32))
    with pytest.raises(RuntimeError, match="faiss-gpu"):
        faiss_to_gpu(index, "cuda")
    assert faiss_to_gpu(index, "auto") == (index, False)


# --- observation format -----------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20).filter(lambda t: "\n" not in t), st.text(max_size=300)),
                max_size=5),
       st.integers(min_value=len(TRUNCATION_MARK) + 1, max_value=800))
def test_truncation_respects_budget_and_keeps_a_prefix(docs, budget):
    hits = [Hit(str(i), title, text) for i, (title, text) in enumerate(docs)]
    full = format_observation(hits)
    cut = format_observation(hits, max_chars=budget)
    assert len(cut) <= budget
    if len(full) <= budget:
        assert cut == full
    else:
        assert cut.endswith(TRUNCATION_MARK) and full.startswith(cut[: -len(TRUNCATION_MARK)])


def test_token_budget_with_a_real_tokenizer():
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    hits = [Hit.from_passage(p) for p in PASSAGES]
    for budget in (8, 20, 50):
        obs = format_observation(hits, tokenizer=tok, max_tokens=budget)
        assert len(tok.encode(obs, add_special_tokens=False)) <= budget and obs.endswith(TRUNCATION_MARK)
    assert format_observation(hits[:1], tokenizer=tok, max_tokens=500) == format_observation(hits[:1])


# --- fault accounting -------------------------------------------------------------------------------------------

class Scripted(Retriever):
    "Answers from BM25, but raises / hangs / reports unavailability on marked queries; records each call."
    def __init__(self, inner, remote=False):
        self.inner, self.remote, self.calls, self.lock = inner, remote, [], threading.Lock()
        self.release, self.answered = threading.Event(), []  # a hanging call waits for `release`, then is recorded

    def _retrieve(self, queries, topk):
        with self.lock:
            self.calls.append(list(queries))
        if any("boom" in q for q in queries):
            raise KeyError("shard missing")
        if any("down" in q for q in queries):
            raise SearchUnavailable("the server is down")
        if any("hang" in q for q in queries):
            self.release.wait(30)
            self.answered.append(list(queries))
        return self.inner.retrieve(queries, topk)


def rates_sum(m):
    return m["search/success_rate"] + m["search/error_rate"] + m["search/timeout_rate"] + m["search/invalid_rate"]


def test_every_outcome_is_an_observation_and_counted(bm25):
    tool = SearchTool(Scripted(bm25), topk=1, timeout_s=None, max_query_chars=30)
    obs = tool.search_batch(["Varoda Pell", "boom", "", "   \n ", None, 17, "zzzz", "Ostrigo " * 20])
    assert obs[0].startswith("Doc 1(Title: Varoda Pell)")
    assert obs[1] == "search failed: KeyError: 'shard missing'"
    assert obs[2] == obs[3] == EMPTY_QUERY and obs[4] == obs[5] == NOT_TEXT_QUERY
    assert obs[6] == NO_RESULTS and obs[7].startswith("Doc 1(Title: Ostrigo)")
    m = tool.metrics()
    assert (m["search/calls"], m["search/errors"], m["search/timeouts"], m["search/invalid"], m["search/truncated"]) == (8, 1, 0, 4, 1)
    assert m["search/success_rate"] == pytest.approx(3 / 8) and rates_sum(m) == pytest.approx(1.0)
    tool.reset_metrics()
    assert tool.metrics()["search/calls"] == 0 and tool.metrics()["search/success_rate"] == 0.0


def test_a_failing_query_does_not_fail_its_batch(bm25):
    backend = Scripted(bm25)
    tool = SearchTool(backend, topk=1, timeout_s=None)
    obs = tool.search_batch(["Velmar", "boom", "Ostrigo"])
    assert obs[0].startswith("Doc 1(Title: Velmar)") and obs[2].startswith("Doc 1(Title: Ostrigo)")
    assert backend.calls == [["Velmar", "boom", "Ostrigo"], ["Velmar"], ["boom"], ["Ostrigo"]]
    assert tool.metrics()["search/error_rate"] == pytest.approx(1 / 3)


def test_an_unavailable_backend_is_not_hammered_query_by_query(bm25):
    backend = Scripted(bm25)
    tool = SearchTool(backend, topk=1, timeout_s=None)
    obs = tool.search_batch(["Velmar", "down", "Ostrigo"])
    assert obs == ["search failed: SearchUnavailable: the server is down"] * 3
    assert len(backend.calls) == 1 and tool.metrics()["search/error_rate"] == 1.0


def test_a_backend_breaking_the_interface_is_an_error_not_a_crash(bm25):
    class Short(Retriever):
        def _retrieve(self, queries, topk):
            return bm25.retrieve(queries, topk)[:-1]  # one hit list too few
    tool = SearchTool(Short(), timeout_s=None)
    assert tool.search_batch(["Velmar", "Ostrigo"]) == \
        ["search failed: SearchError: the backend answered 0 hit lists for 1 queries"] * 2
    assert tool.metrics()["search/error_rate"] == 1.0


def test_timeout_is_an_observation(bm25):
    backend = Scripted(bm25)
    tool = SearchTool(backend, topk=1, timeout_s=0.2)
    assert tool.search("hang on Velmar") == TIMEOUT
    assert backend.answered == []  # the tool answered at its deadline, while the backend was still busy
    backend.release.set()
    assert tool.search("Velmar").startswith("Doc 1(Title: Velmar)")
    m = tool.metrics()
    assert (m["search/timeouts"], m["search/timeout_rate"], m["search/success_rate"]) == (1, 0.5, 0.5)


def test_remote_batches_are_chunked_and_a_slow_chunk_only_delays_its_own(bm25):
    backend = Scripted(bm25, remote=True)
    tool = SearchTool(backend, topk=1, timeout_s=1.0, chunk_size=2, max_workers=4)
    queries = ["Velmar", "Ostrigo", "hang Tasko", "Varoda", "Brisk Lantern"]
    obs = tool.search_batch(queries)
    assert backend.answered == []  # the deadline fired while the hanging chunk was still out
    backend.release.set()
    assert sorted(len(c) for c in backend.calls) == [1, 2, 2]
    assert obs[2] == obs[3] == TIMEOUT
    assert [o.split(")")[0] for o in (obs[0], obs[1], obs[4])] == \
        ["Doc 1(Title: Velmar", "Doc 1(Title: Ostrigo", "Doc 1(Title: Brisk Lantern"]
    m = tool.metrics()
    assert (m["search/calls"], m["search/timeouts"]) == (5, 2) and rates_sum(m) == pytest.approx(1.0)


def test_counters_are_consistent_under_concurrent_callers(bm25):
    tool = SearchTool(Scripted(bm25), topk=1, timeout_s=None)
    batch = ["Velmar", "boom", "", "Ostrigo"]
    threads = [threading.Thread(target=lambda: [tool.search_batch(batch) for _ in range(25)]) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    m = tool.metrics()
    assert (m["search/calls"], m["search/errors"], m["search/invalid"]) == (400, 100, 100)


def test_make_search_tool_from_config(corpus_file):
    cfg = SearchConfig(corpus_path=str(corpus_file), topk=2, max_chars=60)
    tool = make_search_tool(cfg)
    obs = tool.search("Tasko Institute")
    assert len(obs) <= 60 and obs.startswith("Doc 1(Title: Tasko Institute)")


# --- Wikipedia client against recorded-shape answers served on loopback ----------------------------------------

WIKI_ANSWER = {"batchcomplete": True, "continue": {"gsroffset": 2, "continue": "gsroffset||"},
               "query": {"pages": [
                   {"pageid": 5843419, "ns": 0, "title": "France", "index": 2,
                    "extract": "France, officially the French Republic, is a country\nin Western Europe."},
                   {"pageid": 22989, "ns": 0, "title": "Paris", "index": 1,
                    "extract": "Paris is the capital and largest city of France."}]}}


class WikiHandler(BaseHTTPRequestHandler):
    seen, script = [], []

    def do_GET(self):
        params = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        WikiHandler.seen.append(params)
        status, body = WikiHandler.script.pop(0) if WikiHandler.script else (200, WIKI_ANSWER)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def wiki_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), WikiHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    WikiHandler.seen.clear(); WikiHandler.script.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/w/api.php"
    server.shutdown(); server.server_close()


def test_wikipedia_retriever(wiki_url):
    wiki = WikipediaRetriever(wiki_url, backoff_s=0.01, trust_env=False)
    hits = wiki.retrieve(["capital of France"], 2)[0]
    assert [(h.id, h.title) for h in hits] == [("22989", "Paris"), ("5843419", "France")]
    assert hits[1].text == "France, officially the French Republic, is a country in Western Europe."
    params = WikiHandler.seen[0]
    assert (params["gsrsearch"], params["gsrlimit"], params["generator"], params["prop"]) == \
        ("capital of France", "2", "search", "extracts")
    assert wiki.retrieve(["capital of France"], 1)[0] == hits[:1]


def test_wikipedia_faults(wiki_url):
    wiki = WikipediaRetriever(wiki_url, backoff_s=0.01, max_retries=2, trust_env=False)
    WikiHandler.script[:] = [(503, {"error": "busy"}), (200, WIKI_ANSWER)]
    assert wiki.retrieve(["Paris"], 1)[0][0].title == "Paris" and wiki.stats["retries"] == 1
    WikiHandler.script[:] = [(200, {"error": {"code": "srsearch-text-disabled", "info": "Search is disabled."}})]
    with pytest.raises(SearchError, match="Search is disabled"):
        wiki.retrieve(["Paris"], 1)
    WikiHandler.script[:] = [(200, {"error": {"code": "x", "info": "Search is disabled."}})]
    tool = SearchTool(wiki, timeout_s=5)
    assert tool.search("Paris") == "search failed: SearchError: MediaWiki API error x: Search is disabled."
    assert tool.metrics()["search/error_rate"] == 1.0


# --- the /retrieve contract: two answer shapes, one set of limits --------------------------------------------

titles = st.text(max_size=20).filter(lambda t: "\n" not in t)
hit_lists = st.lists(st.lists(st.builds(Hit, id=st.text(max_size=8), title=titles, text=st.text(max_size=60),
                                        score=st.floats(allow_nan=False, allow_infinity=False)), max_size=4), max_size=4)


@settings(max_examples=200, deadline=None)
@given(hit_lists, st.booleans())
def test_both_answer_shapes_round_trip_through_json(results, with_scores):
    body = json.loads(json.dumps(retrieve_response(results, with_scores)))
    keys = {"document", "score"} if with_scores else {"id", "contents"}
    assert all(set(e) == keys for docs in body["result"] for e in docs)
    expected = [[h if with_scores else replace(h, score=None) for h in hits] for hits in results]
    assert parse_retrieve_response(body, len(results)) == expected


def test_answers_from_other_servers():
    "Search-R1's BM25 server sends title/text/contents rows without an id; other corpora number their ids."
    rows = {"result": [[{"title": "Ostrigo", "text": "A port.", "contents": '"Ostrigo"\nA port.'}],
                       [{"document": {"id": 12, "contents": '"Velmar"\nA country.', "title": "Velmar"}, "score": 3}]]}
    assert parse_retrieve_response(rows, 2) == [[Hit("", "Ostrigo", "A port.")], [Hit("12", "Velmar", "A country.", 3.0)]]
    for body, message in [({"result": [[{"document": {"id": "7"}, "score": 1.0}]]}, "result[0][0].document.contents should be a string, found nothing"),
                          ({"result": [[{"document": {"contents": "x"}, "score": True}]]}, "result[0][0].score should be a number or null, found bool True"),
                          ({"result": [[7]]}, "result[0][0] should be an object, found int 7"),
                          ({"documents": []}, "the body should be an object with a 'result' list, found dict")]:
        with pytest.raises(SearchResponseError, match=re.escape(message)):
            parse_retrieve_response(body, 1)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 20), st.integers(1, 5), st.integers(1, 30))
def test_request_limits_are_the_model_constraints(max_topk, max_queries, max_query_chars):
    limits = RetrieveLimits(max_topk=max_topk, max_queries=max_queries, max_query_chars=max_query_chars)
    model = request_model(limits)
    ok = model(queries=["x" * max_query_chars] * max_queries, topk=max_topk)
    assert (ok.topk, model(queries=[]).topk) == (max_topk, limits.default_topk)
    for bad in [dict(queries=["x"] * (max_queries + 1)), dict(queries=["x" * (max_query_chars + 1)]),
                dict(queries=[], topk=max_topk + 1), dict(queries=[], topk=0)]:
        with pytest.raises(ValidationError):
            model(**bad)
    schema = model.model_json_schema()["properties"]
    assert (schema["queries"]["maxItems"], schema["queries"]["items"]["maxLength"], schema["topk"]["anyOf"][0]["maximum"]) == \
        (max_queries, max_query_chars, max_topk)
    assert request_model(limits) is model


def test_request_body_is_built_by_the_model():
    assert retrieve_request(("a", "b"), np.int64(2), False) == {"queries": ["a", "b"], "topk": 2, "return_scores": False}
    with pytest.raises(ValidationError):
        retrieve_request(["a", 3], 2)
    assert RetrieveRequest.model_validate_json('{"queries": ["a"], "return_scores": null}').return_scores is None
