"""The mustache subset of prompt templates: variables, sections, inverted sections, comments, required names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.controlplane import mustache
from gateway.controlplane.mustache import MissingVariable, TemplateError, compile_template, render, required_variables


def fill(text: str, **variables) -> str:
    return render(compile_template(text), variables)


def test_variables_are_replaced_without_html_escaping():
    assert fill("Hi {{name}}, {{ name }}!", name="<Ann & Bo>") == "Hi <Ann & Bo>, <Ann & Bo>!"
    assert fill("{{{raw}}} {{& raw}}", raw="<b>") == "<b> <b>"


def test_values_that_are_not_strings():
    assert fill("{{n}} {{f}} {{t}} {{z}} {{o}} {{l}}", n=3, f=1.5, t=True, z=None, o={"a": 1}, l=[1, "x"]) == \
        '3 1.5 true  {"a":1} [1,"x"]'


def test_dotted_names_look_into_objects():
    assert fill("{{user.name}} of {{user.team.name}}", user={"name": "Ann", "team": {"name": "blue"}}) == \
        "Ann of blue"


def test_sections_iterate_lists_enter_objects_and_skip_falsy_values():
    text = "{{#items}}[{{.}}]{{/items}}{{#user}}{{name}}{{/user}}{{#flag}}on{{/flag}}{{#empty}}x{{/empty}}"
    assert fill(text, items=["a", "b"], user={"name": "Ann"}, flag=True, empty=[]) == "[a][b]Annon"
    assert fill("{{#items}}{{name}}:{{top}} {{/items}}", items=[{"name": "x"}, {"name": "y"}], top="T") == "x:T y:T "


def test_inverted_sections_render_for_missing_or_falsy_values():
    text = "{{^items}}none{{/items}}"
    for value in (None, False, "", []):
        assert fill(text, items=value) == "none"
    assert fill(text) == "none"
    assert fill(text, items=["a"]) == ""


def test_comments_vanish_and_whitespace_is_kept():
    assert fill("a {{! a comment\n over lines }}b\n{{#s}}\nx\n{{/s}}\n", s=True) == "a b\n\nx\n\n"


def test_top_level_variables_are_required_and_section_contents_are_not():
    nodes = compile_template("{{a}} {{#s}}{{b}}{{/s}} {{c.d}} {{a}}")
    assert required_variables(nodes) == ["a", "c.d"]
    with pytest.raises(MissingVariable) as missing:
        render(nodes, {"c": {"d": 1}})
    assert missing.value.name == "a"
    assert render(nodes, {"a": 1, "c": {"d": 2}, "s": True}) == "1  2 1"


@pytest.mark.parametrize("text", ["{{#a}}x", "{{/a}}", "{{#a}}{{/b}}", "{{> partial}}", "{{=<% %>=}}",
                                  "{{two words}}", "{{}}", "Hi {{name", "{{a}} {{b", "{{#s}}x{{/s}} {{"])
def test_unsupported_or_broken_templates_are_refused(text):
    with pytest.raises(TemplateError):
        compile_template(text)


@given(st.text().filter(lambda t: "{{" not in t and "}}" not in t))
def test_text_without_tags_renders_unchanged(text):
    assert fill(text) == text


@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(max_size=20), min_size=1, max_size=5))
def test_every_variable_renders_its_value(values):
    text = "|".join("{{" + name + "}}" for name in values)
    assert fill(text, **values) == "|".join(values.values())


def test_an_unclosed_tag_is_named_with_its_position():
    with pytest.raises(TemplateError) as refused:
        compile_template("Hello {{name}}, from {{place")
    assert str(refused.value) == "tag '{{place' opened at character 21 is never closed (no '}}')"


# --- bounds: nesting depth at compile, work and size at render ---------------------------------------------------


def test_sections_nested_past_the_limit_are_refused_when_compiled():
    depth = mustache.MAX_SECTION_DEPTH
    assert fill("{{#a}}" * depth + "x" + "{{/a}}" * depth, a=True) == "x"
    for deeper in (depth + 1, 3000):
        with pytest.raises(TemplateError, match=f"deeper than {depth}"):
            compile_template("{{#a}}" * deeper + "x" + "{{/a}}" * deeper)


@pytest.mark.parametrize("template, variables", [
    ("{{#a}}" * 5 + "x" + "{{/a}}" * 5, {"a": list(range(25))}),  # ten million steps
    ("{{#a}}{{#a}}{{/a}}{{/a}}", {"a": [0] * 1_000_000}),  # items with nothing to render still count
])
def test_a_render_that_would_take_too_many_steps_stops_at_the_limit(template, variables):
    with pytest.raises(mustache.RenderLimit, match=f"{mustache.MAX_RENDER_STEPS} steps"):
        render(compile_template(template), variables)


def test_a_render_that_would_produce_too_much_text_stops_at_the_limit():
    big = "y" * (mustache.MAX_RENDERED_CHARS // 3)
    assert len(render(compile_template("{{#a}}{{big}}{{/a}}"), {"a": [1, 2], "big": big})) == 2 * len(big)
    with pytest.raises(mustache.RenderLimit, match=f"{mustache.MAX_RENDERED_CHARS} characters"):
        render(compile_template("{{#a}}{{big}}{{/a}}"), {"a": [1, 2, 3, 4], "big": big})


def test_one_budget_covers_every_render_it_is_given_to():
    budget = mustache.RenderBudget(steps=10, chars=1000)
    nodes = compile_template("{{#a}}x{{/a}}")
    assert render(nodes, {"a": [1, 2, 3]}, budget) == "xxx"
    with pytest.raises(mustache.RenderLimit):
        render(nodes, {"a": [1, 2, 3]}, budget)
