"""The console in Chromium against two gateway instances sharing Redis and a PostgreSQL log store: the console of
one instance shows, live, the requests the other serves, and its charts count both instances' requests."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.console.test_browser import enter_key, sdk
from tests.support.postgres import create_database, drop_database
from tests.support.servers import start_gateway


@pytest.fixture(scope="module")
def shared_instances(mock_server):
    from tests.support.controlplane import clear_redis_prefix
    from tests.support.redis_servers import random_prefix, test_redis_url

    url, prefix = test_redis_url(), random_prefix()
    pg, name = create_database()
    env = {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix, "GATEWAY_SECRET_KEY": f"secret-{prefix}",
           "GATEWAY_LOG_STORE_URL": pg}
    first = start_gateway(env, workers=2)
    second = start_gateway(env, workers=2)
    yield first, second
    second.stop()
    first.stop()
    clear_redis_prefix(url, prefix)
    drop_database(name)


def test_the_console_of_one_instance_shows_both_instances_requests_live_and_in_its_charts(page, shared_instances,
                                                                                           mock):
    a, b = shared_instances
    base = mock.scenario()
    enter_key(page, a)
    expect(page.locator("#live-state")).to_have_text("live")
    served = {}
    for name, server in (("b", b), ("a", a)):  # the other instance first
        trace = f"console-{name}-{uuid.uuid4().hex}"
        sdk(server, base, trace).chat.completions.create(model="gpt-4o-mini",
                                                         messages=[{"role": "user", "content": "hi"}])
        served[name] = trace
        expect(page.locator(f'#log-rows tr[data-trace="{trace}"]')).to_have_count(1, timeout=5000)  # live
    enter_key(page, a, where="#/glance")
    page.click('button[data-window="15m"]')
    expect(page.locator("#glance-cards")).to_have_attribute("data-requests", re.compile(r"^2$"), timeout=10000)
