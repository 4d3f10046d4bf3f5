"""The exact-match cache key: what of a request changes its answer, hashed within its workspace.

A key is a BLAKE2b digest of:
- the workspace (always: two workspaces never share an answer);
- the partition: ``x-gateway-cache-namespace`` when given, else ``x-gateway-metadata`` (so a namespace makes the
  metadata and every other header irrelevant to the key);
- the target: its provider and what decides which upstream and deployment answers (``TARGET_FIELDS``);
- the endpoint (chat, completions, embeddings, ...);
- the request body as sent upstream (after param rewriting and redaction), minus ``IGNORED_FIELDS``; object keys
  in any order make the same key.
The provider's API key is not part of it: clients of one workspace that call the same target with different
provider keys share answers.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from gateway.schema.config import Config

#: body fields that do not change the answer: how it is delivered (``stream``, ``stream_options``), who asks
#: (``user``, ``safety_identifier``) and what the provider keeps or hints (``store``, ``metadata``,
#: ``prompt_cache_key``)
IGNORED_FIELDS = frozenset({
    "stream", "stream_options", "user", "safety_identifier", "store", "metadata", "prompt_cache_key",
})

#: config fields that decide which upstream (and which deployment or region) answers
TARGET_FIELDS = (
    "provider", "custom_host", "strict_vendorA_compliance", "resource_name", "deployment_id", "api_version",
    "cloudA_region", "cloudB_region", "cloudB_deployment_name", "cloudB_endpoint_name", "cloudB_api_version",
    "cloudB_deployment_type", "cloudC_project_id", "cloudC_region",
)

KEY_VERSION = 1
_encode = msgspec.json.Encoder(order="sorted").encode


def target_identity(config: Config) -> list[Any]:
    """The values of ``TARGET_FIELDS`` on an effective target config."""
    return [getattr(config, name) for name in TARGET_FIELDS]


def answer_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the fields that do not change the answer (a new dict; ``body`` is not changed)."""
    return {k: v for k, v in body.items() if k not in IGNORED_FIELDS}


def partition(workspace: str, namespace: str | None, metadata: dict[str, Any] | None) -> bytes:
    """The part of every key that says whose answers may be shared: the workspace and the namespace or metadata."""
    if namespace is not None:
        return _encode([KEY_VERSION, workspace, "ns", namespace])
    return _encode([KEY_VERSION, workspace, "md", metadata or {}])


def simple_key(part: bytes, config: Config, endpoint: str, body: dict[str, Any]) -> str:
    """The exact-match key of a request (see the module docstring)."""
    digest = hashlib.blake2b(part, digest_size=20)
    digest.update(b"\x00")
    digest.update(_encode([target_identity(config), endpoint, answer_fields(body)]))
    return "r:" + digest.hexdigest()
