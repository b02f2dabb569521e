"""The suite catches planted bugs in a copy of the reference, each with a minimal case that a
reader can act on (the falsifying example, and for multi-rank cases the replay command) and that
blames the planted rule. At least one mutant per chapter of the spec (``test_every_chapter``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from conformance import rules

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.mutation


def run_suite(test_file: str, impl: str, profile: str = "mutation") -> str:
    """Run one suite file, or one test of it (``file::test``), against a mutant."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "suite")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"conformance/suite/{test_file}",
            "-p",
            "conformance.plugin",
            "-p",
            "no:cacheprovider",
            "-p",
            "mutation_profile",
            "--impl",
            impl,
            "-x",
            "-q",
            f"--hypothesis-profile={profile}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


class Mutant(NamedTuple):
    """A planted bug: the suite file (or ``file::test``) that must catch it, the adapter, the
    rule the failure must blame (on its ``rules:`` line) and texts of its minimal case."""

    name: str
    target: str
    impl: str
    rule: str
    expected: list[str | re.Pattern[str]]
    profile: str = "mutation"  # "mutation-covering": the ci profile's covering examples too


MUTANTS = [
    # Mutants that only a pair of edge classes shows (conformance/covering.py), one per pair the
    # ci profile once missed. Those of profile "mutation-covering" survive the property's own ci
    # draws (profile "mutation") and are killed by a covering example, which is reported as drawn
    # (not shrunk), with its replay line; the property's own draws meet the others.
    Mutant(
        "integer-sum-partition-floors",
        "test_dt_redistribute.py::test_partial_sources_reduce_and_partial_targets_partition[min]",
        "mutants:INTEGER_SUM_FLOORS",
        "DT-REDIST-6",
        ['"dtype": "int64"', '"P(sum)"', "replay --backend gloo --world-size"],
        "mutation-covering",
    ),
    Mutant(
        "gather-loses-a-second-box-on-sub-groups",
        "test_st_gather.py::test_gather_returns_the_global_tensor_of_any_layout",
        "mutants:GATHER_LOSES_SECOND_BOX",
        "ST-GATHER-1",
        [
            "rank 0: out at [[1]]=[0.0], but should be [201.25]",
            '{"offsets": [0], "rank": 0, "sizes": [1]}, {"offsets": [1], "rank": 0, "sizes": [1]}',
            '"group": [0]',
        ],
    ),
    Mutant(
        "from-local-stride-reads-the-storage",
        "test_dt_api.py::test_from_local_wraps_a_valid_layout_and_run_check_rejects_the_rest",
        "mutants:FROM_LOCAL_STRIDE_READS_STORAGE",
        "DT-API-11",
        ['"give_stride": true', re.compile(r'"memory": "(strided|transposed)"'), "to_local() at"],
    ),
    Mutant(
        "placements-checked-against-the-world",
        "test_st_reshard.py::test_reshard_equals_sharding_the_gathered_tensor",
        "mutants:PLACEMENTS_CHECKED_AGAINST_THE_WORLD",
        "ST-RESHARD-9",
        ["every rank should raise ValueError (ST-RESHARD-9)", '"new_spec": {"dim": '],
        "mutation-covering",
    ),
    Mutant(
        "loading-forgets-requires-grad",
        "test_st_lifecycle.py::test_to_cpu_clone_and_pickling_keep_layout_and_values",
        "mutants:LOADING_FORGETS_REQUIRES_GRAD",
        "ST-LIFE-18",
        ["loaded metadata=", "requires_grad=True", '"requires_grad": true'],
    ),
    Mutant(
        "size-of-holders-only",
        "test_st_validation.py::test_construction_from_local_shards_checks_every_rank_and_keeps_the_data",
        "mutants:SIZE_OF_HOLDERS_ONLY",
        "ST-VALID-6",
        ['"kind": "local"', "every rank should raise ValueError (ST-VALID-6)"],
        "mutation-covering",
    ),
    Mutant(
        "own-shards-checked-after-agreeing",
        "test_st_validation.py::test_construction_from_local_shards_checks_every_rank_and_keeps_the_data",
        "mutants:OWN_SHARDS_CHECKED_AFTER_AGREEING",
        "ST-VALID-8",
        ['"kind": "global"', "every rank should raise ValueError", "1 rank(s) did not"],
    ),
    Mutant(
        "zero-dim-box-holds-nothing",
        "test_st_validation.py::test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor",
        "mutants:ZERO_DIM_BOX_HOLDS_NOTHING",
        "ST-VALID-1",
        [
            "but should be 'a result'",
            "validate([{'offsets': [], 'sizes': [], 'placement': 'rank:0/cpu'}], size=[])",
        ],
    ),
    Mutant(
        "chunk-offset",
        "test_st_sharding_spec.py",
        "mutants:CHUNK_OFFSET",
        "ST-SPEC-2",
        [
            "shards=[{'offsets': [0], 'sizes': [1]",
            "{'offsets': [2], 'sizes': [0]",
            ".build_metadata([1])",
        ],
    ),
    Mutant(
        "gather-drops-last-shard",
        "test_st_gather.py",
        "mutants:GATHER_DROPS_LAST",
        "ST-GATHER-1",
        ["rank 0: out at [[0]]=[0.0], but should be [3.0]", "--world-size 1", '"shape": [1]'],
    ),
    Mutant(
        "touching-boxes-overlap",
        "test_st_validation.py",
        "mutants:TOUCHING_OVERLAP",
        "ST-VALID-1",
        [
            "overlap\", but should be 'a result'",
            # two unit boxes side by side, in however many dims the shrinker settles on
            re.compile(
                r"validate\(\[\{'offsets': \[[01, ]+\], 'sizes': \[[1, ]+\], "
                r"'placement': 'rank:\d/cpu'\}, \{'offsets': \[[01, ]+\], 'sizes': \[[1, ]+\], "
                r"'placement': 'rank:\d/cpu'\}\], size=\[(1, )*2\]\)"
            ),
        ],
    ),
    Mutant(
        "overlap-seen-in-one-dim",
        "test_st_validation.py",
        "mutants:OVERLAP_IN_ONE_DIM",
        "ST-VALID-1",
        [
            "overlap\", but should be 'a result'",
            # two unit boxes, disjoint along dim 0, sharing dim 1
            "validate([{'offsets': [0, 0], 'sizes': [1, 1], 'placement': 'rank:0/cpu'}, "
            "{'offsets': [1, 0], 'sizes': [1, 1], 'placement': 'rank:0/cpu'}], size=[2, 1])",
        ],
    ),
    Mutant(
        "overlaps-left-to-the-count",
        "test_st_validation.py::test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor",
        "mutants:OVERLAPS_LEFT_TO_THE_COUNT",
        "ST-VALID-2",
        [
            # one box twice, the other element in none: the count is right
            "returned=None, but should be 'ValueError (ST-VALID-2)' [ST-VALID-2, ERR-1; "
            "validate([{'offsets': [1], 'sizes': [1], 'placement': 'rank:0/cpu'}, "
            "{'offsets': [1], 'sizes': [1], 'placement': 'rank:0/cpu'}], size=[2])]"
        ],
    ),
    Mutant(
        "overlap-only-between-neighbours",
        "test_st_validation.py::test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor",
        "mutants:OVERLAP_ONLY_BETWEEN_NEIGHBOURS",
        "ST-VALID-2",
        # a rare layout: the ci profile draws it only at volume, hundreds of examples in
        ["returned=None, but should be 'ValueError (ST-VALID-2)' [ST-VALID-2, ERR-1; validate("],
    ),
    Mutant(
        "float32-trip",
        "test_dt_redistribute.py",
        "mutants:LOSES_PRECISION",
        "DT-REDIST-2",
        ["=[904623.3125], but should be [904623.3]", '"shape": []', "--world-size 1"],
    ),
    Mutant(
        "gather-writes-out-before-checking",
        "test_st_gather.py",
        "mutants:GATHER_WRITES_OUT",
        "ERR-8",
        ["out unchanged before raising=False, but should be True [ERR-8"],
    ),
    Mutant(
        "reshard-spoils-its-source-on-error",
        "test_st_reshard.py",
        "mutants:RESHARD_SPOILS_SOURCE",
        "ST-RESHARD-6",
        ["held before the call unchanged=False, but should be True [ST-RESHARD-6"],
    ),
    Mutant(
        "messages-without-rule-ids",
        "test_errors.py",
        "mutants:NO_RULE_IDS",
        "ERR-5",
        ["rule ids the spec defines, named in the message=False, but should be True"],
    ),
    Mutant(
        "negative-offsets-accepted",
        "test_st_metadata.py::test_shard_metadata_accepts_exactly_non_negative_int_boxes",
        "mutants:NEGATIVE_OFFSETS",
        "ST-META-2",
        ["[ST-META-2, ERR-1; ShardMetadata([-1], [0], 'rank:0/cpu')]"],
    ),
    Mutant(
        "create-drops-requires-grad",
        "test_st_lifecycle.py::test_construction_from_a_spec_follows_its_layout_and_fill",
        "mutants:CREATE_DROPS_GRAD",
        "ST-LIFE-1",
        ["requires_grad=False", "rules: ST-LIFE-1"],
    ),
    Mutant(
        "gaps-accepted",
        "test_st_validation.py::test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor",
        "mutants:GAPS_ACCEPTED",
        "ST-VALID-4",
        ["returned=None, but should be 'ValueError (ST-VALID-4)' [ST-VALID-4, ERR-1; validate("],
    ),
    Mutant(
        "reshard-in-rank-order",
        "test_st_reshard.py::test_reshard_equals_sharding_the_gathered_tensor",
        "mutants:RESHARD_IN_RANK_ORDER",
        "ST-RESHARD-2",
        ['"new_spec": {"dim": 0, "ranks": [1, 0]}', "rules: ST-RESHARD-2"],
    ),
    Mutant(
        "gather-checks-out-only-on-the-destination",
        "test_st_gather.py::test_gather_arguments_are_validated_on_every_rank_before_data_moves",
        "mutants:GATHER_CHECKS_ON_DST",
        "ERR-6",
        ["rules: ST-GATHER-5, ERR-6, ERR-7", "rank 1: no answer after"],
    ),
    Mutant(
        "flatten-keeps-empty-inner-tensors",
        "test_st_flatten.py::test_flattening_rewrites_nested_tensors_into_outer_coordinates",
        "mutants:FLATTEN_KEEPS_EMPTY",
        "ST-FLAT-2",
        [
            "keys of x (o, p dropped where not held)=['o', 'p', 'y'], but should be ['p', 'y'] "
            "[ST-FLAT-2;"
        ],
    ),
    Mutant(
        "mesh-groups-in-rank-order",
        "test_dt_mesh.py::test_every_rank_sees_the_mesh_its_coordinate_and_its_groups_in_"
        "coordinate_order",
        "mutants:MESH_GROUPS_SORTED",
        "DT-MESH-7",
        ["=[[[0, 1], 0]], but should be [[[1, 0], 1]] [DT-MESH-7;", '"ranks": [1, 0]'],
    ),
    Mutant(
        "partials-equal-whatever-the-op",
        "test_dt_placements.py::test_placements_are_equal_exactly_when_kind_and_parameters_are",
        "mutants:PARTIALS_EQUAL",
        "DT-PLACE-8",
        ["a == b=True, but should be False [DT-PLACE-8; Partial() vs Partial('avg',)]"],
    ),
    Mutant(
        "floor-chunks",
        "test_dt_layout.py::test_local_shape_and_offset_of_every_coordinate",
        "mutants:FLOOR_CHUNKS",
        "DT-LAYOUT-2",
        ["=((0,), (0,)), but should be ((1,), (0,)) [DT-LAYOUT-2; shape=[1], mesh=[2]"],
    ),
    Mutant(
        "distribute-from-the-first-member",
        "test_dt_api.py::test_distribute_slices_the_source_ranks_tensor_or_each_ranks_own",
        "mutants:DISTRIBUTE_FROM_FIRST",
        "DT-API-2",
        ["to_local() at [[]]=[3.0], but should be", '"src_data_rank": 1'],
    ),
    Mutant(
        "average-without-dividing",
        "test_dt_redistribute.py::test_partial_sources_reduce_and_partial_targets_partition",
        "mutants:AVG_WITHOUT_DIVIDING",
        "DT-REDIST-4",
        ['"source": ["P(avg)"]', "rules: DT-REDIST-4"],
    ),
    Mutant(
        "interop-places-by-coordinate",
        "test_interop.py::test_one_box_per_canonical_coordinate_or_value_error",
        "mutants:INTEROP_BY_COORDINATE",
        "INTEROP-1",
        ["[INTEROP-1; to_sharded_metadata([], mesh=[2] [1, 0], ['R'])]"],
    ),
    Mutant(
        "checkpoint-keeps-replicas",
        "test_interop.py::test_a_checkpoint_writes_each_box_once_from_a_rank_that_holds_it",
        "mutants:CHECKPOINT_KEEPS_REPLICAS",
        "INTEROP-8",
        ['"placements": ["R"]', "the non-empty boxes written"],
    ),
    # Each of these survived the suite until its strategy drew the input class or its test
    # made the check (a blind-spot campaign of planted bugs).
    Mutant(
        "clone-shares-later-shards",
        "test_st_lifecycle.py::test_to_cpu_clone_and_pickling_keep_layout_and_values",
        "mutants:CLONE_SHARES_LATER_SHARDS",
        "ST-LIFE-17",
        ["clone shares storage=True, but should be False", '"ranks": [0, 0]'],
    ),
    Mutant(
        "reshard-drops-requires-grad",
        "test_st_reshard.py::test_reshard_equals_sharding_the_gathered_tensor",
        "mutants:RESHARD_DROPS_GRAD",
        "ST-RESHARD-5",
        ['"requires_grad": true', "--world-size 1"],
    ),
    Mutant(
        "gather-through-a-copy-of-out",
        "test_st_gather.py::test_gather_arguments_are_validated_on_every_rank_before_data_moves",
        "mutants:GATHER_THROUGH_A_COPY",
        "ST-GATHER-8",
        ['"transposed": true', "--world-size 1"],
    ),
    Mutant(
        "flatten-removes-nested-entries",
        "test_st_flatten.py",
        "mutants:FLATTEN_REMOVES_NESTED",
        "ST-FLAT-10",
        ["input intact=False, but should be True", "--world-size 1"],
    ),
    Mutant(
        "from-local-checks-into-the-input",
        "test_dt_api.py::test_from_local_wraps_a_valid_layout_and_run_check_rejects_the_rest",
        "mutants:FROM_LOCAL_CHECKS_INTO_INPUT",
        "DT-API-9",
        ["rank 1: input unchanged=False", '"kind": "drift"', '"placements": ["R"]'],
    ),
    Mutant(
        "full-of-the-default-dtype",
        "test_dt_api.py::test_factories_build_the_layout_dtype_and_fill_of_any_placements",
        "mutants:FULL_OF_DEFAULT_DTYPE",
        "DT-API-18",
        ["dtype='float32', but should be 'int64'", '"op": "full"'],
    ),
    Mutant(
        "redistribute-stride-of-the-local",
        "test_dt_redistribute.py::test_every_shard_and_replicate_transition_keeps_the_value_exactly",
        "mutants:REDISTRIBUTE_STRIDE_OF_LOCAL",
        "DT-REDIST-13",
        ["stride=[1, 1], but should be [2, 1]", '"shape": [0, 2]'],
    ),
    Mutant(
        "partial-relabelled",
        "test_dt_redistribute.py::test_partial_sources_reduce_and_partial_targets_partition",
        "mutants:PARTIAL_RELABELLED",
        "DT-REDIST-6",
        ['"source": ["P(sum)"]', '"target": ["P(avg)"]', "--world-size 2"],
    ),
    Mutant(
        "nested-shards-gathered-left-to-right",
        "test_dt_redistribute.py::test_every_shard_and_replicate_transition_keeps_the_value_exactly",
        "mutants:NESTED_LEFT_TO_RIGHT",
        "DT-REDIST-3",
        ['"source": ["S(-1)", "S(-1)"]', '"target": ["R", "R"]'],
    ),
    Mutant(
        "sum-keeps-its-parts-unreduced",
        "test_dt_ops.py::test_an_op_on_dtensors_gives_the_single_device_result[sum]",
        "mutants:SUM_UNREDUCED",
        "DT-OP-3",
        ['"op": "sum"', "full_tensor()"],
    ),
    # Mutants only the op-aware draws meet (conformance/ops/cases.py): the property's own ci
    # draws miss them, a covering example of the op's pairs meets them.
    Mutant(
        "contraction-parts-taken-as-replicas",
        "test_dt_ops.py::test_an_op_on_dtensors_gives_the_single_device_result[mm]",
        "mutants:CONTRACTION_PARTS_AS_REPLICAS",
        "DT-OP-3",
        ['"op": "mm"', re.compile(r'\["R", "S\(1\)"\], \["R", "S\(0\)"\]'), "full_tensor()"],
        "mutation-covering",
    ),
    Mutant(
        "number-added-to-every-part",
        "test_dt_ops.py::test_an_op_on_dtensors_gives_the_single_device_result[add]",
        "mutants:NUMBER_ADDED_TO_EVERY_PART",
        "DT-OP-2",
        ['"op": "add"', '"P(sum)"', '"scalars": [null, "bool"]'],
        "mutation-covering",
    ),
    Mutant(
        "unused-outputs-get-ones",
        "test_dt_op_grad.py::test_an_ops_gradient_is_the_single_device_gradient[chunk]",
        "mutants:UNUSED_OUTPUTS_GET_ONES",
        "DT-GRAD-7",
        ['"op": "chunk"', '"backward": [0]', "its gradient"],
    ),
    Mutant(
        "layout-cached-without-arguments",
        "test_dt_ops.py::test_an_ops_result_does_not_depend_on_the_ops_before_it",
        "mutants:LAYOUT_CACHED_WITHOUT_ARGUMENTS",
        "DT-OP-9",
        ["alone on a fresh world the call passes", "call(s) before it on one world it fails"],
    ),
    Mutant(
        "draws-after-an-uneven-one-out-of-step",
        "test_dt_random.py::test_random_calls_in_sequence_each_hold_one_draw_of_their_layout",
        "mutants:DRAWS_AFTER_UNEVEN_OUT_OF_STEP",
        "DT-RAND-2",
        ["draws:sequence", re.compile(r"step \d+ of the sequence"), "its replica"],
    ),
    Mutant(
        "out-returns-a-new-dtensor",
        "test_dt_ops.py::test_an_out_call_writes_the_single_device_result_into_its_out_dtensor",
        "mutants:OUT_RETURNS_NEW",
        "DT-OP-13",
        ['"out": [', "returned the tensor it wrote"],
    ),
    Mutant(
        "scalar-tensors-refused",
        "test_dt_ops.py::test_an_op_reads_plain_tensors_and_dtensors_of_another_mesh_as_their_values",
        "mutants:SCALAR_TENSORS_REFUSED",
        "DT-OP-12",
        ['"homes": [', "a 0-d plain tensor argument"],
    ),
    Mutant(
        "partition-divides-bool",
        "test_dt_redistribute.py::test_partial_sources_reduce_and_partial_targets_partition",
        "mutants:PARTITION_DIVIDES_BOOL",
        "DT-REDIST-6",
        ["to_local().dtype=torch.float32, but should be torch.bool", '"target": ["P(sum)"]'],
    ),
    Mutant(
        "to-local-ignores-grad-placements",
        "test_dt_grad.py",
        "mutants:TO_LOCAL_IGNORES_GRAD_PLACEMENTS",
        "DT-GRAD-3",
        ["the leaf's gradient", '"end": "to_local"', '"P(sum)"'],
    ),
    Mutant(
        "replicated-gradient-summed",
        "test_dt_op_grad.py::test_an_ops_gradient_is_the_single_device_gradient[mm]",
        "mutants:REPLICATED_GRADIENT_SUMMED",
        "DT-GRAD-7",
        ["its gradient", '"op": "mm"'],
    ),
    Mutant(
        "tanh-derivative-coarse",
        "test_dt_op_grad.py::test_an_ops_gradient_is_the_single_device_gradient[tanh]",
        "mutants:TANH_DERIVATIVE_COARSE",
        "DT-GRAD-8",
        ["its gradient", '"op": "tanh"'],
    ),
    Mutant(
        "softmax-derivative-coarse",
        "test_dt_op_grad.py::test_an_ops_gradient_is_the_single_device_gradient[softmax]",
        "mutants:SOFTMAX_DERIVATIVE_COARSE",
        "DT-GRAD-9",
        ["its gradient", '"op": "softmax"'],
    ),
    Mutant(
        "cumsum-backward-raises",
        "test_dt_op_grad.py::test_an_ops_gradient_is_the_single_device_gradient[cumsum]",
        "mutants:CUMSUM_BACKWARD_RAISES",
        "DT-GRAD-7",
        ["planted: no backward for this layout", '"op": "cumsum"'],
    ),
    Mutant(
        "random-shards-from-the-start",
        "test_dt_random.py",
        "mutants:RANDOM_SHARDS_FROM_THE_START",
        "DT-RAND-4",
        ["are equal", '"S(0)"'],
    ),
    Mutant(
        "random-parts-not-partitioned",
        "test_dt_random.py",
        "mutants:RANDOM_PARTS_NOT_PARTITIONED",
        "DT-RAND-3",
        ['"call": "rand"', '"P(sum)"', "outside ('uniform', 0.0, 1.0)'s support"],
        "mutation-covering",
    ),
    Mutant(
        "kaiming-fan-of-a-shard",
        "test_st_ops.py",
        "mutants:KAIMING_FAN_OF_A_SHARD",
        "ST-OP-13",
        ['"op": "kaiming_uniform_"', "outside the support"],
        "mutation-covering",
    ),
    Mutant(
        "equal-of-own-shards",
        "test_st_ops.py",
        "mutants:EQUAL_OF_OWN_SHARDS",
        "ST-OP-3",
        ['"op": "equal"', "answers by rank"],
        "mutation-covering",
    ),
]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_a_planted_bug_is_caught_with_a_minimal_case_that_blames_its_rule(mutant):
    out = run_suite(mutant.target, mutant.impl, mutant.profile)
    blamed = re.findall(r"^  rules: (.*)$", out, re.MULTILINE)
    assert any(mutant.rule in line.split(", ") for line in blamed), (blamed, out[-4000:])
    for text in mutant.expected:
        found = text.search(out) if isinstance(text, re.Pattern) else text in out
        assert found, out[-4000:]


def test_every_chapter_of_the_spec_has_a_mutant():
    chapters = {rule.chapter for rule in rules.load()}
    by_id = {rule.id: rule.chapter for rule in rules.load()}
    assert sorted(chapters - {by_id[m.rule] for m in MUTANTS}) == []
    assert len(MUTANTS) >= 20
