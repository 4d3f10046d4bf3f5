"""The served gateway the Realtime tests share (Granian serves WebSockets; the in-process gateway has no socket)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import Server, start_gateway


@pytest.fixture(scope="package")
def gw(mock_server) -> Iterator[Server]:
    """A gateway of this package's own: small limits, so the oversized and idle sessions are quick to make."""
    server = start_gateway({"GATEWAY_REALTIME_MAX_MESSAGE_BYTES": str(256 * 1024),
                            "GATEWAY_REALTIME_IDLE_TIMEOUT_MS": "3000"})
    yield server
    server.stop()
