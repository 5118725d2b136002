"""Checks of `search_r1_course.world` that a notebook cannot hold: the world must not depend on the
interpreter process that builds it (string hashing is randomised per process by PYTHONHASHSEED, so any
iteration over a set or dict of strings that shaped the world would show up here)."""
import os
import subprocess
import sys

DIGEST = """
import dataclasses, hashlib, json
from search_r1_course.world import build_world, WorldConfig
w = build_world(WorldConfig.tiny(seed=3))
rows = [dataclasses.asdict(x) for x in w.entities + w.passages + w.questions]
print(hashlib.sha256(json.dumps(rows).encode()).hexdigest())
"""


def _digest(hashseed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(hashseed)}
    out = subprocess.run([sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_same_world_in_every_process():
    digests = {_digest(seed) for seed in (1, 2, 3)}
    assert len(digests) == 1, digests
