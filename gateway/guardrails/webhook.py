"""The guardrails' one HTTP path: webhook calls and JWKS fetches through the gateway's UpstreamClient.

Every call goes through ``UpstreamClient.open``, so the SSRF rules of custom hosts apply (http/https only, no
credentials or fragment in the URL, no private, loopback, link-local or metadata address unless allow-listed in
GATEWAY_ALLOW_PRIVATE_HOSTS, the connection pinned to the checked address), and no redirect is followed. Each call
is bounded by its own timeout (connect, send and read together) and its answer by MAX_ANSWER_BYTES (counted
decompressed, as it is read). Any failure is
an ``HttpCheckError`` whose message says what went wrong; the checks turn it into a failed verdict.

The webhook request (``default.webhook``) is a POST with ``Content-Type: application/json`` plus the configured
headers, and this body:
``{"eventType": "beforeRequestHook" | "afterRequestHook",
   "request": {"json": <request body>, "text": <the text checks judge>, "endpoint", "model", "isStreamingRequest"},
   "response": {"json": <answer body or null>, "text": <answer text>, "statusCode"}   (after the request only),
   "metadata": <x-gateway-metadata>}``.
It must answer 2xx with a JSON object holding a boolean ``verdict``; optional ``explanation`` (string) and ``data``
(any JSON) are passed on into ``hook_results``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.guardrails.text import request_text
from gateway.http.errors import GatewayError
from gateway.upstream.client import UpstreamClient, failure_text
from gateway.upstream.request import UpstreamRequest

MAX_ANSWER_BYTES = 1024 * 1024
JWKS_CACHE_MAX = 256

_json_decode = msgspec.json.decode


class HttpCheckError(Exception):
    """A webhook or JWKS call failed: refused, unreachable, timed out, non-2xx or an unreadable answer."""


class CheckIO:
    """What network-bound checks use: the upstream client (None: every call fails) and a JWKS cache."""

    def __init__(self, client: UpstreamClient | None) -> None:
        self.client = client
        self._cache: BoundedCache[str, tuple[float, Any]] = BoundedCache(JWKS_CACHE_MAX)
        self._inflight: dict[str, asyncio.Future[Any]] = {}

    async def call(self, method: str, url: str, headers: dict[str, str], body: bytes, timeout_ms: int) -> bytes:
        """Send one request; the body of a 2xx answer (at most MAX_ANSWER_BYTES), else HttpCheckError."""
        if self.client is None:
            raise HttpCheckError("no HTTP client is available to guardrails")
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                resp = await self.client.open(UpstreamRequest(url, headers, body, method))
                try:
                    if not 200 <= resp.status < 300:
                        raise HttpCheckError(f"{url} answered HTTP {resp.status}")
                    return await _read_bounded(resp)
                finally:
                    resp.release()
        except TimeoutError:
            raise HttpCheckError(f"{url} did not answer within {timeout_ms} ms") from None
        except GatewayError as exc:
            raise HttpCheckError(exc.message) from None
        except (OSError, aiohttp.ClientError) as exc:
            raise HttpCheckError(f"{url} {failure_text(exc)}") from None

    async def post_json(self, url: str, headers: dict[str, str], payload: Any, timeout_ms: int) -> Any:
        """POST ``payload`` as JSON and decode the JSON answer."""
        sent = {"content-type": "application/json", **headers}
        body = await self.call("POST", url, sent, msgspec.json.encode(payload), timeout_ms)
        return _decode(body, url)

    async def cached_json(self, url: str, ttl_s: int, timeout_ms: int) -> Any:
        """GET a JSON document, cached for ``ttl_s`` seconds; concurrent misses share one fetch."""
        hit = self._cache.get(url)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        pending = self._inflight.get(url)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[url] = future
        try:
            doc = _decode(await self.call("GET", url, {"accept": "application/json"}, b"", timeout_ms), url)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            self._inflight.pop(url, None)
        if ttl_s > 0:
            self._cache[url] = (now + ttl_s, doc)
        future.set_result(doc)
        return doc


async def _read_bounded(resp: Any) -> bytes:
    """The answer, counted as it is read (decompressed); past MAX_ANSWER_BYTES its connection is dropped."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(65536):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            resp.close()
            raise HttpCheckError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(body: bytes, url: str) -> Any:
    try:
        return _json_decode(body)
    except msgspec.DecodeError:
        raise HttpCheckError(f"{url} did not answer JSON") from None


def webhook_payload(subject: Any) -> dict[str, Any]:
    """The JSON body a webhook receives for one phase (see the module docstring)."""
    request = subject.request
    doc: dict[str, Any] = {
        "eventType": "beforeRequestHook" if subject.phase == "before" else "afterRequestHook",
        "request": {
            "json": request.body,
            "text": subject.text if subject.phase == "before" else request_text(request.body, request.endpoint),
            "endpoint": request.endpoint,
            "model": request.model,
            "isStreamingRequest": request.stream,
        },
        "metadata": request.metadata,
    }
    if subject.phase == "after":
        answer = subject.answer
        doc["response"] = {
            "json": answer.json if answer is not None else None,
            "text": subject.text,
            "statusCode": answer.status if answer is not None else 200,
        }
    return doc
