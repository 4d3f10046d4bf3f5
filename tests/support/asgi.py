"""Drive the gateway's ASGI app in-process, as Granian would, without a socket or a subprocess.

``AppClient`` is the async client: it runs the app's lifespan once (startup on enter, shutdown on exit, the lifespan
state copied into each request's scope as a server does), makes requests, and opens streamed answers that are read
chunk by chunk or SSE event by event and can be left mid-stream (the app's pending ``receive()`` then answers
``http.disconnect`` and a later ``send`` raises, as Granian does). ``in_process`` builds a started runtime and its app
for tests that inject a clock or a store; ``call`` makes one request to such an app. The synchronous client over a
loop of its own, for tests written against a gateway URL, is ``tests/support/inprocess.py``.
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from gateway.app import GatewayApp
from gateway.runtime import Runtime
from gateway.settings import Settings, load
from gateway.waiting import within
from tests.support.http import Response
from tests.support.servers import ADMIN_KEY
from tests.support.sse import parse_event

#: bound on the app's lifespan startup and shutdown, and the default bound on one wait for a response's next part
STARTUP_S = 60.0
READ_S = 60.0

Body = bytes | str | dict | None


def gateway_settings(env: Mapping[str, str] | None = None, data_dir: str | None = None,
                     flags: Mapping[str, str | bool] | None = None) -> Settings:
    """The settings ``start_gateway`` gives a subprocess (an admin key, loopback upstreams allowed, a data directory
    of its own), with ``env`` and ``flags`` over them."""
    return load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1,localhost,::1",
                 "GATEWAY_DATA_DIR": data_dir or tempfile.mkdtemp(prefix="gw-data-"), **(env or {})}, flags)


def _encode(body: Body) -> bytes:
    if isinstance(body, dict):
        return msgspec.json.encode(body)
    if isinstance(body, str):
        return body.encode()
    return body or b""


def _scope(method: str, target: str, headers: Mapping[str, str] | None, body: bytes,
           state: dict[str, Any]) -> dict[str, Any]:
    """An http scope for ``target`` (a path, or a URL whose scheme and host are dropped), with the headers
    ``http.client`` adds when the caller gives none (host, accept-encoding, content-length)."""
    host = "testserver"
    if "://" in target:
        host, _, rest = target.split("://", 1)[1].partition("/")
        target = "/" + rest
    path, _, query = target.partition("?")
    method = method.upper()
    pairs = [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
    given = {name for name, _ in pairs}
    if b"host" not in given:
        pairs.insert(0, (b"host", host.encode()))
    if b"accept-encoding" not in given:
        pairs.append((b"accept-encoding", b"identity"))
    if b"content-length" not in given and b"transfer-encoding" not in given and (
            body or method in ("POST", "PUT", "PATCH")):
        pairs.append((b"content-length", str(len(body)).encode()))
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http",
        "method": method, "path": path, "raw_path": path.encode(), "query_string": query.encode(),
        "root_path": "", "headers": pairs, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
        "state": dict(state),
    }


class StreamedResponse:
    """An answer whose head has arrived; its body is read as the app sends it. ``close`` leaves mid-stream."""

    def __init__(self, status: int, header_list: list[tuple[str, str]], parts: asyncio.Queue,
                 gone: asyncio.Event, task: asyncio.Task) -> None:
        self.status = status
        self.header_list = header_list
        self.headers = dict(header_list)
        self._parts = parts
        self._gone = gone
        self._task = task
        self._buffer = b""
        self.ended = False

    async def next_chunk(self, seconds: float = READ_S) -> bytes | None:
        """The next body bytes the app sent; None once the body ended (or the app stopped without ending it)."""
        if self.ended:
            return None
        message = await within(self._parts.get(), seconds)
        if message is None or not message.get("more_body", False):
            self.ended = True
            if message is None:
                return None
        return message.get("body", b"")

    async def read(self, seconds: float = READ_S) -> bytes:
        """The rest of the body."""
        out = [self._buffer]
        self._buffer = b""
        while (chunk := await self.next_chunk(seconds)) is not None:
            out.append(chunk)
        return b"".join(out)

    async def next_event(self, seconds: float = READ_S) -> tuple[str, str, str | None] | None:
        """The next SSE event as ``(event, data, id)``; None when the stream ended or nothing came in ``seconds``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            block, sep, rest = self._buffer.replace(b"\r\n", b"\n").partition(b"\n\n")
            if sep:
                self._buffer = rest
                parsed = parse_event(block.decode())
                if parsed is not None:
                    return parsed
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                chunk = await self.next_chunk(remaining)
            except TimeoutError:
                return None
            if chunk is None:
                return parse_event(self._buffer.decode()) if self._buffer.strip() else None
            self._buffer += chunk

    async def close(self) -> None:
        """Leave: the app's pending ``receive()`` answers ``http.disconnect``; waits (bounded) for the app to end."""
        self._gone.set()
        if not self._task.done():
            await asyncio.wait({self._task}, timeout=READ_S)
        self.ended = True


class AppClient:
    """Requests to an ASGI app in this process; ``async with`` runs its lifespan (when ``lifespan``)."""

    def __init__(self, app: Any, lifespan: bool = True) -> None:
        self.app = app
        self.lifespan = lifespan
        #: the lifespan state, copied into every request's scope
        self.state: dict[str, Any] = {}
        self._lifespan_task: asyncio.Task | None = None
        self._lifespan_in: asyncio.Queue = asyncio.Queue()
        self._lifespan_out: asyncio.Queue = asyncio.Queue()
        self._tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> AppClient:
        if self.lifespan:
            await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):  # streams a test left open end as a client leaving them
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=READ_S)
        if self._lifespan_task is not None:
            await self._lifespan_call("lifespan.shutdown")
            await within(self._lifespan_task, STARTUP_S)

    async def _start(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        threshold = gc.get_threshold()
        self._lifespan_task = asyncio.ensure_future(self.app(scope, self._lifespan_in.get, self._lifespan_out.put))
        try:
            await self._lifespan_call("lifespan.startup")
        finally:  # a worker tunes the collector for its own life; this process's tests keep the default
            gc.unfreeze()
            gc.set_threshold(*threshold)

    async def _lifespan_call(self, kind: str) -> None:
        await self._lifespan_in.put({"type": kind})
        answer = await within(self._lifespan_out.get(), STARTUP_S)
        if answer["type"] != kind + ".complete":
            raise RuntimeError(f"{kind} failed: {answer.get('message')}")

    async def request(self, method: str, target: str, body: Body = None,
                      headers: Mapping[str, str] | None = None, seconds: float = READ_S) -> Response:
        """One request, its whole answer read."""
        async with self.stream(method, target, body, headers, seconds) as answer:
            data = await answer.read(seconds)
        return Response(answer.status, answer.headers, data, answer.header_list)

    @asynccontextmanager
    async def stream(self, method: str, target: str, body: Body = None, headers: Mapping[str, str] | None = None,
                     seconds: float = READ_S) -> AsyncIterator[StreamedResponse]:
        """A request whose answer is read as it comes; leaving the block before its end leaves the stream."""
        answer = await self.open(method, target, body, headers, seconds)
        try:
            yield answer
        finally:
            await answer.close()

    async def open(self, method: str, target: str, body: Body = None, headers: Mapping[str, str] | None = None,
                   seconds: float = READ_S) -> StreamedResponse:
        """Send a request and wait for its answer's head (the caller closes the answer)."""
        data = _encode(body)
        gone = asyncio.Event()
        parts: asyncio.Queue = asyncio.Queue()
        head: asyncio.Future = asyncio.get_running_loop().create_future()
        head_only = method.upper() == "HEAD"
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": data, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if gone.is_set():
                raise ConnectionResetError("the client left")
            if message["type"] == "http.response.start":
                pairs = [(bytes(k).decode().lower(), bytes(v).decode()) for k, v in message.get("headers", [])]
                head.set_result((message["status"], pairs))
            elif message["type"] == "http.response.body":
                if head_only:  # a server never sends a HEAD answer's body, whatever the app writes
                    message = {**message, "body": b""}
                await parts.put(message)
                if not message.get("more_body", False):
                    gone.set()  # the exchange is over: a later receive() answers disconnect, as on a closed socket

        async def run() -> None:
            try:
                await self.app(_scope(method, target, headers, data, self.state), receive, send)
            finally:
                await parts.put(None)
                if not head.done():
                    head.set_exception(RuntimeError(f"{method} {target}: the app ended without an answer"))

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        status, pairs = await within(asyncio.shield(head), seconds)
        return StreamedResponse(status, pairs, parts, gone, task)


async def call(app: Any, method: str, path: str, body: bytes | dict = b"", headers: dict[str, str] | None = None
               ) -> Response:
    """One request to ``app`` (no lifespan: the runtime ``in_process`` started)."""
    return await AppClient(app, lifespan=False).request(method, path, body, headers)


@asynccontextmanager
async def in_process(env: dict[str, str] | None = None, data_dir: str | None = None,
                     **runtime: Any) -> AsyncIterator[GatewayApp]:
    """The app over a started runtime with the settings ``start_gateway`` gives a subprocess (plus ``env``);
    ``runtime`` goes to ``Runtime`` (a store, a clock). Closed on exit."""
    started = Runtime(gateway_settings(env, data_dir), **runtime)
    app = GatewayApp(started)  # first: the app adds the services its routes mount to the runtime's lifecycle
    await started.start()
    try:
        yield app
    finally:
        await started.close()


@asynccontextmanager
async def served(env: dict[str, str] | None = None, data_dir: str | None = None,
                 flags: Mapping[str, str | bool] | None = None, **runtime: Any) -> AsyncIterator[AppClient]:
    """A client of a gateway app whose runtime the app's own lifespan starts and closes, as in a worker."""
    app = GatewayApp(Runtime(gateway_settings(env, data_dir, flags), **runtime))
    async with AppClient(app) as client:
        yield client
