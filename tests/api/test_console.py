"""``GET /console`` and its files: served from the package with a strict CSP and ``nosniff``, no request data in
them, cacheable by ETag; ``GATEWAY_CONSOLE=off`` removes the console and its API routes."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from tests.support.asgi import call, in_process
from tests.support.http import request
from tests.support.servers import ADMIN_KEY

STATIC = resources.files("gateway.console").joinpath("static")


def csp(headers: dict[str, str]) -> dict[str, str]:
    return {d.split()[0]: d.split(" ", 1)[1] if " " in d else "" for d in
            (p.strip() for p in headers["content-security-policy"].split(";")) if d}


def test_the_page_is_served_with_a_strict_policy(gateway):
    resp = request("GET", f"{gateway.url}/console")
    assert resp.status == 200 and resp.headers["content-type"] == "text/html; charset=utf-8"
    policy = csp(resp.headers)
    assert policy["script-src"] == "'self'" and policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'" and policy["connect-src"] == "'self'"
    assert "unsafe-inline" not in resp.headers["content-security-policy"]
    assert "unsafe-eval" not in resp.headers["content-security-policy"]
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["x-frame-options"] == "DENY" and resp.headers["referrer-policy"] == "no-referrer"
    assert "<script>" not in resp.text and not re.search(r"\son[a-z]+\s*=", resp.text, re.I)  # nothing inline


def test_every_file_the_page_loads_is_served_from_the_gateway_itself(gateway):
    page = request("GET", f"{gateway.url}/console").text
    refs = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert refs and all(ref.startswith("console/") or ref == "data:," for ref in refs)
    scripts = [ref for ref in refs if ref.endswith(".js")]
    modules: set[str] = set()
    for ref in scripts:
        resp = request("GET", f"{gateway.url}/{ref}")
        assert resp.status == 200 and resp.headers["content-type"] == "text/javascript; charset=utf-8"
        assert resp.headers["x-content-type-options"] == "nosniff"
        modules.update(re.findall(r'from "\./([^"]+)"', resp.text))
    for name in modules:
        resp = request("GET", f"{gateway.url}/console/{name}")
        assert resp.status == 200, name
        assert "innerHTML" not in resp.text and "eval(" not in resp.text and "insertAdjacentHTML" not in resp.text
        assert "document.write" not in resp.text
    css = request("GET", f"{gateway.url}/console/vendor/uplot/uPlot.min.css")
    assert css.status == 200 and css.headers["content-type"] == "text/css; charset=utf-8"


def test_the_vendored_chart_library_keeps_its_licence_and_version():
    folder = STATIC.joinpath("vendor", "uplot")
    assert "MIT License" in folder.joinpath("LICENSE").read_text()
    assert "1.6.32" in folder.joinpath("SOURCE.txt").read_text()
    assert "(v1.6.32)" in folder.joinpath("uPlot.iife.min.js").read_text()[:200]


def test_files_revalidate_by_etag(gateway):
    first = request("GET", f"{gateway.url}/console/main.js")
    assert first.headers["cache-control"] == "no-cache"
    again = request("GET", f"{gateway.url}/console/main.js", headers={"if-none-match": first.headers["etag"]})
    assert again.status == 304 and again.body == b""
    assert again.headers["content-security-policy"]


def test_the_page_needs_no_key_but_shows_nothing_without_one(gateway):
    page = request("GET", f"{gateway.url}/console").text
    assert ADMIN_KEY not in page and "gateway key" in page.lower()
    assert request("GET", f"{gateway.url}/v1/logs/stream").status == 401


def test_a_trailing_slash_goes_to_the_page(gateway):
    resp = request("GET", f"{gateway.url}/console/")
    assert resp.status == 308 and resp.headers["location"] == "../console"


def test_unknown_console_files_are_404(gateway):
    assert request("GET", f"{gateway.url}/console/nope.js").status == 404
    assert request("GET", f"{gateway.url}/console/vendor/uplot/LICENSE").status == 404  # only page assets


@pytest.fixture
async def console_off():
    async with in_process({"GATEWAY_CONSOLE": "off"}) as app:
        yield app


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/console", 404), ("GET", "/console/main.js", 404), ("GET", "/v1/logs/stream", 404),
    ("GET", "/v1/logs/aggregates", 404),
    # /v1/configs/{config_id} (saved configs) still answers GET, PUT and DELETE there: POST is a 405
    ("POST", "/v1/configs/validate", 405),
])
async def test_console_off_removes_the_routes(console_off, method, path, status):
    resp = await call(console_off, method, path, headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == status


async def test_console_off_keeps_the_logs_api(console_off):
    assert (await call(console_off, "GET", "/v1/logs", headers={"x-gateway-api-key": ADMIN_KEY})).status == 200
