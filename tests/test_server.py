"""The retrieval server, run for real (uvicorn on a free loopback port), and the HTTP client against it."""
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from fastapi import FastAPI

from search_r1_course.data import Passage, write_corpus
from search_r1_course.remote import HttpRetriever, RetrieveLimits, SearchRequestRejected, SearchResponseError
from search_r1_course.retrievers import BM25Retriever, Retriever, SearchTimeout, SearchUnavailable
from search_r1_course.search import TIMEOUT, SearchTool
from search_r1_course.server import BackgroundServer, build_app

PASSAGES = [Passage(f"p{i}", title, text) for i, (title, text) in enumerate([
    ("Varoda Pell", "Varoda Pell is a painter born in Ostrigo."),
    ("Ostrigo", "Ostrigo is a river port in the north of Velmar."),
    ("Velmar", "Velmar is a country whose capital is Dunhallow."),
    ("Ermin Tasko", "Ermin Tasko is a chemist born in Dunhallow who founded the Tasko Institute."),
    ("Tasko Institute", "The Tasko Institute is a research organisation in Ostrigo.")])]
QUERIES = ["Who founded the Tasko Institute?", "Where was Varoda Pell born?", "capital of Velmar"]
LIMITS = RetrieveLimits(max_topk=50, max_queries=8, max_query_chars=100, max_body_bytes=20_000)


@pytest.fixture(scope="module")
def bm25():
    return BM25Retriever.build(PASSAGES)


@pytest.fixture(scope="module")
def server(bm25):
    with BackgroundServer(build_app(bm25, LIMITS)) as s:
        yield s


def post(server, content: bytes, headers=None):
    return httpx.post(server.url + "/retrieve", content=content, timeout=10,
                      headers={"content-type": "application/json", **(headers or {})})


def good_request_works(server, bm25):
    r = post(server, json.dumps({"queries": QUERIES, "topk": 2, "return_scores": True}).encode())
    assert r.status_code == 200
    ids = [[e["document"]["id"] for e in hits] for hits in r.json()["result"]]
    assert ids == [[h.id for h in hits] for hits in bm25.retrieve(QUERIES, 2)]


# --- the contract -----------------------------------------------------------------------------------------------

def test_round_trip_with_scores(server, bm25):
    r = post(server, json.dumps({"queries": QUERIES, "topk": 3, "return_scores": True}).encode())
    assert r.status_code == 200
    assert float(r.headers["server-timing"].removeprefix("retrieve;dur=")) >= 0  # retrieval time, for clients
    result = r.json()["result"]
    assert len(result) == len(QUERIES)
    for entries, hits in zip(result, bm25.retrieve(QUERIES, 3)):
        assert [set(e) for e in entries] == [{"document", "score"}] * len(hits)
        assert [e["document"] for e in entries] == [{"id": h.id, "contents": h.passage.contents} for h in hits]
        assert [e["score"] for e in entries] == pytest.approx([h.score for h in hits])
    with HttpRetriever(server.url + "/retrieve") as client:
        assert client.retrieve(QUERIES, 3) == bm25.retrieve(QUERIES, 3)


def test_round_trip_without_scores_gives_bare_documents(server, bm25):
    "Without scores Search-R1's server returns the corpus rows themselves, not wrapped in `document`."
    r = post(server, json.dumps({"queries": QUERIES[:1], "topk": 2, "return_scores": False}).encode())
    assert r.status_code == 200
    assert r.json() == {"result": [[{"id": h.id, "contents": h.passage.contents}
                                    for h in bm25.retrieve(QUERIES[:1], 2)[0]]]}
    with HttpRetriever(server.url + "/retrieve", return_scores=False) as client:
        hits = client.retrieve(QUERIES, 2)
    assert [[(h.id, h.text, h.score) for h in hs] for hs in hits] == \
        [[(h.id, h.text, None) for h in hs] for hs in bm25.retrieve(QUERIES, 2)]


def torchtitan_read(url, query, topk=3):
    "What torchtitan's Search-R1 env does: post without scores, read `result[0][i]['contents']`, split the title line."
    data = httpx.post(url, json={"queries": [query], "topk": topk, "return_scores": False}, timeout=10).json()
    docs = (data.get("result") or [[]])[0]
    return [(c.split("\n")[0], "\n".join(c.split("\n")[1:])) for c in (d.get("contents", "") for d in docs)]


def search_r1_read(url, query, topk=3):
    "What Search-R1's own rollout does: post with scores, read `doc['document']['contents']`."
    data = httpx.post(url, json={"queries": [query], "topk": topk, "return_scores": True}, timeout=10).json()
    contents = [doc["document"]["contents"] for doc in data["result"][0]]
    return [(c.split("\n")[0], "\n".join(c.split("\n")[1:])) for c in contents]


@pytest.mark.parametrize("read", [torchtitan_read, search_r1_read], ids=["torchtitan", "search-r1"])
def test_search_r1_clients_read_the_passages(server, bm25, read):
    for query in QUERIES:
        expected = bm25.retrieve([query], 3)[0]
        got = read(server.url + "/retrieve", query)
        assert got == [(f'"{h.title}"', h.text) for h in expected] and len(got) > 0
        assert all(text.strip() for _, text in got)  # the passage text, not the empty string a misread gives


def test_defaults_and_health(server):
    r = post(server, json.dumps({"queries": ["Velmar Ostrigo Dunhallow"]}).encode())  # topk, return_scores left out
    assert r.status_code == 200 and len(r.json()["result"][0]) == 3 and "score" not in r.json()["result"][0][0]
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["retriever"] == "BM25Retriever(5 passages)"
    assert health["limits"]["max_queries"] == LIMITS.max_queries


BAD_REQUESTS = {
    "garbage bytes": (b"\x89PNG\r\n\x1a\n\x00\x00", 400, "not valid JSON"),
    "truncated JSON": (b'{"queries": ["a"', 400, "not valid JSON"),
    "empty body": (b"", 400, "empty request body"),
    "array body": (b'["Velmar"]', 422, "must be a JSON object"),
    "missing queries": (b'{"topk": 3}', 422, "missing field 'queries'"),
    "queries a string": (b'{"queries": "Velmar"}', 422, "'queries' must be a list of strings, found a string"),
    "query a number": (b'{"queries": ["Velmar", 3]}', 422, "'queries[1]' must be a string, found an integer"),
    "query null": (b'{"queries": [null]}', 422, "'queries[0]' must be a string, found null"),
    "topk a string": (b'{"queries": ["Velmar"], "topk": "3"}', 422, "'topk' must be an integer from 1 to 50"),
    "topk a float": (b'{"queries": ["Velmar"], "topk": 2.5}', 422, "found a number: 2.5"),
    "topk a boolean": (b'{"queries": ["Velmar"], "topk": true}', 422, "found a boolean"),
    "topk 0": (b'{"queries": ["Velmar"], "topk": 0}', 422, "found an integer: 0"),
    "topk 51": (b'{"queries": ["Velmar"], "topk": 51}', 422, "found an integer: 51"),
    "return_scores a string": (b'{"queries": ["Velmar"], "return_scores": "yes"}', 422, "must be true or false"),
    "too many queries": (json.dumps({"queries": ["Velmar"] * 9}).encode(), 413, "at most 8 per request"),
    "too long query": (json.dumps({"queries": ["Velmar " * 20]}).encode(), 422, "140 characters long; the limit is 100"),
    "body too large": (json.dumps({"queries": ["x" * 30_000]}).encode(), 413, "the limit is 20000"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_requests_get_4xx_and_the_server_keeps_serving(server, bm25, case):
    content, status, message = BAD_REQUESTS[case]
    r = post(server, content)
    assert r.status_code == status, r.text
    assert message in r.json()["detail"]
    good_request_works(server, bm25)


NESTED = {"arrays": b"[" * 1000 + b"]" * 1000,                                  # 2 KB
          "objects": b'{"a":' * 1000 + b"1" + b"}" * 1000,
          "inside queries": b'{"queries": ' + b"[" * 1000 + b"]" * 1000 + b"}"}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_deeply_nested_json_is_a_400_counted_as_rejected(server, bm25, case):
    before = httpx.get(server.url + "/health").json()
    r = post(server, NESTED[case])
    assert r.status_code == 400, r.text
    assert "nests arrays or objects too deeply" in r.json()["detail"]
    after = httpx.get(server.url + "/health").json()
    assert (after["rejected"], after["failed"]) == (before["rejected"] + 1, before["failed"])
    good_request_works(server, bm25)


def test_published_schema_and_checks_share_the_limits(server):
    "The request schema at /openapi.json states the limits the checks enforce and the messages quote."
    api = httpx.get(server.url + "/openapi.json").json()
    fields = api["paths"]["/retrieve"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert fields["queries"]["maxItems"] == LIMITS.max_queries
    assert fields["queries"]["items"]["maxLength"] == LIMITS.max_query_chars
    assert (fields["topk"]["anyOf"][0]["minimum"], fields["topk"]["anyOf"][0]["maximum"]) == (1, LIMITS.max_topk)
    assert fields["topk"]["default"] == LIMITS.default_topk
    at_limit = {"queries": ["x" * LIMITS.max_query_chars] * LIMITS.max_queries, "topk": LIMITS.max_topk}
    assert post(server, json.dumps(at_limit).encode()).status_code == 200
    for field, value, status in [("queries", ["x"] * (LIMITS.max_queries + 1), 413),
                                 ("queries", ["x" * (LIMITS.max_query_chars + 1)], 422), ("topk", LIMITS.max_topk + 1, 422)]:
        r = post(server, json.dumps({**at_limit, field: value}).encode())
        assert r.status_code == status, r.text
    assert "Document" in api["components"]["schemas"] and "ScoredDocument" in api["components"]["schemas"]


def test_wrong_method_and_path_are_4xx(server, bm25):
    assert httpx.get(server.url + "/retrieve").status_code == 405
    assert httpx.post(server.url + "/search", json={"queries": ["x"]}).status_code == 404
    good_request_works(server, bm25)


def test_client_does_not_retry_4xx(server):
    before = httpx.get(server.url + "/health").json()["rejected"]
    client = HttpRetriever(server.url + "/retrieve", max_retries=3, backoff_s=0.01)
    with pytest.raises(SearchRequestRejected, match="HTTP 422 .*the limit is 100"):
        client.retrieve(["Velmar " * 30], 1)
    assert client.stats == {"requests": 1, "retries": 0, "failures": 0}
    assert httpx.get(server.url + "/health").json()["rejected"] == before + 1


# --- failures inside the server, retries, timeouts, concurrency -----------------------------------------------

class FailFirst(Retriever):
    "Raises on the first `n` calls, then answers from BM25; records when each call arrived."
    def __init__(self, inner, n):
        self.inner, self.n, self.times = inner, n, []

    def _retrieve(self, queries, topk):
        self.times.append(time.monotonic())
        if len(self.times) <= self.n:
            raise RuntimeError(f"warming up (call {len(self.times)})")
        return self.inner.retrieve(queries, topk)


def test_retriever_exception_is_a_500_and_the_server_survives(bm25):
    with BackgroundServer(build_app(FailFirst(bm25, 1))) as s:
        r = post(s, json.dumps({"queries": ["Velmar"]}).encode())
        assert r.status_code == 500 and r.json()["detail"] == "retrieval failed: RuntimeError: warming up (call 1)"
        assert post(s, json.dumps({"queries": ["Velmar"]}).encode()).status_code == 200


def test_retry_with_exponential_backoff_then_success(bm25):
    backend = FailFirst(bm25, 2)
    with BackgroundServer(build_app(backend)) as s:
        client = HttpRetriever(s.url + "/retrieve", max_retries=3, backoff_s=0.1)
        waits = []
        client.sleep = waits.append  # record the waits between attempts instead of sleeping
        assert client.retrieve(QUERIES, 2) == bm25.retrieve(QUERIES, 2)
        assert client.stats == {"requests": 3, "retries": 2, "failures": 0} and len(backend.times) == 3
        assert waits == [0.1, 0.2]  # backoff doubles: 0.1 s, then 0.2 s
        client.close()


def test_retries_are_bounded(bm25):
    backend = FailFirst(bm25, 100)
    with BackgroundServer(build_app(backend)) as s:
        client = HttpRetriever(s.url + "/retrieve", max_retries=2, backoff_s=0.01)
        with pytest.raises(SearchUnavailable, match="HTTP 500"):
            client.retrieve(["Velmar"], 1)
        assert len(backend.times) == 3 and client.stats["failures"] == 1
        tool = SearchTool(client, timeout_s=10)
        assert tool.search("Velmar").startswith("search failed: SearchUnavailable: HTTP 500 from the retrieval server")
        assert tool.metrics()["search/error_rate"] == 1.0


def test_unreachable_server():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = HttpRetriever(f"http://127.0.0.1:{port}/retrieve", max_retries=1, backoff_s=0.01)
    with pytest.raises(SearchUnavailable, match="ConnectError"):
        client.retrieve(["Velmar"], 1)
    assert client.stats == {"requests": 2, "retries": 1, "failures": 1}


class Slow(Retriever):
    """Answers when `gate` opens (or after `delay` seconds without a gate); tracks how many calls are in flight at once.
    With `wait_for_overlap`, a call is also held until a second one is in flight (once per round, at most 10 s), so that
    a concurrent client shows its concurrency however loaded the machine is."""
    def __init__(self, inner, delay=0.0, gate=None, wait_for_overlap=False):
        self.inner, self.delay, self.gate, self.wait_for_overlap = inner, delay, gate, wait_for_overlap
        self.cond = threading.Condition()
        self.in_flight = self.max_in_flight = self.calls = self.answered = 0
        self.batch_sizes = []

    def _retrieve(self, queries, topk):
        with self.cond:
            self.in_flight += 1
            self.calls += 1
            self.batch_sizes.append(len(queries))
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.cond.notify_all()
            if self.wait_for_overlap:
                self.cond.wait_for(lambda: self.max_in_flight >= 2, timeout=10)
        try:
            if self.gate is not None: self.gate.wait(30)
            else: time.sleep(self.delay)
            return self.inner.retrieve(queries, topk)
        finally:
            with self.cond:
                self.in_flight -= 1
                self.answered += 1


def test_client_timeout_turns_into_an_observation(bm25):
    gate = threading.Event()  # the server answers nothing until the test is done
    backend = Slow(bm25, gate=gate)
    with BackgroundServer(build_app(backend)) as s:
        try:
            client = HttpRetriever(s.url + "/retrieve", timeout_s=0.2, max_retries=1, backoff_s=0.01)
            with pytest.raises(SearchTimeout):
                client.retrieve(["Velmar"], 1)
            assert client.stats["requests"] == 2  # a timeout is retried, within the bound
            tool = SearchTool(client, timeout_s=None)
            assert tool.search_batch(["Velmar", "Ostrigo"]) == [TIMEOUT, TIMEOUT]
            m = tool.metrics()
            assert (m["search/timeout_rate"], m["search/timeouts"]) == (1.0, 2)
            assert backend.answered == 0  # every timeout fired while the server was still working
        finally:
            gate.set()


def test_tool_deadline_beats_a_slow_server(bm25):
    gate = threading.Event()
    backend = Slow(bm25, gate=gate)
    with BackgroundServer(build_app(backend)) as s:
        try:
            client = HttpRetriever(s.url + "/retrieve", timeout_s=30)
            tool = SearchTool(client, timeout_s=0.3)
            assert tool.search("Velmar") == TIMEOUT
            assert backend.answered == 0 and client.stats["retries"] == 0  # the tool's deadline fired, not the client's
        finally:
            gate.set()


def test_concurrency_limit_and_batching(bm25):
    backend = Slow(bm25, 0.05, wait_for_overlap=True)
    with BackgroundServer(build_app(backend)) as s:
        client = HttpRetriever(s.url + "/retrieve", max_in_flight=3, batch_size=2)
        queries = [f"{q} {i}" for i in range(4) for q in QUERIES]  # 12 queries -> 6 requests of 2
        expected = bm25.retrieve(queries, 1)
        assert client.retrieve(queries, 1) == expected
        assert backend.batch_sizes == [2] * 6
        assert 2 <= backend.max_in_flight <= 3  # concurrent, but never above the limit
        # many callers at once (the tool's thread pool, 8 workers, one query per request) share the same limit
        backend.max_in_flight, backend.batch_sizes = 0, []
        tool = SearchTool(client, topk=1, timeout_s=20, max_workers=8, chunk_size=1)
        obs = tool.search_batch(queries * 2)
        assert len(backend.batch_sizes) == 24 and set(backend.batch_sizes) == {1}
        assert 2 <= backend.max_in_flight <= 3
        assert tool.metrics()["search/success_rate"] == 1.0 and obs[0].startswith("Doc 1(Title: Ermin Tasko)")
        client.close()


# --- other servers speaking the contract ---------------------------------------------------------------------

def test_client_reads_search_r1_bare_documents_and_rejects_malformed_answers():
    "Search-R1's own server returns bare documents when return_scores is false."
    app, answers = FastAPI(), []

    @app.post("/retrieve")
    def retrieve(body: dict):
        return answers.pop(0)

    with BackgroundServer(app) as s:
        client = HttpRetriever(s.url + "/retrieve", return_scores=False, max_retries=0)
        answers.append({"result": [[{"id": "7", "contents": '"Ostrigo"\nA river port.'}]]})
        hits = client.retrieve(["port"], 1)
        assert [(h.id, h.title, h.text, h.score) for h in hits[0]] == [("7", "Ostrigo", "A river port.", None)]
        answers.append({"result": [[{"document": {"id": "7"}, "score": 1.0}]]})
        with pytest.raises(SearchResponseError, match=r"result\[0\]\[0\].document.contents should be a string"):
            client.retrieve(["port"], 1)
        answers.append({"result": []})
        tool = SearchTool(client, timeout_s=10)
        assert tool.search("port") == "search failed: SearchResponseError: /retrieve answer: 'result' holds 0 lists for 1 queries"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_function_in_a_subprocess(tmp_path):
    "`serve` (what the command line calls) builds the retriever from a config and binds loopback."
    corpus = write_corpus(PASSAGES, tmp_path / "corpus.jsonl")
    port = free_port()
    code = ("from search_r1_course.server import serve; from search_r1_course.search import SearchConfig; "
            f"serve(SearchConfig(corpus_path={str(corpus)!r}), port={port}, log_level='warning')")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        client = HttpRetriever(f"http://127.0.0.1:{port}/retrieve", max_retries=0)
        deadline = time.monotonic() + 60
        while True:
            try:
                assert client.health()["status"] == "ok"
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "the server did not start within 60 s"
                time.sleep(0.2)
        assert client.retrieve(["Varoda Pell"], 1)[0][0].id == "p0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record): self.records.append(record)


def test_a_client_that_hangs_up_mid_body_is_one_log_line(bm25):
    """The body is promised 1000 bytes and the client closes after 14: one warning, no traceback, and the server
    keeps answering."""
    caught, loggers = _Records(), [logging.getLogger(n) for n in ("uvicorn.error", "search_r1_course.server")]
    with BackgroundServer(build_app(bm25, LIMITS)) as s:
        for lg in loggers: lg.addHandler(caught)
        try:
            with socket.create_connection((s.host, s.port)) as sock:
                sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 1000\r\n\r\n" + b'{"queries": [')
            deadline = time.monotonic() + 10
            while not caught.records and time.monotonic() < deadline: time.sleep(0.05)
            health = httpx.get(s.url + "/health").json()
            good_request_works(s, bm25)
        finally:
            for lg in loggers: lg.removeHandler(caught)
    assert [r.exc_info for r in caught.records] == [None], [r.getMessage() for r in caught.records]
    assert "disconnected before sending the whole request body" in caught.records[0].getMessage()
    assert health["disconnected"] == 1 and health["failed"] == 0
