"""What a sample's arguments let a draw line up (spec/dt-ops.md, "Inputs the suite draws"),
derived from the sample and the op's own schema, never from a list kept per op.

A sharding strategy decides where the layouts of an op's inputs meet: a matrix product whose two
operands are sharded along the contraction dim, an index against the dim it indexes, a partial
sum fed to an op that is linear in it, a Python number added to a partial. Inputs drawn one by
one rarely meet there. For each sample this module finds:

- **equal dims**: dims of two tensor arguments of the same length (a contraction's two sides,
  the same dim of two elementwise operands, an index and the dim it runs along);
- **named dims**: the dims of a tensor argument that the call names, read from the schema of
  every ATen op the call reaches (arguments such as ``dim``, ``dims``, ``dim0``, ``start_dim``);
- **linear sets**: the tensor arguments the op is linear in, alone or all together, tested on
  the sample itself (``f(x + y) = f(x) + f(y)`` and ``f(2x) = 2f(x)`` on random values);
- **number forms**: where the call takes a Python ``int``, ``float`` or ``bool``, or a 0-d
  tensor, in place of a tensor argument (``x * 0.5``, ``clamp(x, min=0)``), by calling it.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from conformance.ops import catalogue

# What a tensor argument may become instead (catalogue.as_scalar): a Python number of each kind,
# or a 0-d tensor of its first element.
NUMBER_FORMS = ("int", "float", "bool", "0-d")


@dataclass(frozen=True)
class Anatomy:
    """The correlations a draw can give one sample's tensor arguments (indices into its
    ``tensors()``)."""

    shapes: tuple[tuple[int, ...], ...]
    equal_dims: tuple[tuple[tuple[int, int], tuple[int, int]], ...]
    named_dims: tuple[tuple[int, int], ...]
    linear: tuple[tuple[int, ...], ...]


@functools.cache
def of(op: str, dtype: str, index: int) -> Anatomy:
    """The anatomy of the op's sample ``index`` of ``dtype`` (``catalogue.samples``)."""
    sample = catalogue.samples(op, dtype)[index]
    shapes = tuple(tuple(t.shape) for t in sample.tensors())
    return Anatomy(
        shapes=shapes,
        equal_dims=_equal_dims(shapes),
        named_dims=_named_dims(op, sample),
        linear=_linear_sets(op, sample),
    )


@functools.cache
def number_forms(op: str, dtype: str, index: int, variant: str) -> tuple[tuple[str, ...], ...]:
    """Per tensor argument of the sample, the forms of ``NUMBER_FORMS`` the ``variant`` call
    (``plain``, ``in_place``, ``out``, ``grad``) takes in its place; none for the first, which a
    case keeps a DTensor."""
    sample = catalogue.samples(op, dtype)[index]
    return tuple(
        tuple(f for f in NUMBER_FORMS if i and _takes(op, variant, sample, i, f))
        for i in range(len(sample.tensors()))
    )


@functools.cache
def reads_as_a_value(op: str, dtype: str, index: int, variant: str, i: int, form: str) -> bool:
    """Whether tensor argument ``i`` in number ``form`` means a value, as a 0-d tensor there
    would: the single-device call gives outputs of the same structure and shapes either way.
    ``torch.max(x, 1)`` reduces over dim 1 where ``torch.max(x, tensor(1))`` is elementwise, and
    ``x[1]`` selects a row where a 0-d mask ``x[tensor(True)]`` adds a dim: such a number is a dim
    or an index,
    an argument like any other, and no 0-d DTensor stands for it (DT-OP-12). A call that refuses
    the 0-d tensor leaves nothing to compare: the number reads as a value."""
    sample = catalogue.samples(op, dtype)[index]
    forms: list[str | None] = [None] * len(sample.tensors())
    forms[i] = "0-d"
    as_tensor = _outline(op, variant, catalogue.with_scalars(sample, forms))
    forms[i] = form
    return as_tensor is None or as_tensor == _outline(
        op, variant, catalogue.with_scalars(sample, forms)
    )


def _outline(op: str, variant: str, sample: catalogue.Sample) -> tuple | None:
    """The structure of the call's result and each output's shape; ``None`` where it raises."""
    try:
        if variant == "in_place":
            result = catalogue.call_in_place(op, sample)
        elif variant == "out":
            result = catalogue.call_out(op, sample)
        else:
            result = catalogue.call(op, sample)
    except Exception:  # a refusal: nothing to compare with
        return None
    leaves, spec = pytree.tree_flatten(result)
    return str(spec), tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in leaves)


def _equal_dims(shapes: tuple[tuple[int, ...], ...]) -> tuple:
    return tuple(
        ((i, a), (j, b))
        for i, first in enumerate(shapes)
        for j in range(i + 1, len(shapes))
        for a, n in enumerate(first)
        for b, m in enumerate(shapes[j])
        if n == m and n > 0
    )


class _DimsNamed(TorchDispatchMode):
    """Records, for each ATen op a call reaches, its tensor arguments (the first ``Tensor`` and
    every ``Tensor[]``) and the dims its schema's dim arguments give, defaults included."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[list[torch.Tensor], list[int]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors: list[torch.Tensor] = []
        dims: list[int] = []
        for i, argument in enumerate(func._schema.arguments):
            given = args[i] if i < len(args) else kwargs.get(argument.name, argument.default_value)
            if isinstance(given, torch.Tensor) and not tensors:
                tensors.append(given)
            elif (
                isinstance(given, (list, tuple))
                and given
                and all(isinstance(t, torch.Tensor) for t in given)
            ):
                tensors.extend(given)
            elif "dim" in argument.name and not argument.name.startswith("keep"):
                values = given if isinstance(given, (list, tuple)) else [given]
                dims += [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if tensors and dims:
            self.calls.append((tensors, dims))
        return func(*args, **kwargs)


def _named_dims(op: str, sample: catalogue.Sample) -> tuple[tuple[int, int], ...]:
    """``(i, d)``: dim ``d`` of tensor argument ``i`` is one the call names. An ATen op's tensor
    is the argument itself, or a view of it of the same shape (a wrapper's reshape of another
    shape names dims of something else)."""
    run = sample.with_tensors([t.clone() for t in sample.tensors()])
    tensors = run.tensors()
    recorder = _DimsNamed()
    with catalogue.quietly():
        try:
            with recorder:
                catalogue.function(op)(*run.args, **run.kwargs)
        except Exception:  # a call the mode cannot follow names nothing
            return ()
    named = set()
    for seen, dims in recorder.calls:
        for t in seen:
            i = _argument_of(t, tensors)
            if i is None or not t.dim():
                continue
            named.update((i, d % t.dim()) for d in dims if -t.dim() <= d < t.dim())
    return tuple(sorted(named))


def _argument_of(t: torch.Tensor, tensors: list[torch.Tensor]) -> int | None:
    for i, x in enumerate(tensors):
        if t is x:
            return i
    for i, x in enumerate(tensors):
        same_storage = (
            x.numel() and t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        )
        if same_storage and t.shape == x.shape:
            return i
    return None


def _linear_sets(op: str, sample: catalogue.Sample) -> tuple[tuple[int, ...], ...]:
    """The sets of tensor arguments (with elements, not ``bool``) the op is linear in, the
    others as sampled: every set of up to three arguments (``add`` is linear in its two
    operands together and in neither alone; ``addmm(c, a, b)`` in ``c`` and ``a`` together)."""
    tensors = sample.tensors()
    candidates = [
        i for i, t in enumerate(tensors) if t.numel() and t.dtype not in (torch.bool, torch.uint8)
    ]
    sets = [s for k in range(1, 4) for s in itertools.combinations(candidates, k)]
    return tuple(s for s in sets if _linear_in(op, sample, s))


def _linear_in(op: str, sample: catalogue.Sample, chosen: tuple[int, ...]) -> bool:
    """Whether ``f(x + y) = f(x) + f(y)`` and ``f(2x) = 2f(x)`` for the arguments ``chosen``
    (the others as sampled) on random values at three scales (one draw could fall where a
    ``max`` with a fixed operand is linear): exactly for integers, within ``1e-9`` of the terms
    for floating arguments, taken in float64."""
    tensors = [t.double() if t.is_floating_point() else t for t in sample.tensors()]
    generator = torch.Generator().manual_seed(0)

    def f(values: dict[int, torch.Tensor]) -> list[Any] | None:
        call = sample.with_tensors([values.get(i, t) for i, t in enumerate(tensors)])
        try:
            return pytree.tree_leaves(catalogue.call(op, call))
        except Exception:  # an op that refuses these values is not known to be linear
            return None

    for scale in (1, 100, 10_000):

        def random_like(t: torch.Tensor, scale: int = scale) -> torch.Tensor:
            if t.is_floating_point():
                return scale * torch.randn(t.shape, generator=generator, dtype=t.dtype)
            return torch.randint(-8 * scale, 8 * scale + 1, t.shape, generator=generator,
                                 dtype=t.dtype)  # fmt: skip

        x = {i: random_like(tensors[i]) for i in chosen}
        y = {i: random_like(tensors[i]) for i in chosen}
        fx, fy = f(x), f(y)
        fsum, ftwice = f({i: x[i] + y[i] for i in chosen}), f({i: 2 * x[i] for i in chosen})
        if fx is None or fy is None or fsum is None or ftwice is None:
            return False
        if not (_adds_up(fsum, fx, fy) and _adds_up(ftwice, fx, fx)):
            return False
    return True


def _adds_up(total: list[Any], a: list[Any], b: list[Any]) -> bool:
    if not len(total) == len(a) == len(b):
        return False
    tensors = 0
    for t, p, q in zip(total, a, b, strict=True):
        if not isinstance(t, torch.Tensor):
            if t != p or t != q:
                return False
            continue
        tensors += 1
        if not (isinstance(p, torch.Tensor) and isinstance(q, torch.Tensor)):
            return False
        if t.shape != p.shape or p.shape != q.shape or t.dtype in (torch.bool,):
            return False
        if not t.is_floating_point():
            if not torch.equal(t, p + q):
                return False
            continue
        scale = p.abs() + q.abs() + t.abs()
        if not bool(((t - (p + q)).abs() <= 1e-9 * scale + 1e-300).all()):
            return False
    return tensors > 0


def _takes(op: str, variant: str, sample: catalogue.Sample, i: int, form: str) -> bool:
    """Whether the ``variant`` call returns with tensor argument ``i`` in ``form``: a number
    of that kind, or a 0-d tensor (not for an argument that is one already)."""
    tensor = sample.tensors()[i]
    if not tensor.numel() or (form == "0-d" and not tensor.dim()):
        return False
    scalars: list[str | None] = [None] * len(sample.tensors())
    scalars[i] = form
    return catalogue.returns(op, variant, catalogue.with_scalars(sample, scalars))
