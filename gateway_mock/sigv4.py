"""Verifying AWS Signature Version 4 as the service does, written for the mock from AWS's public description.

The mock does not share the gateway's signer: it recomputes the signature on its own, so a mistake in the gateway's
signer shows up as a 403 instead of being agreed with. Facts relied on (AWS's public "Signature Version 4 signing
process" pages and its published test suite, ``aws-sig-v4-test-suite``):

- the ``Authorization`` header reads ``AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/<service>/aws4_request,
  SignedHeaders=<lower-case names joined by ;>, Signature=<64 hex digits>``;
- the canonical request is six lines joined by ``\\n``: the method; the canonical URI; the canonical query; the
  canonical headers (one ``name:value\\n`` line per signed header, so the block ends with an empty line); the
  signed-header list; the hex SHA-256 of the body;
- canonical URI (every service but S3): the path's empty, ``.`` and ``..`` segments are resolved, then each segment
  is URI-encoded once more than it was sent (a ``%3A`` on the wire is ``%253A`` in the canonical URI). URI encoding
  keeps ``A-Z a-z 0-9 - _ . ~`` and writes every other UTF-8 byte as ``%XX`` with upper-case hex;
- canonical query: every ``name=value`` pair URI-encoded (from its decoded form), sorted by name then value, joined
  by ``&``; an empty query is an empty line;
- canonical header values are trimmed and inner runs of white space become one space;
- the string to sign is ``AWS4-HMAC-SHA256``, the ``X-Amz-Date`` stamp (``YYYYMMDDTHHMMSSZ``), the scope
  ``<date>/<region>/<service>/aws4_request`` and the hex SHA-256 of the canonical request, joined by ``\\n``;
- the signing key is HMAC-SHA256 applied in turn to the date, region, service and ``aws4_request``, starting from
  the key ``"AWS4" + secret``; the signature is the hex HMAC-SHA256 of the string to sign under it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import unquote_to_bytes

SCHEME = "AWS4-HMAC-SHA256"
_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


@dataclass(frozen=True)
class Authorization:
    """The parts of a SigV4 ``Authorization`` header."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str


def parse(value: str) -> Authorization | None:
    """The header's parts, or None when it is not a well-formed SigV4 header."""
    scheme, _, rest = value.partition(" ")
    if scheme != SCHEME:
        return None
    fields = {}
    for item in rest.split(","):
        name, eq, text = item.strip().partition("=")
        if not eq:
            return None
        fields[name] = text
    if not {"Credential", "SignedHeaders", "Signature"} <= fields.keys() or not fields["Signature"]:
        return None
    credential = fields["Credential"].split("/")
    if len(credential) != 5 or credential[4] != "aws4_request":
        return None
    key_id, date, region, service, _ = credential
    return Authorization(key_id, date, region, service, tuple(fields["SignedHeaders"].split(";")),
                         fields["Signature"])


def encode(raw: bytes) -> str:
    """URI-encode bytes: unreserved characters stay, every other byte is ``%XX`` (upper-case hex)."""
    return "".join(chr(b) if b in _KEEP else f"%{b:02X}" for b in raw)


def canonical_uri(sent_path: str) -> str:
    """The canonical URI of a path exactly as it came on the wire (already encoded once)."""
    kept: list[str] = []
    for segment in sent_path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment not in ("", "."):
            kept.append(segment)
    uri = "/" + "/".join(encode(s.encode("utf-8")) for s in kept)
    if kept and sent_path.endswith("/"):
        uri += "/"
    return uri


def canonical_query(sent_query: str) -> str:
    """The canonical form of a raw query string."""
    pairs = []
    for item in sent_query.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((encode(unquote_to_bytes(name)), encode(unquote_to_bytes(value))))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def canonical_request(method: str, sent_path: str, sent_query: str, headers: Mapping[str, str],
                      signed: tuple[str, ...], body: bytes) -> str:
    """The canonical request over the ``signed`` header names (lower-cased and sorted; an absent one is empty)."""
    by_name = {name.lower(): value for name, value in headers.items()}
    names = sorted({name.lower() for name in signed})
    lines = "".join(f"{name}:{' '.join(by_name.get(name, '').split())}\n" for name in names)
    return "\n".join((method.upper(), canonical_uri(sent_path), canonical_query(sent_query), lines,
                      ";".join(names), hashlib.sha256(body).hexdigest()))


def string_to_sign(stamp: str, auth: Authorization, canonical: str) -> str:
    scope = f"{auth.date}/{auth.region}/{auth.service}/aws4_request"
    return "\n".join((SCHEME, stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()))


def signature(secret: str, auth: Authorization, to_sign: str) -> str:
    key = ("AWS4" + secret).encode("utf-8")
    for part in (auth.date, auth.region, auth.service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()


def is_signed_by(secret: str, auth: Authorization, method: str, sent_path: str, sent_query: str,
                 headers: Mapping[str, str], body: bytes) -> bool:
    """Whether the request carries the signature ``secret`` makes for it (its ``x-amz-date`` must be of the scope's
    day); compared in constant time."""
    stamp = headers.get("x-amz-date", "")
    if stamp[:8] != auth.date:
        return False
    canonical = canonical_request(method, sent_path, sent_query, headers, auth.signed_headers, body)
    expected = signature(secret, auth, string_to_sign(stamp, auth, canonical))
    return hmac.compare_digest(expected, auth.signature)
