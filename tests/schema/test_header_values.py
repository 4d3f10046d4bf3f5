"""Which config values are refused for holding CR, LF or NUL, and how the refused one is named."""

from __future__ import annotations

import pytest

from gateway.schema.config import Config, Deployment
from gateway.schema.header_values import HEADER_FIELDS, field_with_breaks, has_breaks


@pytest.mark.parametrize("value, broken", [("sk-a", False), ("a\rb", True), ("a\nb", True), ("a\x00", True),
                                           ("tab\tis fine", False), (None, False), (7, False)])
def test_only_cr_lf_and_nul_break_a_value(value, broken):
    assert has_breaks(value) is broken


@pytest.mark.parametrize("field", HEADER_FIELDS)
def test_every_header_bound_field_is_named_in_a_config_and_in_a_dict(field):
    assert field_with_breaks(Config(**{field: "x\r\ny"})) == field
    assert field_with_breaks({field: "x\ny"}) == field
    assert field_with_breaks(Config(**{field: "fine"})) is None


def test_a_deployment_is_named_by_its_index():
    config = Config(deployments=[Deployment("d", "a", "v"), Deployment("d", "a", "v\n")])
    assert field_with_breaks(config) == "deployments[1].api_version"
    assert field_with_breaks({"deployments": [{"alias": "\x00"}]}) == "deployments[0].alias"
