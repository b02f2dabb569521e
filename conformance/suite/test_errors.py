"""spec/errors.md: ERR-5, for implementations that claim their messages name the rule."""

from __future__ import annotations

import pytest
from hypothesis import given

from conformance import judge, rules
from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_validation import layout_verdict
from conformance.suite.test_st_validation import grid_layouts
from conformance.world.protocol import RULE_ID

SPEC_IDS = {rule.id for rule in rules.load()}


@pytest.mark.rules("ERR-5")
@given(layout=grid_layouts())
def test_a_rejected_layout_names_a_rule_of_the_spec(impl, layout):
    judge.requires(impl, "sharded_tensor", "rule_ids_in_messages")
    shape, shards = layout
    meta = TensorMeta(tuple(ShardMeta.from_json(s) for s in shards), tuple(shape))
    if layout_verdict(meta).ok:
        return
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is judged elsewhere
        impl.st_validate(shards, shape)
    named = set(RULE_ID.findall(str(info.value)))
    judge.assert_equal(
        "rule ids the spec defines, named in the message",
        bool(named & SPEC_IDS),
        True,
        f"validate({shards}, size={shape}) raised {info.value!r}",
        rule="ERR-5",
    )
