"""bench/mcp.py runs and reports: a tools/call directly and through the gateway, JSON and SSE answers (no timings)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.bench.test_bench_smoke import ROOT, clean_env, run_json

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # a load tool: it needs the machine to itself


def test_mcp_bench_reports_latency_and_throughput_of_both_paths_and_forms() -> None:
    report = run_json([sys.executable, "bench/mcp.py", "--quick"], timeout=120)
    assert report["machine"]["nproc"] >= 1 and "busy_cpus_before" in report["machine"]
    assert report["settings"]["requests"] == 100 and report["settings"]["rounds"] == 1
    for form in ("json", "sse"):
        result = report["forms"][form]
        assert set(result["latency_ms"]) == {"direct", "gateway"}
        assert {"p50", "p99"} <= set(result["latency_ms"]["gateway"])
        assert set(result["added_ms"]) == {"p50", "p99"}
        assert result["errors"] == result["throughput_errors"] == {"direct": 0, "gateway": 0}
        assert result["requests"] == 100
        assert all(v > 0 for v in result["calls_per_s"].values())
        assert result["connections"] == 16 and result["gateway_vs_direct"] > 0
        assert all(v > 0 for v in result["cpu_us_per_call"].values())
        assert [len(v) for v in result["other_busy_cpus_rounds"].values()] == [1, 1]
        assert result["other_busy_cpus_latency"] >= 0
    assert len(report["forms"]["gateway_rss_mb"]) == 1


def test_mcp_bench_refuses_an_unknown_form_and_unbounded_counts() -> None:
    for args in (["--forms", "xml"], ["--requests", "0"], ["--duration", "1000"]):
        done = subprocess.run([sys.executable, "bench/mcp.py", *args], cwd=ROOT, env=clean_env(),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert json.dumps(args[0])[1:-1] in done.stderr
