"""The suite catches planted bugs in a copy of the reference, each with a minimal case that a
reader can act on (the falsifying example, and for multi-rank cases the replay command)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_suite(test_file: str, impl: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "suite")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"conformance/suite/{test_file}",
            "-p",
            "conformance.plugin",
            "-p",
            "no:cacheprovider",
            "-p",
            "mutation_profile",
            "--impl",
            impl,
            "-x",
            "-q",
            "--hypothesis-profile=mutation",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize(
    ("test_file", "impl", "expected"),
    [
        (
            "test_st_sharding_spec.py",
            "mutants:CHUNK_OFFSET",
            [
                "shards=[{'offsets': [0], 'sizes': [1]",
                "{'offsets': [2], 'sizes': [0]",
                ".build_metadata([1])",
            ],
        ),
        (
            "test_st_gather.py",
            "mutants:GATHER_DROPS_LAST",
            ["rank 0: out at [[0]]=[0.0], but should be [3.0]", "--world-size 1", '"shape": [1]'],
        ),
        (
            "test_st_validation.py",
            "mutants:TOUCHING_OVERLAP",
            [
                "overlap\", but should be 'a result'",
                # two unit boxes side by side, in however many dims the shrinker settles on
                re.compile(
                    r"validate\(\[\{'offsets': \[[01, ]+\], 'sizes': \[[1, ]+\], "
                    r"'placement': 'rank:0/cpu'\}, \{'offsets': \[[01, ]+\], 'sizes': \[[1, ]+\], "
                    r"'placement': 'rank:1/cpu'\}\], size=\[(1, )*2\]\)"
                ),
            ],
        ),
        (
            "test_st_validation.py",
            "mutants:OVERLAP_IN_ONE_DIM",
            [
                "overlap\", but should be 'a result'",
                # two unit boxes, disjoint along dim 0, sharing dim 1
                "validate([{'offsets': [0, 0], 'sizes': [1, 1], 'placement': 'rank:0/cpu'}, "
                "{'offsets': [1, 0], 'sizes': [1, 1], 'placement': 'rank:1/cpu'}], size=[2, 1])",
            ],
        ),
        (
            "test_dt_redistribute.py",
            "mutants:LOSES_PRECISION",
            ["=[904623.3125], but should be [904623.3]", '"shape": []', "--world-size 1"],
        ),
        (
            "test_st_gather.py",
            "mutants:GATHER_WRITES_OUT",
            ["out unchanged before raising=False, but should be True [ERR-8"],
        ),
        (
            "test_st_reshard.py",
            "mutants:RESHARD_SPOILS_SOURCE",
            ["held before the call unchanged=False, but should be True [ST-RESHARD-6"],
        ),
        (
            "test_errors.py",
            "mutants:NO_RULE_IDS",
            ["rule ids the spec defines, named in the message=False, but should be True"],
        ),
    ],
    ids=[
        "chunk-offset",
        "gather-drops-last-shard",
        "touching-boxes-overlap",
        "overlap-seen-in-one-dim",
        "float32-trip",
        "gather-writes-out-before-checking",
        "reshard-spoils-its-source-on-error",
        "messages-without-rule-ids",
    ],
)
def test_a_planted_bug_is_caught_with_a_minimal_case(test_file, impl, expected):
    out = run_suite(test_file, impl)
    for text in expected:
        found = text.search(out) if isinstance(text, re.Pattern) else text in out
        assert found, out[-4000:]
