"""``default.validUrls``: passes when every URL in the text is well formed (``not`` inverts).

Parameters: ``not`` (boolean, default false). A URL is any ``scheme://...`` run of the text (trailing
punctuation dropped). It is valid when its scheme is http or https, its port (if any) is 1..65535 and its host is
an IP address, ``localhost``, or a domain name of at least two labels (letters, digits and inner hyphens, at most
63 characters each, 253 in all) whose last label is alphabetic or an ``xn--`` label. Nothing is fetched or
resolved. A text without URLs passes.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import msgspec

from gateway.guardrails.checks.base import Check, Params, Verdict, inverted
from gateway.guardrails.text import Subject

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{0,15}://[^\s<>\"'`]+")
_TRAILING = ".,;:!?)]}'\""
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_TLD = re.compile(r"^(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$")


class ValidUrlsParams(Params, frozen=True):
    negate: bool = msgspec.field(default=False, name="not")


class ValidUrls(Check):
    id = "default.validUrls"
    params_type = ValidUrlsParams

    def run(self, subject: Subject) -> Verdict:
        urls = [match.group(0).rstrip(_TRAILING) for match in _URL.finditer(subject.text)]
        bad = [url for url in urls if not valid_url(url)]
        if not urls:
            return Verdict(inverted(True, self.params.negate), "the text has no URLs")
        if bad:
            shown = ", ".join(repr(url) for url in bad[:5])
            return Verdict(inverted(False, self.params.negate), f"{len(bad)} of {len(urls)} URLs are not valid: "
                                                                 f"{shown}", {"invalid": bad[:20]})
        return Verdict(inverted(True, self.params.negate), f"all {len(urls)} URLs are valid")


def valid_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or port == 0:
        return False
    host = parts.hostname
    if not host:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    if host == "localhost":
        return True
    host = host[:-1] if host.endswith(".") else host
    labels = host.split(".")
    if len(host) > 253 or len(labels) < 2:
        return False
    return all(_LABEL.match(label) for label in labels) and _TLD.match(labels[-1]) is not None
