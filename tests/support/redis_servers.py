"""Redis for tests: the shared server from GATEWAY_TEST_REDIS_URL, and private redis-server processes (a single
server a test may stop and restart, or a three-master cluster) on free loopback ports.

Without ``redis-server`` on the PATH the private servers skip their tests, except in CI (the ``CI`` variable, which
``.ci/run`` exports) or with GATEWAY_TEST_REQUIRE_REDIS=1, where a missing ``redis-server`` fails them: the
cluster run is part of the Redis suite there (forming it takes a few seconds, once per session).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from tests.support.app_process import stop_process


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def need_redis_server() -> None:
    """Skip the calling test without ``redis-server``; fail instead in CI or with GATEWAY_TEST_REQUIRE_REDIS=1."""
    if shutil.which("redis-server") is None:
        if _on("CI") or _on("GATEWAY_TEST_REQUIRE_REDIS"):
            pytest.fail("redis-server is not installed, and CI or GATEWAY_TEST_REQUIRE_REDIS=1 needs it")
        pytest.skip("redis-server is not installed")


def test_redis_url() -> str:
    """The shared Redis's URL; without one the calling test skips, or fails when GATEWAY_TEST_REQUIRE_REDIS=1."""
    url = os.environ.get("GATEWAY_TEST_REDIS_URL")
    if not url:
        if _on("GATEWAY_TEST_REQUIRE_REDIS"):
            pytest.fail("GATEWAY_TEST_REQUIRE_REDIS=1 but GATEWAY_TEST_REDIS_URL is not set")
        pytest.skip("no Redis: set GATEWAY_TEST_REDIS_URL (GATEWAY_TEST_REQUIRE_REDIS=1 makes this a failure)")
    return url


test_redis_url.__test__ = False  # its name starts with test_, but pytest must not collect it


def random_prefix() -> str:
    return f"gwtest:{uuid.uuid4().hex[:10]}:"


async def delete_prefix(client, prefix: str) -> None:
    """Delete every key under ``prefix`` (never a whole database: other tests share it)."""
    keys = [key async for key in client.scan_iter(match=prefix + "*", count=500)]
    for key in keys:
        await client.delete(key)


def _free_port_pair() -> int:
    """A free port whose cluster bus port (+10000) is free too."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port >= 55000:
            continue
        try:
            with socket.socket() as bus:
                bus.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def _wait_ping(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True, timeout=5)
        if done.stdout.strip() == "PONG":
            return
        time.sleep(0.05)
    raise RuntimeError(f"redis-server on {port} did not answer within {timeout}s")


class RedisProcess:
    """One private redis-server on loopback (no persistence); ``stop`` and ``start`` keep its port."""

    def __init__(self, port: int | None = None, *extra: str) -> None:
        need_redis_server()
        self.port = port or _free_port_pair()
        self.dir = tempfile.mkdtemp(prefix="gw-redis-")
        self.extra = extra
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_ping(self.port)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.proc = None


class RedisCluster:
    """Three masters, no replicas, formed with ``redis-cli --cluster create``."""

    def __init__(self) -> None:
        self.nodes = [RedisProcess(None, "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
                                   "--cluster-config-file", f"nodes-{uuid.uuid4().hex[:8]}.conf") for _ in range(3)]
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        subprocess.run(["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = [subprocess.run(["redis-cli", "-p", str(n.port), "cluster", "info"], capture_output=True,
                                     text=True, timeout=5).stdout for n in self.nodes]
            if all("cluster_state:ok" in s for s in states):
                return self
            time.sleep(0.1)
        raise RuntimeError("the test cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
