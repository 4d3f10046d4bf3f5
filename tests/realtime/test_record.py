"""A session's record as the logs and aggregates see it (``gateway/realtime/record.py``): its latency is the open
handshake, so a long session does not skew its workspace's latency figures, and its length is a metadata key."""

from __future__ import annotations

import json

import websockets

from tests.realtime.test_realtime_e2e import trace, vendor_config, ws_url
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY
from tests.support.socket_events import raw_until


async def test_a_sessions_latency_is_its_open_handshake_and_its_length_is_kept_beside(gw, mock):
    trace_id = trace()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario()),
               "x-gateway-trace-id": trace_id}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        for _ in range(2):
            await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
            await raw_until(ws, "response.done")
    [item] = wait_logs(gw, trace_id)
    assert item["status"] == 101
    # the handshake: the provider's connect inside it, the gateway's own work the rest; the session ran on after
    assert 0 < item["upstream_latency_ms"] <= item["latency_ms"] < item["metadata"]["realtime_duration_ms"]
    assert item["gateway_latency_ms"] is not None
    assert abs(item["latency_ms"] - item["upstream_latency_ms"] - item["gateway_latency_ms"]) < 0.01
