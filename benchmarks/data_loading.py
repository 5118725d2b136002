"""Loader throughput of `search_r1_course.data` against the bare library calls it wraps.

Synthetic files at the real scale of the Search-R1 training parquet (~170k rows, the columns of
PeterJinGo/nq_hotpotqa_train) and a 200k-passage corpus. Baselines: `pandas.read_parquet` (no
validation, answers left as NumPy arrays) and `json.loads` per line (no checks).
Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/data_loading.py [--rows N] [--passages N]
"""
import argparse, json, tempfile, time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from search_r1_course.data import Passage, load_search_r1, read_corpus, write_corpus


def timed(f):
    t = time.perf_counter(); out = f(); return out, time.perf_counter() - t


def main(rows: int, passages: int):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        recs = [{"id": f"train_{i}", "question": f"who is the person number {i} in the list of examples?",
                 "golden_answers": [f"answer {i}", f"alias {i}"][: 1 + i % 2], "data_source": "nq" if i % 3 else "hotpotqa",
                 "prompt": [{"content": "Answer the question. " * 40 + f"Question: q{i}?\n", "role": "user"}],
                 "ability": "fact-reasoning", "reward_model": {"ground_truth": {"target": [f"answer {i}"]}, "style": "rule"},
                 "extra_info": {"index": i, "split": "train"}} for i in range(rows)]
        pq.write_table(pa.Table.from_pylist(recs), d/"train.parquet")
        _, t_base = timed(lambda: pd.read_parquet(d/"train.parquet"))
        samples, t_ours = timed(lambda: load_search_r1("train", data_path=d))
        print(f"QA parquet, {rows:,} rows: pandas.read_parquet {t_base:.2f} s ({rows / t_base:,.0f} rows/s) | "
              f"load_search_r1 {t_ours:.2f} s ({rows / t_ours:,.0f} rows/s), {t_ours / t_base:.1f}x")
        assert len(samples) == rows

        ps = [Passage(str(i), f"Title {i}", "Some encyclopedia text about the subject. " * 3) for i in range(passages)]
        write_corpus(ps, d/"corpus.jsonl")
        def bare():
            with open(d/"corpus.jsonl", encoding="utf-8") as f: return [json.loads(l) for l in f]
        _, t_base = timed(bare)
        got, t_ours = timed(lambda: read_corpus(d/"corpus.jsonl"))
        print(f"corpus, {passages:,} lines: json.loads per line {t_base:.2f} s ({passages / t_base:,.0f} lines/s) | "
              f"read_corpus {t_ours:.2f} s ({passages / t_ours:,.0f} lines/s), {t_ours / t_base:.1f}x")
        assert got == ps


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=170_000)
    ap.add_argument("--passages", type=int, default=200_000)
    main(**vars(ap.parse_args()))
