"""The gateway's cost on WebSocket sessions: a Realtime round trip and a Responses WebSocket turn against the mock
called directly and through the gateway, and many concurrent Realtime sessions on one worker with their memory.

Starts ``gateway mock-upstream`` (1 worker) and ``gateway serve`` (1 worker, default settings, private loopback
hosts allowed, an admin key) on free loopback ports; the gateway reaches the mock as vendorA through
``x-gateway-config`` (``custom_host`` = the mock's ``/v1``). Prints one JSON document on stdout (progress and a
table on stderr). Wire facts relied on (``gateway_mock/realtime.py``, ``responses_ws.py``):

- Realtime: ``GET /v1/realtime?model=<m>`` upgraded; the first server event is ``session.created``; a
  ``response.create`` with ``response: {"conversation": "none", "output_modalities": ["text"]}`` (out of band, so
  the conversation does not grow turn after turn) is answered at once with a text reply ending in ``response.done``.
- Responses WebSocket mode: ``GET /v1/responses`` upgraded, no greeting; one ``response.create`` frame (the POST
  body's fields) is answered with the stream's events ending in ``response.completed``.
- Directly the mock takes ``Authorization: Bearer <any key>``; through the gateway the gateway key goes in
  ``x-gateway-api-key``.

Parts:

- ``round_trip``: one session per path, the paths interleaved turn by turn (order swapping each round); the time
  from sending ``response.create`` to its final event; p50/p99 of each and added = gateway - direct; the CPU time
  the gateway's worker spent per message it relayed (the turns' client events and provider events, warm-up
  included: the whole stretch is metered); how many CPUs other work on the machine kept busy meanwhile.
- ``--floor`` adds the path ``floor``: ``bench/realtime_floor.py``, a bare Granian + aiohttp relay with nothing of
  the gateway's (its CPU per message too), so gateway - floor is what the gateway's own work costs and floor -
  direct what the server and client libraries cost; and, in ``sessions``, the worker RSS per open session of that
  relay and of a bare Granian app holding the client's socket alone (``floor_sessions``), each on a fresh worker.
- ``sessions``: ``--sessions`` concurrent Realtime sessions through the gateway (opened at most
  ``--open-concurrency`` at a time), each doing one turn and then held open; failures, seconds to open all, the
  worker's RSS (``/proc``) before, with all open and after closing them all, and the RSS per session (from the
  first wave). ``--waves`` (2) repeats it: a second wave that grows the RSS no further tells memory the allocator
  keeps for reuse from memory lost. Last, the sessions the gateway's ``/metrics`` still counts open (0 expected).

Quick run: ``python bench/realtime.py --quick`` (50 turns, 50 sessions; about 10 s).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import close_report, open_report, summary_ms
from procs import ADMIN_KEY, CHAT_PROBE, CpuMeter, Processes, Server, http_ok, worker_pids, worker_rss_mb

BENCH = Path(__file__).resolve().parent

PATHS = ("direct", "gateway")
#: the servers whose workers relay (their CPU per message is reported)
RELAYS = ("gateway", "floor")
KINDS = ("realtime", "responses")
MODEL = "gpt-realtime"
#: kind -> (the URL path, the event sent each turn, the type of the turn's last event)
TURNS: dict[str, tuple[str, dict[str, Any], str]] = {
    "realtime": (f"/v1/realtime?model={MODEL}",
                 {"type": "response.create", "response": {"conversation": "none", "output_modalities": ["text"]}},
                 "response.done"),
    "responses": ("/v1/responses", {"type": "response.create", "model": "gpt-bench", "input": "hello there",
                                    "store": False}, "response.completed"),
}
LIMITS = {"turns": 100_000, "warmup": 10_000, "sessions": 5_000, "open_concurrency": 1_000, "waves": 10,
          "timeout": 600.0}
#: seconds one turn or one opening may take before it counts as a failure
STEP_TIMEOUT = 30.0
MAX_MESSAGE = 16 * 1024 * 1024


class Stack(Processes):
    """The mock and the gateway, started at once and stopped together."""

    def __init__(self, floor: bool = False) -> None:
        super().__init__("gw-bench-realtime-")
        self.floor = floor

    def start(self) -> None:
        mock, gateway = self.add_mock(), self.add_gateway()
        mock.wait_ready(functools.partial(http_ok, mock.url + "/v1/chat/completions", CHAT_PROBE))
        if self.floor:
            upstream = ["--upstream", _ws(mock.url)]
            for name, extra in (("floor", upstream), ("floor_hold", ["--hold"])):
                self.add(name, [sys.executable, str(BENCH / "realtime_floor.py"), *extra])
        gateway.wait_ready(functools.partial(http_ok, gateway.url + "/ready"))
        for name in ("floor", "floor_hold") if self.floor else ():
            self.servers[name].wait_ready(functools.partial(http_ok, self.servers[name].url + "/"))
        self.wait_workers(self.servers)

    @property
    def mock(self) -> Server:
        return self.servers["mock"]

    @property
    def gateway(self) -> Server:
        return self.servers["gateway"]

    @property
    def paths(self) -> tuple[str, ...]:
        return (*PATHS, "floor") if self.floor else PATHS

    def target(self, path: str, kind: str) -> tuple[str, dict[str, str]]:
        """(ws URL, headers) of a session of ``kind`` on ``path``."""
        suffix = TURNS[kind][0]
        if path == "direct":
            return _ws(self.mock.url) + suffix, {"authorization": "Bearer sk-bench"}
        if path in ("floor", "floor_hold"):
            return _ws(self.servers[path].url) + suffix, {"authorization": "Bearer sk-bench"}
        config = msgspec.json.encode({"provider": "vendorA", "api_key": "sk-bench",
                                      "custom_host": f"{self.mock.url}/v1"}).decode()
        return _ws(self.gateway.url) + suffix, {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": config}

def _ws(http_url: str) -> str:
    return "ws" + http_url.removeprefix("http")


async def open_session(url: str, headers: dict[str, str], kind: str) -> websockets.ClientConnection:
    """Open a session; a Realtime one is read up to its ``session.created``."""
    ws = await websockets.connect(url, additional_headers=headers, max_size=MAX_MESSAGE, open_timeout=STEP_TIMEOUT)
    if kind == "realtime":
        first = msgspec.json.decode(await ws.recv())
        if first.get("type") != "session.created":
            await ws.close()
            raise RuntimeError(f"the session opened with {first!r:.300}")
    return ws


async def turn(ws: websockets.ClientConnection, event: bytes, last: str) -> tuple[int, int]:
    """Send one ``response.create`` and read up to the turn's last event; the nanoseconds it took and the messages
    it was (the one sent and the events received)."""
    started = time.perf_counter_ns()
    await ws.send(event.decode())
    messages = 1
    while True:
        doc = msgspec.json.decode(await ws.recv())
        messages += 1
        kind = doc.get("type")
        if kind == last:
            return time.perf_counter_ns() - started, messages
        if kind == "error":
            raise RuntimeError(f"the turn was answered with an error: {doc!r:.500}")


async def round_trip(stack: Stack, kind: str, count: int, warmup: int) -> dict:
    """One session per path, the paths interleaved turn by turn, the order swapping each round."""
    _, event, last = TURNS[kind]
    frame = msgspec.json.encode(event)
    paths = stack.paths
    sockets = {path: await open_session(*stack.target(path, kind), kind) for path in paths}
    totals: dict[str, list[int]] = {p: [] for p in paths}
    messages = dict.fromkeys(paths, 0)
    relays = [p for p in paths if p in RELAYS]
    meter = CpuMeter({"mock": stack.mock.pid, **{p: stack.servers[p].pid for p in relays}})
    try:
        for i in range(warmup + count):
            for path in paths if i % 2 == 0 else paths[::-1]:
                took, relayed = await _within(turn(sockets[path], frame, last), STEP_TIMEOUT)
                messages[path] += relayed
                if i >= warmup:
                    totals[path].append(took)
    finally:
        used, others = meter.stop()
        for ws in sockets.values():
            await ws.close()
    lat = {path: summary_ms(totals[path]) for path in paths}
    out = {"latency_ms": lat, "added_ms": {q: round(lat["gateway"][q] - lat["direct"][q], 4) for q in ("p50", "p99")},
           "turns": count, "messages_per_turn": round(messages["gateway"] / (warmup + count), 1),
           "cpu_us_per_message": {p: round(used[p] * 1e6 / max(1, messages[p]), 1) for p in relays},
           "other_busy_cpus": others}
    if "floor" in paths:
        out["added_over_floor_ms"] = {q: round(lat["gateway"][q] - lat["floor"][q], 4) for q in ("p50", "p99")}
    return out


async def _within(awaitable: Any, seconds: float) -> Any:
    """The awaitable's result, or TimeoutError after ``seconds`` (a bench-side bound, not gateway code)."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def many_sessions(stack: Stack, count: int, concurrency: int, waves: int) -> dict:
    """``waves`` times: ``count`` Realtime sessions through the gateway, each one turn then held, then all closed;
    the worker's memory before, with all open and after each wave (a second wave tells memory kept for reuse from
    memory lost), and the sessions the gateway still counts open after the last."""
    worker = worker_pids(stack.gateway.pid)[0]
    rss_before = _rss(worker)
    rounds = [await _wave(stack, "gateway", worker, count, concurrency) for _ in range(waves)]
    first = rounds[0]
    return {"sessions": count, "open_concurrency": concurrency, "failures": sum(w["failures"] for w in rounds),
            "rss_mb_before": rss_before, "waves": rounds,
            "rss_kb_per_session": round((first["rss_mb_all_open"] - rss_before) * 1024 / max(1, first["opened"]), 1),
            "gateway_open_after_close": open_sessions(stack)}


async def floor_sessions(stack: Stack, count: int, concurrency: int) -> dict:
    """One wave of ``count`` sessions on each floor (fresh workers): the RSS per open session of a bare relay and of
    Granian holding the client's socket alone."""
    out = {}
    for path in ("floor", "floor_hold"):
        worker = worker_pids(stack.servers[path].pid)[0]
        before = _rss(worker)
        wave = await _wave(stack, path, worker, count, concurrency)
        out[path] = {**wave, "rss_mb_before": before,
                     "rss_kb_per_session": round((wave["rss_mb_all_open"] - before) * 1024 / max(1, wave["opened"]),
                                                 1)}
    return out


async def _wave(stack: Stack, path: str, worker: int, count: int, concurrency: int) -> dict:
    url, headers = stack.target(path, "realtime")
    _, event, last = TURNS["realtime"]
    frame = msgspec.json.encode(event)
    gate = asyncio.Semaphore(concurrency)
    failures: dict[str, int] = {}

    def failed(exc: BaseException) -> None:
        failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1

    async def one() -> websockets.ClientConnection | None:
        async with gate:
            try:
                ws = await _within(open_session(url, headers, "echo" if path == "floor_hold" else "realtime"),
                                   STEP_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - counted by kind, the run goes on
                failed(exc)
                return None
            try:
                if path == "floor_hold":  # one frame each way, as a turn would
                    await ws.send(frame.decode())
                    await _within(ws.recv(), STEP_TIMEOUT)
                else:
                    await _within(turn(ws, frame, last), STEP_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                failed(exc)
                await ws.close()
                return None
            return ws

    started = time.perf_counter()
    opened = [ws for ws in await asyncio.gather(*(one() for _ in range(count))) if ws is not None]
    open_s = time.perf_counter() - started
    await asyncio.sleep(1.0)  # the worker settles (buffers handed back) before its memory is read
    rss_open = _rss(worker)
    still_open = sum(1 for ws in opened if ws.state is websockets.State.OPEN)
    started = time.perf_counter()
    await asyncio.gather(*(ws.close() for ws in opened))
    close_s = time.perf_counter() - started
    await asyncio.sleep(2.0)
    return {"opened": len(opened), "still_open_at_peak": still_open, "failures": sum(failures.values()),
            "failure_kinds": failures, "open_all_s": round(open_s, 2), "close_all_s": round(close_s, 2),
            "rss_mb_all_open": rss_open, "rss_mb_after_close": _rss(worker)}


def open_sessions(stack: Stack) -> int | None:
    """Realtime sessions the gateway counts open (``gateway_realtime_sessions_total``: opened less ended), or None
    when ``/metrics`` does not say."""
    req = urllib.request.Request(stack.gateway.url + "/metrics", headers={"x-gateway-api-key": ADMIN_KEY})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    counts = {"opened": 0.0, "ended": 0.0}
    for line in text.splitlines():
        if line.startswith("gateway_realtime_sessions_total{"):
            for event in counts:
                if f'event="{event}"' in line:
                    counts[event] += float(line.rsplit(" ", 1)[1])
    return round(counts["opened"] - counts["ended"]) if counts["opened"] else None


def _rss(pid: int) -> float:
    """The worker's resident memory, MB (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def run(args: argparse.Namespace) -> dict:
    out: dict = {}
    with Stack(args.floor) as stack:
        log("started the mock and the gateway (1 worker)")
        for kind in KINDS:
            log(f"{kind}: round trips ({args.warmup} + {args.turns} turns x 2 interleaved)")
            out[kind] = await round_trip(stack, kind, args.turns, args.warmup)
        log(f"sessions: {args.sessions} concurrent Realtime sessions through the gateway")
        out["sessions"] = await many_sessions(stack, args.sessions, args.open_concurrency, args.waves)
        if args.floor:
            log(f"floor sessions: {args.sessions} on a bare relay, then on Granian alone")
            out["floor_sessions"] = await floor_sessions(stack, args.sessions, args.open_concurrency)
        out["gateway_rss_mb"] = worker_rss_mb(stack.gateway.pid)
    return out


def log(message: str) -> None:
    print(f"[realtime {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    return {"nproc": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)), "cpu": cpu,
            "python": sys.version.split()[0], "websockets": metadata.version("websockets"),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--turns", type=int, default=2000, help="measured turns per path and kind")
    p.add_argument("--warmup", type=int, default=200, help="unmeasured turns per path first")
    p.add_argument("--sessions", type=int, default=1000, help="concurrent Realtime sessions through the gateway")
    p.add_argument("--open-concurrency", type=int, default=100, help="sessions being opened at once, at most")
    p.add_argument("--waves", type=int, default=2, help="times the sessions are opened, held and closed")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds the whole run may take")
    p.add_argument("--floor", action="store_true",
                   help="also a bare Granian + aiohttp relay (bench/realtime_floor.py) and Granian alone")
    p.add_argument("--quick", action="store_true", help="a smoke run: 10 + 50 turns, 50 sessions")
    p.add_argument("--output", help="also write the JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.warmup, args.sessions = 50, 10, 50
    for name, most in LIMITS.items():
        value, least = getattr(args, name), 0 if name == "warmup" else 1
        if not least <= value <= most:
            p.error(f"--{name.replace('_', '-')} must be between {least} and {most:g}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    report = open_report(machine(), log)
    try:
        report["results"] = asyncio.run(_bounded(run(args), args.timeout))
    except TimeoutError:
        log(f"the run took longer than --timeout {args.timeout:g}s")
        return 1
    print_table(report)
    close_report(report, args, started)
    return 0


async def _bounded(coro: Any, seconds: float) -> Any:
    return await _within(coro, seconds)


def print_table(report: dict) -> None:
    """The figures as tables on stderr (stdout stays one JSON document)."""
    res = report["results"]
    rows = ["| turn | p50 direct / gateway | p99 direct / gateway | added p50 / p99 | CPU a message "
            "| other work, CPUs |", "|---|---|---|---|---|---|"]
    for kind in KINDS:
        r = res[kind]
        lat, added, cpu = r["latency_ms"], r["added_ms"], r["cpu_us_per_message"]
        cpus = " / ".join(f"{path} {us:.0f} us" for path, us in cpu.items())
        rows.append(f"| {kind} | {lat['direct']['p50']:.3f} / {lat['gateway']['p50']:.3f} ms | "
                    f"{lat['direct']['p99']:.3f} / {lat['gateway']['p99']:.3f} ms | {added['p50']:.3f} / "
                    f"{added['p99']:.3f} ms | {cpus} | {r['other_busy_cpus']:.2f} |")
        if "floor" in lat:
            over = r["added_over_floor_ms"]
            rows.append(f"| {kind}, floor | p50 {lat['floor']['p50']:.3f} ms | p99 {lat['floor']['p99']:.3f} ms | "
                        f"gateway over floor {over['p50']:.3f} / {over['p99']:.3f} ms | | |")
    s = res["sessions"]
    rows += ["", "| wave | sessions | failures | open all | RSS before / all open / after close | per session |",
             "|---|---|---|---|---|---|"]
    for n, w in enumerate(s["waves"], 1):
        rows.append(f"| {n} | {w['opened']} of {s['sessions']} | {w['failures']} | {w['open_all_s']:.1f} s | "
                    f"{s['rss_mb_before']} / {w['rss_mb_all_open']} / {w['rss_mb_after_close']} MB | "
                    + (f"{s['rss_kb_per_session']:.0f} KB |" if n == 1 else "- |"))
    for path, w in (res.get("floor_sessions") or {}).items():
        rows.append(f"| {path} | {w['opened']} of {s['sessions']} | {w['failures']} | {w['open_all_s']:.1f} s | "
                    f"{w['rss_mb_before']} / {w['rss_mb_all_open']} / {w['rss_mb_after_close']} MB | "
                    f"{w['rss_kb_per_session']:.0f} KB |")
    rows.append(f"\nsessions the gateway counts open after the last close: {s['gateway_open_after_close']}")
    print("\n".join(rows), file=sys.stderr, flush=True)

if __name__ == "__main__":
    sys.exit(main())
