"""The in-process dispatcher's streaming call: the answer handed on part by part as the app sends it, a caller that
leaves seen by the app as a client disconnect (a pending receive answers it, the next send raises), and an error the
app raises handed on as its JSON answer."""

from __future__ import annotations

import asyncio

import msgspec

from gateway.http.errors import NotFound
from gateway.jobs.dispatch import Headers, InProcessDispatcher


class Sink:
    def __init__(self) -> None:
        self.status = 0
        self.headers: Headers = []
        self.parts: list[bytes] = []
        self.got_part = asyncio.Event()

    async def start(self, status: int, headers: Headers) -> None:
        self.status, self.headers = status, headers

    async def body(self, data: bytes) -> None:
        self.parts.append(data)
        self.got_part.set()


async def test_parts_are_handed_on_as_sent_and_the_request_is_the_callers():
    seen = {}

    async def app(scope, receive, send):
        seen["body"] = (await receive())["body"]
        seen["key"] = scope.get("gateway.key")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for part in (b"one ", b"two"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sink = Sink()
    left = asyncio.get_running_loop().create_future()
    await InProcessDispatcher(app).stream("POST", "/x", [], b"{}", None, sink, left)
    assert (sink.status, sink.parts, seen) == (200, [b"one ", b"two"], {"body": b"{}", "key": None})


async def test_a_caller_that_leaves_is_a_disconnect_to_the_app():
    outcome = {}

    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        outcome["disconnect"] = (await receive())["type"]  # waits until the caller leaves
        try:
            await send({"type": "http.response.body", "body": b"late", "more_body": True})
        except ConnectionResetError:
            outcome["send"] = "refused"

    sink = Sink()
    left = asyncio.get_running_loop().create_future()
    call = asyncio.ensure_future(InProcessDispatcher(app).stream("POST", "/x", [], b"", None, sink, left))
    await sink.got_part.wait()
    left.set_result(None)
    await call
    assert outcome == {"disconnect": "http.disconnect", "send": "refused"} and sink.parts == [b"first"]


async def test_an_error_the_app_raises_is_handed_on_as_its_answer():
    async def app(scope, receive, send):
        raise NotFound("nothing here", param="path")

    sink = Sink()
    await InProcessDispatcher(app).stream("POST", "/x", [], b"", None, sink,
                                          asyncio.get_running_loop().create_future())
    assert sink.status == 404
    assert msgspec.json.decode(b"".join(sink.parts))["error"]["param"] == "path"
