"""Throughput clients for bench/overhead.py: ``wrk`` (C, when installed) or the raw-socket Python generator."""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from rawhttp import python_load

_RPS = re.compile(rb"Requests/sec:\s+([0-9.]+)")
_TOTAL = re.compile(rb"(\d+) requests in ([0-9.]+)(us|ms|s|m)")
_NON2XX = re.compile(rb"Non-2xx or 3xx responses: (\d+)")
_SOCKET = re.compile(rb"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_UNIT = {b"us": 1e-6, b"ms": 1e-3, b"s": 1.0, b"m": 60.0}


def lua_string(data: bytes) -> str:
    """``data`` as a Lua string literal (decimal escapes keep CR/LF exact, unlike long brackets)."""
    out = []
    for byte in data:
        ch = chr(byte)
        out.append(ch if 32 <= byte < 127 and ch not in '"\\' else f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


class LoadGenerator:
    connections = 32

    def run(self, url: str, request: bytes, duration: float, limit: int = 0) -> dict:
        """``{"requests", "errors", "seconds", "rps"}`` of keeping the connections busy for ``duration`` s."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class WrkLoad(LoadGenerator):
    """``wrk`` sending our exact request bytes (a Lua ``request`` function) on every connection."""

    def __init__(self, binary: str, connections: int, threads: int) -> None:
        self.binary = binary
        self.connections = connections
        self.threads = max(1, min(threads, connections))
        self.dir = Path(tempfile.mkdtemp(prefix="gw-wrk-"))
        atexit.register(shutil.rmtree, self.dir, True)
        self.scripts: dict[bytes, Path] = {}

    def _script(self, request: bytes) -> Path:
        path = self.scripts.get(request)
        if path is None:
            path = self.dir / f"req{len(self.scripts)}.lua"
            path.write_text(f"local raw = {lua_string(request)}\nrequest = function() return raw end\n")
            self.scripts[request] = path
        return path

    def run(self, url: str, request: bytes, duration: float, limit: int = 0) -> dict:
        cmd = [self.binary, f"-t{self.threads}", f"-c{self.connections}", f"-d{max(1, round(duration))}s",
               "--timeout", "10s", "-s", str(self._script(request)), url]
        done = subprocess.run(cmd, capture_output=True, timeout=duration + 60)
        out = done.stdout
        rps = _RPS.search(out)
        total = _TOTAL.search(out)
        if done.returncode != 0 or rps is None or total is None:
            raise RuntimeError(f"wrk failed ({done.returncode}): {out.decode(errors='replace')}"
                               f"{done.stderr.decode(errors='replace')}")
        errors = int(m.group(1)) if (m := _NON2XX.search(out)) else 0
        if m := _SOCKET.search(out):
            errors += sum(int(g) for g in m.groups())
        seconds = float(total.group(2)) * _UNIT[total.group(3)]
        return {"requests": int(total.group(1)), "errors": errors, "seconds": seconds, "rps": float(rps.group(1))}

    def describe(self) -> str:
        version = subprocess.run([self.binary, "--version"], capture_output=True).stdout.split(b"\n")[0]
        return f"{version.decode(errors='replace').split(' Copyright')[0]}, {self.threads} thread(s)"


class PythonLoad(LoadGenerator):
    """The multi-process raw-socket generator of ``rawhttp.python_load`` (uvloop, prebuilt request bytes)."""

    def __init__(self, connections: int, processes: int) -> None:
        self.connections = connections
        self.processes = max(1, processes)

    def run(self, url: str, request: bytes, duration: float, limit: int = 0) -> dict:
        return python_load(url, request, self.connections, duration, self.processes, limit)

    def describe(self) -> str:
        return f"python raw-socket generator, {self.processes} process(es)"


def pick_loadgen(kind: str, connections: int, threads: int) -> LoadGenerator:
    binary = shutil.which("wrk")
    if kind == "wrk" and binary is None:
        raise SystemExit("--loadgen wrk: wrk is not installed (apt-get install wrk)")
    if kind in ("auto", "wrk") and binary is not None:
        return WrkLoad(binary, connections, threads)
    return PythonLoad(connections, threads)
