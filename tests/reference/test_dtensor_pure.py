"""The pure parts of reference.dtensor: placements, layout, plans, interop and drawings.

The layout is checked against ``dt_tasks.oracle_indices`` (slicing written from the spec) for
every coordinate of many shapes; the rest against the spec's examples.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from dt_tasks import oracle_indices
from expecttest import TestCase

from reference.dtensor.draw import draw
from reference.dtensor.interop import to_sharded_metadata
from reference.dtensor.layout import index_sequences, is_interval, local_shape_and_offset
from reference.dtensor.placements import (
    Partial,
    Replicate,
    Shard,
    StridedShard,
    normalize,
    parse,
    show,
)
from reference.dtensor.redistribute import plan
from reference.sharded_tensor.validation import check_layout

PLACEMENTS_1D = ["R", "P(sum)", "S(0)", "S(1)", "_S(0, 2)", "_S(0, 3)", "_S(1, 2)"]


def layouts():
    """(global shape, mesh shape, placements) over small shapes, 1-d to 3-d meshes."""
    for mesh_shape in [(1,), (2,), (3,), (4,), (2, 2), (2, 3), (3, 2), (2, 2, 2)]:
        for combo in itertools.product(PLACEMENTS_1D, repeat=len(mesh_shape)):
            if len(mesh_shape) == 3 and "_S" in "".join(combo[1:]):
                continue
            for global_shape in [(0, 2), (1, 3), (5, 3), (7, 2), (13, 1), (8, 5)]:
                yield global_shape, mesh_shape, ", ".join(combo)


@pytest.mark.rules(
    "DT-LAYOUT-1",
    "DT-LAYOUT-2",
    "DT-LAYOUT-3",
    "DT-LAYOUT-4",
    "DT-LAYOUT-6",
    "DT-LAYOUT-7",
    "DT-LAYOUT-8",
    "DT-LAYOUT-10",
    "DT-LAYOUT-11",
)
def test_layout_of_every_coordinate_matches_slicing_and_tiles_the_tensor():
    cases = 0
    for global_shape, mesh_shape, placements in layouts():
        parsed = parse(placements)
        seen: dict[tuple, list[tuple]] = {}
        for coord in itertools.product(*(range(k) for k in mesh_shape)):
            expected = oracle_indices(global_shape, mesh_shape, placements, coord)
            sequences = index_sequences(global_shape, mesh_shape, parsed, coord)
            assert [list(s) for s in sequences] == expected, (global_shape, placements, coord)
            shape, offset = local_shape_and_offset(global_shape, mesh_shape, parsed, coord)
            assert shape == tuple(len(e) for e in expected)
            assert offset == tuple(
                e[0] if e else n for e, n in zip(expected, global_shape, strict=True)
            )
            key = tuple(
                c
                for c, p in zip(coord, parsed, strict=True)
                if not isinstance(p, Replicate | Partial)
            )
            seen.setdefault(key, []).append(tuple(map(tuple, expected)))
            cases += 1
        # DT-LAYOUT-11: one index set per group; groups tile the tensor.
        assert all(len(set(v)) == 1 for v in seen.values())
        elements = [e for v in seen.values() for e in itertools.product(*v[0])]
        assert sorted(elements) == list(itertools.product(*(range(n) for n in global_shape)))
    assert cases > 10_000


@pytest.mark.rules("DT-LAYOUT-4", "DT-LAYOUT-5", "DT-LAYOUT-7", "DT-LAYOUT-9", "DT-LAYOUT-10")
def test_layout_examples_of_the_spec():
    def f(g, m, p, c):
        return local_shape_and_offset(g, m, parse(p), c)

    assert f((5, 3), (2, 2), "S(0), S(1)", (1, 1)) == ((2, 1), (3, 2))
    assert [f((5,), (4,), "S(0)", (c,)) for c in range(4)] == [
        ((2,), (0,)),
        ((2,), (2,)),
        ((1,), (4,)),
        ((0,), (5,)),
    ]
    assert f((3,), (2, 2), "S(0), S(0)", (1, 1)) == ((0,), (3,))
    assert f((0,), (2,), "S(0)", (1,)) == ((0,), (0,))
    assert f((5, 3), (2, 2), "R, S(0)", (1, 0)) == ((3, 3), (0, 0))
    assert f((5, 3), (2, 2), "P(sum), R", (1, 1)) == ((5, 3), (0, 0))
    assert f((), (2,), "R", (1,)) == ((), ())
    assert [f((5,), (2, 2), "S(0), S(0)", c)[0] for c in itertools.product((0, 1), (0, 1))] == [
        (2,),
        (1,),
        (1,),
        (1,),
    ]
    assert list(index_sequences((7,), (3, 2), parse("_S(0, 2), S(0)"), (2, 0))[0]) == [6]
    assert f((5, 3), (2, 2), "S(-2), S(-1)", (1, 1)) == ((2, 1), (3, 2))


@pytest.mark.rules(
    "DT-PLACE-1", "DT-PLACE-3", "DT-PLACE-4", "DT-PLACE-5", "DT-PLACE-6", "DT-PLACE-7"
)
def test_invalid_placements_raise_the_spec_types():
    for make, error in [
        (lambda: Shard(1.5), TypeError),
        (lambda: Shard(True), TypeError),
        (lambda: StridedShard(0, 2.0), TypeError),
        (lambda: Partial(3), TypeError),
        (lambda: Partial("foo"), ValueError),
        (lambda: StridedShard(0, 0), ValueError),
        (lambda: StridedShard(0, -1), ValueError),
        (lambda: normalize([Shard(0), Replicate()], 1, 1), ValueError),
        (lambda: normalize([Shard(1)], 1, 1), ValueError),
        (lambda: normalize([Shard(-2)], 1, 1), ValueError),
        (lambda: normalize([Shard(0)], 0, 1), ValueError),
        (lambda: normalize([StridedShard(2, 2)], 2, 1), ValueError),
        (lambda: normalize([Partial("sum"), Partial("max")], 1, 2), ValueError),
        (lambda: normalize(["S(0)"], 1, 1), TypeError),
        (lambda: local_shape_and_offset((4,), (2,), [Shard(0), Replicate()], (0,)), ValueError),
    ]:
        with pytest.raises(error):
            make()


class TestGolden(TestCase):
    def test_placements_compare_hash_and_print_in_short_form(self):
        # DT-PLACE-2, DT-PLACE-8, DT-PLACE-9
        assert Shard(0) != StridedShard(0, 1)
        assert Shard(-1) != Shard(1)
        assert Partial() == Partial("sum") != Partial("avg")
        assert (
            len(
                {
                    Shard(0),
                    Shard(0),
                    Replicate(),
                    Replicate(),
                    Partial(),
                    Partial("sum"),
                    StridedShard(0, 2),
                    StridedShard(0, 2),
                }
            )
            == 4
        )
        listed = parse("[S(-1), _S(0, 2), R, P(avg)]")
        self.assertExpectedInline(show(listed), """[S(-1), _S(0, 2), R, P(avg)]""")
        self.assertExpectedInline(str(normalize(listed[:2], 2, 2)), """(S(1), _S(0, 2))""")
        assert parse(show(listed)) == listed

    def test_plans_print_one_collective_per_step(self):
        text = "\n".join(
            str(plan(parse(a), parse(b)))
            for a, b in [
                ("S(0)", "R"),
                ("S(0)", "S(1)"),
                ("P(sum)", "R"),
                ("P(sum)", "S(0)"),
                ("S(0), S(0)", "S(1), R"),
                ("S(0), S(1)", "S(1), S(0)"),
                ("P(avg), P(avg)", "R, S(0)"),
                ("S(0)", "P(max)"),
                ("R, S(0)", "R, S(0)"),
            ]
        )
        self.assertExpectedInline(
            text,
            """\
[S(0)] -> [R]
  1. all_gather     mesh dim 0: S(0) -> R
[S(0)] -> [S(1)]
  1. all_to_all     mesh dim 0: S(0) -> S(1)
[P(sum)] -> [R]
  1. all_reduce     mesh dim 0: P(sum) -> R
[P(sum)] -> [S(0)]
  1. reduce_scatter mesh dim 0: P(sum) -> S(0)
[S(0), S(0)] -> [S(1), R]
  1. all_gather     mesh dim 1: S(0) -> R
  2. all_to_all     mesh dim 0: S(0) -> S(1)
[S(0), S(1)] -> [S(1), S(0)]
  1. all_gather     mesh dim 1: S(1) -> R
  2. all_to_all     mesh dim 0: S(0) -> S(1)
  3. slice          mesh dim 1: R -> S(0)
[P(avg), P(avg)] -> [R, S(0)]
  1. all_reduce     mesh dim 0: P(avg) -> R
  2. reduce_scatter mesh dim 1: P(avg) -> S(0)
  3. divide         mesh dim 0, 1: the sums by the number of coordinates
[S(0)] -> [P(max)]
  1. all_gather     mesh dim 0: S(0) -> R
  2. partition      mesh dim 0: R -> P(max)
[R, S(0)] -> [R, S(0)]
  (no-op)""",
        )

    def test_drawing_shows_blocks_replicas_and_empty_shards(self):
        self.assertExpectedInline(
            draw((5, 3), (2, 2), parse("S(0), S(1)")),
            """\
global (5, 3), mesh (2, 2), [S(0), S(1)]
  A A B
  A A B
  A A B
  C C D
  C C D
A: [0:3, 0:2] at (0, 0) rank 0
B: [0:3, 2:3] at (0, 1) rank 1
C: [3:5, 0:2] at (1, 0) rank 2
D: [3:5, 2:3] at (1, 1) rank 3""",
        )
        self.assertExpectedInline(
            draw((5,), (2, 2), parse("R, S(0)"), [3, 1, 0, 2]),
            """\
global (5,), mesh (2, 2), [R, S(0)]
  A A A B B
A: [0:3] at (0, 0) rank 3, (1, 0) rank 0
B: [3:5] at (0, 1) rank 1, (1, 1) rank 2""",
        )
        self.assertExpectedInline(
            draw((3,), (2, 2), parse("S(0), S(0)")),
            """\
global (3,), mesh (2, 2), [S(0), S(0)]
  A B C
A: [0:1] at (0, 0) rank 0
B: [1:2] at (0, 1) rank 1
C: [2:3] at (1, 0) rank 2
D: empty (0) at (1, 1) rank 3""",
        )
        self.assertExpectedInline(
            draw((5,), (2,), parse("_S(0, 2)")),
            """\
global (5,), mesh (2,), [_S(0, 2)]
  A A B A B
A: [[0, 1, 3]] at (0,) rank 0
B: [[2, 4]] at (1,) rank 1""",
        )

    def test_interop_boxes_of_the_spec_examples(self):
        # INTEROP-1, INTEROP-3, INTEROP-7 (no process group here)
        def boxes(shape, mesh, placements):
            meta = to_sharded_metadata(
                shape, torch.float32, torch.tensor(mesh), parse(placements), "cpu"
            )
            check_layout(meta)  # INTEROP-2
            return "\n".join(
                f"{m.shard_offsets} {m.shard_sizes} {m.placement}" for m in meta.shards_metadata
            )

        self.assertExpectedInline(
            boxes((5,), [[0, 1], [2, 3]], "S(0), R"),
            """\
[0] [3] rank:0/cpu
[3] [2] rank:2/cpu""",
        )
        self.assertExpectedInline(
            boxes((5,), [0, 1, 2, 3], "S(0)"),
            """\
[0] [2] rank:0/cpu
[2] [2] rank:1/cpu
[4] [1] rank:2/cpu
[5] [0] rank:3/cpu""",
        )
        self.assertExpectedInline(
            boxes((8,), [[0, 1], [2, 3]], "_S(0, 2), S(0)"),
            """\
[0] [2] rank:0/cpu
[4] [2] rank:1/cpu
[2] [2] rank:2/cpu
[6] [2] rank:3/cpu""",
        )
        self.assertExpectedInline(boxes((5,), [[3, 1], [0, 2]], "R, R"), """[0] [5] rank:3/cpu""")


@pytest.mark.rules("INTEROP-2", "INTEROP-4", "INTEROP-5", "INTEROP-6")
def test_interop_boxes_are_valid_metadata_and_reject_partial_and_strided_gaps():
    for global_shape, mesh_shape, placements in layouts():
        mesh = torch.arange(len(list(itertools.product(*map(range, mesh_shape))))).reshape(
            mesh_shape
        )
        if "P" in placements:
            with pytest.raises(ValueError, match="INTEROP-5"):
                to_sharded_metadata(global_shape, torch.float32, mesh, parse(placements), "cpu")
            continue
        sequences = [
            index_sequences(global_shape, mesh_shape, parse(placements), c)
            for c in itertools.product(*map(range, mesh_shape))
        ]
        if "_S" in placements and not all(
            is_interval(s) for held in sequences if all(held) for s in held
        ):
            with pytest.raises(ValueError, match="INTEROP-6"):
                to_sharded_metadata(global_shape, torch.float32, mesh, parse(placements), "cpu")
            continue
        meta = to_sharded_metadata(global_shape, torch.float32, mesh, parse(placements), "cpu")
        check_layout(meta)
        if len(mesh_shape) == 1 and placements.startswith("S("):
            dim = parse(placements)[0].dim
            size = global_shape[dim]
            step = -(-size // mesh_shape[0])
            chunks = [
                (c * step, min(size, (c + 1) * step) - c * step) for c in range(mesh_shape[0])
            ]
            chunks = [(o, n) for o, n in chunks if n > 0]
            got = [
                (m.shard_offsets[dim], m.shard_sizes[dim])
                for m in meta.shards_metadata
                if m.shard_sizes[dim] > 0
            ]
            assert got == chunks
    with pytest.raises(ValueError, match="INTEROP-6"):
        to_sharded_metadata((4,), torch.float32, torch.tensor([0, 1]), parse("_S(0, 2)"), "cpu")
    # A coordinate of no element may hold columns that are no interval: its box is empty.
    empty = to_sharded_metadata(
        (0, 3), torch.float32, torch.tensor([0, 1]), parse("_S(1, 2)"), "cpu"
    )
    assert [(m.shard_offsets, m.shard_sizes) for m in empty.shards_metadata] == [
        ([0, 0], [0, 2]),
        ([0, 1], [0, 1]),
    ]
