"""spec/st-ops.md: torch functions on ShardedTensors (comparisons, shard-wise ops, ``copy_``, the
``*_like`` constructors, ``nn.init``), each judged against the single-device op on the values.

Layouts are drawn apart from any spec: tilings on and off a grid, with empty boxes, a rank
holding several boxes or none, on the world or a sub-group. An empty box starts at the end of its
empty dim: inside the tensor it is a class of construction (ST-VALID-1, judged by the gather
tests), which an implementation that cannot build it would fail here on every op instead of
being judged on the ops. Every rule is judged on every
example that returned, and a failure names each rule it broke: a known failure of one rule
does not hide another's."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge, symptoms
from conformance import strategies as ss
from conformance.oracle import dt_ops, st_ops
from conformance.world import Raised

FLOATING = ["float32", "float64", "bfloat16"]


@st.composite
def params_of(draw, op: str, dtype: str) -> dict[str, Any]:
    """The op's arguments after its tensors: defaults and values that move the result."""
    if op == "allclose":
        return {"rtol": draw(st.sampled_from([1e-5, 1e-3, 0.0])),
                "atol": draw(st.sampled_from([1e-8, 1e-2, 0.0])),
                "equal_nan": draw(st.booleans())}  # fmt: skip
    if op == "type_as":
        return {"dtype": draw(st.sampled_from(ss.DTYPES)), "sharded": draw(st.booleans())}
    if op == "requires_grad_":
        return {"flag": draw(st.booleans())}
    if op in st_ops.LIKE:
        return {"dtype": draw(st.sampled_from([None, *FLOATING, "int64"])),
                "requires_grad": draw(st.booleans()),
                "fill": draw(st.sampled_from([2.5, -1, 0.1]))}  # fmt: skip
    if op == "constant_":
        return {"val": draw(st.sampled_from([2.5, -3, 0.1]))}
    if op == "uniform_":
        return dict(zip("ab", draw(st.sampled_from([(0.0, 1.0), (-2.0, 3.0), (0.5, 4.0)])),
                        strict=True))  # fmt: skip
    if op == "normal_":
        mean, std = draw(st.sampled_from([(0.0, 1.0), (2.0, 0.5), (-1.0, 3.0)]))
        return {"mean": mean, "std": std}
    if op == "kaiming_uniform_":
        return {"a": draw(st.sampled_from([0, math.sqrt(5), 0.1])),
                "mode": draw(st.sampled_from(["fan_in", "fan_out"])),
                "nonlinearity": draw(st.sampled_from(["leaky_relu", "relu", "tanh"]))}  # fmt: skip
    return {}


@st.composite
def op_cases(draw, world_sizes: list[int]) -> tuple[int, dict[str, Any]]:
    """An op of spec/st-ops.md on a drawn layout; a binary op's second tensor of another layout
    or the same, with a value equal, one element off, scaled, with NaNs, or of another size."""
    # larger worlds and groups first: a draw leans to its first choices, and most classes here
    # (ranks holding different boxes) need two members or more
    world_size = draw(st.sampled_from(sorted(world_sizes, reverse=True)))
    left_out = draw(st.integers(0, world_size - 1))
    group = sorted(draw(st.permutations(range(world_size)))[: world_size - left_out])
    # the comparisons thrice, kaiming_uniform_ twice: their classes need rarer draws (a second
    # tensor of one layout, one element off; a box that cuts the fan's dims)
    op = draw(st.sampled_from([*st_ops.OPS, *st_ops.COMPARISONS * 2, "kaiming_uniform_"]))
    long = op in st_ops.RANDOM and draw(st.booleans())  # enough elements to compare boxes
    shape = draw(ss.shapes(min_dims=2 if long else 1, max_dims=3, max_side=12 if long else 5))
    floating = op in st_ops.INIT or op in st_ops.RANDOM
    dtype = draw(st.sampled_from([*FLOATING, "int64"] if floating else ss.DTYPES))
    # one violation at a time (ERR-11): an integer kaiming_uniform_ has dims to compute a fan
    # from, and an integer *_like result does not require grad
    if op == "kaiming_uniform_" and dtype == "int64" and len(shape) < 2:
        shape = [*shape, 2]
    params = draw(params_of(op, dtype))
    if op in st_ops.LIKE and st_ops.result_dtype(op, dtype, params) not in FLOATING:
        params["requires_grad"] = False
    params["x_requires_grad"] = dtype in FLOATING and draw(st.booleans())
    boxes = draw(ss.owned_layouts(shape, group, empty_at_ends=True))
    other = None
    if op in st_ops.BINARY and (op != "type_as" or params["sharded"]):
        # another size is a question for equal only (the others refuse it or need one size);
        # copy_ copies a value that differs from x's, so that a copy not made shows
        relations = {"type_as": ["same"], "copy_": ["another draw", "one element differs"]}.get(
            op, [r for r in st_ops.RELATIONS if op == "equal" or r != "another size"])  # fmt: skip
        relation = draw(st.sampled_from(relations))
        other_dtype = params["dtype"] if op == "type_as" else draw(
            st.sampled_from([dtype, dtype, *ss.DTYPES]))  # fmt: skip
        other_shape = st_ops.other_shape(shape, relation)
        same_layout = other_shape == shape and draw(st.booleans())
        # on the members that hold none of x's boxes, where there are some (always for copy_,
        # whose silent failure is there; else sometimes): no rank holds boxes of both
        idle = [r for r in group if r not in {b["rank"] for b in boxes}]
        owners = idle if idle and (op == "copy_" or draw(st.booleans())) else group
        other = {
            "relation": relation,
            "dtype": other_dtype,
            "where": draw(st.integers(0, 2**16)),
            "scale": draw(st.sampled_from([1e-9, 1e-6, 1e-3, 0.5])),
            "boxes": boxes
            if same_layout
            else draw(ss.owned_layouts(other_shape, owners, empty_at_ends=True)),
        }
    args = {
        "op": op,
        "shape": shape,
        "dtype": dtype,
        "seed": draw(st.integers(0, 2**16)),
        "boxes": boxes,
        "group": group,
        "params": params,
        "other": other,
        "rng_seed": draw(st.integers(0, 2**31 - 1)),
    }
    _note(args, world_size)
    return world_size, args


def _note(args: dict[str, Any], world_size: int) -> None:
    shape, boxes, group = args["shape"], args["boxes"], args["group"]
    refused = isinstance(_expected(args), str)
    edges.note("st op: a refusal expected" if refused else f"st op: {args['op']}")
    if refused and {b["rank"] for b in boxes} != set(group):
        edges.note("st op: a refusal, a member holding no box")
    edges.group(group, world_size)
    edges.tensor(shape, args["dtype"], len(boxes))
    edges.layout(shape, [(b["offsets"], b["sizes"]) for b in boxes])
    edges.local_shards([[{"metadata": b} for b in boxes if b["rank"] == r] for r in group])
    if args["params"]["x_requires_grad"]:
        edges.note("st op: x requires grad")
    other = args["other"]
    if other is not None and other["boxes"] != boxes:
        edges.note("st op: another layout")
        mine, theirs = {b["rank"] for b in boxes}, {b["rank"] for b in other["boxes"]}
        # pairing local shards rank by rank pairs nothing, where there are elements to miss
        if mine.isdisjoint(theirs) and math.prod(shape):
            edges.note("st op: no member holding boxes of both tensors")
    if args["op"] in st_ops.COMPARISONS and not refused and other["boxes"] == boxes:
        _note_own_answers(args)
    if args["op"] == "kaiming_uniform_" and not refused and any(
        math.prod(b["sizes"]) and st_ops.kaiming_bound(b["sizes"], args["params"])
        != st_ops.kaiming_bound(shape, args["params"]) for b in boxes
    ):  # fmt: skip
        edges.note("st op: a box whose fan is not the tensor's")
    m = st_ops.prefix_length(args["op"], args["params"], shape, args["dtype"])
    # two ranks' boxes: a rank draws its own boxes one after another from its one stream
    long_owners = {b["rank"] for b in boxes if m and math.prod(b["sizes"]) >= m}
    if args["op"] in st_ops.RANDOM and not refused and len(long_owners) > 1:
        edges.note("st op: boxes on two ranks compared")


def _note_own_answers(args: dict[str, Any]) -> None:
    """The class of a comparison of one layout whose answer a rank's own boxes alone would get
    wrong on some ranks only: what ST-OP-3's agreement is about."""
    x, y = _values(args)
    own = {
        r: all(st_ops.single_device(args["op"], x[_index(b)], args["params"], y[_index(b)])
               is True for b in args["boxes"] if b["rank"] == r)
        for r in args["group"]
    }  # fmt: skip
    if len(set(own.values())) > 1:
        edges.note("st op: the ranks' own shards disagree")


def _values(args: dict[str, Any]) -> tuple[torch.Tensor, Any]:
    """The values of ``x`` and of the second tensor, as the task builds them."""
    return st_ops.inputs(args["shape"], args["dtype"], args["seed"], args["other"])


def _expected(args: dict[str, Any]) -> Any:
    x, y = _values(args)
    if args["op"] == "type_as" and y is None:
        y = torch.zeros(1, dtype=getattr(torch, args["params"]["dtype"]))
    return st_ops.single_device(args["op"], x, args["params"], y)


# The rules a failure to return breaks, by op: the ones whose result it never gave (a comparison
# that raises gives no bool either: ST-OP-3).
RETURN_RULE = {
    "equal": ("ST-OP-1", "ST-OP-3"),
    "allclose": ("ST-OP-2", "ST-OP-3"),
    **dict.fromkeys(st_ops.SHARD_WISE, "ST-OP-5"),
    "requires_grad_": "ST-OP-7",
    "copy_": "ST-OP-8",
    **dict.fromkeys(st_ops.LIKE, "ST-OP-11"),
    **dict.fromkeys(st_ops.INIT, "ST-OP-12"),
}


def judge_op(result: Any, args: dict[str, Any]) -> None:
    """Every rule of spec/st-ops.md on one call's outcomes; a failure names each rule broken."""
    layouts = [args["boxes"], *([args["other"]["boxes"]] if args["other"] else [])]
    empty = any(not all(b["sizes"]) for boxes in layouts for b in boxes)
    judge.assert_built(result, rule="ST-VALID-1" if empty else "ST-LIFE-14")
    op, group = args["op"], args["group"]
    expected = _expected(args)
    members = [result.outcomes[r] for r in group]
    raised = [o for o in members if isinstance(o, Raised)]
    if isinstance(expected, str):
        if len(raised) == len(members) and all(o.is_a(expected) for o in raised):
            return
        judge.fail(result.report(f"{op}: the single-device op raises {expected}"), "ST-OP-15",
                   symptoms.of_outcomes(result.outcomes))  # fmt: skip
    if raised:
        _judge_refusal(result, args, members)
        return
    values = judge.all_returned(result, rule=_first(RETURN_RULE[op]))
    context = result.replay_command()
    broken: dict[str, list[str]] = {}
    x_value, _ = _values(args)
    got = {r: values[r] for r in group}
    if op in st_ops.COMPARISONS:
        _comparison(got, expected, op, broken)
    elif op in ("copy_", "requires_grad_", *st_ops.INIT):
        _in_place(got, args, expected, x_value, broken)
    else:
        _new_tensor(got, args, expected, broken)
    if op not in ("copy_", "requires_grad_", *st_ops.INIT):
        _unchanged(got, args, x_value, "x", broken)
    for rank, seen in got.items():
        if not seen["other_unchanged"]:
            broken.setdefault("ERR-9", []).append(f"rank {rank}: the second tensor was changed")
    if broken:
        lines = [f"{rule}: {line}" for rule, found in broken.items() for line in found[:3]]
        judge.fail(f"{op}: {'; '.join(lines)} [{context}]", tuple(broken), symptoms.WRONG_VALUE)


def _first(rules: str | tuple[str, ...]) -> str:
    return rules if isinstance(rules, str) else rules[0]


def _judge_refusal(result: Any, args: dict[str, Any], members: list[Any]) -> None:
    """A raise where the single-device op returns: allowed only for ``copy_`` from another
    layout, as ``NotImplementedError`` on every member with ``x`` unchanged (ST-OP-9)."""
    op, other = args["op"], args["other"]
    another = other is not None and other["boxes"] != args["boxes"]
    if op == "copy_" and another:
        every = all(isinstance(o, Raised) and o.is_a("NotImplementedError") for o in members)
        x_value, _ = _values(args)
        kept: dict[str, list[str]] = {}
        facts = {o.rank: {"x": o.facts["x"]} for o in members
                 if isinstance(o, Raised) and o.facts}  # fmt: skip
        _unchanged(facts, args, x_value, "x", kept)
        if every and not kept:
            return
        judge.fail(result.report("copy_ from another layout: a refusal must be "
                                 "NotImplementedError on every member, x unchanged"),
                   "ST-OP-9", symptoms.of_outcomes(result.outcomes))  # fmt: skip
    judge.fail(result.report(f"{op} raised where the single-device op returns"),
               RETURN_RULE[op], symptoms.of_outcomes(result.outcomes))  # fmt: skip


def _assemble(got: dict[int, Any], key: str, shape: list[int], dtype: Any) -> torch.Tensor:
    """The value of a sharded tensor from every member's local shards, each at its box."""
    value = torch.zeros(shape, dtype=dtype)
    for seen in got.values():
        for tensor, box in seen[key]["local"]:
            value[_index(box)] = tensor.to(dtype)
    return value


def _index(box: dict[str, Any]) -> tuple[slice, ...]:
    """The index of a box ``{"offsets", "sizes", ...}`` into the value."""
    return tuple(slice(o, o + n) for o, n in zip(box["offsets"], box["sizes"], strict=True))


def _layout_kept(got: dict[int, Any], key: str, args: dict[str, Any], rule: str,
                 broken: dict[str, list[str]]) -> bool:  # fmt: skip
    """``got[rank][key]`` has ``x``'s size and boxes as ``x`` held them before the call, on the
    same ranks in the same order; each rank holding its boxes in the order it held ``x``'s (``x``
    itself, or a shard-wise op's result: local tensor for local tensor), or in the order of
    their entries (a ``*_like`` result, built as construction builds)."""
    for rank, seen in got.items():
        d, was = seen[key], seen["x_before"]
        local = [box for _, box in d["local"]]
        entries = [s for s in d["shards"] if s["placement"].startswith(f"rank:{rank}/")]
        order = entries if args["op"] in st_ops.LIKE else was["local"]
        if d["size"] != args["shape"] or d["shards"] != was["shards"] or local != order:
            broken.setdefault(rule, []).append(
                f"rank {rank}: size {d['size']}, boxes {_boxes(d['shards'])}, local "
                f"{_boxes(local)}; x's: {args['shape']}, {_boxes(was['shards'])}"
            )
            return False
    return True


def _boxes(boxes: list[dict[str, Any]]) -> list[tuple]:
    return [(b["offsets"], b["sizes"], b["placement"]) for b in boxes]


def _comparison(got: dict[int, Any], expected: bool, op: str, broken: dict) -> None:
    """ST-OP-3: a bool, the same on every member; ST-OP-1, 2: the single-device answer."""
    answers = {rank: seen.get("bool", seen["returned"]) for rank, seen in got.items()}
    if any(seen["returned"] != "bool" for seen in got.values()) or len(set(answers.values())) > 1:
        broken.setdefault("ST-OP-3", []).append(f"answers by rank: {answers}")
        return
    answer = next(iter(answers.values()))
    if answer != expected:
        rule = "ST-OP-1" if op == "equal" else "ST-OP-2"
        broken.setdefault(rule, []).append(f"answered {answer}, the values give {expected}")


def _new_tensor(got, args, expected, broken) -> None:
    """A shard-wise op's or a ``*_like``'s result: its layout (ST-OP-4, 10), dtype and
    requires_grad (ST-OP-5, 7, 11), values (ST-OP-5, 11, 13, 14), storage (ST-OP-6)."""
    op, shape = args["op"], args["shape"]
    like = op in st_ops.LIKE
    # x itself where the single-device op returns its input (contiguous, a cast to its dtype)
    kinds = ("sharded tensor", "x") if op in ("contiguous", "type_as") else ("sharded tensor",)
    if any(seen["returned"] not in kinds for seen in got.values()):
        kinds = {rank: seen["returned"] for rank, seen in got.items()}
        broken.setdefault("ST-OP-10" if like else "ST-OP-4", []).append(f"returned {kinds}")
        return
    layout_rule = "ST-OP-10" if like else "ST-OP-4"
    if not _layout_kept(got, "result", args, layout_rule, broken):
        return
    for rank, seen in got.items():
        if not seen["same_group"]:
            broken.setdefault(layout_rule, []).append(f"rank {rank}: not on x's group")
    dtype_rule = "ST-OP-11" if like else "ST-OP-5"
    want_dtype = str(expected.dtype).removeprefix("torch.")
    grad_rule = "ST-OP-11" if like else "ST-OP-7"
    for rank, seen in got.items():
        props = seen["result"]["properties"]
        if props["dtype"] != want_dtype:
            broken.setdefault(dtype_rule, []).append(
                f"rank {rank}: dtype {props['dtype']}, the single-device result's {want_dtype}"
            )
            return
        flags = {props["requires_grad"], *seen["local_requires_grad"]}
        if flags != {expected.requires_grad}:
            broken.setdefault(grad_rule, []).append(
                f"rank {rank}: requires_grad {props['requires_grad']} (metadata), "
                f"{seen['local_requires_grad']} (local), not {expected.requires_grad}"
            )
        if op == "clone" and seen["shares_storage"]:
            broken.setdefault("ST-OP-6", []).append(f"rank {rank}: shares x's storage")
        if op == "contiguous" and not all(seen["local_contiguous"]):
            broken.setdefault("ST-OP-5", []).append(f"rank {rank}: a local tensor not contiguous")
    value = _assemble(got, "result", shape, expected.dtype)
    if op in st_ops.RANDOM:
        _draw(value, args, broken)
    elif op != "empty_like" and not dt_ops.exact(value, expected.detach()):
        broken.setdefault(dtype_rule, []).append(
            f"value {_show(value)}, the single-device result {_show(expected)}"
        )


def _in_place(got, args, expected, x_value, broken) -> None:
    """``copy_`` (ST-OP-8), ``requires_grad_`` (ST-OP-7) and the init functions (ST-OP-12 to
    14): ``x`` returned, its layout and dtype kept, its value the single-device result's."""
    op = args["op"]
    rule = {"copy_": "ST-OP-8", "requires_grad_": "ST-OP-7"}.get(op, "ST-OP-12")
    for rank, seen in got.items():
        if seen["returned"] != "x":
            broken.setdefault(rule, []).append(f"rank {rank}: returned {seen['returned']}, not x")
    if not _layout_kept(got, "x", args, rule, broken):
        return
    for rank, seen in got.items():
        props = seen["x"]["properties"]
        if props["dtype"] != args["dtype"]:
            broken.setdefault(rule, []).append(f"rank {rank}: x's dtype became {props['dtype']}")
            return
        # requires_grad_ sets it; copy_ and the init functions keep x's (ST-OP-7, 8, 12)
        want = (
            expected.requires_grad if op == "requires_grad_" else args["params"]["x_requires_grad"]
        )
        flags = {props["requires_grad"], *seen.get("local_requires_grad", [])}
        if flags != {want}:
            broken.setdefault(rule, []).append(
                f"rank {rank}: x's requires_grad {props['requires_grad']} (metadata), "
                f"{seen.get('local_requires_grad')} (local), not {want}"
            )
    value = _assemble(got, "x", args["shape"], x_value.dtype)
    if op in st_ops.RANDOM:
        _draw(value, args, broken)
    elif not dt_ops.exact(value, expected.detach()):
        broken.setdefault(rule, []).append(
            f"x holds {_show(value)}, the single-device result {_show(expected)}"
        )


def _unchanged(got, args, x_value, key, broken) -> None:
    """ERR-9: an op that does not write ``x`` left its value as it was."""
    value = _assemble(got, key, args["shape"], x_value.dtype)
    if not dt_ops.exact(value, x_value):
        rule = "ST-OP-9" if args["op"] == "copy_" else "ERR-9"
        broken.setdefault(rule, []).append(f"x became {_show(value)}, was {_show(x_value)}")


def _draw(value: torch.Tensor, args: dict[str, Any], broken: dict) -> None:
    """ST-OP-13: in the support; ST-OP-14: no two boxes begin with the same draws, over as many
    leading elements as make a correct draw's chance of it at most 2^-40."""
    op, params, dtype = args["op"], args["params"], args["dtype"]
    outside = st_ops.outside_support(op, params, value)
    if bool(outside.any()):
        broken.setdefault("ST-OP-13", []).append(
            f"{value[outside][:3].tolist()} at {outside.nonzero()[:3].tolist()} outside the support"
        )
    m = st_ops.prefix_length(op, params, args["shape"], dtype)
    seen: dict[tuple, list[int]] = {}
    for b in args["boxes"] if m else []:
        part = value[_index(b)]
        if part.numel() < m:
            continue
        key = tuple(part.flatten()[:m].tolist())
        if key in seen:
            broken.setdefault("ST-OP-14", []).append(
                f"the boxes at {seen[key]} and {b['offsets']} begin with equal draws {list(key)}"
            )
        seen.setdefault(key, b["offsets"])


def _show(t: torch.Tensor) -> str:
    return str(t.detach().flatten()[:6].tolist())


@pytest.mark.rules(
    "ST-OP-1", "ST-OP-2", "ST-OP-3", "ST-OP-4", "ST-OP-5", "ST-OP-6", "ST-OP-7", "ST-OP-8",
    "ST-OP-9", "ST-OP-10", "ST-OP-11", "ST-OP-12", "ST-OP-13", "ST-OP-14", "ST-OP-15",
    "ST-LIFE-14", "ST-VALID-1", "ERR-9",
)  # fmt: skip
@pytest.mark.edges("st op", "st op input")
@pytest.mark.volume(8)  # eighteen ops, each its own classes; a case takes milliseconds
@given(data=st.data())
def test_a_torch_function_on_sharded_tensors_is_the_op_on_their_values(
    impl, available_world_sizes, run_case, data
):
    """A torch function on ShardedTensors of any valid layout, on the world or a sub-group:
    the single-device op on the values, its result laid out as the rules say, its refusals the
    single-device op's, on every member."""
    judge.requires(impl, "sharded_tensor", "sharded_tensor_ops")
    world_size, args = data.draw(op_cases(available_world_sizes))
    if len(args["group"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    judge_op(run_case("st_ops:apply", world_size, **args), args)
