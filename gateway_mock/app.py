"""The mock upstream's ASGI app: scenario control endpoints and dispatch to each provider module's ROUTES.

Every module in ``gateway_mock`` with a ``ROUTES`` list of ``(method, compiled path regex, handler)`` is served;
its optional ``error(req, send)`` writes scripted errors in that provider's own format (vendorA's otherwise).
A module's ``WS_ROUTES`` (``(compiled path regex, handler)``) serve WebSocket upgrades the same way, under the same
``/s/{id}`` scenario prefix (see ``gateway_mock/websocket.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import re

import msgspec

import gateway_mock as mock_package
from gateway_mock import vendorA
from gateway_mock.asgi import Receive, Scope, Send
from gateway_mock.kit import (
    DEFAULT_STEP,
    Handler,
    MockRequest,
    MockState,
    Scenario,
    Step,
    _current,
    respond,
    respond_json,
)
from gateway_mock.websocket import Socket, WsHandler

Route = tuple[str, re.Pattern[str], Handler, Handler]


def discover_websockets() -> list[tuple[re.Pattern[str], WsHandler]]:
    """``(path pattern, handler)`` of every provider module's WebSocket routes."""
    routes: list[tuple[re.Pattern[str], WsHandler]] = []
    for info in pkgutil.iter_modules(mock_package.__path__):
        if info.name in ("app", "kit"):
            continue
        routes.extend(getattr(importlib.import_module(f"gateway_mock.{info.name}"), "WS_ROUTES", ()))
    return routes


def discover() -> list[Route]:
    """``(method, path pattern, handler, error writer)`` of every provider module's routes."""
    routes: list[Route] = []
    for info in pkgutil.iter_modules(mock_package.__path__):
        if info.name in ("app", "kit"):
            continue
        module = importlib.import_module(f"gateway_mock.{info.name}")
        found = getattr(module, "ROUTES", None)
        if not found:
            continue
        error = getattr(module, "error", vendorA.error)
        for method, pattern, handler in found:
            routes.append((method, pattern, handler, error))
    return routes


async def _read(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(parts)


async def _watch(receive: Receive, req: MockRequest) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            req.disconnected = True
            return


async def _control(scenarios: dict[str, Scenario], method: str, scenario_id: str, body: bytes,
                   send: Send) -> None:
    if method == "POST":
        try:
            scenario = msgspec.json.decode(body or b"{}", type=Scenario)
        except msgspec.MsgspecError as exc:
            await respond_json(send, 400, {"error": {"message": f"bad scenario: {exc}"}})
            return
        scenario.calls = 0
        scenario.requests = []
        scenarios[scenario_id] = scenario
        await respond_json(send, 200, {"ok": True})
    elif method == "GET":
        found = scenarios.get(scenario_id)
        if found is None:
            await respond_json(send, 404, {"error": {"message": "no such scenario"}})
            return
        await respond_json(send, 200, {"calls": found.calls, "requests": found.requests})
    elif method == "DELETE":
        scenarios.pop(scenario_id, None)
        await respond_json(send, 200, {"ok": True})
    else:
        await respond_json(send, 405, {"error": {"message": "method not allowed"}})


class MockApp:
    """The ASGI app: one instance holds its routes and everything it remembers (``state``)."""

    def __init__(self) -> None:
        self.state = MockState()
        self.routes = discover()
        self.websocket_routes = discover_websockets()

    def _scenario_step(self, path: str, entry: dict) -> tuple[str, Step, dict | None]:
        """The path without its ``/s/{id}`` prefix, the scenario's next step and the recorded entry (or none)."""
        if not path.startswith("/s/"):
            return path, DEFAULT_STEP, None
        scenario_id, _, rest = path[3:].partition("/")
        scenario = self.state.scenarios.get(scenario_id)
        if scenario is None:
            scenario = self.state.scenarios[scenario_id] = Scenario()
        step = scenario.next_step()
        entry["path"] = "/" + rest
        scenario.requests.append(entry)
        del scenario.requests[:-100]
        return "/" + rest, step, entry

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode()
        record = {"method": "GET", "path": scope["path"], "query": query, "headers": headers, "body": "",
                  "completed": False, "aborted": False}
        path, step, entry = self._scenario_step(scope["path"], record)
        socket = Socket(scope, receive, send, entry)
        if not await socket.wait_connect():
            return
        req = MockRequest("GET", path, query, headers, b"", step, self.state)
        req.raw_path = scope.get("raw_path") or scope["path"].encode()
        for pattern, handler in self.websocket_routes:
            match = pattern.match(path)
            if match is None:
                continue
            req.match = match
            try:
                await handler(req, socket)
            except BaseException:
                if entry is not None:
                    entry["aborted"] = True
                await socket.close(1011, "mock error")
                raise
            if entry is not None:
                entry["completed"] = True
            return
        body = f'{{"error": {{"message": "mock has no WebSocket route for {path}"}}}}'.encode()
        await socket.refuse(404, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        method = scope["method"]
        path = scope["path"]
        body = await _read(receive)
        if path.startswith("/_mock/scenarios/"):
            await _control(self.state.scenarios, method, path[len("/_mock/scenarios/"):], body, send)
            return
        step = DEFAULT_STEP
        entry: dict | None = None
        if path.startswith("/s/"):
            scenario_id, _, rest = path[3:].partition("/")
            path = "/" + rest
            scenario = self.state.scenarios.get(scenario_id)
            if scenario is None:
                scenario = self.state.scenarios[scenario_id] = Scenario()
            step = scenario.next_step()
            entry = {
                "method": method, "path": path, "query": scope.get("query_string", b"").decode(),
                "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
                "body": body.decode("utf-8", "replace"), "completed": False, "aborted": False,
            }
            scenario.requests.append(entry)
            del scenario.requests[:-100]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        req = MockRequest(method, path, scope.get("query_string", b"").decode(), headers, body, step, self.state)
        req.raw_path = scope.get("raw_path") or scope["path"].encode()
        for route_method, pattern, handler, error in self.routes:
            match = pattern.match(path)
            if match is None or route_method != method:
                continue
            req.match = match
            _current.set(req)
            watcher = asyncio.ensure_future(_watch(receive, req))
            try:
                if step.delay_ms:
                    await asyncio.sleep(step.delay_ms / 1000)
                if step.html:
                    await respond(send, 200, b"<html><body><h1>Welcome to nginx!</h1></body></html>", b"text/html")
                elif step.status >= 400:
                    await error(req, send)
                else:
                    await handler(req, send)
            except BaseException:
                if entry is not None:
                    entry["aborted"] = True
                if req.disconnected:
                    return
                raise
            finally:
                watcher.cancel()
            if entry is not None:
                entry["completed"] = True
            return
        await respond_json(send, 404, {"error": {"message": f"mock has no route for {method} {path}",
                                                 "type": "invalid_request_error", "param": None, "code": None}})


#: the app ``gateway mock-upstream`` serves (Granian imports it by name); tests may build their own ``MockApp()``
app = MockApp()
