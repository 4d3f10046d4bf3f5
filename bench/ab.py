"""Builds side by side: the gateway from two or more checkouts (or one checkout under other settings) beside the
floor proxy, alternated round by round in one run, so a change's cost or gain shows above this box's noise.

Each variant is ``NAME=CHECKOUT`` or ``NAME=CHECKOUT,SETTING=VALUE,...`` (e.g. ``before=../gw-before``,
``pure=.,GATEWAY_NO_EXTENSIONS=1``). Its ``gateway serve`` starts *in* its checkout: ``python -m gateway`` puts the
working directory ahead of ``PYTHONPATH`` on ``sys.path``, so a build started anywhere else would run that other
checkout's code instead (every variant would then measure the same thing). A checkout runs its compiled kernels when
they are built in place there (``python setup.py build_ext --inplace``), else their pure twins: the report lists
what each variant loaded (``/health`` ``speedups``) and the provider header each answered with, so a wrong setup
shows.

All variants and the floor run at once (idle ones cost nothing); ``--rounds`` rounds each run every target once, for
``--duration`` seconds at ``--connections`` connections (``wrk`` when installed, else the raw-socket generator), the
order rotating each round. Prints one JSON document (progress on stderr): per target the median req/s, its ratio to
the floor's, the median server CPU per request (all the server's processes) and the worker RSS after the run.

A setting's value ``@collector`` is the URL of a loopback OTLP/HTTP collector the run starts
(``bench/otlp_sink.py``), so the cost of trace export shows beside the default build:
``python bench/ab.py plain=. traced=.,GATEWAY_OTLP_ENDPOINT=@collector``; the report says how many spans it
received.

Quick run: ``python bench/ab.py compiled=. pure=.,GATEWAY_NO_EXTENSIONS=1 --rounds 1 --duration 1``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import pick_loadgen
from overhead import CHAT, STREAM_CHUNKS, STREAM_SCENARIO
from procs import BENCH, Server, Stack, cpu_seconds, worker_rss_mb
from rawhttp import build_request


def parse_variant(text: str) -> tuple[str, Path, dict[str, str]]:
    """``NAME=CHECKOUT[,SETTING=VALUE...]`` -> (name, checkout, settings)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=CHECKOUT[,SETTING=VALUE...]")
    checkout, *pairs = rest.split(",")
    path = Path(checkout).expanduser().resolve()
    if not (path / "gateway" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: {path} is not a gateway checkout")
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{text!r}: {pair!r} is not SETTING=VALUE")
        env[key] = value
    return name, path, env


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def _health(url: str) -> dict:
    with urllib.request.urlopen(url + "/health", timeout=5) as resp:
        return msgspec.json.decode(resp.read())


COLLECTOR = "@collector"


def start_collector(stack: Stack) -> Server:
    """The loopback OTLP collector (``bench/otlp_sink.py``)."""
    sink = Server("collector", [sys.executable, str(BENCH / "otlp_sink.py")], stack.env, stack.tmp)
    sink.wait_ready(lambda: _answers(sink.url + "/count"))
    return sink


def collected(sink: Server) -> dict:
    with urllib.request.urlopen(sink.url + "/count", timeout=5) as resp:
        return msgspec.json.decode(resp.read())


def start(stack: Stack, variants: list[tuple[str, Path, dict[str, str]]], collector: Server | None = None
          ) -> dict[str, Server]:
    servers = {"floor": Server("floor", [sys.executable, str(BENCH / "floor_proxy.py"), "--upstream",
                                         stack.mock.url, "--workers", "1"], stack.env, stack.tmp)}
    for name, checkout, settings in variants:
        if collector is not None:
            settings = {key: collector.url if value == COLLECTOR else value for key, value in settings.items()}
        env = {**stack.env, "GATEWAY_ADMIN_KEY": stack.admin_key, "GATEWAY_DATA_DIR": str(stack.tmp / f"data-{name}"),
               "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1", "GATEWAY_WORKERS": "1", **settings}
        servers[name] = Server(name, [sys.executable, "-m", "gateway", "serve"], env, stack.tmp, cwd=checkout)
    for server in servers.values():
        server.wait_ready(lambda server=server: _answers(server.url + "/ready"))
    return servers


def requests_for(stack: Stack, servers: dict[str, Server], stream: bool) -> dict[str, tuple[str, bytes]]:
    body = msgspec.json.encode({**CHAT, "stream": True} if stream else CHAT)
    base = f"/s/{STREAM_SCENARIO}" if stream else ""
    plain = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    gateway = {**plain, "x-gateway-api-key": stack.admin_key, "x-gateway-provider": "vendorA",
               "x-gateway-custom-host": f"{stack.mock.url}{base}/v1"}
    out = {}
    for name, server in servers.items():
        url = server.url + (base if name == "floor" else "") + "/v1/chat/completions"
        out[name] = (url, build_request(url, body, plain if name == "floor" else gateway))
    return out


def check(name: str, url: str, raw: bytes) -> str | None:
    """Send one request; the provider header the answer names (None for the floor), 200 or an error."""
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:])
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as resp:
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{name} answered {resp.status}")
        return resp.headers.get("x-gateway-provider")


def run(args: argparse.Namespace) -> dict:
    gen = pick_loadgen(args.loadgen, args.connections, 1)
    with Stack(log=log) as stack:
        stack.scenario(STREAM_SCENARIO, [{"chunks": STREAM_CHUNKS}])
        wants_collector = any(COLLECTOR in settings.values() for _, _, settings in args.variants)
        collector = start_collector(stack) if wants_collector else None
        servers = start(stack, args.variants, collector)
        report: dict = {"mode": args.mode, "loadgen": gen.describe(), "connections": args.connections,
                        "rounds": args.rounds, "round_seconds": args.duration, "targets": {}}
        try:
            reqs = requests_for(stack, servers, args.mode == "stream")
            for name, (url, raw) in reqs.items():
                target = report["targets"][name] = {"provider_header": check(name, url, raw)}
                if name != "floor":
                    target["checkout"] = str(servers[name].cwd)
                    target["speedups"] = _health(servers[name].url).get("speedups")
                gen.run(url, raw, 1.0)  # unmeasured: pools and caches warm on every path
            names = list(servers)
            rps: dict[str, list[float]] = {n: [] for n in names}
            cpu: dict[str, list[float]] = {n: [] for n in names}
            errors = dict.fromkeys(names, 0)
            for r in range(args.rounds):
                shift = r % len(names)
                for name in names[shift:] + names[:shift]:
                    before = cpu_seconds(servers[name].pid)
                    result = gen.run(*reqs[name], args.duration)
                    used = cpu_seconds(servers[name].pid) - before
                    rps[name].append(round(result["rps"], 1))
                    cpu[name].append(used / result["requests"] * 1e6 if result["requests"] else 0.0)
                    errors[name] += result["errors"]
                log(f"round {r + 1}: " + ", ".join(f"{n} {rps[n][-1]:.0f}/s" for n in names))
            floor = statistics.median(rps["floor"])
            for name in names:
                median = statistics.median(rps[name])
                report["targets"][name].update({
                    "rps": round(median, 1), "rps_rounds": rps[name],
                    "ratio_to_floor": round(median / floor, 3) if floor else None,
                    "cpu_us_per_request": round(statistics.median(cpu[name]), 1), "errors": errors[name],
                    "rss_mb": worker_rss_mb(servers[name].pid)})
            if collector is not None:
                time.sleep(1.5)  # the exporters' last batches (they send about once a second)
                report["collector"] = collected(collector)
        finally:
            for server in servers.values():
                server.stop()
            if collector is not None:
                collector.stop()
    return report


def log(message: str) -> None:
    print(f"[ab] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variants", nargs="+", type=parse_variant, metavar="NAME=CHECKOUT[,SETTING=VALUE...]")
    p.add_argument("--mode", choices=("chat", "stream"), default="chat", help="a chat or a 20-chunk stream")
    p.add_argument("--rounds", type=int, default=6, help="rounds, each running every target once (default 6)")
    p.add_argument("--duration", type=float, default=6.0, help="seconds per target and round (default 6)")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    p.add_argument("--output", help="also write the JSON here")
    args = p.parse_args(argv)
    names = [name for name, _, _ in args.variants]
    if len(set(names)) != len(names) or "floor" in names:
        p.error("variant names must differ from each other and from 'floor'")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    report = run(args)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    text = msgspec.json.encode(report).decode()
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
