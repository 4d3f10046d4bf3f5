"""The console in a real browser, used as an operator would: enter a key, watch a request made with the SDK appear
live, filter, open it (a prompt full of markup shows as text), read the charts, and validate a config in the
playground (a fault highlighted at its JSON path) before sending a test request through it."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from openai import OpenAI
from playwright.sync_api import expect

from tests.support.http import post
from tests.support.servers import ADMIN_KEY

XSS = "<img src=x onerror=alert(1)>"
XSS_META = "<script>alert(2)</script>"
XSS_MODEL = "<img src=x onerror=alert(3)>"


def sdk(gateway, base: str, trace: str, **headers: str) -> OpenAI:
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-provider-token", max_retries=0, timeout=30,
                  default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                                   "x-gateway-custom-host": f"{base}/v1", "x-gateway-trace-id": trace, **headers})


def enter_key(page, gateway, key: str = ADMIN_KEY, where: str = "") -> None:
    page.goto(f"{gateway.url}/console{where}")
    page.fill("#key-input", key)
    page.click("#key-use")


def new_trace() -> str:
    return f"console-{uuid.uuid4().hex}"


def test_a_request_made_with_the_sdk_appears_live_and_opens_with_its_prompt_as_text(page, console_gateway, mock):
    enter_key(page, console_gateway)
    expect(page.locator("#key-state")).to_have_text("key accepted")
    expect(page.locator("#live-state")).to_have_text("live")
    trace = new_trace()
    client = sdk(console_gateway, mock.scenario(), trace, **{"x-gateway-metadata": json.dumps({"note": XSS_META})})
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": XSS}])
    row = page.locator(f'#log-rows tr[data-trace="{trace}"]')
    expect(row).to_have_count(1, timeout=5000)  # live: no reload
    expect(row).to_contain_text("vendorA")
    expect(row).to_contain_text("gpt-4o-mini")
    row.click()
    detail = page.locator("#log-detail")
    expect(detail).to_contain_text(trace)
    expect(detail).to_contain_text(XSS)  # the markup, as characters
    expect(detail).to_contain_text(XSS_META)
    expect(detail).to_contain_text("added by the gateway")
    assert detail.locator("img").count() == 0 and detail.locator("script").count() == 0
    assert page.problems.dialogs == []
    page.wait_for_timeout(300)  # an injected handler would have fired by now


def test_filters_narrow_the_live_log(page, console_gateway, mock):
    trace = new_trace()
    enter_key(page, console_gateway)
    page.fill("#filter-trace", trace)
    page.select_option("#filter-status", "5xx")
    page.click("#log-filters button[type=submit]")
    expect(page.locator("#live-state")).to_have_text("live")
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk-x",
               "content-type": "application/json", "x-gateway-trace-id": trace}
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    ok, failing = mock.scenario(), mock.scenario([{"status": 503}])
    assert post(f"{console_gateway.url}/v1/chat/completions", body,
                {**headers, "x-gateway-custom-host": ok + "/v1"}).status == 200
    assert post(f"{console_gateway.url}/v1/chat/completions", body,
                {**headers, "x-gateway-custom-host": failing + "/v1"}).status == 503
    rows = page.locator("#log-rows tr")
    expect(rows).to_have_count(1, timeout=5000)
    expect(rows.first.locator("td.status")).to_have_text("503")
    page.wait_for_timeout(1500)  # the 200 never shows under a 5xx filter
    expect(rows).to_have_count(1)
    page.select_option("#filter-status", "")  # any status: both, from the backlog
    page.click("#log-filters button[type=submit]")
    expect(rows).to_have_count(2, timeout=5000)
    page.fill("#filter-provider", "anthropic")
    page.click("#log-filters button[type=submit]")
    expect(page.locator("#live-state")).to_have_text("live")
    expect(rows).to_have_count(0)


def test_the_charts_show_the_requests_just_made(page, console_gateway, mock):
    base = mock.scenario()
    client = sdk(console_gateway, base, new_trace())
    for _ in range(5):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    enter_key(page, console_gateway, where="#/glance")
    page.click('button[data-window="15m"]')
    cards = page.locator("#glance-cards")
    expect(cards).to_have_attribute("data-requests", re.compile(r"^[1-9]\d*$"), timeout=10000)
    for chart in ("rps", "latency", "tokens"):
        box = page.locator(f"#chart-{chart}")
        expect(box.locator("canvas")).to_have_count(1)
        assert int(box.get_attribute("data-points")) > 0, chart
    expect(page.locator("#glance-groups")).to_contain_text("gpt-4o-mini")
    page.select_option("#glance-group", label="vendorA · gpt-4o-mini")  # the charts of one provider and model
    expect(page.locator(".charts")).to_have_attribute("data-focus", '["vendorA","gpt-4o-mini"]')
    assert int(page.locator("#chart-rps").get_attribute("data-points")) > 0
    page.locator('#glance-groups tr[data-group=\'["vendorA","gpt-4o-mini"]\']').click()  # a click on its row: all
    expect(page.locator(".charts")).to_have_attribute("data-focus", "")


def test_a_model_name_full_of_markup_shows_as_text_in_the_log_and_the_charts_page(page, console_gateway, mock):
    enter_key(page, console_gateway)
    expect(page.locator("#live-state")).to_have_text("live")
    trace = new_trace()
    sdk(console_gateway, mock.scenario(), trace).chat.completions.create(
        model=XSS_MODEL, messages=[{"role": "user", "content": "hi"}])
    row = page.locator(f'#log-rows tr[data-trace="{trace}"]')
    expect(row).to_contain_text(XSS_MODEL, timeout=5000)
    page.click('#nav a[data-page="glance"]')
    page.click('button[data-window="15m"]')
    expect(page.locator("#glance-groups")).to_contain_text(XSS_MODEL, timeout=10000)
    expect(page.locator("#glance-group option", has_text=XSS_MODEL)).to_have_count(1)
    page.select_option("#glance-group", label=f"vendorA · {XSS_MODEL}")
    expect(page.locator(".charts")).to_have_attribute("data-focus", json.dumps(["vendorA", XSS_MODEL],
                                                                                separators=(",", ":")))
    assert page.locator("main img").count() == 0
    page.wait_for_timeout(300)  # an injected handler would have fired by now


def test_a_late_answer_for_a_window_left_behind_does_not_replace_the_one_picked(page, console_gateway):
    enter_key(page, console_gateway, where="#/glance")
    charts = page.locator(".charts")
    page.click('button[data-window="15m"]')
    expect(charts).to_have_attribute("data-window", "15m")
    held = []
    page.route(re.compile(r".*/v1/logs/aggregates\?window=1d.*"), lambda route: held.append(route))  # slow day
    page.click('button[data-window="1d"]')
    page.wait_for_timeout(300)
    page.click('button[data-window="1h"]')
    expect(charts).to_have_attribute("data-window", "1h")
    assert held, "the day's request was not made"
    for route in held:
        route.continue_()
    page.wait_for_timeout(1000)  # the day's answer has arrived by now
    expect(charts).to_have_attribute("data-window", "1h")
    expect(page.locator('button[data-window="1h"]')).to_have_class("active")


def test_a_bad_config_is_highlighted_at_its_path(page, console_gateway):
    enter_key(page, console_gateway, where="#/playground")
    bad = ('{\n  "strategy": {"mode": "fallback"},\n  "targets": [\n    {"provider": "vendorA", "api_key": "k"},\n'
           '    {"provider": "vendorA", "api_key": "k", "retry": {"attempts": 50}}\n  ]\n}')
    page.fill("#config-editor", bad)
    expect(page.locator("#error-path")).to_have_text("targets[1].retry.attempts")
    expect(page.locator("#config-verdict")).to_contain_text("must be an integer 0..10")
    expect(page.locator("#error-mark")).to_have_text('"attempts": 50')
    expect(page.locator("#config-tree li")).to_have_count(0)


def test_a_valid_config_shows_its_tree_and_a_test_request_its_answer_headers_and_trace(page, console_gateway, mock):
    enter_key(page, console_gateway, where="#/playground")
    dead, alive = mock.scenario([{"status": 500}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "retry": {"attempts": 0}, "api_key": "sk-from-config",
              "targets": [{"provider": "vendorA", "custom_host": dead + "/v1"},
                          {"provider": "vendorA", "custom_host": alive + "/v1", "name": "backup"}]}
    page.fill("#config-editor", json.dumps(config, indent=2))
    expect(page.locator("#config-verdict")).to_have_text("Valid config")
    tree = page.locator("#config-tree")
    expect(tree.locator('li[data-path="config.targets[1]"]')).to_contain_text("backup")
    expect(tree.locator('li[data-path="config.targets[1]"] tr.inherited')).to_contain_text(["api_key", "retry"])
    assert "sk-from-config" not in tree.inner_text()
    page.click("#try-send")
    expect(page.locator("#try-status")).to_have_text("200", timeout=10000)
    expect(page.locator("#try-answer")).to_contain_text("Hello from the gateway mock")
    headers = page.locator("#try-headers")
    expect(headers).to_contain_text("x-gateway-last-used-option-index")
    expect(headers).to_contain_text("config.targets[1]")
    expect(headers).to_contain_text("x-gateway-trace-id")
    trace = page.locator("#try-trace")
    expect(trace).to_contain_text("answering target", timeout=8000)
    expect(trace).to_contain_text("config.targets[1]")
    expect(trace).to_contain_text("fallbacks")


def test_the_key_lives_in_this_tab_only(page, browser, console_gateway):
    enter_key(page, console_gateway, key="not-a-key")
    expect(page.locator("#key-state")).to_have_text("key rejected")
    enter_key(page, console_gateway)
    expect(page.locator("#key-state")).to_have_text("key accepted")
    assert page.evaluate("sessionStorage.getItem('gateway-console-key')") == ADMIN_KEY
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    assert ADMIN_KEY not in page.url
    assert page.locator("#key-input").input_value() == ""
    other = browser.new_context().new_page()
    try:
        other.goto(f"{console_gateway.url}/console")
        expect(other.locator("main")).to_contain_text("Enter a gateway key")
    finally:
        other.context.close()
    page.click("#key-forget")
    assert page.evaluate("sessionStorage.getItem('gateway-console-key')") is None


@pytest.mark.parametrize("where", ["#/logs", "#/glance", "#/playground"])
def test_every_page_loads_under_the_strict_policy(page, console_gateway, where):
    enter_key(page, console_gateway, where=where)
    expect(page.locator(f'#nav a[data-page="{where[2:]}"]')).to_have_class("active")
    page.wait_for_timeout(500)  # violations and script errors are collected by the fixture
