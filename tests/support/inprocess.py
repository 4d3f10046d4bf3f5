"""A gateway served in this process for synchronous tests: the shape of Starlette's ``TestClient``.

``InProcessGateway`` runs the gateway app (its lifespan once: the runtime starts on enter and closes on exit) on an
event loop of its own in a thread, and the test's thread makes requests through it: ``request``/``post`` answer a
``tests.support.http.Response``, ``stream_events`` iterates SSE ``data:`` payloads as ``tests.support.http`` does,
``events`` opens an answer read event by event (``EventStream``'s methods) that ``close`` leaves mid-stream.
Targets are paths or URLs under ``url`` (scheme and host are dropped), so a test written against a gateway URL
moves here by building its URLs from this object. ``run`` runs a coroutine on the gateway's loop (to reach
``runtime``). Use a gateway subprocess (``tests/support/servers.py``) where serving itself is under test.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import itertools
import os
import threading
from collections.abc import Coroutine, Iterator, Mapping
from concurrent.futures import Future
from types import ModuleType
from typing import Any, TypeVar

import httpx

from gateway.app import GatewayApp
from gateway.runtime import Runtime
from tests.support.asgi import READ_S, STARTUP_S, AppClient, Body, StreamedResponse, gateway_settings
from tests.support.http import Response
from tests.support.mounts import MOUNTED, PREFIX
from tests.support.sse import read_logs

T = TypeVar("T")
#: numbers the gateways' base URLs
_NUMBERS = itertools.count(1)


def start_in_process(env: Mapping[str, str] | None = None, data_dir: str | None = None,
                     flags: Mapping[str, str | bool] | None = None, **runtime: Any) -> InProcessGateway:
    """A started in-process gateway (``stop`` it): ``tests.support.servers.start_gateway``'s shape, for a test where
    the gateway's serving (Granian, workers, signals, the process's output) is not under test."""
    return InProcessGateway(env, data_dir, flags, **runtime).start()


class InProcessGateway:
    """The gateway app with the settings ``start_gateway`` gives a subprocess (plus ``env`` and ``flags``), served
    in-process; a context manager (``with InProcessGateway(env) as gw``), or ``start_in_process`` then ``stop``."""

    def __init__(self, env: Mapping[str, str] | None = None, data_dir: str | None = None,
                 flags: Mapping[str, str | bool] | None = None, **runtime: Any) -> None:
        self.settings = gateway_settings(env, data_dir, flags)
        #: the base of the URLs a test builds; while the gateway runs, ``tests/support/http.py`` sends URLs under it
        #: here (only their path and query reach the app)
        self.url = f"{PREFIX}{next(_NUMBERS)}-{os.getpid()}.test"
        self._runtime_args = runtime
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="in-process-gateway", daemon=True)
        self._client: AppClient | None = None
        self.app: GatewayApp | None = None

    def __enter__(self) -> InProcessGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> InProcessGateway:
        """Run the app's lifespan startup and mount ``url``; returns self."""
        self._thread.start()
        try:
            self.run(self._start(), STARTUP_S)
        except BaseException:
            self._stop_loop()
            raise
        MOUNTED[self.url] = self
        return self

    def stop(self) -> None:
        """Unmount, leave open streams, run the lifespan shutdown (the runtime closes) and end the loop."""
        MOUNTED.pop(self.url, None)
        try:
            if self._client is not None:
                self.run(self._client.__aexit__(None, None, None), STARTUP_S * 2)
        finally:
            self._client = None
            try:
                self.run(_cancel_the_rest(), STARTUP_S)
            finally:
                self._stop_loop()

    async def _start(self) -> None:
        self.app = GatewayApp(Runtime(self.settings, **self._runtime_args))
        self._client = AppClient(self.app)
        await self._client.__aenter__()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        if not self._thread.is_alive():
            self._loop.close()

    @property
    def runtime(self) -> Runtime:
        assert self.app is not None and self.app.runtime is not None, "the gateway has not started"
        return self.app.runtime

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = READ_S) -> T:
        """Run ``coroutine`` on the gateway's loop and return its result (bounded by ``timeout``)."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout)

    @property
    def client(self) -> AppClient:
        assert self._client is not None, "the gateway has not started"
        return self._client

    def request(self, method: str, target: str, body: Body = None, headers: Mapping[str, str] | None = None,
                timeout: float = READ_S) -> Response:
        return self.run(self.client.request(method, target, body, headers, timeout), timeout + 5)

    def post(self, target: str, body: Body, headers: Mapping[str, str] | None = None,
             timeout: float = READ_S) -> Response:
        return self.request("POST", target, body, headers, timeout)

    def http_client(self, package: str = "httpx", **options: Any) -> Any:
        """A ``Client`` of ``package`` whose requests this gateway answers (an SDK's ``http_client=``), bodies
        streamed: httpx's by default, ``"httpx2"`` for an SDK built on that fork (the anthropic SDK)."""
        module = importlib.import_module(package)
        return module.Client(transport=GatewayTransport(self, module), **options)

    def events(self, method: str, target: str, body: Body = None, headers: Mapping[str, str] | None = None,
               timeout: float = READ_S) -> SyncEventStream:
        """Open a streamed answer (its head arrived) to read event by event; ``close`` it when done."""
        answer = self.run(self.client.open(method, target, body, headers, timeout), timeout + 5)
        return SyncEventStream(self, answer)

    def stream_events(self, target: str, body: dict, headers: Mapping[str, str], timeout: float = READ_S
                      ) -> tuple[int, dict[str, str], Iterator[bytes]]:
        """POST and iterate the SSE ``data:`` payloads as they arrive (``tests.support.http.stream_events``)."""
        stream = self.events("POST", target, body, headers, timeout)

        def payloads() -> Iterator[bytes]:
            try:
                while (event := stream.read_event(timeout)) is not None:
                    yield from (line.encode() for line in event[1].split("\n"))
            finally:
                stream.close()

        return stream.status, stream.headers, payloads()


async def _cancel_the_rest() -> None:
    """Cancel the tasks still on the loop and wait for them, as ``asyncio.run`` does before it closes a loop (a
    worker's process ends instead, so a task its shutdown does not stop would otherwise outlive the loop)."""
    current = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not current]
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=STARTUP_S)


class GatewayTransport(httpx.BaseTransport):
    """httpx's transport interface over an in-process gateway: each request goes to its app, and the answer's body
    is read as the app sends it (httpx's ``MockTransport`` is the model). ``package`` is the httpx module whose
    ``Response`` it answers (httpx, or a fork with the same interface)."""

    def __init__(self, gateway: InProcessGateway, package: ModuleType = httpx) -> None:
        self.gateway = gateway
        self.package = package

    def handle_request(self, request: Any) -> Any:
        gateway = self.gateway
        headers = dict(request.headers.multi_items())
        answer = gateway.run(gateway.client.open(request.method, str(request.url), request.read(), headers))
        return self.package.Response(answer.status, headers=answer.header_list,
                                     stream=_body_stream(self.package)(gateway, answer), request=request)


class _BodyStream:
    """An answer's body as the app sends it, read from the test's thread (a ``SyncByteStream`` of the package)."""

    def __init__(self, gateway: InProcessGateway, answer: StreamedResponse) -> None:
        self.gateway = gateway
        self.answer = answer

    def __iter__(self) -> Iterator[bytes]:
        while (chunk := self.gateway.run(self.answer.next_chunk())) is not None:
            yield chunk

    def close(self) -> None:
        self.gateway.run(self.answer.close())


@functools.cache
def _body_stream(package: ModuleType) -> type[_BodyStream]:
    """``_BodyStream`` as a ``SyncByteStream`` of ``package`` (its ``Response`` checks the stream's class)."""
    return type("_BodyStream", (_BodyStream, package.SyncByteStream), {})


class SyncEventStream:
    """A streamed answer read from the test's thread (``tests.support.sse.EventStream``'s methods)."""

    def __init__(self, gateway: InProcessGateway, answer: StreamedResponse) -> None:
        self._gateway = gateway
        self.answer = answer
        self.status = answer.status
        self.headers = answer.headers

    @property
    def ended(self) -> bool:
        return self.answer.ended

    def read_event(self, timeout: float) -> tuple[str, str, str | None] | None:
        """The next (event, data, id), None when nothing came within ``timeout`` or the stream ended."""
        return self._gateway.run(self.answer.next_event(timeout), timeout + 5)

    def read(self, timeout: float = READ_S) -> bytes:
        """The rest of the body."""
        return self._gateway.run(self.answer.read(timeout), timeout + 5)

    def logs(self, count: int, timeout: float = 5.0) -> list[dict]:
        """The next ``count`` log items (fewer when ``timeout`` runs out first)."""
        return read_logs(self.read_event, count, timeout)

    def close(self) -> None:
        """Leave the stream (the app sees the client disconnect)."""
        self._gateway.run(self.answer.close(), READ_S + 5)
