"The benchmarks' calibration: both roofs of a decoding step, and which one binds."
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from machine_roof import decode_roof, matmul_gflops, read_gbs  # noqa: E402


def test_the_lower_roof_binds():
    # 135M bf16 parameters: 0.269 GFLOP and 269 MB per token; 2,000 GFLOP/s and 17.7 GB/s
    at_32 = decode_roof(2000, 17.7, 0.269, 269_000_000, rows=32)
    assert at_32["matmul"] == pytest.approx(2000 / 0.269)
    assert at_32["bandwidth"] == pytest.approx(17.7e9 * 32 / 269e6)   # ~2,100 tokens/s
    assert (at_32["binds"], at_32["roof"]) == ("bandwidth", at_32["bandwidth"])
    at_512 = decode_roof(2000, 17.7, 0.269, 269_000_000, rows=512)   # enough rows: the arithmetic binds
    assert (at_512["binds"], at_512["roof"]) == ("matmul", at_512["matmul"])


def test_measured_roofs_are_plausible():
    gflops, gbs = matmul_gflops(n=256, reps=3), read_gbs(gib=1 / 64, reps=3)
    assert 1 < gflops < 1e5 and 0.5 < gbs < 1e4, (gflops, gbs)
