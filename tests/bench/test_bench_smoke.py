"""The benchmark tools run and report: bench/overhead.py's JSON and bench/load.sh's locust summary (no timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.serial]  # load tools: they need the machine to themselves


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "BENCH_"))}
    env["PYTHON"] = sys.executable
    return env


def run_json(cmd: list[str], timeout: float = 240) -> dict:
    done = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)


def overhead(*args: str) -> dict:
    return run_json([sys.executable, "bench/overhead.py", "--workers", "1", "--requests", "50", "--warmup", "10",
                     "--rounds", "1", "--duration", "1", *args])


def test_overhead_reports_every_path_for_chat_and_streams() -> None:
    report = overhead()
    assert {"machine", "workers", "verdict", "settings"} <= set(report)
    assert report["machine"]["nproc"] >= 1 and report["machine"]["loadgen"]
    run = report["workers"]["1"]
    for mode in ("chat", "stream"):
        result = run[mode]
        assert set(result["latency_ms"]) == {"direct", "floor", "lean", "gateway"}
        assert {"p50", "p99"} <= set(result["latency_ms"]["gateway"])
        assert set(result["added_ms"]) == {"floor", "lean", "gateway"}
        assert {"p50", "p99"} == set(result["added_ms"]["gateway"])
        assert "added_p50_ratio" in result and "throughput_ratio" in result
        # the gateway against the lean floor, and the lean floor against the stock one
        assert {"added_p50_ratio_to_lean", "lean_added_p50_ratio", "throughput_ratio_to_lean",
                "lean_throughput_ratio"} <= set(result)
        assert set(result["throughput_rps"]) == {"direct", "floor", "lean", "gateway"}
        assert all(v > 0 for v in result["throughput_rps"].values())
        assert result["errors"] == {"direct": 0, "floor": 0, "lean": 0, "gateway": 0}
        assert result["throughput_errors"] == {"direct": 0, "floor": 0, "lean": 0, "gateway": 0}
        assert result["connections"] == 32
    assert run["stream"]["content_chunks"] == {"direct": 20, "floor": 20, "lean": 20, "gateway": 20}
    assert len(run["gateway_rss_mb"]) == 1 and run["gateway_rss_mb"][0] > 0
    assert run["gateway_requests_served"] > 100
    assert {"added_p50_ratio_ok", "throughput_ratio_ok", "rss_ok"} <= set(report["verdict"])


def test_overhead_runs_with_the_python_load_generator() -> None:
    report = overhead("--loadgen", "python", "--modes", "chat")
    assert report["machine"]["loadgen"].startswith("python")
    result = report["workers"]["1"]["chat"]
    assert all(v > 0 for v in result["throughput_rps"].values())
    assert result["throughput_errors"] == {"direct": 0, "floor": 0, "lean": 0, "gateway": 0}
    assert "stream" not in report["workers"]["1"]


def test_memory_mode_reports_rss_at_half_and_end() -> None:
    report = run_json([sys.executable, "bench/overhead.py", "--memory", "--memory-requests", "2000"])
    memory = report["memory"]
    assert memory["requests"] == 2000 and memory["errors"] == 0
    assert memory["rss_mb_at_half"]["requests"] >= 1000 and memory["rss_mb_at_end"]["requests"] == 2000
    assert len(memory["growth_mb_half_to_end"]) == 1
    assert {"rss_ok", "no_growth_ok"} <= set(memory)


def test_load_script_reports_locust_results_as_json() -> None:
    report = run_json(["bash", "bench/load.sh", "--time", "5s", "--users", "2", "--spawn-rate", "2"], timeout=120)
    assert report["scenario"] == "MixedUser"
    assert report["requests"] > 0
    assert report["failures"] == 0
    assert {"p50", "p95", "p99"} <= set(report["latency_ms"])
    assert {"chat", "chat stream", "chat fallback", "chat cache"} <= set(report["by_name"])


def test_burst_reports_failures_wall_time_first_bytes_and_peak_rss() -> None:
    report = run_json([sys.executable, "bench/burst.py", "--streams", "40", "--chunks", "5", "--delay-ms", "20",
                       "--targets", "floor,lean,gateway"])
    assert report["settings"]["streams"] == 40 and report["settings"]["workers"] == 1
    for name in ("floor", "lean", "gateway"):
        result = report["targets"][name]
        assert result["streams"] == 40 and result["failures"] == 0, result
        assert result["wall_s"] > 0
        assert {"p50", "p99"} == set(result["ttfb_ms"]) == set(result["first_event_ms"])
        assert result["ttfb_ms"]["p50"] <= result["ttfb_ms"]["p99"]
        assert len(result["peak_rss_mb"]) == 1 and result["peak_rss_mb"][0] > 0


def test_batch_benchmark_reports_lines_per_second_and_memory() -> None:
    report = run_json([sys.executable, "bench/batch_run.py", "--lines", "300"])
    assert report["status"] == "completed"
    assert report["request_counts"] == {"total": 300, "completed": 300, "failed": 0}
    assert report["lines_per_s"] > 0 and set(report["cpu_us_per_line"]) == {"gateway", "mock"}
    assert report["gateway_worker_rss_mb"]["peak_hwm"] >= report["gateway_worker_rss_mb"]["idle"] > 0


def test_overhead_keeps_consoles_connected_when_asked() -> None:
    report = overhead("--modes", "chat", "--consoles", "20")
    run = report["workers"]["1"]
    consoles = run["consoles"]
    assert consoles["connections"] == 20 and consoles["ok"] == 20 and consoles["refused"] == 0
    assert consoles["closed_by_server"] == 0
    assert consoles["events"] > 0  # the load's records reached them
    assert run["chat"]["throughput_errors"] == {"direct": 0, "floor": 0, "lean": 0, "gateway": 0}


def test_aggregates_bench_reports_each_window() -> None:
    report = run_json([sys.executable, "bench/aggregates.py", "--rows", "3000", "--repeat", "2", "--raw-repeat", "1"])
    assert report["fill"]["rows"] == 3000
    assert set(report["report"]) == {"15m", "1h", "1d"}
    assert report["report"]["1d"]["requests"] == 3000
    for window in report["report"].values():
        assert window["all_workspaces"]["median_ms"] > 0 and window["one_workspace"]["median_ms"] > 0
    assert report["raw_day_query_for_scale"]["median_ms"] > 0


def test_cache_benchmark_reports_hits_against_direct_calls() -> None:
    report = run_json([sys.executable, "bench/cache.py", "--requests", "20", "--warmup", "5"], timeout=240)
    assert report["statuses"] == {"hit": "HIT", "stream_hit": "HIT", "semantic_hit": "SEMANTIC_HIT"}
    assert set(report["latency_ms"]) == {"direct", "gateway", "hit", "stream_hit", "semantic_hit"}
    assert all(count == 0 for count in report["errors"].values())


def test_ab_runs_each_variant_from_its_checkout_and_says_what_it_loaded() -> None:
    report = run_json([sys.executable, "bench/ab.py", f"compiled={ROOT}", f"pure={ROOT},GATEWAY_NO_EXTENSIONS=1",
                       "--rounds", "1", "--duration", "1"])
    targets = report["targets"]
    assert set(targets) == {"floor", "compiled", "pure"}
    assert set(targets["compiled"]["speedups"].values()) == {"compiled"}
    assert set(targets["pure"]["speedups"].values()) == {"pure"}
    for name in ("compiled", "pure"):
        assert targets[name]["checkout"] == str(ROOT) and targets[name]["provider_header"] == "vendorA"
    for target in targets.values():
        assert target["rps"] > 0 and target["errors"] == 0 and target["cpu_us_per_request"] > 0
    assert targets["floor"]["ratio_to_floor"] == 1.0


def test_ab_starts_a_collector_for_a_traced_variant_and_counts_its_spans() -> None:
    report = run_json([sys.executable, "bench/ab.py", f"traced={ROOT},GATEWAY_OTLP_ENDPOINT=@collector",
                       "--rounds", "1", "--duration", "1"])
    traced = report["targets"]["traced"]
    assert traced["errors"] == 0 and traced["rps"] > 0
    # a request span and an answering-attempt span per request, all of them taken by the collector
    assert report["collector"]["requests"] > 0 and report["collector"]["spans"] >= 2 * traced["rps"]


def test_ab_refuses_a_variant_that_names_no_checkout() -> None:
    done = subprocess.run([sys.executable, "bench/ab.py", "x=/nowhere"], cwd=ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not a gateway checkout" in done.stderr
