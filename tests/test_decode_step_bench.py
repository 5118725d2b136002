"""benchmarks/decode_step_bench.py, run as a user runs it at a small shape: the floor beside the measured step, and the
profiler's split, whose parts add up to the whole and give the LM head its own share."""
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent/"benchmarks"/"decode_step_bench.py"


def test_decode_step_bench_prints_floor_and_split():
    done = subprocess.run([sys.executable, str(BENCH), "--threads", "1", "--rows", "2", "--cache", "16", "--steps", "4"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert re.search(r"read [\d.]+ GB/s, bf16 matmul \d+ GFLOP/s; 2 rows, cache of 16 positions", out), out
    floor = float(re.search(r"at least ([\d.]+) ms at the read bandwidth", out).group(1))
    step = float(re.search(r"step: median ([\d.]+) ms of 4 ", out).group(1))
    assert 0 < floor < step
    total = float(re.search(r"own time under the profiler: ([\d.]+) ms", out).group(1))
    parts = {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"^\s+([a-zA-Z ()]+):\s+([\d.]+) ms", out, re.M)}
    assert set(parts) == {"linear layers", "attention over the cache", "LM head and embedding", "the rest (small operators)"}
    assert abs(sum(parts.values()) - total) < 0.1 + 0.01 * total
    assert parts["LM head and embedding"] > 0 and parts["linear layers"] > 0
