"""An op's cell of the per-op table names the findings that stand for its own failure, not every
record its known-failures group names (conformance.attribution)."""

from __future__ import annotations

import pytest

from conformance.attribution import call_name, deviating, findings_of
from conformance.matrix import Run

IN_PLACE = [
    "in-place-op-on-partial-refused-as-runtimeerror",
    "in-place-squeeze-leaves-the-local-tensor",
]
FILLS = [
    "fill-of-a-partial-fills-every-part",
    "in-place-masked-fill-relabels-its-input",
    "in-place-squeeze-leaves-the-metadata",
]
VIEWS = ["uneven-view-refused-as-runtimeerror", "view-op-raises-runtimeerror-1"]


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("Tensor.squeeze_", "squeeze"),
        ("squeeze/multiple", "squeeze"),
        ("torch.addcdiv backward", "addcdiv"),
        ("nn.functional.nll_loss", "nll_loss"),
        ("torch.nn.functional.nll_loss", "nll_loss"),
        ("__getitem__", "__getitem"),
    ],
)
def test_an_op_and_a_subject_name_the_same_call_without_namespace_or_in_place_mark(name, call):
    assert call_name(name) == call


def test_a_record_that_breaks_another_rule_on_the_release_is_not_the_ops():
    # On 2.12.1 squeeze_ breaks DT-OP-11 (it leaves the local tensor), not the DT-OP-7 neg met.
    assert findings_of(IN_PLACE, ["DT-OP-7"], "neg", "2.12.1+cu130") == IN_PLACE[:1]


def test_on_a_release_where_both_break_the_rule_each_op_keeps_the_group_account():
    # On 2.13.0 both records break DT-OP-7: neg is named by neither, so both stand for it.
    assert findings_of(IN_PLACE, ["DT-OP-7"], "neg", "2.13.0+cpu") == IN_PLACE


def test_a_record_whose_subject_names_the_op_is_the_ops_alone():
    assert findings_of(FILLS, ["DT-OP-11"], "squeeze/multiple", "2.13.0") == FILLS[2:]
    assert findings_of(FILLS, ["DT-OP-11"], "fill", "2.13.0") == FILLS[:1]


def test_an_op_no_record_names_meets_every_record_of_its_rule():
    assert findings_of(VIEWS, ["DT-OP-7"], "transpose", "2.13.0") == VIEWS


def test_an_id_that_is_no_record_stays_for_the_agreement_tests_to_report():
    assert findings_of(["no-such-record", *VIEWS], ["DT-OP-7"], "view", None) == [
        "no-such-record",
        VIEWS[0],
    ]


def test_a_test_of_no_op_meets_every_record_that_breaks_its_rule():
    assert findings_of(FILLS, ["DT-OP-11"], "", "2.13.0") == FILLS
    assert findings_of(IN_PLACE, ["DT-OP-7"], "", "2.12.1") == IN_PLACE[:1]


OUT_CALLS = ["out-placements-refused-as-runtimeerror", "out-strided-shard-propagation-fails"]


def test_a_record_that_conforms_on_the_release_is_not_what_its_run_met():
    # The out= entry names both records on every release; the first is fixed in 2.14.1.
    assert findings_of(OUT_CALLS, ["DT-OP-7"], "", "2.14.1") == OUT_CALLS[1:]
    assert findings_of(OUT_CALLS, ["DT-OP-7"], "", "2.13.0") == OUT_CALLS
    assert deviating(OUT_CALLS, "2.14.1+cpu") == OUT_CALLS[1:]
    assert deviating(OUT_CALLS[:1], "2.14.1") == OUT_CALLS[:1]  # the entry's own account


def test_a_matrix_cell_names_only_the_records_that_deviate_on_its_release():
    runs = [
        Run(
            "torch",
            release,
            {},
            {"DT-OP-7": {"ws2": "xfail"}},
            rule_findings={"DT-OP-7": OUT_CALLS},
        )
        for release in ("2.13.0", "2.14.1")
    ]
    assert [run.rule_texts["DT-OP-7"] for run in runs] == [
        "xfail: `out-placements-refused-as-runtimeerror`, `out-strided-shard-propagation-fails`",
        "xfail: `out-strided-shard-propagation-fails`",
    ]
