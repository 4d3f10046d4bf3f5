"""bench/realtime.py runs and reports: Realtime and Responses WebSocket turns directly and through the gateway (and
a bare relay with ``--floor``), and many concurrent sessions with the worker's memory (no timings checked)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.bench.test_bench_smoke import ROOT, clean_env, run_json

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # a load tool: it needs the machine to itself


def test_realtime_bench_reports_round_trips_of_both_paths_and_many_sessions() -> None:
    report = run_json([sys.executable, "bench/realtime.py", "--quick"], timeout=120)
    assert report["machine"]["nproc"] >= 1 and "busy_cpus_before" in report["machine"]
    assert report["settings"]["turns"] == 50 and report["settings"]["sessions"] == 50
    results = report["results"]
    for kind in ("realtime", "responses"):
        result = results[kind]
        assert set(result["latency_ms"]) == {"direct", "gateway"}
        assert all({"p50", "p99"} <= set(result["latency_ms"][path]) for path in ("direct", "gateway"))
        assert set(result["added_ms"]) == {"p50", "p99"}
        assert result["turns"] == 50 and result["other_busy_cpus"] >= 0
        assert result["messages_per_turn"] > 2 and set(result["cpu_us_per_message"]) == {"gateway"}
    sessions = results["sessions"]
    assert sessions["failures"] == 0 and sessions["sessions"] == 50 and len(sessions["waves"]) == 2
    for wave in sessions["waves"]:
        assert wave["failures"] == 0 and wave["failure_kinds"] == {}
        assert wave["opened"] == wave["still_open_at_peak"] == 50
        assert wave["open_all_s"] > 0 and wave["rss_mb_all_open"] > 0 and wave["rss_mb_after_close"] > 0
    assert sessions["rss_mb_before"] > 0 and "rss_kb_per_session" in sessions
    assert sessions["gateway_open_after_close"] == 0
    assert len(results["gateway_rss_mb"]) == 1


def test_realtime_bench_floor_adds_a_bare_relay_path_and_its_sessions() -> None:
    report = run_json([sys.executable, "bench/realtime.py", "--quick", "--floor", "--waves", "1"], timeout=120)
    results = report["results"]
    for kind in ("realtime", "responses"):
        result = results[kind]
        assert set(result["latency_ms"]) == {"direct", "gateway", "floor"}
        assert set(result["added_over_floor_ms"]) == {"p50", "p99"}
        assert set(result["cpu_us_per_message"]) == {"gateway", "floor"}
        assert all(us > 0 for us in result["cpu_us_per_message"].values())
    floors = results["floor_sessions"]
    assert set(floors) == {"floor", "floor_hold"}
    for wave in floors.values():
        assert wave["failures"] == 0 and wave["opened"] == wave["still_open_at_peak"] == 50
        assert wave["rss_mb_all_open"] > 0 and "rss_kb_per_session" in wave


def test_realtime_bench_refuses_unbounded_counts() -> None:
    for args in (["--turns", "0"], ["--sessions", "100000"], ["--open-concurrency", "0"], ["--waves", "11"],
                 ["--timeout", "5000"]):
        done = subprocess.run([sys.executable, "bench/realtime.py", *args], cwd=ROOT, env=clean_env(),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert args[0] in done.stderr
