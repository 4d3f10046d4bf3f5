"""The agent card the gateway serves for a registered agent: the stored card with the gateway as the agent's only
endpoint and the gateway key as its only credential, so a client pointed at the gateway never learns or needs the
agent's address or credentials.

What changes (everything else is the agent's card as it was validated at registration):

- **Endpoints.** Only JSON-RPC interfaces are kept (the gateway relays the JSON-RPC binding only): a 1.0 card's
  ``supportedInterfaces`` keeps the entries whose ``protocolBinding`` is ``JSONRPC`` and whose ``url`` is the one
  the gateway sends to (all JSON-RPC ones when none is), each ``url`` made the gateway's endpoint for the agent; a
  0.3 card's top-level ``url`` is that endpoint and ``preferredTransport`` ``JSONRPC``, its ``additionalInterfaces``
  keep the ``JSONRPC`` ones, rewritten the same way. The A2A SDK's client (a2a-sdk 1.3.0) reads
  ``supportedInterfaces`` and, for a card without them, builds them from ``url``/``preferredTransport``/
  ``additionalInterfaces``; it posts to the chosen interface's ``url``.
- **Credentials.** ``securitySchemes`` becomes two alternatives that both mean the gateway key, with a security
  requirement for each: ``gatewayKey`` (an API key in the ``x-gateway-api-key`` header) and ``gatewayBearer`` (HTTP
  bearer). A 1.0 card gets them in 1.0's shape (``apiKeySecurityScheme {location, name}``,
  ``httpAuthSecurityScheme {scheme}``, ``securityRequirements [{schemes: {name: {list: []}}}]``), a card without
  ``supportedInterfaces`` in 0.3's (``{type: apiKey, in, name}``, ``{type: http, scheme}``,
  ``security [{name: []}]``). The SDK's ``AuthInterceptor`` sets the header of the first requirement its credential
  service has a credential for. The skills' own security requirements are dropped (they named the agent's schemes).
- **Signatures** are dropped: they signed the agent's card, not this one.

The extended card an agent answers to ``GetExtendedAgentCard`` / ``agent/getAuthenticatedExtendedCard`` goes through
the same change before it reaches the client (``served_result``).
"""

from __future__ import annotations

from typing import Any

import msgspec

JSONRPC = "JSONRPC"
KEY_HEADER = "x-gateway-api-key"
_KEY_DESCRIPTION = "the gateway key (x-gateway-api-key, or Authorization: Bearer <gateway key>)"
_MODERN_SCHEMES = {
    "gatewayKey": {"apiKeySecurityScheme": {"description": _KEY_DESCRIPTION, "location": "header",
                                            "name": KEY_HEADER}},
    "gatewayBearer": {"httpAuthSecurityScheme": {"description": _KEY_DESCRIPTION, "scheme": "Bearer"}},
}
_MODERN_REQUIREMENTS: list[dict[str, Any]] = [{"schemes": {"gatewayKey": {"list": []}}},
                                              {"schemes": {"gatewayBearer": {"list": []}}}]
_LEGACY_SCHEMES = {
    "gatewayKey": {"type": "apiKey", "description": _KEY_DESCRIPTION, "in": "header", "name": KEY_HEADER},
    "gatewayBearer": {"type": "http", "description": _KEY_DESCRIPTION, "scheme": "bearer"},
}
_LEGACY_REQUIREMENTS: list[dict[str, Any]] = [{"gatewayKey": []}, {"gatewayBearer": []}]
#: the methods whose result is an agent card
CARD_METHODS = frozenset({"GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"})


def served_card(stored: bytes, endpoint: str, own_url: str) -> bytes:
    """The card to serve for an agent whose stored card is ``stored`` (a JSON object), which the gateway reaches at
    ``endpoint`` and clients at ``own_url``."""
    card = msgspec.json.decode(stored)
    if not isinstance(card, dict):
        card = {}
    return msgspec.json.encode(rewritten(card, endpoint, own_url))


def rewritten(card: dict[str, Any], endpoint: str, own_url: str) -> dict[str, Any]:
    """``card`` as the gateway serves it (a new object; see the module docstring)."""
    out = dict(card)
    modern = isinstance(out.get("supportedInterfaces"), list)
    if modern:
        out["supportedInterfaces"] = _interfaces(out["supportedInterfaces"], "protocolBinding", endpoint, own_url)
    if "url" in out:
        out["url"] = own_url
        if "preferredTransport" in out:
            out["preferredTransport"] = JSONRPC
    if isinstance(out.get("additionalInterfaces"), list):
        kept = _interfaces(out["additionalInterfaces"], "transport", endpoint, own_url)
        if kept:
            out["additionalInterfaces"] = kept
        else:
            del out["additionalInterfaces"]
    for name in ("securitySchemes", "securityRequirements", "security", "signatures"):
        out.pop(name, None)
    if modern:
        out["securitySchemes"], out["securityRequirements"] = _MODERN_SCHEMES, _MODERN_REQUIREMENTS
    else:
        out["securitySchemes"], out["security"] = _LEGACY_SCHEMES, _LEGACY_REQUIREMENTS
    skills = out.get("skills")
    if isinstance(skills, list):
        out["skills"] = [{k: v for k, v in skill.items() if k not in ("security", "securityRequirements")}
                         if isinstance(skill, dict) else skill for skill in skills]
    return out


def _interfaces(entries: list[Any], binding: str, endpoint: str, own_url: str) -> list[dict[str, Any]]:
    jsonrpc = [e for e in entries if isinstance(e, dict) and str(e.get(binding, "")).upper() == JSONRPC]
    relayed = [e for e in jsonrpc if e.get("url") == endpoint] or jsonrpc
    return [{**entry, "url": own_url} for entry in relayed]


def served_result(method: str, result: Any, endpoint: str, own_url: str) -> Any:
    """An agent's ``result`` to ``method`` as the client gets it: an extended agent card rewritten as the public one
    is, anything else as it came."""
    if method in CARD_METHODS and isinstance(result, dict):
        return rewritten(result, endpoint, own_url)
    return result
