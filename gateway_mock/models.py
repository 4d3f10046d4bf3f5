"""Mock of the providers' models lists: ``GET /v1/models`` in vendorA's format, or anthropic's when the request
carries ``x-api-key`` (anthropic's auth header).

vendorA: ``{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}``. anthropic:
``{"data": [{"type": "model", "id", "display_name", "created_at"}], "has_more", "first_id", "last_id"}``. The
model ids are ``DEFAULT_MODELS`` (or anthropic's), or the step's ``reply`` split at commas.
"""

from __future__ import annotations

import re
from typing import Any

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, respond_json

DEFAULT_MODELS = ("gpt-4o", "gpt-4o-mini", "text-embedding-3-small")
ANTHROPIC_MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5")
CREATED = 1_700_000_000


def _ids(req: MockRequest, default: tuple[str, ...]) -> list[str]:
    if req.step.reply:
        return [m.strip() for m in req.step.reply.split(",") if m.strip()]
    return list(default)


async def models(req: MockRequest, send: Send) -> None:
    if "x-api-key" in req.headers:
        ids = _ids(req, ANTHROPIC_MODELS)
        items = [{"type": "model", "id": i, "display_name": i.replace("-", " ").title(),
                  "created_at": "2025-09-29T00:00:00Z"} for i in ids]
        await respond_json(send, 200, {"data": items, "has_more": False, "first_id": ids[0] if ids else None,
                                       "last_id": ids[-1] if ids else None})
        return
    data: list[dict[str, Any]] = [{"id": i, "object": "model", "created": CREATED, "owned_by": "mock"}
                                  for i in _ids(req, DEFAULT_MODELS)]
    await respond_json(send, 200, {"object": "list", "data": data})


ROUTES = [("GET", re.compile(r"^(?:/v1)?/models$"), models)]
