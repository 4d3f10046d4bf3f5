"""A real browser (Debian's Chromium, driven by Playwright) holds a Realtime session with a client secret its server
minted: the page sets no header and never sees a gateway key or a provider key (docs/websockets.md, "From a
browser" and "Client secrets"). The secret opens one session; the page's second try is refused."""

from __future__ import annotations

import json
import os

import pytest

from tests.realtime.test_client_secrets import mint, slug_for
from tests.realtime.test_realtime_e2e import ws_url
from tests.support.controlplane import create_key
from tests.support.poll import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

#: the page's code: open the socket with the secret as a subprotocol, ask for one response, report what came
SESSION = """async ([url, secret]) => await new Promise((resolve) => {
  const ws = new WebSocket(url, ["realtime", "openai-insecure-api-key." + secret]);
  const types = [];
  const done = (outcome) => resolve({...outcome, types, protocol: ws.protocol});
  ws.onmessage = (message) => {
    const event = JSON.parse(message.data);
    types.push(event.type);
    if (event.type === "session.created") {
      ws.send(JSON.stringify({type: "response.create", response: {output_modalities: ["text"]}}));
    }
    if (event.type === "response.done") {
      ws.close(1000);
      done({opened: true, usage: event.response.usage});
    }
  };
  ws.onclose = (closed) => done({opened: false, code: closed.code});
  setTimeout(() => done({opened: false, code: -1}), 20000);
})"""


def test_a_page_holds_a_session_with_a_minted_secret_and_no_headers(gw, mock):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver (.ci/run does it)")
    from playwright.sync_api import sync_playwright

    base = mock.scenario()
    admin = create_key(gw)
    member = create_key(gw, role="member", workspace=admin["workspace_id"])
    slug = slug_for(gw, base, admin["key"])
    minted = mint(gw, member["key"], {}, **{"x-gateway-provider": f"@{slug}"})
    assert minted.status == 200, minted.text
    secret = minted.json()["value"]
    url = f"{ws_url(gw.url)}/v1/realtime?model=gpt-realtime"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{gw.url}/health")  # a page of the gateway's own origin
            first = page.evaluate(SESSION, [url, secret])
            again = page.evaluate(SESSION, [url, secret])
        finally:
            browser.close()
    assert first["opened"] and first["protocol"] == "realtime", first
    assert first["types"][0] == "session.created" and first["types"][-1] == "response.done"
    assert first["usage"]["total_tokens"] > 0
    assert not again["opened"] and again["types"] == []  # the secret opened its one session
    upstream = mock.calls(base)["requests"][0]
    assert upstream["headers"]["authorization"] == "Bearer sk-slug-key"  # the slug's key, never the page's
    assert secret not in json.dumps(upstream["headers"])

    def listed() -> list[dict] | None:
        from tests.support.http import request

        data = request("GET", f"{gw.url}/v1/logs?limit=50", headers={"x-gateway-api-key": member["key"]}).json()
        sessions = [item for item in data["data"] if item["endpoint"] == "realtime" and item["status"] == 101]
        return sessions or None

    [session] = wait_for(listed, 10.0)
    assert session["workspace"] == member["workspace_id"] and secret not in json.dumps(session)
