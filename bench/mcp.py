"""The MCP gateway's cost on a ``tools/call``: the same SDK server called directly and through ``/v1/mcp/<slug>``,
interleaved in one run.

Starts two MCP servers of the official ``mcp`` SDK (the tests' server, ``python -m tests.support.mcp_server_app``:
an ``MCPServer`` on uvicorn) and ``gateway serve`` (1 worker, default settings, private loopback hosts allowed) on
free loopback ports, registers the servers (``POST /v1/mcp-servers``, which pins their tools) and prints one JSON
document on stdout (progress on stderr). Two answer forms, each against its own server:

- ``json``: ``tools/call`` of ``add`` on a server started with ``json_response=True``: one ``application/json``
  answer;
- ``sse``: ``tools/call`` of ``slow`` (``n=1, delay=0``) with a ``progressToken`` on a server with SSE answers: a
  ``text/event-stream`` of one ``notifications/progress`` event and the result, relayed as a stream.

Every request is the 2026-07-28 form (stateless): one POST whose ``params._meta`` carries the protocol envelope,
with the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers (``gateway/mcp/wire.py``); through the
gateway it also carries ``Authorization: Bearer <gateway key>``. For each form:

- latency at concurrency 1: one persistent keep-alive socket per path (prebuilt request bytes), the two paths
  interleaved request by request with the order swapping each round; p50/p99 of each and added = gateway - direct;
  how many CPUs other work on the machine kept busy meanwhile;
- throughput: ``--connections`` (16) connections for ``--duration`` s per round (``wrk`` when installed, else the
  raw-socket generator), rounds alternating the paths, the median of the rounds; the CPU time per call of the
  gateway's processes and of the MCP server's (from ``/proc``), and how many CPUs processes outside the run kept
  busy during each round (other work on the machine: a round with any is noise).

``--profile FILE`` also records the gateway worker with ``py-spy`` (collapsed Python stacks) under one more round
of the ``json`` load through the gateway. Quick run: ``python bench/mcp.py --quick`` (about 15 s).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import LoadGenerator, pick_loadgen
from overhead import close_report, machine, open_report, summary_ms
from procs import ADMIN_KEY, CpuMeter, Processes, Server, http_ok, worker_pids, worker_rss_mb
from rawhttp import Connection, build_request

PATHS = ("direct", "gateway")
FORMS = ("json", "sse")
VERSION = "2026-07-28"
#: form -> (the tool called, its arguments, whether the call asks for progress, what its result's text is)
CALLS = {"json": ("add", {"a": 2, "b": 3}, False, "5"), "sse": ("slow", {"n": 1, "delay": 0}, True, "done")}
#: form -> the content type each path must answer with
CONTENT_TYPES = {"json": "application/json", "sse": "text/event-stream"}
LIMITS = {"requests": 100_000, "warmup": 10_000, "rounds": 20, "duration": 60.0, "connections": 256}


class Stack(Processes):
    """The two MCP servers and the gateway, started at once and stopped together."""

    def __init__(self) -> None:
        super().__init__("gw-bench-mcp-")

    def start(self) -> None:
        for form in FORMS:
            cmd = [sys.executable, "-m", "tests.support.mcp_server_app", "--name", f"bench-{form}"]
            self.add(form, cmd + (["--json-response"] if form == "json" else []))
        gateway = self.add_gateway()
        for form in FORMS:
            self.servers[form].wait_ready(functools.partial(http_ok, self.servers[form].url + "/control"))
        gateway.wait_ready(functools.partial(http_ok, gateway.url + "/ready"))
        self.wait_workers(["gateway"])
        for form in FORMS:
            register(gateway.url, f"bench-{form}", self.servers[form].url + "/mcp")

    @property
    def gateway(self) -> Server:
        return self.servers["gateway"]


def register(gateway_url: str, slug: str, url: str) -> None:
    """``POST /v1/mcp-servers`` with the admin key (the gateway reads and pins the server's tools)."""
    body = msgspec.json.encode({"slug": slug, "url": url})
    req = urllib.request.Request(gateway_url + "/v1/mcp-servers", data=body, method="POST", headers={
        "content-type": "application/json", "x-gateway-api-key": ADMIN_KEY})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"registering {slug} answered {exc.code}: {exc.read()[:500]!r}") from None


def requests_for(stack: Stack, form: str) -> dict[str, tuple[str, bytes]]:
    """Path -> (url, exact request bytes) of the form's ``tools/call`` in the 2026-07-28 form."""
    tool, arguments, progress, _ = CALLS[form]
    meta: dict[str, object] = {"io.modelcontextprotocol/protocolVersion": VERSION,
                               "io.modelcontextprotocol/clientCapabilities": {},
                               "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}
    if progress:
        meta["progressToken"] = 1
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": tool, "arguments": arguments, "_meta": meta}})
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": tool}
    urls = {"direct": (stack.servers[form].url + "/mcp", headers),
            "gateway": (f"{stack.gateway.url}/v1/mcp/bench-{form}", {**headers,
                                                                     "authorization": f"Bearer {ADMIN_KEY}"})}
    return {path: (url, build_request(url, body, extra)) for path, (url, extra) in urls.items()}


def verify(reqs: dict[str, tuple[str, bytes]], form: str) -> None:
    """One call per path, read whole: 200, the form's content type, the tool's result (and, for ``sse``, the
    progress event before it); raises otherwise."""
    expected = CALLS[form][3]
    for path, (url, raw) in reqs.items():
        head, _, body = raw.partition(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:])
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=30) as resp:
                status, kind, answer = resp.status, resp.headers.get("content-type", ""), resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{path} ({form}) answered {exc.code}: {exc.read()[:500]!r}") from None
        messages = [msgspec.json.decode(line[5:]) for line in answer.splitlines() if line.startswith(b"data:")] \
            if form == "sse" else [msgspec.json.decode(answer)]
        result = messages[-1].get("result") if messages and isinstance(messages[-1], dict) else None
        texts = [c.get("text") for c in result.get("content", [])] if isinstance(result, dict) else []
        progressed = any(m.get("method") == "notifications/progress" for m in messages[:-1])
        if status != 200 or not kind.startswith(CONTENT_TYPES[form]) or texts != [expected] \
                or result.get("isError") or (form == "sse" and not progressed):  # type: ignore[union-attr]
            raise RuntimeError(f"{path} ({form}) answered {status} {kind}: {answer[:500]!r}")


def latency(reqs: dict[str, tuple[str, bytes]], count: int, warmup: int, pids: dict[str, int]) -> dict:
    """Concurrency 1, the paths interleaved request by request, the order swapping each round (``pids``: the
    servers', to tell other work on the machine from theirs)."""
    meter = CpuMeter(pids)
    conns = {path: Connection(url) for path, (url, _) in reqs.items()}
    totals: dict[str, list[int]] = {p: [] for p in PATHS}
    errors = dict.fromkeys(PATHS, 0)
    try:
        for i in range(warmup + count):
            for path in PATHS if i % 2 == 0 else PATHS[::-1]:
                status, _, total_ns = conns[path].send(reqs[path][1])
                if status != 200:
                    errors[path] += 1
                if i >= warmup:
                    totals[path].append(total_ns)
    finally:
        for conn in conns.values():
            conn.close()
    lat = {path: summary_ms(totals[path]) for path in PATHS}
    added = {q: round(lat["gateway"][q] - lat["direct"][q], 4) for q in ("p50", "p99")}
    return {"latency_ms": lat, "added_ms": added, "errors": errors, "requests": count,
            "other_busy_cpus_latency": meter.stop()[1]}


def throughput(stack: Stack, form: str, reqs: dict[str, tuple[str, bytes]], gen: LoadGenerator, rounds: int,
               duration: float) -> dict:
    """Rounds alternating the paths at ``gen.connections`` connections; medians of calls/s and of CPU per call."""
    server, gateway = stack.servers[form], stack.gateway
    rps: dict[str, list[float]] = {p: [] for p in PATHS}
    server_cpu: dict[str, list[float]] = {p: [] for p in PATHS}
    gateway_cpu: list[float] = []
    #: CPUs kept busy by processes outside the run during each round (other work on the machine: noise)
    other_cpus: dict[str, list[float]] = {p: [] for p in PATHS}
    errors = dict.fromkeys(PATHS, 0)
    for path in PATHS:  # unmeasured: connections, pools and caches warm on both paths first
        gen.run(*reqs[path], 1.0)
    for r in range(rounds):
        for path in PATHS if r % 2 == 0 else PATHS[::-1]:
            meter = CpuMeter({"server": server.pid, "gateway": gateway.pid})
            result = gen.run(*reqs[path], duration)
            used, others = meter.stop()
            calls = max(1, result["requests"])
            rps[path].append(round(result["rps"], 1))
            errors[path] += result["errors"]
            server_cpu[path].append(used["server"] / calls * 1e6)
            if path == "gateway":
                gateway_cpu.append(used["gateway"] / calls * 1e6)
            other_cpus[path].append(others)
        log(f"{form} round {r + 1}: " + ", ".join(f"{p} {rps[p][-1]:.0f}/s" for p in PATHS))
    med = {path: round(statistics.median(rps[path]), 1) for path in PATHS}
    return {
        "calls_per_s": med,
        "calls_per_s_rounds": rps,
        "gateway_vs_direct": round(med["gateway"] / med["direct"], 3) if med["direct"] else None,
        "throughput_errors": errors,
        "cpu_us_per_call": {"mcp_server_direct": round(statistics.median(server_cpu["direct"]), 1),
                            "mcp_server_via_gateway": round(statistics.median(server_cpu["gateway"]), 1),
                            "gateway": round(statistics.median(gateway_cpu), 1)},
        "other_busy_cpus_rounds": other_cpus,
        "connections": gen.connections,
        "round_seconds": duration,
    }


def profile(stack: Stack, reqs: dict[str, tuple[str, bytes]], gen: LoadGenerator, seconds: float, out: Path) -> dict:
    """``py-spy record`` (collapsed Python stacks, 500 Hz, without pausing the worker; idle samples left out) of the
    gateway worker under ``seconds`` of the load through the gateway; a failure is reported, not raised."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy (pip install py-spy)")
    worker = worker_pids(stack.gateway.pid)[0]
    cmd = [spy, "record", "--pid", str(worker), "--rate", "500", "--format", "raw", "--nonblocking",
           "--duration", str(max(1, round(seconds))), "--output", str(out)]
    spying = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    result = gen.run(*reqs["gateway"], seconds)
    _, err = spying.communicate(timeout=seconds + 60)
    if spying.returncode != 0:
        log(f"py-spy failed ({spying.returncode}): {err.decode(errors='replace')[-2000:]}")
        return {"error": err.decode(errors="replace")[-2000:]}
    return {"file": str(out), "worker_pid": worker, "calls_per_s": round(result["rps"], 1), "seconds": seconds}


def run(args: argparse.Namespace, gen: LoadGenerator) -> dict:
    out: dict = {}
    with Stack() as stack:
        log(f"started the MCP servers ({', '.join(FORMS)}) and the gateway (1 worker)")
        for form in args.forms:
            reqs = requests_for(stack, form)
            verify(reqs, form)
            log(f"{form}: latency ({args.warmup} + {args.requests} calls x 2 interleaved)")
            result = latency(reqs, args.requests, args.warmup,
                             {"server": stack.servers[form].pid, "gateway": stack.gateway.pid})
            log(f"{form}: throughput ({args.rounds} rounds x {args.duration}s x 2)")
            result.update(throughput(stack, form, reqs, gen, args.rounds, args.duration))
            out[form] = result
        if args.profile:
            log(f"profiling the gateway worker for {args.profile_seconds}s of json load")
            out["profile"] = profile(stack, requests_for(stack, "json"), gen, args.profile_seconds,
                                     Path(args.profile))
        out["gateway_rss_mb"] = worker_rss_mb(stack.gateway.pid)
    return out


def log(message: str) -> None:
    print(f"[mcp {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--forms", default="json,sse", help="answer forms to measure: json, sse (default both)")
    p.add_argument("--requests", type=int, default=2000, help="measured latency calls per path and form")
    p.add_argument("--warmup", type=int, default=200, help="unmeasured latency calls per path first")
    p.add_argument("--rounds", type=int, default=5, help="throughput rounds (each runs both paths once)")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per throughput round and path")
    p.add_argument("--connections", type=int, default=16, help="concurrent connections for throughput")
    p.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto",
                   help="throughput client: wrk (when installed) or the raw-socket generator")
    p.add_argument("--quick", action="store_true", help="a smoke run: 20 + 100 calls, 1 round of 1 s")
    p.add_argument("--profile", metavar="FILE", help="also record the gateway worker with py-spy into FILE")
    p.add_argument("--profile-seconds", type=float, default=10.0)
    p.add_argument("--output", help="also write the JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.warmup, args.rounds, args.duration = 100, 20, 1, 1.0
    args.forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    if not args.forms or not set(args.forms) <= set(FORMS):
        p.error(f"--forms takes {', '.join(FORMS)}")
    for name, most in LIMITS.items():
        value = getattr(args, name)
        if not (0 if name == "warmup" else 1) <= value <= most:
            p.error(f"--{name} must be between {0 if name == 'warmup' else 1} and {most}")
    if not 1 <= args.profile_seconds <= LIMITS["duration"]:
        p.error(f"--profile-seconds must be between 1 and {LIMITS['duration']:g}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gen = pick_loadgen(args.loadgen, args.connections, 1)
    started = time.monotonic()
    report = open_report(machine(gen), log)
    report["forms"] = run(args, gen)
    print_table(report)
    close_report(report, args, started)
    return 0


def print_table(report: dict) -> None:
    """The figures as a table on stderr (stdout stays one JSON document)."""
    rows = ["| form | p50 direct / gateway | added p50 / p99 | calls/s direct / gateway | gateway vs direct | "
            "CPU us/call gateway / server | other work, CPUs: latency / max of rounds |",
            "|---|---|---|---|---|---|---|"]
    for form in FORMS:
        r = report["forms"].get(form)
        if r is None:
            continue
        lat, added, cpu = r["latency_ms"], r["added_ms"], r["cpu_us_per_call"]
        rows.append(f"| {form} | {lat['direct']['p50']:.3f} / {lat['gateway']['p50']:.3f} ms | {added['p50']:.3f} / "
                    f"{added['p99']:.3f} ms | {r['calls_per_s']['direct']:,.0f} / {r['calls_per_s']['gateway']:,.0f}"
                    f" | {r['gateway_vs_direct']}x | {cpu['gateway']:.0f} / {cpu['mcp_server_direct']:.0f} | "
                    f"{r['other_busy_cpus_latency']:.2f} / "
                    f"{max(v for vs in r['other_busy_cpus_rounds'].values() for v in vs):.2f} |")
    print("\n".join(rows), file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
