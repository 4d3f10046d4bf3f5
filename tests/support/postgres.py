"""PostgreSQL for tests: ``GATEWAY_TEST_POSTGRES_URL`` (a cluster ``tests/support/postgres.sh`` starts, as
``.ci/run`` does), and a database of its own for each test (random name, dropped afterwards), so tests running at
once never meet. Without the URL a test skips, or fails when ``GATEWAY_TEST_REQUIRE_POSTGRES=1``. Never a fake."""

from __future__ import annotations

import asyncio
import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

SCRIPT = "tests/support/postgres.sh"


def test_postgres_url() -> str:
    url = os.environ.get("GATEWAY_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("GATEWAY_TEST_REQUIRE_POSTGRES", "").strip().lower() in {"1", "true", "yes", "on"}:
            pytest.fail("GATEWAY_TEST_REQUIRE_POSTGRES=1 but GATEWAY_TEST_POSTGRES_URL is not set")
        pytest.skip(f"no PostgreSQL: eval \"$({SCRIPT})\" sets GATEWAY_TEST_POSTGRES_URL")
    return url


test_postgres_url.__test__ = False  # type: ignore[attr-defined]


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _admin(url: str, statement: str) -> None:
    """Run one statement, in a thread of its own (a test's thread may already run an event loop: Playwright's)."""
    from concurrent.futures import ThreadPoolExecutor

    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


def create_database() -> tuple[str, str]:
    """A new empty database: (its URL, its name)."""
    url = test_postgres_url()
    name = f"gwtest_{uuid.uuid4().hex[:12]}"
    _admin(url, f"CREATE DATABASE {name}")
    return with_database(url, name), name


def drop_database(name: str) -> None:
    _admin(test_postgres_url(), f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_url():
    """The URL of a database of this test's own."""
    url, name = create_database()
    yield url
    drop_database(name)


class PrivatePostgres:
    """A cluster of one test's own (``postgres.sh`` on a free port, in a temporary directory) that the test may
    stop and start again; ``url`` names its ``postgres`` database."""

    def __init__(self) -> None:
        import tempfile

        from tests.support.servers import free_port

        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="gw-pg-")
        self.url = f"postgresql://gateway:gateway@127.0.0.1:{self.port}/postgres"

    def _script(self, *args: str) -> None:
        import subprocess
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PGPORT": str(self.port), "PGTEST_DIR": self.dir}
        done = subprocess.run(["bash", str(root / SCRIPT), *args], env=env, capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            pytest.fail(f"{SCRIPT} {' '.join(args)} failed: {done.stderr}")

    def start(self) -> PrivatePostgres:
        self._script("start")
        return self

    def stop(self) -> None:
        self._script("stop")

    def remove(self) -> None:
        import shutil

        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
