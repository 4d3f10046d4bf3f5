"""AWS Signature Version 4 request signing as pure functions (canonical request, string to sign, key, header).

Facts relied on (AWS's public Signature Version 4 documentation and its published test suite):

- canonical request = method, canonical URI, canonical query, canonical headers (each ``name:value`` line ends in
  a newline, so a blank line follows the block), the signed-header list, and the hex SHA-256 of the payload, joined
  by newlines;
- URI encoding leaves only ``A-Z a-z 0-9 - _ . ~`` unencoded and writes upper-case hex; for every service but S3
  the path is normalised (empty, ``.`` and ``..`` segments resolved) and then encoded once more than it was sent,
  so a sent ``%3A`` appears as ``%253A``;
- header names are lower-cased and sorted, values trimmed with inner runs of spaces collapsed to one;
- the query is sorted by encoded name, then value;
- string to sign = ``AWS4-HMAC-SHA256``, the ``YYYYMMDDTHHMMSSZ`` request time, the scope
  ``date/region/service/aws4_request`` and the hex SHA-256 of the canonical request, joined by newlines;
- signing key = HMAC-SHA256 chain ``"AWS4" + secret`` -> date -> region -> service -> ``aws4_request``;
  the signature is the hex HMAC of the string to sign under that key;
- ``Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<scope>, SignedHeaders=<list>, Signature=<hex>``;
  temporary credentials add ``X-Amz-Security-Token`` (signed here), ``X-Amz-Content-Sha256`` may carry the payload
  hash.

The signer signs exactly the Host and path bytes it is given: the caller sends those same bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Callable, Iterable, Mapping, NamedTuple
from urllib.parse import quote, unquote

from gateway.bounded_cache import BoundedCache

ALGORITHM = "AWS4-HMAC-SHA256"
TERMINATOR = "aws4_request"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_UNRESERVED = "-_.~"  # with letters and digits, the only characters AWS leaves unencoded
_sha256 = hashlib.sha256
_hmac_new = hmac.new


class Credentials(NamedTuple):
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


class ParsedAuthorization(NamedTuple):
    """The parts of an ``Authorization`` header (used by verifiers such as the mock)."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str


def uri_encode(value: str, safe: str = "") -> str:
    """Percent-encode every byte of the UTF-8 form except unreserved characters (and ``safe``), upper-case hex."""
    return quote(value, safe=_UNRESERVED + safe)


def normalize_path(path: str) -> str:
    """Resolve empty, ``.`` and ``..`` segments (non-S3 services); keeps a trailing slash."""
    if not path:
        return "/"
    segments: list[str] = []
    for segment in path.split("/"):
        if not segment or segment == ".":
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    out = "/" + "/".join(segments)
    if segments and path.endswith("/"):
        out += "/"
    return out


def canonical_uri(path: str, *, s3: bool = False) -> str:
    """The canonical URI of a path as sent on the wire (already percent-encoded once)."""
    if s3:
        return path or "/"
    return uri_encode(normalize_path(path), safe="/")


def canonical_query(query: str) -> str:
    """The canonical query string of a raw (encoded) query: each name and value re-encoded, sorted."""
    if not query:
        return ""
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((uri_encode(unquote(name)), uri_encode(unquote(value))))
    pairs.sort()
    return "&".join(f"{n}={v}" for n, v in pairs)


def _clean(value: str) -> str:
    return " ".join(value.split())


def canonical_headers(headers: Mapping[str, str], names: Iterable[str] | None = None) -> tuple[str, str]:
    """``(canonical header block, signed-header list)`` for ``names`` (default: every header given)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    chosen = sorted({n.lower() for n in names} if names is not None else lowered)
    block = "".join(f"{n}:{_clean(lowered.get(n, ''))}\n" for n in chosen)
    return block, ";".join(chosen)


def canonical_request(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    payload_sha256: str,
    names: Iterable[str] | None = None,
) -> tuple[str, str]:
    """``(canonical request, signed-header list)``; ``path`` is the path exactly as sent."""
    block, signed = canonical_headers(headers, names)
    text = f"{method.upper()}\n{canonical_uri(path)}\n{canonical_query(query)}\n{block}\n{signed}\n{payload_sha256}"
    return text, signed


def scope(date: str, region: str, service: str) -> str:
    return f"{date}/{region}/{service}/{TERMINATOR}"


def string_to_sign(amz_date: str, credential_scope: str, canonical: str) -> str:
    digest = _sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{amz_date}\n{credential_scope}\n{digest}"


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The derived key (it changes once a day per secret, region and service: a ``Signer`` keeps it)."""
    key = _hmac_new(("AWS4" + secret).encode("utf-8"), date.encode(), _sha256).digest()
    key = _hmac_new(key, region.encode(), _sha256).digest()
    key = _hmac_new(key, service.encode(), _sha256).digest()
    return _hmac_new(key, TERMINATOR.encode(), _sha256).digest()


def signature(key: bytes, to_sign: str) -> str:
    return _hmac_new(key, to_sign.encode("utf-8"), _sha256).hexdigest()


def authorization(access_key_id: str, credential_scope: str, signed_headers: str, sig: str) -> str:
    return f"{ALGORITHM} Credential={access_key_id}/{credential_scope}, SignedHeaders={signed_headers}, Signature={sig}"


def amz_date(now: float | None = None) -> str:
    """``YYYYMMDDTHHMMSSZ`` (UTC) for ``now`` (default: the current time)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


#: derived keys a Signer keeps (one per secret, day, region and service in use)
SIGNING_KEYS_MAX = 256


class Signer:
    """Signs requests with what is worth keeping between them: derived keys (a bounded cache, so a secret is not
    held for the life of the process once many others were used since) and the current second's timestamp."""

    __slots__ = ("_keys", "_second", "_stamp")

    def __init__(self, max_keys: int = SIGNING_KEYS_MAX) -> None:
        self._keys: BoundedCache[tuple[str, str, str, str], bytes] = BoundedCache(max_keys)
        self._second = 0
        self._stamp = ""

    def key(self, secret: str, date: str, region: str, service: str) -> bytes:
        """``signing_key``, derived once per (secret, date, region, service) while it stays in the cache."""
        cache_key = (secret, date, region, service)
        key = self._keys.get(cache_key)
        if key is None:
            key = self._keys.put(cache_key, signing_key(secret, date, region, service))
        return key

    def now(self) -> str:
        """``amz_date()`` for the current second, formatted once per second."""
        second = int(time.time())
        if self._second != second:
            self._second = second
            self._stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
        return self._stamp

    def sign(self, method: str, host: str, path: str, body: bytes, credentials: Credentials, region: str,
             service: str, *, headers: Mapping[str, str] | None = None) -> dict[str, str]:
        """``sign`` with this signer's kept keys and timestamp."""
        return sign(method, host, path, body, credentials, region, service, headers=headers, when=self.now(),
                    key_for=self.key)


def sign(
    method: str,
    host: str,
    path: str,
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
    *,
    query: str = "",
    headers: Mapping[str, str] | None = None,
    when: str | None = None,
    content_sha256: bool = True,
    key_for: Callable[[str, str, str, str], bytes] = signing_key,
) -> dict[str, str]:
    """The headers to send: ``host``, ``x-amz-date``, (``x-amz-content-sha256``), (``x-amz-security-token``),
    the given ``headers`` and ``authorization``. Every header returned except ``authorization`` is signed."""
    stamp = when or amz_date()
    payload = _sha256(body).hexdigest() if body else EMPTY_SHA256
    out: dict[str, str] = {"host": host, "x-amz-date": stamp}
    if headers:
        for name, value in headers.items():
            out[name.lower()] = value
    if content_sha256:
        out["x-amz-content-sha256"] = payload
    if credentials.session_token:
        out["x-amz-security-token"] = credentials.session_token
    canonical, signed = canonical_request(method, path, query, out, payload)
    credential_scope = scope(stamp[:8], region, service)
    key = key_for(credentials.secret_access_key, stamp[:8], region, service)
    sig = signature(key, string_to_sign(stamp, credential_scope, canonical))
    out["authorization"] = authorization(credentials.access_key_id, credential_scope, signed, sig)
    return out


def parse_authorization(value: str) -> ParsedAuthorization | None:
    """Split an ``AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`` header; None if malformed."""
    if not value.startswith(ALGORITHM + " "):
        return None
    fields: dict[str, str] = {}
    for part in value[len(ALGORITHM) + 1:].split(","):
        name, sep, item = part.strip().partition("=")
        if not sep:
            return None
        fields[name] = item
    try:
        credential = fields["Credential"].split("/")
        signed = tuple(fields["SignedHeaders"].split(";"))
        sig = fields["Signature"]
    except KeyError:
        return None
    if len(credential) != 5 or credential[4] != TERMINATOR or not sig:
        return None
    return ParsedAuthorization(credential[0], credential[1], credential[2], credential[3], signed, sig)


def verify(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    parsed: ParsedAuthorization,
) -> bool:
    """Recompute the signature of a received request from its own header values and compare in constant time."""
    stamp = headers.get("x-amz-date", "")
    if stamp[:8] != parsed.date:
        return False
    payload = _sha256(body).hexdigest()
    canonical, _ = canonical_request(method, path, query, headers, payload, parsed.signed_headers)
    credential_scope = scope(parsed.date, parsed.region, parsed.service)
    key = signing_key(secret, parsed.date, parsed.region, parsed.service)
    expected = signature(key, string_to_sign(stamp, credential_scope, canonical))
    return hmac.compare_digest(expected, parsed.signature)
