"""The benchmark's servers: mock upstream, floor proxy and gateway as subprocesses on free loopback ports.

Also reads what ``/proc`` says about them: the RSS of each Granian worker and the CPU time of a server's processes.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable, Iterable, Self

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
ADMIN_KEY = "bench-admin-key"
_TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One server process (its own session, so its Granian workers go with it)."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], logdir: Path, cwd: Path = ROOT) -> None:
        """``cwd``: where the server starts; ``python -m gateway`` runs the checkout it starts in."""
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = logdir / f"{name}.log"
        self.cwd = cwd
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([*cmd, "--port", str(self.port)], env=env, cwd=str(cwd), stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid

    def wait_ready(self, probe: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if probe():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"{self.name} did not become ready:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        try:  # workers left behind by a main process that died first: our own session only
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def http_ok(url: str, body: bytes | None = None) -> bool:
    """Whether ``url`` answers 200 (a POST of ``body`` when given, else a GET): a server's readiness probe."""
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=2) as resp:
        return resp.status == 200


#: a chat completion every mock and floor answers (their readiness probe)
CHAT_PROBE = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


class Processes:
    """Servers started and stopped together (``with``: ``start`` on entry, every server stopped and the folder
    removed on exit, or when a start fails), their logs and the gateways' data in one temporary folder. A bench's
    stack says in ``start`` which servers it runs (``add``, ``add_mock``, ``add_gateway``) and how it waits for
    them; ``stop`` ends some of them before the others (a stack that starts its gateway again per worker count)."""

    def __init__(self, prefix: str, dropped: tuple[str, ...] = ("GATEWAY_", "BENCH_")) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix=prefix))
        #: the servers' environment: this process's, without the variables named by a prefix of ``dropped``
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
        self.servers: dict[str, Server] = {}

    def start(self) -> None:
        """Start the stack's servers and wait until they answer."""

    def add(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Server:
        server = Server(name, cmd, self.env if env is None else env, self.tmp)
        self.servers[name] = server
        return server

    def add_mock(self, name: str = "mock") -> Server:
        """``gateway mock-upstream`` with one worker (so a scripted scenario reaches every request)."""
        return self.add(name, [sys.executable, "-m", "gateway", "mock-upstream", "--workers", "1"])

    def add_gateway(self, name: str = "gateway", workers: int = 1, data: str = "data",
                    env: dict[str, str] | None = None) -> Server:
        """``gateway serve`` with the bench's admin key, its data in ``data`` of the folder, loopback upstreams
        allowed, ``workers`` workers and the settings in ``env``."""
        settings = {**self.env, "GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_DATA_DIR": str(self.tmp / data),
                    "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1", "GATEWAY_WORKERS": str(workers), **(env or {})}
        return self.add(name, [sys.executable, "-m", "gateway", "serve"], settings)

    def wait_workers(self, names: Iterable[str], workers: int = 1, timeout: float = 30.0) -> None:
        """Wait (at most ``timeout`` in all) until each named server runs ``workers`` Granian workers."""
        deadline = time.monotonic() + timeout
        for name in names:
            while len(worker_pids(self.servers[name].pid)) < workers and time.monotonic() < deadline:
                time.sleep(0.1)

    def stop(self, *names: str) -> None:
        """Stop the named servers (those running), the last started first."""
        for name in reversed(list(self.servers)):
            if name in names:
                self.servers.pop(name).stop()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(*self.servers)
        shutil.rmtree(self.tmp, ignore_errors=True)


class Stack(Processes):
    """Mock for the whole run; floor and gateway per worker count (``start_proxies`` / ``stop_proxies``)."""

    def __init__(self, log: Callable[[str], None] = print, gateway_env: dict[str, str] | None = None) -> None:
        super().__init__("gw-bench-", ("GATEWAY_", "FLOOR_"))
        self.gateway_env = gateway_env or {}
        self.log = log
        self.admin_key = ADMIN_KEY
        self.gateway_requests = 0

    @property
    def mock(self) -> Server | None:
        return self.servers.get("mock")

    @property
    def floor(self) -> Server | None:
        return self.servers.get("floor")

    @property
    def lean(self) -> Server | None:
        """The lean floor: the same relay over the gateway's lean exchange."""
        return self.servers.get("lean")

    @property
    def gateway(self) -> Server | None:
        return self.servers.get("gateway")

    def start(self) -> None:
        signal.signal(signal.SIGTERM, _exit_on_signal)
        mock = self.add_mock()
        mock.wait_ready(lambda: http_ok(mock.url + "/v1/chat/completions", CHAT_PROBE))

    def scenario(self, name: str, steps: list[dict]) -> None:
        """Script a mock scenario (``/s/<name>/...``); the mock runs one worker, so every request sees it."""
        import msgspec

        body = msgspec.json.encode({"steps": steps})
        if not http_ok(f"{self.mock.url}/_mock/scenarios/{name}", body):
            raise RuntimeError(f"the mock refused scenario {name}")

    def start_proxies(self, workers: int, floor: bool = True) -> None:
        self.gateway_requests = 0
        upstream = self.mock.url
        try:
            floors = []
            if floor:
                relay = [sys.executable, str(BENCH / "floor_proxy.py"), "--upstream", upstream,
                         "--workers", str(workers)]
                floors = [self.add("floor", relay), self.add("lean", [*relay, "--lean"])]
            gateway = self.add_gateway(workers=workers, data=f"data-{workers}", env=self.gateway_env)
            for floor_server in floors:
                floor_server.wait_ready(lambda s=floor_server: http_ok(s.url + "/v1/chat/completions", CHAT_PROBE))
            gateway.wait_ready(lambda: http_ok(gateway.url + "/ready"))
            self.wait_workers([s.name for s in (gateway, *floors)], workers)
        except BaseException:
            self.stop_proxies()
            raise
        self.log(f"started the floors and the gateway with {workers} worker(s)")

    def stop_proxies(self) -> None:
        self.stop("floor", "lean", "gateway")




def _exit_on_signal(signum, frame) -> None:
    raise SystemExit(128 + signum)


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            out.extend(int(c) for c in text)
    except OSError:
        pass
    return out


def worker_pids(pid: int) -> list[int]:
    """The Granian workers under a server's main process (multiprocessing helpers left out)."""
    pids = []
    for child in children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" not in cmdline and b"forkserver" not in cmdline:
            pids.append(child)
    return sorted(pids)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker_rss_mb(pid: int) -> list[float]:
    """RSS of each worker, MB (MiB), in pid order."""
    out = []
    for child in worker_pids(pid):
        try:
            out.append(round(_rss_mb(child), 1))
        except OSError:
            pass
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a server's main process and all its descendants that are still running."""
    total = 0.0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        stack.extend(children(current))
    return total


class CpuMeter:
    """The CPU time the run's servers used over one stretch of the run, and how many CPUs everything outside the
    run (other work on the machine) kept busy meanwhile: the machine's busy time less the servers' and this
    process's with its finished children (the load generator)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.started = time.perf_counter()
        self.box = busy_cpu_seconds()
        self.own = own_cpu_seconds()
        self.servers = {name: cpu_seconds(pid) for name, pid in pids.items()}

    def stop(self) -> tuple[dict[str, float], float]:
        """(CPU seconds each server used, CPUs other work kept busy on average)."""
        used = {name: cpu_seconds(pid) - self.servers[name] for name, pid in self.pids.items()}
        others = busy_cpu_seconds() - self.box - sum(used.values()) - (own_cpu_seconds() - self.own)
        return used, round(max(0.0, others) / max(time.perf_counter() - self.started, 1e-3), 2)


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (every CPU, ``/proc/stat``: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / _TICK


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the load generator's processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
