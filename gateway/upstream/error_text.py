"""What of an upstream's error text reaches the client, the log line, the log stores and traces: cut to a few KiB,
and the credentials the gateway itself put on the request masked.

An upstream decides what its error says: a 300 MB ``error.message``, or the request's own headers echoed back.
Whatever it says is cut to ``ERROR_TEXT_CHARS`` characters (``… [truncated N characters]`` says where and how
much; ``type``, ``code`` and ``param`` to ``ERROR_FIELD_CHARS``) when the error is made, and the exchange that
sent the request replaces every credential it sent (the target's ``api_key``, a provider slug's or saved config's
unsealed key, cloudA's key id, secret and session token, a token the gateway minted, the headers that carried
them) by its ``sha256:<16 hex>`` hash, as the request log hashes the secrets a client sends. A credential the cut
splits is not left half-shown: its visible start is dropped as well. See docs/http-api.md, "Errors".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gateway.http.errors import GatewayError
from gateway.observability.masking import MIN_SECRET, hash_value
from gateway.upstream.request import UpstreamRequest

#: the most of an upstream's error message a client or a log ever sees
ERROR_TEXT_CHARS = 4096
#: the most of an upstream's error ``type``, ``code`` or ``param``
ERROR_FIELD_CHARS = 256
#: how a cut text says it was cut (followed by the count and ``characters]`` or ``bytes]``)
CUT_MARK = "… [truncated "

#: request headers whose values are credentials the gateway sets (a scheme such as ``Bearer`` is not part of it)
_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token",
                       "proxy-authorization")
#: target config fields that hold credentials (a cloudC service account's key is inside its JSON)
_CREDENTIAL_FIELDS = ("api_key", "cloudA_access_key_id", "cloudA_secret_access_key", "cloudA_session_token")
_ACCOUNT_SECRETS = ("private_key", "private_key_id")
_SCHEMES = ("bearer ", "basic ", "token ")


def bounded(text: str, limit: int = ERROR_TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying where it was cut and how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{CUT_MARK}{len(text) - limit} characters]"


def bounded_field(value: Any) -> Any:
    """An upstream's ``type``, ``code`` or ``param``, cut to ERROR_FIELD_CHARS (None and numbers pass)."""
    return bounded(value, ERROR_FIELD_CHARS) if isinstance(value, str) else value


def sent_secrets(request: UpstreamRequest | None, target: Any = None, *extra: str | None) -> list[str]:
    """The credentials an upstream request carried: its credential headers' values (without a scheme such as
    ``Bearer``), the target config's credential fields and any ``extra`` (a token exchange's assertion)."""
    found: list[str] = []
    if request is not None:
        headers = request.headers
        for name in _CREDENTIAL_HEADERS:
            value = headers.get(name)
            if value:  # ``Bearer <token>`` shows as ``Bearer sha256:...``, as a client's does in the request log
                found.append(value.split(" ", 1)[1].strip() if value[:7].lower().startswith(_SCHEMES) else value)
    if target is not None:
        for field in _CREDENTIAL_FIELDS:
            value = getattr(target, field, None)
            if isinstance(value, str) and value:
                found.append(value)
        account = getattr(target, "cloudC_service_account_json", None)
        if isinstance(account, dict):
            found.extend(v for k in _ACCOUNT_SECRETS if isinstance(v := account.get(k), str) and v)
    found.extend(v for v in extra if v)
    # longest first: a secret that contains another is replaced whole
    return sorted({s for s in found if len(s) >= MIN_SECRET}, key=len, reverse=True)


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials among headers a record sets on every request to its upstream (an MCP server's, an agent's):
    every value, and the token of a ``Bearer``/``Basic``/``Token`` value on its own; longest first."""
    found = []
    for value in headers.values():
        found.append(value)
        scheme, _, rest = value.partition(" ")
        if rest and scheme.lower() in ("bearer", "basic", "token"):
            found.append(rest.strip())
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def unaddressed(text: str, url: str, called: str) -> str:
    """``text`` with the upstream at ``url`` named ``called`` instead of by its address (its URL, host and port,
    host): callers know a registered upstream by its slug, its address is the admin's. The transport's
    "upstream HOST ..." wording loses its address."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    for shown in (url, parts.netloc, f"{host}:{parts.port}" if parts.port else "", f"[{host}]", host):
        if len(shown) >= 3 and shown in text:
            text = text.replace(shown, "\x00")
    return text.replace("upstream \x00 ", "").replace("\x00", called)


def scrub_text(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced by its hash; a secret cut off by ``bounded`` loses its visible start."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, hash_value(secret))
    cut = text.rfind(CUT_MARK)
    if cut > 0:
        head = text[:cut]
        for secret in secrets:
            for size in range(min(len(secret) - 1, len(head)), MIN_SECRET // 2 - 1, -1):
                if head.endswith(secret[:size]):
                    head = head[:-size]
                    break
        text = head + text[cut:]
    return text


def scrubbed(error: GatewayError, secrets: list[str]) -> GatewayError:
    """``error`` (changed in place) with ``secrets`` masked in its message, ``param``, ``type`` and ``code``."""
    if not secrets:
        return error
    error.message = scrub_text(error.message, secrets)
    error.args = (error.message,)
    for name in ("param", "type", "code"):
        value = getattr(error, name)
        if isinstance(value, str) and value:
            clean = scrub_text(value, secrets)
            if clean != value:
                setattr(error, name, clean)
    return error
