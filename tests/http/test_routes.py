"""The route table: exact routes, path parameters, and what a wrong method or path answers."""

from __future__ import annotations

from gateway.http.routes import RouteTable


def handler(name: str):
    async def run(scope, receive, send) -> None:
        return None

    run.__name__ = name
    return run


def table() -> tuple[RouteTable, dict]:
    routes = RouteTable()
    h = {n: handler(n) for n in ("chat", "list", "get", "delete", "render")}
    routes.add("POST", "/v1/chat/completions", h["chat"])
    routes.add("GET", "/v1/prompts", h["list"])
    routes.add("GET", "/v1/prompts/{prompt_id}", h["get"])
    routes.add("DELETE", "/v1/prompts/{prompt_id}", h["delete"])
    routes.add("POST", "/v1/prompts/{prompt_id}/render", h["render"])
    return routes, h


def test_exact_routes_need_no_parameters():
    routes, h = table()
    assert routes.exact("POST", "/v1/chat/completions") is h["chat"]
    assert routes.match("POST", "/v1/chat/completions") == (h["chat"], None, [])


def test_parameters_are_named_segments():
    routes, h = table()
    assert routes.match("GET", "/v1/prompts/pp-1") == (h["get"], {"prompt_id": "pp-1"}, [])
    assert routes.match("POST", "/v1/prompts/pp-1/render") == (h["render"], {"prompt_id": "pp-1"}, [])


def test_wrong_method_lists_the_allowed_ones():
    routes, _ = table()
    assert routes.match("PUT", "/v1/prompts/pp-1") == (None, None, ["DELETE", "GET", "HEAD"])
    assert routes.match("GET", "/v1/chat/completions") == (None, None, ["POST"])


def test_unknown_paths_match_nothing():
    routes, _ = table()
    assert routes.match("GET", "/v1/prompts/pp-1/other") == (None, None, [])
    assert routes.match("GET", "/v1/nothing") == (None, None, [])
    assert routes.match("POST", "/v1/chat/completions/") == (None, None, [])
    assert routes.match("GET", "/v1/prompts//render") == (None, None, [])
    assert routes.match("GET", "/v1/prompts/pp-1/") == (None, None, [])


def test_the_table_lists_every_route_as_written():
    routes, _ = table()
    assert sorted(routes.routes()) == [
        ("DELETE", "/v1/prompts/{prompt_id}"), ("GET", "/v1/prompts"), ("GET", "/v1/prompts/{prompt_id}"),
        ("POST", "/v1/chat/completions"), ("POST", "/v1/prompts/{prompt_id}/render")]
