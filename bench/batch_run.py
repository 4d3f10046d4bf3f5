"""Benchmark: a gateway-run batch against the mock upstream: lines per second and the gateway's peak memory.

Starts the mock (1 worker) and the gateway (``--workers``, default 1) on loopback, uploads a ``--lines`` chat
batch file (default 10,000) with only the gateway key, creates an ``immediate`` batch with the vendorA provider
headers (custom host = the mock), polls it every 100 ms until it ends, checks the output file has one line per
input line in order, and prints a JSON report: wall time from create to completed, lines per second, when each
state was first seen, CPU time per line of the gateway and of the mock, and the peak RSS of the gateway's workers
(largest ``VmHWM``, and the largest RSS sampled while the batch ran).

    python bench/batch_run.py                              # 10,000 lines, embedded store
    python bench/batch_run.py --concurrency 32 --lines 2000
    python bench/batch_run.py --redis redis://127.0.0.1:6379/15   # Redis store (a random key prefix, removed after)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import ADMIN_KEY, Stack, cpu_seconds, worker_pids

CHAT = "/v1/chat/completions"


def _request(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> dict | bytes:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=120) as resp:
        data = resp.read()
        return json.loads(data) if resp.headers.get("content-type", "").startswith("application/json") else data


def batch_file(lines: int) -> bytes:
    return b"".join(json.dumps({"custom_id": f"line-{i}", "method": "POST", "url": CHAT, "body": {
        "model": "mock-model", "max_tokens": 64,
        "messages": [{"role": "user", "content": f"Question number {i}: say hello."}]}}).encode() + b"\n"
        for i in range(1, lines + 1))


def upload(url: str, content: bytes) -> str:
    boundary = uuid.uuid4().hex
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.jsonl"\r\n'
            "Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    doc = _request("POST", url + "/v1/files", body, {"x-gateway-api-key": ADMIN_KEY,
                                                       "content-type": f"multipart/form-data; boundary={boundary}"})
    return doc["id"]


def rss_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(args: argparse.Namespace) -> dict:
    env = {"GATEWAY_BATCH_CONCURRENCY": str(args.concurrency), "GATEWAY_LOG_FILE": "off"}
    if args.redis:
        env.update(GATEWAY_REDIS_URL=args.redis, GATEWAY_REDIS_KEY_PREFIX=f"gwbench:{uuid.uuid4().hex[:8]}:")
    try:
        return _measure(args, env)
    finally:
        if args.redis:
            _delete_prefix(args.redis, env["GATEWAY_REDIS_KEY_PREFIX"])


def _delete_prefix(url: str, prefix: str) -> None:
    """Remove the run's keys (never the whole database: others may share it)."""
    import redis

    conn = redis.Redis.from_url(url)
    try:
        for key in conn.scan_iter(match=prefix + "*", count=1000):
            conn.delete(key)
    finally:
        conn.close()


def _measure(args: argparse.Namespace, env: dict[str, str]) -> dict:
    with Stack(log=lambda _: None, gateway_env=env) as stack:
        stack.start_proxies(args.workers, floor=False)
        gateway = stack.gateway
        workers = worker_pids(gateway.pid)
        idle_rss = max(rss_kb(pid, "VmRSS") for pid in workers)
        file_id = upload(gateway.url, batch_file(args.lines))
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk-b",
                   "x-gateway-custom-host": stack.mock.url + "/v1", "content-type": "application/json"}
        cpu_before = {"gateway": cpu_seconds(gateway.pid), "mock": cpu_seconds(stack.mock.pid)}
        started = time.monotonic()
        batch = _request("POST", gateway.url + "/v1/batches", json.dumps({
            "input_file_id": file_id, "endpoint": CHAT, "completion_window": "immediate"}).encode(), headers)
        seen: dict[str, float] = {}
        sampled_rss = idle_rss
        while batch["status"] not in ("completed", "failed", "cancelled", "expired"):
            time.sleep(0.1)
            batch = _request("GET", f"{gateway.url}/v1/batches/{batch['id']}", None, {"x-gateway-api-key": ADMIN_KEY})
            seen.setdefault(batch["status"], time.monotonic() - started)
            sampled_rss = max([sampled_rss] + [rss_kb(pid, "VmRSS") for pid in workers])
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"batch not done after {args.timeout} s: {batch['status']}")
        elapsed = time.monotonic() - started
        cpu_us = {name: round((cpu_seconds(server.pid) - cpu_before[name]) * 1e6 / args.lines, 1)
                  for name, server in (("gateway", gateway), ("mock", stack.mock))}
        peak_hwm = max(rss_kb(pid, "VmHWM") for pid in workers)
        output = _request("GET", f"{gateway.url}/v1/files/{batch['output_file_id']}/content", None,
                          {"x-gateway-api-key": ADMIN_KEY})
        ids = [json.loads(line)["custom_id"] for line in output.splitlines()]
        assert ids == [f"line-{i}" for i in range(1, args.lines + 1)], "output is not one line per input line"
        running_s = batch["finalizing_at"] - batch["in_progress_at"] if batch.get("finalizing_at") else None
        return {
            "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                        "os": platform.platform(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "settings": {"lines": args.lines, "concurrency": args.concurrency, "workers": args.workers,
                         "store": "redis" if args.redis else "embedded"},
            "status": batch["status"], "request_counts": batch["request_counts"],
            "wall_s": round(elapsed, 2), "lines_per_s": round(args.lines / elapsed, 1),
            "first_seen_s": {k: round(v, 2) for k, v in seen.items()},
            "in_progress_to_finalizing_s": running_s,
            "cpu_us_per_line": cpu_us,
            "gateway_worker_rss_mb": {"idle": round(idle_rss / 1024, 1), "peak_sampled": round(sampled_rss / 1024, 1),
                                      "peak_hwm": round(peak_hwm / 1024, 1)},
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16, help="GATEWAY_BATCH_CONCURRENCY")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--redis", default=None, help="a Redis URL: run on the Redis store instead of embedded")
    parser.add_argument("--timeout", type=float, default=600)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
