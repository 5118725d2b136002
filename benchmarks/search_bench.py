"""Retrieval speed and cost: queries/s in process and over HTTP on loopback, index build time and peak memory.

    python benchmarks/search_bench.py [--threads 1] [--runs 5] [--big 100000] [--skip-dense]

Prints one table: each measured figure next to its target where there is one. Timings are medians of --runs
runs (builds that take minutes run once). Peak memory is measured in a fresh child process per build (so memory
freed by earlier work cannot hide a build's cost): the peak resident-set growth during the build, and for
pure-Python/numpy work also tracemalloc's peak. Thread counts are fixed before numpy/torch/faiss load
(OMP/MKL/OpenBLAS, torch.set_num_threads, faiss.omp_set_num_threads), in this process and in the children.
The HTTP server runs in its own process (as deployed), loading the index this script saved. HTTP overhead per
batch = HTTP time - in-process time, per request: the client's round trip (JSON encoding and parsing included)
minus the retrieval time the server measured for that same batch (its `Server-Timing` header), median over all
requests; subtracting the same batch's own retrieval time keeps the noise of a shared machine out of the figure.
"""
import argparse
import os
import sys

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--threads", type=int, default=1, help="threads for numpy/torch/faiss (client, server, children)")
ap.add_argument("--runs", type=int, default=5, help="repetitions per timing (the median is reported)")
ap.add_argument("--big", type=int, default=100_000, help="passages in the generated corpus")
ap.add_argument("--queries", type=int, default=640, help="queries per throughput run")
ap.add_argument("--skip-dense", action="store_true", help="BM25 only")
ap.add_argument("--child", nargs=3, metavar=("KIND", "INPUT", "OUTPUT"), help=argparse.SUPPRESS)
args = ap.parse_args()
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gc  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

from search_r1_course.data import Passage, load_world, load_world_corpus, read_corpus, write_corpus  # noqa: E402
from search_r1_course.remote import HttpRetriever, parse_retrieve_response, retrieve_request  # noqa: E402
from search_r1_course.retrievers import BM25Retriever, DenseRetriever, build_faiss_index, make_encoder  # noqa: E402

PROC = psutil.Process()


def set_threads():
    import faiss
    import torch
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)


def median_time(fn, runs):
    times = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class PeakRSS:
    "Peak resident-memory growth while the block runs (5 ms sampling, plus the kernel's high-water mark)."
    def __enter__(self):
        gc.collect()
        self.base = self.peak = PROC.memory_info().rss
        self.hwm_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, PROC.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.stop.set(); self.thread.join()
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.peak = max(self.peak, PROC.memory_info().rss, hwm if hwm > self.hwm_before else 0)
        self.delta_mb = (self.peak - self.base) / 2**20


def child(kind, inp, out):
    "Build one index from `inp` in this fresh process; write seconds and peak memory to `out` as JSON."
    set_threads()
    traced = None
    if kind == "bm25":
        corpus = read_corpus(inp)
        build = lambda: BM25Retriever.build(corpus)  # noqa: E731
    elif kind == "dense":
        corpus, encoder = read_corpus(inp), make_encoder("minilm", device="cpu")
        build = lambda: DenseRetriever.build(corpus, encoder, device="cpu")  # noqa: E731
    else:
        vectors = np.load(inp)
        build = lambda: build_faiss_index(vectors, kind)  # noqa: E731
    with PeakRSS() as rss:
        if kind == "bm25": tracemalloc.start()
        t0 = time.perf_counter()
        index = build()
        seconds = time.perf_counter() - t0
        if kind == "bm25": traced = tracemalloc.get_traced_memory()[1] / 2**20; tracemalloc.stop()
    if kind == "dense": index.save(Path(out).with_suffix(".index"))
    Path(out).write_text(json.dumps({"seconds": seconds, "rss_mb": rss.delta_mb, "traced_mb": traced}))


def in_child(kind, inp, tmp):
    out = Path(tmp) / f"{kind}-{Path(inp).stem}.json"
    subprocess.run([sys.executable, __file__, "--threads", str(args.threads), "--child", kind, str(inp), str(out)],
                   check=True, env=os.environ.copy())
    return json.loads(out.read_text())


def pronounceable_corpus(n, seed=0):
    "n passages of random pronounceable words (Zipf-distributed vocabulary of 30k words)."
    rng = np.random.default_rng(seed)
    cons, vows = list("bcdfghjklmnprstvz") + ["ch", "sh", "th", "tr", "br"], ["a", "e", "i", "o", "u", "ai", "ou"]
    vocab = set()
    while len(vocab) < 30_000:
        k = rng.integers(2, 4)
        vocab.add("".join(cons[rng.integers(len(cons))] + vows[rng.integers(len(vows))] for _ in range(k)))
    vocab = list(rng.permutation(sorted(vocab)))  # frequent words are spread over the alphabet
    p = 1 / np.arange(1, len(vocab) + 1) ** 1.07
    lengths = rng.integers(40, 90, size=n)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=p / p.sum())
    out, pos = [], 0
    for i, length in enumerate(lengths):
        w = [vocab[j] for j in words[pos:pos + length]]; pos += length
        out.append(Passage(f"g{i}", f"{w[0].capitalize()} {w[1].capitalize()}", " ".join(w[2:]).capitalize() + "."))
    return out


def passage_queries(passages, n, seed=1):
    "Queries of 4-8 words drawn from random passages (so they hit the generated corpus' vocabulary)."
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.integers(len(passages), size=n):
        words = passages[i].text.rstrip(".").split()
        k = int(rng.integers(4, 9))
        out.append(" ".join(rng.choice(words, size=min(k, len(words)), replace=False)))
    return out


def throughput(retriever, queries, batch, runs):
    "Median queries/s and median seconds per batch."
    batches = [queries[i:i + batch] for i in range(0, len(queries), batch)]
    def go():
        for b in batches: retriever.retrieve(b, 3)
    retriever.retrieve(batches[0], 3)  # warm-up
    seconds = median_time(go, runs)
    return len(queries) / seconds, seconds / len(batches)


def http_overhead_ms(url, queries, batch, runs):
    "Median over requests of (round trip incl. JSON encode/parse) - (retrieval time the server reports)."
    client = httpx.Client(trust_env=False)
    batches = [queries[i:i + batch] for i in range(0, len(queries), batch)]
    client.post(url, json=retrieve_request(batches[0], 3))  # warm-up
    overheads = []
    for _ in range(runs):
        for b in batches:
            t0 = time.perf_counter()
            r = client.post(url, json=retrieve_request(b, 3))
            parse_retrieve_response(r.json(), len(b))
            seconds = time.perf_counter() - t0
            overheads.append(seconds - float(r.headers["server-timing"].split("dur=")[1]) / 1000)
    client.close()
    return 1000 * statistics.median(overheads)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    "A retrieval server in a child process (`serve`, as the command line runs it), loading a saved index."
    def __init__(self, kind, index_dir):
        self.port = free_port()
        code = ("import torch, faiss; torch.set_num_threads({t}); faiss.omp_set_num_threads({t}); "
                "from search_r1_course.server import serve; from search_r1_course.search import SearchConfig; "
                "serve(SearchConfig(kind={k!r}, index_dir={d!r}, device='cpu'), port={p}, log_level='warning')"
                ).format(t=args.threads, k=kind, d=str(index_dir), p=self.port)
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy())
        self.client = HttpRetriever(f"http://127.0.0.1:{self.port}/retrieve", timeout_s=60, max_retries=0)
        deadline = time.monotonic() + 180
        while True:
            try:
                self.client.health(); break
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {kind} server did not start")
                time.sleep(0.2)

    def close(self):
        self.client.close(); self.proc.terminate(); self.proc.wait(timeout=20)


def main():
    set_threads()
    rows = []  # (measurement, setting, measured, unit, target)
    def row(what, setting, value, unit, target=""):
        rows.append((what, setting, value, unit, target))
        print(f"  {what:<40} {setting:<28} {value:>10.2f} {unit}", file=sys.stderr, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="search-bench-"))
    try:
        run_all(tmp, row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows)


def run_all(tmp, row):
    world = load_world_corpus()
    questions = [s.question for split in ("train", "test") for s in load_world(split)]
    queries = [questions[i % len(questions)] for i in range(args.queries)]
    big = pronounceable_corpus(args.big)
    big_name = f"generated {len(big) // 1000}k"
    corpus_files = {"world": write_corpus(world, tmp / "world.jsonl"), big_name: write_corpus(big, tmp / "big.jsonl")}
    print(f"world corpus: {len(world)} passages; generated corpus: {len(big)} passages; {len(queries)} queries per "
          f"run; threads={args.threads}; runs={args.runs}; load average at start: {os.getloadavg()[0]:.1f}", file=sys.stderr)

    # --- index builds: time (median, this process) and memory (a fresh child each)
    for name, corpus in [("world", world), (big_name, big)]:
        row("BM25 index build", name, median_time(lambda: BM25Retriever.build(corpus), args.runs if len(corpus) < 20_000 else 3), "s")
        mem = in_child("bm25", corpus_files[name], tmp)
        row("BM25 build peak memory (RSS growth)", name, mem["rss_mb"], "MB")
        row("BM25 build peak memory (tracemalloc)", name, mem["traced_mb"], "MB")
    bm25 = BM25Retriever.build(world)
    bm25.save(tmp / "bm25")
    retrievers = [("BM25", "bm25", bm25)]
    if not args.skip_dense:
        mem = in_child("dense", corpus_files["world"], tmp)  # one run: encoding takes minutes on a CPU
        row("dense index build (MiniLM encode + flat)", "world", mem["seconds"], "s")
        row("dense build peak memory (RSS growth)", "world", mem["rss_mb"], "MB")
        rate = len(world) / mem["seconds"]
        row("dense encode rate", "world", rate, "passages/s")
        row("dense encode time, extrapolated", big_name, len(big) / rate, "s")
        dense = DenseRetriever.load(tmp / "dense-world.index", device="cpu")
        dim = dense.encoder.dim
        rng = np.random.default_rng(0)
        vecs = rng.standard_normal((len(big), dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        np.save(tmp / "vectors.npy", vecs)
        for kind, runs in [("flat", args.runs), ("ivf", 1), ("hnsw", 1)]:
            if kind == "hnsw":  # graph construction is the slow one: measure it on 20k vectors
                np.save(tmp / "vectors20k.npy", vecs[:20_000])
                row("faiss hnsw build (random unit vectors)", "20k x 384", median_time(lambda: build_faiss_index(vecs[:20_000], kind), runs), "s")
                row("faiss hnsw peak memory (RSS growth)", "20k x 384", in_child(kind, tmp / "vectors20k.npy", tmp)["rss_mb"], "MB")
                continue
            row(f"faiss {kind} build (random unit vectors)", f"{len(big) // 1000}k x {dim}", median_time(lambda: build_faiss_index(vecs, kind), runs), "s")
            row(f"faiss {kind} peak memory (RSS growth)", f"{len(big) // 1000}k x {dim}", in_child(kind, tmp / "vectors.npy", tmp)["rss_mb"], "MB")
        del vecs
        retrievers.append(("dense", "dense", dense))
        (tmp / "dense").symlink_to(tmp / "dense-world.index")

    # --- throughput: in process, then over HTTP against a server process
    big_bm25 = BM25Retriever.build(big)
    qps, _ = throughput(big_bm25, passage_queries(big, args.queries), 64, args.runs)
    row("BM25 in process", f"{big_name}, batch 64", qps, "queries/s")
    del big_bm25, big
    gc.collect()
    for label, kind, retriever in retrievers:
        for batch in (1, 64):
            qs = queries if batch > 1 or label == "BM25" else queries[:128]
            qps, _ = throughput(retriever, qs, batch, args.runs)
            row(f"{label} in process", f"world, batch {batch}", qps, "queries/s",
                ">= 2000" if (label, batch) == ("BM25", 64) else "")
        server = ServerProcess(kind, tmp / kind)
        try:
            for batch in (1, 64):
                qs = queries if batch > 1 or label == "BM25" else queries[:128]
                qps, _ = throughput(server.client, qs, batch, args.runs)
                row(f"{label} over HTTP (loopback)", f"world, batch {batch}", qps, "queries/s")
                row(f"{label} HTTP overhead per batch", f"world, batch {batch}",
                    http_overhead_ms(server.client.url, qs, batch, args.runs), "ms", "<= 5")
        finally:
            server.close()


def print_table(rows):
    print()
    print(f"Retrieval benchmark: top-3, {args.threads} thread(s), timings are medians of {args.runs} runs "
          f"(builds over a minute: 1 run); {os.cpu_count()} CPU cores visible, load average at the end "
          f"{os.getloadavg()[0]:.1f}")
    header = ("measurement", "corpus / setting", "measured", "unit", "target")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    print(f"{header[0]:<{widths[0]}}  {header[1]:<{widths[1]}}  {header[2]:>10}  {header[3]:<{widths[3]}}  {header[4]:<8}  met")
    print("-" * (widths[0] + widths[1] + widths[3] + 38))
    for what, setting, value, unit, target in rows:
        met = ""
        if target:
            op, bound = target.split()
            met = "yes" if (value >= float(bound) if op == ">=" else value <= float(bound)) else "NO"
        fmt = f"{value:>10,.0f}" if abs(value) >= 100 else f"{value:>10.2f}"
        print(f"{what:<{widths[0]}}  {setting:<{widths[1]}}  {fmt}  {unit:<{widths[3]}}  {target:<8}  {met}")


if __name__ == "__main__":
    if args.child:
        child(*args.child)
    else:
        main()
