"""The gateway's overhead in one run: direct to the mock vs the floor proxy vs the gateway, interleaved.

Starts ``gateway mock-upstream``, ``bench/floor_proxy.py`` and ``gateway serve`` on free loopback ports and prints
one JSON document on stdout (progress goes to stderr):

- latency at concurrency 1 (one keep-alive connection per target, targets interleaved request by request with the
  order rotating each round) for a non-streamed chat and a streamed chat (20 content chunks), and (``--modes
  responses,messages``) a Responses API stream and a Messages API stream the gateway forwards to vendorA and
  anthropic as sent (20 text deltas each): p50/p99 of each path,
  the added p50/p99 over direct (``p(path) - p(direct)``) and ``gateway_added_p50 / floor_added_p50``;
- throughput at 32 connections (``wrk`` when installed, else a multi-process raw-socket generator), rounds
  alternating the targets, medians reported, ``gateway / floor`` ratio and each server's CPU per request;
- the gateway workers' RSS after the requests of the run.

``--consoles N`` keeps N ``GET /v1/logs/stream`` connections open (read by a separate process) while a worker
count is measured, and adds what they received to the report.

``--memory`` instead drives 100,000 requests through one gateway worker and reports its RSS at 50k and 100k.
Quick run: ``python bench/overhead.py --workers 1 --requests 200 --rounds 1 --duration 1``.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from consoles import Consoles
from loadgen import LoadGenerator, PythonLoad, WrkLoad, pick_loadgen
from procs import Stack, cpu_seconds, worker_rss_mb
from rawhttp import Connection, build_request

TARGETS = ("direct", "floor", "lean", "gateway")
#: the proxies measured against direct
PROXIES = ("floor", "lean", "gateway")
ADDED_P50_RATIO_MAX = 1.3
THROUGHPUT_RATIO_MIN = 0.7
RSS_MB_MAX = 80.0
STREAM_SCENARIO = "bench-stream20"
STREAM_CHUNKS = 20
CHAT = {"model": "gpt-bench", "max_tokens": 64, "messages": [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Say hello in exactly twenty words, please."}]}


#: mode -> (path, body, client headers, gateway provider, what one content event contains)
DOORS = {
    "responses": ("/v1/responses", {"model": "gpt-bench", "stream": True,
                                    "instructions": CHAT["messages"][0]["content"],
                                    "input": CHAT["messages"][1]["content"]},
                  {"authorization": "Bearer sk-bench"}, "vendorA", b'"type":"response.output_text.delta"'),
    "messages": ("/v1/messages", {"model": "claude-bench", "max_tokens": 64, "stream": True,
                                  "system": CHAT["messages"][0]["content"], "messages": CHAT["messages"][1:]},
                 {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}, "anthropic", b'"type":"text_delta"'),
}
MODES = ("chat", "stream", *DOORS)


def requests_for(stack: Stack, stream: bool | str) -> dict[str, tuple[str, bytes]]:
    """Target name -> (url, exact request bytes) for one chat request (``stream``: a streamed one), or for a mode of
    ``DOORS`` (a forwarded front-door stream).

    Streams go through the mock scenario ``STREAM_SCENARIO`` (``chunks: 20``): the mock's default reply has 18 words.
    """
    if isinstance(stream, str) and stream in DOORS:
        return door_requests_for(stack, stream)
    stream = stream == "stream" if isinstance(stream, str) else stream
    body = msgspec.json.encode({**CHAT, "stream": True} if stream else CHAT)
    base = f"/s/{STREAM_SCENARIO}" if stream else ""
    path = base + "/v1/chat/completions"
    plain = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    gateway = {**plain, "x-gateway-api-key": stack.admin_key, "x-gateway-provider": "vendorA",
               "x-gateway-custom-host": f"{stack.mock.url}{base}/v1"}
    out = {"direct": (stack.mock.url + path, plain), "gateway": (stack.gateway.url + "/v1/chat/completions", gateway)}
    if stack.floor is not None:
        out["floor"] = (stack.floor.url + path, plain)
    if stack.lean is not None:
        out["lean"] = (stack.lean.url + path, plain)
    return {name: (url, build_request(url, body, headers)) for name, (url, headers) in out.items()}


def door_requests_for(stack: Stack, mode: str) -> dict[str, tuple[str, bytes]]:
    path, doc, plain, provider, _ = DOORS[mode]
    base = f"/s/{STREAM_SCENARIO}"
    body = msgspec.json.encode(doc)
    plain = {"content-type": "application/json", **plain}
    gateway = {**plain, "x-gateway-api-key": stack.admin_key, "x-gateway-provider": provider,
               "x-gateway-custom-host": f"{stack.mock.url}{base}/v1"}
    out = {"direct": (stack.mock.url + base + path, plain), "gateway": (stack.gateway.url + path, gateway)}
    if stack.floor is not None:
        out["floor"] = (stack.floor.url + base + path, plain)
    if stack.lean is not None:
        out["lean"] = (stack.lean.url + base + path, plain)
    return {name: (url, build_request(url, body, headers)) for name, (url, headers) in out.items()}


def verify(reqs: dict[str, tuple[str, bytes]], stream: bool | str) -> dict[str, int]:
    """One request per target, read whole: 200 and (streams) the number of content chunks; raises otherwise."""
    marker = DOORS[stream][4] if isinstance(stream, str) and stream in DOORS else b'"delta":{"content"'
    stream = stream != "chat" if isinstance(stream, str) else stream
    counts = {}
    for name, (url, raw) in reqs.items():
        conn = Connection(url)
        try:
            status, body = conn.fetch(raw)
        finally:
            conn.close()
        if status != 200:
            raise RuntimeError(f"{name} answered {status}: {body[:300]!r}")
        if stream:
            counts[name] = body.count(marker)
            if counts[name] != STREAM_CHUNKS:
                raise RuntimeError(f"{name} streamed {counts[name]} content chunks, expected {STREAM_CHUNKS}")
    return counts


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary_ms(values_ns: list[int]) -> dict[str, float]:
    ms = [v / 1e6 for v in values_ns]
    return {"p50": round(pct(ms, 0.50), 4), "p99": round(pct(ms, 0.99), 4), "mean": round(statistics.fmean(ms), 4)}


def latency(reqs: dict[str, tuple[str, bytes]], count: int, warmup: int, stream: bool) -> dict:
    """Concurrency 1, targets interleaved request by request, the order rotating each round."""
    conns = {name: Connection(url) for name, (url, _) in reqs.items()}
    totals: dict[str, list[int]] = {n: [] for n in TARGETS}
    firsts: dict[str, list[int]] = {n: [] for n in TARGETS}
    errors = dict.fromkeys(TARGETS, 0)
    try:
        for i in range(warmup + count):
            shift = i % len(TARGETS)
            for name in TARGETS[shift:] + TARGETS[:shift]:
                status, first_ns, total_ns = conns[name].send(reqs[name][1])
                if status != 200:
                    errors[name] += 1
                if i >= warmup:
                    totals[name].append(total_ns)
                    firsts[name].append(first_ns)
    finally:
        for conn in conns.values():
            conn.close()
    lat = {name: summary_ms(totals[name]) for name in TARGETS}
    added = {name: {q: round(lat[name][q] - lat["direct"][q], 4) for q in ("p50", "p99")} for name in PROXIES}
    out = {
        "latency_ms": lat,
        "added_ms": added,
        "added_p50_ratio": _ratio(added["gateway"]["p50"], added["floor"]["p50"]),
        "added_p50_ratio_to_lean": _ratio(added["gateway"]["p50"], added["lean"]["p50"]),
        "lean_added_p50_ratio": _ratio(added["lean"]["p50"], added["floor"]["p50"]),
        "errors": errors,
        "requests": count,
    }
    if stream:  # a stream's first content reaches the client before its end
        out["first_byte_ms"] = {name: summary_ms(firsts[name]) for name in TARGETS}
    return out


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


def throughput(stack: Stack, reqs: dict[str, tuple[str, bytes]], gen: LoadGenerator, rounds: int,
               duration: float) -> dict:
    """Rounds alternating the targets at ``gen.connections`` connections; medians of req/s."""
    servers = {"direct": stack.mock, "floor": stack.floor, "lean": stack.lean, "gateway": stack.gateway}
    rps: dict[str, list[float]] = {n: [] for n in TARGETS}
    cpu_us: dict[str, list[float]] = {n: [] for n in TARGETS}
    errors = dict.fromkeys(TARGETS, 0)
    for name in TARGETS:  # unmeasured: fresh connections, pools and caches on every path first
        warm = gen.run(*reqs[name], 1.0)
        if name == "gateway":
            stack.gateway_requests += warm["requests"]
    for r in range(rounds):
        shift = r % len(TARGETS)
        for name in TARGETS[shift:] + TARGETS[:shift]:
            url, raw = reqs[name]
            before = cpu_seconds(servers[name].pid)
            result = gen.run(url, raw, duration)
            used = cpu_seconds(servers[name].pid) - before
            rps[name].append(round(result["rps"], 1))
            errors[name] += result["errors"]
            cpu_us[name].append(used / result["requests"] * 1e6 if result["requests"] else 0.0)
            if name == "gateway":
                stack.gateway_requests += result["requests"]
    med = {name: round(statistics.median(rps[name]), 1) for name in TARGETS}
    return {
        "throughput_rps": med,
        "throughput_rounds": rps,
        "throughput_ratio": _ratio(med["gateway"], med["floor"]),
        "throughput_ratio_to_lean": _ratio(med["gateway"], med["lean"]),
        "lean_throughput_ratio": _ratio(med["lean"], med["floor"]),
        "throughput_errors": errors,
        "cpu_us_per_request": {name: round(statistics.median(cpu_us[name]), 1) for name in TARGETS},
        "connections": gen.connections,
        "round_seconds": duration,
    }


def run_workers(stack: Stack, workers: int, args: argparse.Namespace, gen: LoadGenerator) -> dict:
    stack.start_proxies(workers)
    out: dict = {}
    consoles = Consoles(stack.gateway.url, stack.admin_key, args.consoles) if args.consoles else None
    try:
        for mode in args.modes:
            stream = mode != "chat"
            reqs = requests_for(stack, mode)
            chunks = verify(reqs, mode)
            log(f"workers={workers} {mode}: latency ({args.requests} x 3 interleaved)")
            result = latency(reqs, args.requests, args.warmup, stream)
            stack.gateway_requests += args.requests + args.warmup + 1
            log(f"workers={workers} {mode}: throughput ({args.rounds} rounds x {args.duration}s x 3)")
            result.update(throughput(stack, reqs, gen, args.rounds, args.duration))
            if stream:
                result["content_chunks"] = chunks
            out[mode] = result
        out["gateway_rss_mb"] = worker_rss_mb(stack.gateway.pid)
        out["gateway_requests_served"] = stack.gateway_requests
    finally:
        if consoles is not None:
            out["consoles"] = consoles.stop()
        stack.stop_proxies()
    return out


def memory(stack: Stack, args: argparse.Namespace) -> dict:
    """Drive ``--memory-requests`` through the gateway (half chat, half streams per tenth); RSS at checkpoints.

    Uses the Python generator whatever ``--loadgen`` says: it stops after an exact number of answers.
    """
    gen = PythonLoad(args.connections, args.loadgen_threads)
    stack.start_proxies(args.memory_workers, floor=False)
    try:
        reqs = [requests_for(stack, False)["gateway"], requests_for(stack, True)["gateway"]]
        verify({"gateway": reqs[0]}, False)
        total = errors = 0
        goal = args.memory_requests
        step = max(1000, goal // 10)
        checkpoints = sorted({*range(step, goal, step), goal // 2, goal} - {0})
        samples = [{"requests": 0, "rss_mb": worker_rss_mb(stack.gateway.pid), "rps": None}]
        for checkpoint in checkpoints:
            started, done_before = time.perf_counter(), total
            half_way = total + (checkpoint - total) // 2
            for (url, raw), upto in zip(reqs, (half_way, checkpoint)):  # chat, then streams
                if upto > total:
                    result = gen.run(url, raw, 120.0, limit=upto - total)
                    total += result["requests"]
                    errors += result["errors"]
            rps = round((total - done_before) / (time.perf_counter() - started), 1)
            samples.append({"requests": total, "rss_mb": worker_rss_mb(stack.gateway.pid), "rps": rps})
            log(f"memory: {total} requests, rss {samples[-1]['rss_mb']} MB, {rps} req/s since the last sample")
    finally:
        stack.stop_proxies()
    half = next(x for x in samples if x["requests"] >= args.memory_requests // 2)
    last = samples[-1]
    growth = [round(b - a, 2) for a, b in zip(half["rss_mb"], last["rss_mb"])]
    return {
        "workers": args.memory_workers,
        "requests": total,
        "errors": errors,
        "samples": samples,
        "rss_mb_at_half": half,
        "rss_mb_at_end": last,
        "growth_mb_half_to_end": growth,
        "rss_mb_max": RSS_MB_MAX,
        "rss_ok": all(v < RSS_MB_MAX for v in last["rss_mb"]),
        # RSS moves by allocator pages; growth under 1 MB between the checkpoints counts as none
        "no_growth_ok": all(g < 1.0 for g in growth),
    }


def compare_loadgens(stack: Stack, args: argparse.Namespace) -> dict:
    """Each available generator against each target (one worker, chat): req/s and the generator's own CPU."""
    options: list[LoadGenerator] = []
    if shutil.which("wrk"):
        wrk = shutil.which("wrk")
        options += [WrkLoad(wrk, args.connections, 1), WrkLoad(wrk, args.connections, 2)]
    options += [PythonLoad(args.connections, 1), PythonLoad(args.connections, 2)]
    stack.start_proxies(1)
    out: dict = {}
    try:
        reqs = requests_for(stack, False)
        verify(reqs, False)
        for gen in options:
            row = {}
            for name in TARGETS:
                url, raw = reqs[name]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                result = gen.run(url, raw, args.duration)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                row[name] = {"rps": round(result["rps"], 1), "errors": result["errors"],
                             "loadgen_cpu_us_per_request": round(used / max(1, result["requests"]) * 1e6, 1)}
            out[gen.describe()] = row
            log(f"loadgen {gen.describe()}: {row}")
    finally:
        stack.stop_proxies()
    return out


def busy_cpus(seconds: float = 1.0) -> float:
    """How many CPUs were busy (all processes) over ``seconds``: the box should be near 0 before a run."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields[:8]) - idle, sum(fields[:8])

    try:
        busy0, total0 = sample()
        time.sleep(seconds)
        busy1, total1 = sample()
    except OSError:
        return -1.0
    return round((busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1), 2)


def open_report(machine: dict, log: Callable[[str], None]) -> dict:
    """A benchmark's report: the machine, and how busy its CPUs were before the run (warned about when busy)."""
    report: dict = {"machine": machine}
    machine["busy_cpus_before"] = busy_cpus()
    if machine["busy_cpus_before"] > 0.25:
        log(f"warning: {machine['busy_cpus_before']} CPUs were busy before the run: figures will be noisy")
    return report


def close_report(report: dict, args: argparse.Namespace, started: float) -> None:
    """The report's end (the CPUs' business after, the settings, the run's length), printed as one JSON document
    on stdout and written to ``--output`` when given."""
    report["machine"]["busy_cpus_after"] = busy_cpus()
    report["settings"] = {k: v for k, v in vars(args).items() if k != "output"}
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    text = msgspec.json.format(msgspec.json.encode(report), indent=2).decode()
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text, flush=True)


def machine(gen: LoadGenerator) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)), "cpu": cpu,
            "python": platform.python_version(), "platform": platform.platform(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "loadgen": gen.describe()}


def verdict(results: dict) -> dict:
    ratios = [m["added_p50_ratio"] for w in results.values() for k, m in w.items() if isinstance(m, dict)
              and "added_p50_ratio" in m]
    tputs = [m["throughput_ratio"] for w in results.values() for k, m in w.items() if isinstance(m, dict)
             and "throughput_ratio" in m]
    rss = [v for w in results.values() for v in w.get("gateway_rss_mb", [])]
    return {
        "added_p50_ratio_max": ADDED_P50_RATIO_MAX,
        "added_p50_ratio_ok": all(r is not None and r <= ADDED_P50_RATIO_MAX for r in ratios),
        "throughput_ratio_min": THROUGHPUT_RATIO_MIN,
        "throughput_ratio_ok": all(r is not None and r >= THROUGHPUT_RATIO_MIN for r in tputs),
        "rss_mb_max": RSS_MB_MAX,
        "rss_ok": all(v < RSS_MB_MAX for v in rss),
    }


def log(message: str) -> None:
    print(f"[overhead {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2", help="worker counts of floor and gateway to measure (default 1,2)")
    p.add_argument("--modes", default="chat,stream", help="chat, stream, responses, messages (default chat,stream)")
    p.add_argument("--requests", type=int, default=3000, help="measured latency requests per target and mode")
    p.add_argument("--warmup", type=int, default=300, help="unmeasured latency requests per target first")
    p.add_argument("--rounds", type=int, default=5, help="throughput rounds (each runs every target once)")
    p.add_argument("--duration", type=float, default=2.0, help="seconds per throughput round and target")
    p.add_argument("--connections", type=int, default=32, help="concurrent connections for throughput")
    p.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto",
                   help="throughput client: wrk (when installed) or the multi-process raw-socket generator")
    p.add_argument("--loadgen-threads", type=int, default=1,
                   help="wrk threads / generator processes (1 leaves the most CPU to the servers on 2 cores)")
    p.add_argument("--memory", action="store_true", help="only the memory check: RSS at 50%% and 100%% of "
                   "--memory-requests through one gateway worker")
    p.add_argument("--memory-requests", type=int, default=100_000)
    p.add_argument("--memory-workers", type=int, default=1)
    p.add_argument("--compare-loadgens", action="store_true",
                   help="only compare the throughput clients (wrk 1/2 threads, Python 1/2 processes)")
    p.add_argument("--gateway-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for the gateway (repeatable), e.g. GATEWAY_OTLP_ENDPOINT=... to price tracing; "
                   "the acceptance figures use the defaults")
    p.add_argument("--consoles", type=int, default=0,
                   help="live-log console connections (GET /v1/logs/stream) kept open during each measurement")
    p.add_argument("--output", help="also write the JSON here")
    args = p.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",") if w.strip()]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if any("=" not in item for item in args.gateway_env):
        p.error("--gateway-env takes NAME=VALUE")
    args.gateway_env = dict(item.split("=", 1) for item in args.gateway_env)
    if not set(args.modes) <= set(MODES):
        p.error(f"--modes takes {', '.join(MODES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gen = pick_loadgen(args.loadgen, args.connections, args.loadgen_threads)
    started = time.monotonic()
    report = open_report(machine(gen), log)
    with Stack(log=log, gateway_env=args.gateway_env) as stack:
        stack.scenario(STREAM_SCENARIO, [{"chunks": STREAM_CHUNKS}])
        if args.compare_loadgens:
            report["loadgen_comparison"] = compare_loadgens(stack, args)
        elif args.memory:
            report["memory"] = memory(stack, args)
        else:
            results = {str(w): run_workers(stack, w, args, gen) for w in args.workers}
            report["workers"] = results
            report["verdict"] = verdict(results)
    close_report(report, args, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
