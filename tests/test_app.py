"""The app at the edge: trailing slashes, unknown routes and wrong methods; a module of the package that fails to
import stops the server with its traceback, instead of a route that answers 404 or a provider that answers 400 later."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY, free_port

ROOT = Path(__file__).resolve().parents[1]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_a_trailing_slash_is_served_as_the_route_without_it(gateway, mock, gw_headers):
    base = mock.scenario()
    for path in ("/v1/chat/completions/", "/v1/chat/completions//"):
        resp = post(gateway.url + path, CHAT, gw_headers(base + "/v1"))
        assert resp.status == 200, resp.text
        assert resp.json()["object"] == "chat.completion"
    assert mock.calls(base)["calls"] == 2
    resp = request("GET", f"{gateway.url}/health/")
    assert resp.status == 200 and resp.json()["status"] == "ok"


def test_a_wrong_method_on_a_slashed_path_names_only_the_allowed_methods(gateway):
    resp = request("GET", f"{gateway.url}/v1/chat/completions/", headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 405
    assert resp.headers["allow"] == "POST"
    message = resp.json()["error"]["message"]
    assert message.startswith("GET is not allowed") and "allowed: POST" in message


def test_an_unknown_path_with_a_slash_is_404(gateway):
    resp = post(f"{gateway.url}/v1/chat/nothing/", CHAT, {"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 404


BLOCKER = '''
import sys

class _Broken:
    """Makes one module of the package fail to import, in every process (Granian's workers too)."""

    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise ImportError("simulated failure importing " + name)
        return None

sys.meta_path.insert(0, _Broken())
'''


@pytest.mark.parametrize("module", ["gateway.providers.cohere", "gateway.schema.rerank"])
def test_a_module_that_fails_to_import_stops_the_start_with_its_traceback(tmp_path, module):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(module=module))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "GATEWAY_ADMIN_KEY": ADMIN_KEY,
           "GATEWAY_DATA_DIR": str(tmp_path / "data"), "GATEWAY_PORT": str(free_port())}
    done = subprocess.run([sys.executable, "-m", "gateway", "serve"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" in done.stderr and f"simulated failure importing {module}" in done.stderr
