"""Reading an A2A agent's card from its well-known location and validating it, for the agent records
(``gateway.controlplane.agents``) at create, at a change of ``url`` or ``headers`` and at refresh.

The read: ``GET {url}/.well-known/agent-card.json`` through the worker's upstream transport (the SSRF guard's
pinned address, checked by the caller first; a redirect is refused, never followed), within ``FETCH_TIMEOUT_S``,
with the record's headers (the agent's own credential, sent to the agent's own origin). The body is read as it
arrives and the read stops at ``MAX_CARD_BYTES``: a card past it is a 413 and the connection is dropped, so no more
than the limit and one read is ever held. Whatever fails on the way (unreachable, an HTTP error, a timeout) is a
502 or 504 naming the agent, its text bounded and the headers' values masked (``upstream.error_text``).

Facts relied on (A2A specification and the official Python SDK, a2a-sdk 1.3.0, read from its wheel):

- The card is served at ``/.well-known/agent-card.json`` (``a2a.utils.constants.AGENT_CARD_WELL_KNOWN_PATH``; the
  specification moved it there from ``/.well-known/agent.json`` in 0.3.0, and the SDK's resolver reads no other
  path). The older path is not read: an agent of a revision before 0.3 does not speak what the relay speaks.
- The gateway's spec asks for "a JSON object with url and name; over 1 MB rejected". A 1.0 card has no top-level
  ``url``: its endpoints are ``supportedInterfaces[]`` (``url``, ``protocolBinding``, ``protocolVersion``, each
  REQUIRED), the first the agent's preferred. The SDK's resolver reads a card with ``supportedInterfaces`` by that
  list alone, and a 0.3 card (top-level ``url`` with ``preferredTransport``, default JSONRPC, and
  ``additionalInterfaces[]`` of ``{url, transport}``; ``protocolVersion`` default ``0.3.0``) as that list's
  equivalent. So the card's url is, in that order: the first ``supportedInterfaces`` entry whose
  ``protocolBinding`` is ``JSONRPC``; else the top-level ``url`` when its transport is JSONRPC; else the first
  ``additionalInterfaces`` entry of transport ``JSONRPC``. A card with neither list nor ``url`` is refused naming
  ``url``; one with no JSON-RPC endpoint is refused naming the list (the gateway relays JSON-RPC only).
- Required of every card (REQUIRED in the 1.0 proto's field behaviours, required in the 0.3 model): ``name``
  (a non-empty string here), ``description`` and ``version`` (strings), ``capabilities`` (an object),
  ``defaultInputModes`` and ``defaultOutputModes`` (lists of strings), ``skills`` (a list of objects with string
  ``id``, ``name``, ``description`` and a list of strings ``tags``); ``provider``, when present, an object with
  string ``url`` and ``organization``. Lists and strings may be empty, and in a 1.0 card absent: the SDK serves a
  card whose REQUIRED fields are empty (it only warns), and the ProtoJSON it writes leaves empty fields out (an
  agent with no skills serves no ``skills`` key), so absent reads as empty there. A present field of another
  type is refused.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

import msgspec

from gateway.controlplane.agents import Card, check_agent_url
from gateway.http.errors import (
    BadUpstreamResponse,
    Forbidden,
    GatewayError,
    InvalidRequest,
    PayloadTooLarge,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from gateway.observability.masking import MIN_SECRET
from gateway.upstream.error_text import bounded, scrub_text
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamTransport
from gateway.waiting import within

#: the spec's limit on an agent card: 1 MB
MAX_CARD_BYTES = 1_048_576
WELL_KNOWN_PATH = "/.well-known/agent-card.json"
#: how long reading a card may take in all (connect, head and body)
FETCH_TIMEOUT_S = 10.0
#: the A2A binding the gateway relays
JSONRPC = "JSONRPC"
#: how much of an agent's error body an error message quotes
_QUOTED = 512

#: the SSRF guard's check of a host and port (``PinnedResolver.check``): 403 for a refused address
CheckHost = Callable[[str, int], Awaitable[None]]


def card_url(url: str) -> str:
    """Where the card of the agent at base URL ``url`` is read."""
    return url.rstrip("/") + WELL_KNOWN_PATH


# -- validation -----------------------------------------------------------------------------------------------


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"the agent card's {message}", param=param)


def _string(doc: dict[str, Any], name: str, where: str, non_empty: bool = False, absent_empty: bool = False) -> str:
    value = doc.get(name)
    param = f"{where}.{name}"
    if value is None and absent_empty and not non_empty:
        return ""
    if value is None:
        raise _bad(param, f"{param[5:]} is required")
    if not isinstance(value, str):
        raise _bad(param, f"{param[5:]} must be a string, got {type(value).__name__}")
    if non_empty and not value.strip():
        raise _bad(param, f"{param[5:]} must not be empty")
    return value


def _strings(doc: dict[str, Any], name: str, where: str, absent_empty: bool = False) -> list[str]:
    value = doc.get(name)
    param = f"{where}.{name}"
    if value is None and absent_empty:
        return []
    if value is None:
        raise _bad(param, f"{param[5:]} is required (a list of strings)")
    if not isinstance(value, list):
        raise _bad(param, f"{param[5:]} must be a list of strings, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _bad(f"{param}[{i}]", f"{param[5:]}[{i}] must be a string, got {type(item).__name__}")
    return value


def _objects(doc: dict[str, Any], name: str, where: str, required: bool = True) -> list[dict[str, Any]]:
    value = doc.get(name)
    param = f"{where}.{name}"
    if value is None:
        if required:
            raise _bad(param, f"{param[5:]} is required (a list of objects)")
        return []
    if not isinstance(value, list):
        raise _bad(param, f"{param[5:]} must be a list of objects, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise _bad(f"{param}[{i}]", f"{param[5:]}[{i}] must be an object, got {type(item).__name__}")
    return value


def _endpoint(url: str, param: str) -> str:
    """The card's JSON-RPC URL when it is http(s) in the SSRF guard's form; else a 400 naming ``param``."""
    try:
        return check_agent_url(url, param, base=False)
    except InvalidRequest as exc:
        raise _bad(param, exc.message) from None


def _interfaces(card: dict[str, Any]) -> tuple[str, str]:
    """A 1.0 card's JSON-RPC endpoint and protocol version from ``supportedInterfaces``."""
    listed = _objects(card, "supportedInterfaces", "card")
    if not listed:
        raise _bad("card.supportedInterfaces", "supportedInterfaces must list at least one interface")
    for i, item in enumerate(listed):
        where = f"card.supportedInterfaces[{i}]"
        for name in ("url", "protocolBinding", "protocolVersion"):
            _string(item, name, where, non_empty=True)
    for i, item in enumerate(listed):
        if item["protocolBinding"] == JSONRPC:
            return _endpoint(item["url"], f"card.supportedInterfaces[{i}].url"), item["protocolVersion"]
    bindings = sorted({str(item["protocolBinding"])[:40] for item in listed})
    raise _bad("card.supportedInterfaces", f"supportedInterfaces name no {JSONRPC} interface (only "
                                           f"{', '.join(bindings)}): the gateway relays A2A over JSON-RPC only")


def _legacy(card: dict[str, Any]) -> tuple[str, str]:
    """A 0.3 card's JSON-RPC endpoint and protocol version from ``url``, ``preferredTransport`` and
    ``additionalInterfaces``."""
    if card.get("url") is None:
        raise _bad("card.url", "url is required: a card must give its endpoint as url (A2A 0.3) or in "
                               "supportedInterfaces (A2A 1.0)")
    url = _string(card, "url", "card", non_empty=True)
    version = "0.3.0" if card.get("protocolVersion") is None else _string(card, "protocolVersion", "card")
    transport = JSONRPC if card.get("preferredTransport") is None else _string(card, "preferredTransport", "card")
    extra = _objects(card, "additionalInterfaces", "card", required=False)
    for i, item in enumerate(extra):
        where = f"card.additionalInterfaces[{i}]"
        _string(item, "url", where, non_empty=True)
        _string(item, "transport", where, non_empty=True)
    if transport == JSONRPC:
        return _endpoint(url, "card.url"), version
    for i, item in enumerate(extra):
        if item["transport"] == JSONRPC:
            return _endpoint(item["url"], f"card.additionalInterfaces[{i}].url"), version
    raise _bad("card.preferredTransport", f"preferredTransport is {transport[:40]!r} and no additionalInterfaces "
                                          f"entry is {JSONRPC}: the gateway relays A2A over JSON-RPC only")


def validated(body: bytes) -> Card:
    """The card ``body`` holds when it is an A2A agent card the gateway can relay to (module docstring); else a
    400 naming the field (``card.name``, ``card.skills[0].id``) or a 413 past ``MAX_CARD_BYTES``."""
    return _validated(body)[0]


def _validated(body: bytes) -> tuple[Card, str]:
    """``validated``'s card and the field its endpoint came from."""
    if len(body) > MAX_CARD_BYTES:
        raise too_large()
    try:
        card = msgspec.json.decode(body)
        text = body.decode("utf-8")
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise _bad("card", f"body is not JSON: {bounded(str(exc), 200)}") from None
    if not isinstance(card, dict):
        raise _bad("card", f"body must be a JSON object, got {_json_kind(card)}")
    name = _string(card, "name", "card", non_empty=True)
    # a 1.0 card is ProtoJSON, which leaves out an empty string, list or message: absent reads as empty
    v1 = "supportedInterfaces" in card
    if v1:
        endpoint, version, source = *_interfaces(card), "card.supportedInterfaces"
    else:
        endpoint, version, source = *_legacy(card), "card.url"
    _string(card, "description", "card", absent_empty=v1)
    _string(card, "version", "card", absent_empty=v1)
    capabilities = card.get("capabilities", {} if v1 else None)
    if not isinstance(capabilities, dict):
        raise _bad("card.capabilities", "capabilities is required (an object)" if capabilities is None
                   else f"capabilities must be an object, got {_json_kind(capabilities)}")
    _strings(card, "defaultInputModes", "card", absent_empty=v1)
    _strings(card, "defaultOutputModes", "card", absent_empty=v1)
    for i, skill in enumerate(_objects(card, "skills", "card", required=not v1)):
        where = f"card.skills[{i}]"
        for field in ("id", "name"):
            _string(skill, field, where, non_empty=True)
        _string(skill, "description", where, absent_empty=v1)
        _strings(skill, "tags", where, absent_empty=v1)
    provider = card.get("provider")
    if provider is not None:
        if not isinstance(provider, dict):
            raise _bad("card.provider", "provider must be an object")
        _string(provider, "organization", "card.provider")
        _string(provider, "url", "card.provider")
    return Card(text=text, name=name, endpoint=endpoint, protocol_version=version), source


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


def too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"the agent card is larger than {MAX_CARD_BYTES} bytes (1 MB), the most an agent card "
                           "may be; the gateway stopped reading it", param="card")


# -- reading ----------------------------------------------------------------------------------------------------


def _secrets(headers: dict[str, str]) -> list[str]:
    found: set[str] = set()
    for value in headers.values():
        found.add(value)
        scheme, _, rest = value.partition(" ")
        if rest.strip() and scheme.lower() in ("bearer", "basic", "token"):
            found.add(rest.strip())
    return sorted((s for s in found if len(s) >= MIN_SECRET), key=len, reverse=True)


async def check_address(check_host: CheckHost, url: str, param: str) -> None:
    """The SSRF guard's address check of ``url``'s host (a 403 naming ``param`` when refused)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        await check_host(parts.hostname or "", port)
    except Forbidden as exc:
        raise Forbidden(exc.message, param=param) from None


async def fetch(transport: UpstreamTransport, check_host: CheckHost, slug: str, url: str,
                headers: dict[str, str], timeout_s: float | None = None) -> Card:
    """The validated card of the agent ``slug`` at base URL ``url`` (read with ``headers``): its address and its
    endpoint's pass the SSRF guard (403 naming ``url`` or the card's field), the read is bounded (module
    docstring) and what fails is named as such (400, 413, 502, 504)."""
    await check_address(check_host, url, "url")
    timeout_s = FETCH_TIMEOUT_S if timeout_s is None else timeout_s
    secrets = _secrets(headers)
    try:
        body = await within(_read(transport, card_url(url), headers), timeout_s)
    except TimeoutError:
        raise UpstreamTimeout(f"agent '{slug}' did not serve its card within {timeout_s:g} s", param="url") from None
    except Forbidden as exc:  # the pinned resolver refused the address at connect time
        raise Forbidden(exc.message, param="url") from None
    except PayloadTooLarge:
        raise
    except GatewayError as exc:
        text = scrub_text(f"agent '{slug}': reading its card failed: {bounded(exc.message)}", secrets)
        kind = UpstreamTimeout if exc.status == 504 else (
            UpstreamUnreachable if isinstance(exc, UpstreamUnreachable) else BadUpstreamResponse)
        raise kind(text, param="url") from None
    card, source = _validated(body)
    await check_address(check_host, card.endpoint, source)
    return card


async def _read(transport: UpstreamTransport, where: str, headers: dict[str, str]) -> bytes:
    """The body of ``GET where``, at most ``MAX_CARD_BYTES``; a 2xx only (a redirect is not followed)."""
    request = UpstreamRequest(where, {"accept": "application/json", **headers}, b"", method="GET")
    response = await transport.open(request, stream=True)
    status = response.status
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := await response.read_some():
            size += len(chunk)
            if size > MAX_CARD_BYTES and 200 <= status < 300:
                response.close()
                raise too_large()
            if size <= _QUOTED or 200 <= status < 300:
                chunks.append(chunk)
            elif not 200 <= status < 300:
                break  # an error's start is enough to quote
    except response.read_errors as exc:
        response.close()
        raise UpstreamUnreachable(f"the agent {response.failure_text(exc)}") from None
    if 200 <= status < 300:
        response.release()
        return b"".join(chunks)
    response.close()
    if 300 <= status < 400:
        location = bounded(response.headers.get("location", ""), 200)
        raise BadUpstreamResponse(f"{where} answered HTTP {status} (a redirect to {location or 'nowhere'}); the "
                                  "gateway does not follow redirects: register the URL the card is served under")
    quoted = b"".join(chunks)[:_QUOTED].decode("utf-8", "replace")
    raise BadUpstreamResponse(f"{where} answered HTTP {status}: {quoted}")
