"""The headers a record sends its upstream (an MCP server's, an agent's): sealed at rest as one JSON object bound to
the record's kind, workspace and slug, shown masked as provider slugs' secrets are (``providers.mask``), opened for
the data path, and a masked value sent back in an update given the stored value again.

The rules of the headers themselves (names, values, reserved names) are ``mcp_servers.check_headers``'s; a change
of the record's URL must send them again or remove them (``secret_hosts.check_slug_move``).
"""

from __future__ import annotations

import msgspec

from gateway.controlplane.providers import mask
from gateway.controlplane.sealing import looks_masked
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest

_headers = msgspec.json.Decoder(dict[str, str])


def sealed(box: SecretBox, context: str, headers: dict[str, str]) -> tuple[str | None, dict[str, str]]:
    """``headers`` sealed under ``context`` (None when there are none) and as every answer shows them."""
    token = box.seal(msgspec.json.encode(headers), context) if headers else None
    return token, {name: mask(value) for name, value in headers.items()}


def opened(box: SecretBox, context: str, token: str | None) -> dict[str, str]:
    """The headers sealed as ``token`` under ``context`` ({} for none; SecretError when another key sealed them)."""
    if token is None:
        return {}
    return _headers.decode(box.open(token, context))


def restore_masked(given: dict[str, str], stored: dict[str, str], moved: bool, called: str) -> dict[str, str]:
    """``given`` headers with each value that is the mask of the stored value of the same header replaced by that
    value (an answer's headers sent back unchanged keep their secrets); a masked value with no such stored value,
    or one sent with a new URL (``moved``), is a 400 naming it (``called``: what the record is, ``server``)."""
    restored = dict(given)
    for name, value in given.items():
        if not looks_masked(value):
            continue
        where = f"headers.{name}"
        if name not in stored or mask(stored[name]) != value:
            raise InvalidRequest(f"{where} is a masked value with no stored header of that name: send the value "
                                 "itself (a masked value sent back unchanged keeps the stored one)", param=where)
        if moved:
            raise InvalidRequest(f"{where} is a masked value, but this update changes url: send the value itself "
                                 f"again (a stored credential never follows a change of {called})", param=where)
        restored[name] = stored[name]
    return restored
