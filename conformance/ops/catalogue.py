"""The op catalogue: operators and their sample inputs from the OpInfo database of the installed
PyTorch (``torch.testing._internal.common_methods_invocations.op_db``), never written by hand.

An op is named by its OpInfo name and variant (``"max/binary"``, ``"nn.functional.linear"``). A
case carries the name, a dtype and a sample's index; the driver and every rank regenerate the
same sample from the same seed, so a replay line stays short and the values are OpInfo's own.
Each op of the core list belongs to one value class of the spec (DT-OP-1 to 3, 10). OpInfo has
no entry for ``copy_``, which a training step calls to load every parameter: the catalogue
derives it from OpInfo's ``add`` samples (``DERIVED``).
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import random
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import settings
from torch.utils import _pytree as pytree

from conformance import profiles
from conformance.oracle.dt_grad import op_gradients
from conformance.oracle.dt_ops import exact
from conformance.oracle.grad_coefficients import COEFFICIENTS
from conformance.oracle.grad_composite import BOUNDS as COMPOSITE_GRADIENTS

# DT-OP-1: only moves, selects or compares values, or rounds each one alone.
EXACT = (
    "view", "reshape", "transpose", "permute", "flatten", "t", "squeeze", "unsqueeze", "expand",
    "narrow", "chunk", "split", "split/list_args", "cat", "stack", "__getitem__", "index_select",
    "gather", "scatter", "nn.functional.embedding", "clone", "copy_", "contiguous", "zero_",
    "fill", "to",
    "where", "masked_fill", "neg", "abs", "sign", "clamp", "nn.functional.relu", "floor", "ceil",
    "round", "trunc", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "isnan",
    "logical_not", "amax", "amin", "argmax", "argmin", "max/reduction_with_dim",
    "max/reduction_no_dim", "max/binary", "min/reduction_with_dim", "min/reduction_no_dim",
    "min/binary", "ones_like", "zeros_like", "full_like", "flip", "tril", "triu", "roll",
    "unbind", "movedim", "select", "squeeze/multiple", "logical_and", "logical_or",
    "nn.functional.hardtanh", "fmax", "fmin", "nan_to_num", "heaviside", "copysign",
)  # fmt: skip
# DT-OP-2: each output element from the input elements at its index, by a vectorised kernel.
ELEMENTWISE = (
    "add", "sub", "mul", "div/no_rounding_mode", "div/trunc_rounding", "div/floor_rounding",
    "true_divide", "reciprocal", "square", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p",
    "sin", "cos", "tanh", "sigmoid", "erf", "pow", "nn.functional.gelu", "nn.functional.silu",
    "lerp", "addcmul", "addcdiv", "atan2", "exp2", "log2", "log10", "tan", "atan", "sinh",
    "cosh", "asinh", "frac", "hypot", "xlogy",
)  # fmt: skip
# DT-OP-3: adds n terms (products, for the matrix ops) in an order the implementation picks.
SUMS = (
    "sum", "mean", "mm", "matmul", "bmm", "mv", "dot", "addmm", "nn.functional.linear",
)  # fmt: skip

# DT-OP-10: chains reductions and kernels; each has a bound of its own (oracle.composite_bounds).
COMPOSITE = (
    "softmax", "log_softmax", "var", "std", "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.nll_loss", "nn.functional.cross_entropy",
)  # fmt: skip

# DT-GRAD-7: ops whose backward gives each element of an input's gradient as a sum of terms
# ``c * h``, ``h`` an element of an output's gradient and ``c`` computed from the inputs, the
# scalar arguments and element counts with at most three roundings (the differentiable ops of
# the exact and sums classes, and the elementwise ops whose derivative is such a formula:
# ``log``'s ``h / x``, ``sqrt``'s ``h / (2 * sqrt(x))``). The gradients of the other ops go
# through a kernel's own error (``exp``, ``tanh``) or a cancellation (``var``'s ``x - mean``).
LINEAR_GRADIENT = (
    *EXACT, *SUMS, "add", "sub", "mul", "div/no_rounding_mode", "div/trunc_rounding",
    "div/floor_rounding", "true_divide", "reciprocal", "square", "sqrt", "log", "log1p", "log2",
    "log10", "lerp", "addcmul", "addcdiv", "atan", "frac", "nn.functional.nll_loss",
)  # fmt: skip
# The layers of common models whose backward passes the gradient test judges besides the core
# list's (spec/dt-grad.md): convolutions, pooling, embeddings, normalisations, cumulative ops,
# products, indexed writes, losses and attention, and ops of several outputs (topk, sort) whose
# backward pass may start from some of them. Their forward calls are judged by the op tests of
# ``--ops all``; their gradients by layout, and by value where a class of DT-GRAD-7 to 9 names them.
MODEL_LAYERS = (
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv_transpose2d",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.embedding_bag", "nn.functional.batch_norm", "nn.functional.group_norm",
    "nn.functional.instance_norm", "nn.functional.normalize", "cumsum", "cumprod",
    "logcumsumexp", "cummax", "prod", "index_put", "index_add", "scatter_add",
    "nn.functional.mse_loss", "nn.functional.l1_loss", "nn.functional.smooth_l1_loss",
    "nn.functional.huber_loss", "nn.functional.binary_cross_entropy",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.kl_div",
    "nn.functional.scaled_dot_product_attention", "topk", "sort", "kthvalue",
)  # fmt: skip
CLASSES = {**dict.fromkeys(EXACT, "exact"), **dict.fromkeys(ELEMENTWISE, "elementwise"),
           **dict.fromkeys(SUMS, "sums"), **dict.fromkeys(COMPOSITE, "composite")}  # fmt: skip
# The dtypes a case may draw, in order of preference: the op's own dtypes decide which it gets.
DTYPES = ("float32", "float64", "int64")
# Samples whose tensors hold more elements than this are left out: layouts over 4 ranks show
# their edge cases on small tensors, and every element crosses a process boundary.
MAX_ELEMENTS = 4096


@dataclass(frozen=True)
class Sample:
    """One sample call: ``op(*args, **kwargs)``, whose tensor leaves (``pytree`` order over
    ``(args, kwargs)``) are the inputs an op case distributes."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def leaves(self) -> tuple[list[Any], Any]:
        return pytree.tree_flatten((self.args, self.kwargs))

    def tensors(self) -> list[torch.Tensor]:
        return [x for x in self.leaves()[0] if isinstance(x, torch.Tensor)]

    def with_tensors(self, tensors: list[Any]) -> Sample:
        """The same call with its tensor leaves replaced, in order."""
        leaves, spec = self.leaves()
        replaced = iter(tensors)
        new = [next(replaced) if isinstance(x, torch.Tensor) else x for x in leaves]
        args, kwargs = pytree.tree_unflatten(new, spec)
        return Sample(tuple(args), dict(kwargs))


@contextmanager
def quietly() -> Iterator[None]:
    """Run an op here, in the driver, as if it were not run: its random draws on a forked
    generator, its warnings kept out of the run's output."""
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        yield


def op_id(info: Any) -> str:
    return f"{info.name}/{info.variant_test_name}" if info.variant_test_name else info.name


def copy_into_a_clone(destination: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``copy_`` as an out-of-place op: the source written into a clone of the destination, as
    a checkpoint's tensor is into a parameter, so that the inputs stay as they were (DT-OP-8)."""
    return destination.clone().copy_(source)


@dataclass(frozen=True)
class _SampleCall:
    input: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Derived:
    """An op OpInfo has no entry for, read as an entry is: called on the pairs of tensors of
    another entry's samples, the first the destination and the second the source (a sample
    whose source does not broadcast to the destination raises on one device, and is left out
    as every such sample is)."""

    name: str
    op: Callable[..., Any]
    inplace_variant: Callable[..., Any]
    source: Any  # the OpInfo entry whose samples it takes
    variant_test_name: str = ""
    supports_out: bool = False

    def supported_dtypes(self, device: str) -> set[torch.dtype]:
        return self.source.supported_dtypes(device)

    def sample_inputs(self, device: str, dtype: torch.dtype, requires_grad: bool = False):
        for s in self.source.sample_inputs(device, dtype, requires_grad=requires_grad):
            tensors = [x for x in (s.input, *s.args) if isinstance(x, torch.Tensor)]
            if len(tensors) == 2:
                yield _SampleCall(tensors[0], (tensors[1],), {})


# name -> (the OpInfo entry whose samples it takes, the op, its in-place variant)
DERIVED = {"copy_": ("add", copy_into_a_clone, torch.Tensor.copy_)}


@functools.cache
def _op_db() -> dict[str, Any]:
    """OpInfo's database, and the ``DERIVED`` ops. Importing it loads PyTorch's own Hypothesis
    profile (its test utilities do, for its test suite): the profile the run chose is loaded
    again after."""
    profile = profiles.current_name()
    from torch.testing._internal.common_methods_invocations import op_db

    settings.load_profile(profile)
    entries = {op_id(info): info for info in op_db}
    for name, (source, op, in_place_variant) in DERIVED.items():
        entries[name] = Derived(name, op, in_place_variant, entries[source])
    return entries


def load() -> None:
    """Import OpInfo's database now (seconds) rather than on first use."""
    _op_db()


def known(op: str) -> bool:
    return op in _op_db()


def function(op: str) -> Callable[..., Any]:
    """The callable OpInfo tests: ``torch.add``, ``Tensor.view``, or OpInfo's own wrapper."""
    info = _op_db().get(op)
    if info is None:
        raise KeyError(f"{op!r} is not an op of this PyTorch's OpInfo database")
    return info.op


def dtypes(op: str) -> list[str]:
    """The dtypes of ``DTYPES`` that the op supports on the CPU, in that order."""
    supported = _op_db()[op].supported_dtypes("cpu")
    return [d for d in DTYPES if getattr(torch, d) in supported]


CORE_OPS = tuple(CLASSES)


def all_ops() -> list[str]:
    """Every op of the OpInfo database with a sample of one of ``DTYPES``: what ``--ops all``
    (the ``thorough`` profile's default) judges."""
    return sorted(op for op in _op_db() if any(samples(op, d) for d in dtypes(op)))


def value_class(op: str) -> str | None:
    """The op's value class (DT-OP-1 to 3, 10), or ``None``: no bound is proved for it, and its
    values are not compared (spec/dt-ops.md, "Ops of no class")."""
    return CLASSES.get(op)


def in_place(op: str) -> Callable[..., Any] | None:
    """The op's in-place variant (``Tensor.add_`` for ``add``), which writes its first tensor
    argument (DT-OP-11), or ``None``."""
    return _op_db()[op].inplace_variant


@functools.cache
def in_place_ops() -> list[str]:
    """The core ops with an in-place variant that runs on one of their samples."""
    return [
        op
        for op in CORE_OPS
        if known(op) and in_place(op) and any(in_place_samples(op, d) for d in dtypes(op))
    ]


@functools.cache
def in_place_samples(op: str, dtype: str) -> tuple[int, ...]:
    """The indices of the op's samples (``samples``) on which its in-place variant returns on
    one device: its first argument must take the result's shape and dtype."""
    variant = in_place(op)
    return tuple(i for i, sample in enumerate(samples(op, dtype)) if _real_result(variant, sample))


def call_in_place(op: str, sample: Sample) -> torch.Tensor:
    """The in-place variant on copies of the sample's tensors: its first argument after the call
    (the single-device result of DT-OP-11)."""
    run = sample.with_tensors([t.clone() for t in sample.tensors()])
    with quietly():
        in_place(op)(*run.args, **run.kwargs)
    return run.tensors()[0]


@functools.cache
def out_ops() -> list[str]:
    """The core ops whose OpInfo says they take ``out=`` and that run with one on one of their
    samples (DT-OP-13)."""
    return [
        op
        for op in CORE_OPS
        if known(op) and _op_db()[op].supports_out and any(out_samples(op, d) for d in dtypes(op))
    ]


@functools.cache
def out_samples(op: str, dtype: str) -> tuple[int, ...]:
    """The indices of the op's samples with one tensor output, which the op writes into an
    ``out=`` tensor of that output's shape and dtype on one device."""

    def into(out: torch.Tensor) -> Callable[..., Any]:
        return lambda *args, **kwargs: function(op)(*args, **kwargs, out=out)

    kept = []
    for i, sample in enumerate(samples(op, dtype)):
        leaves = pytree.tree_leaves(call(op, sample))
        one = len(leaves) == 1 and isinstance(leaves[0], torch.Tensor)
        if one and _real_result(into(out_filler(leaves[0])), sample):
            kept.append(i)
    return tuple(kept)


def with_scalars(sample: Sample, scalars: list[str | None] | None) -> Sample:
    """The sample with each tensor argument ``i`` whose ``scalars[i]`` is given replaced by
    ``as_scalar``: a Python number, or a 0-d tensor (spec/dt-ops.md, "Inputs the suite
    draws")."""
    if not scalars or not any(scalars):
        return sample
    return sample.with_tensors(arguments(sample, scalars))


def arguments(sample: Sample, scalars: list[str | None] | None) -> list[Any]:
    """What stands for each tensor argument of the sample in a call with ``scalars``: the
    tensor, or ``as_scalar`` of it."""
    tensors = sample.tensors()
    forms = scalars or [None] * len(tensors)
    return [as_scalar(t, f) if f else t for t, f in zip(tensors, forms, strict=True)]


def as_scalar(tensor: torch.Tensor, form: str) -> Any:
    """What stands for ``tensor`` in ``form``: its first element as a Python ``int``, ``float``
    or ``bool`` (an ``int`` of a value that has none, NaN or an infinity, is 2), or as a 0-d
    tensor of its dtype (``"0-d"``)."""
    first = tensor.reshape(-1)[0]
    if form == "0-d":
        return first.clone()
    value = first.item()
    if form == "int":
        return int(value) if math.isfinite(value) else 2
    return {"float": float, "bool": bool}[form](value)


def case_sample(args: dict[str, Any]) -> Sample:
    """The sample an op case calls: the catalogue's, with the case's number forms
    (``scalars``) in place of its tensors."""
    sample = samples(args["op"], args["dtype"])[args["sample"]]
    return with_scalars(sample, args.get("scalars"))


def returns(op: str, variant: str, sample: Sample) -> bool:
    """Whether the op's ``variant`` call (``plain``, ``in_place``, ``out``) returns on one device
    with dense real outputs (``_real_result``); a gradient case (``grad``) takes no number
    forms, whose arguments its backward pass would not reach."""
    if variant == "in_place":
        return _real_result(in_place(op), sample)
    if variant == "out":
        if not _real_result(function(op), sample):
            return False
        leaves = pytree.tree_leaves(call(op, sample))
        if len(leaves) != 1 or not isinstance(leaves[0], torch.Tensor):
            return False
        filler = out_filler(leaves[0])
        return _real_result(lambda *a, **k: function(op)(*a, **k, out=filler), sample)
    return variant == "plain" and _real_result(function(op), sample)


def out_filler(result: torch.Tensor) -> torch.Tensor:
    """What an ``out=`` tensor holds before the call: the result's shape and dtype, and a value
    the op is unlikely to give, so that a call that does not write it shows."""
    return torch.full(result.shape, 3, dtype=result.dtype)


def call_out(op: str, sample: Sample) -> torch.Tensor:
    """The op with ``out=`` a filler of its result (``out_filler``), on copies of the sample's
    tensors: the filler after the call (the single-device result of DT-OP-13)."""
    (result,) = pytree.tree_leaves(call(op, sample))
    out = out_filler(result)
    run = sample.with_tensors([t.clone() for t in sample.tensors()])
    with quietly():
        function(op)(*run.args, **run.kwargs, out=out)
    return out


def gradient_class(op: str) -> str | None:
    """``"linear"`` for an op of ``LINEAR_GRADIENT``, whose gradient's value DT-GRAD-7 bounds;
    ``"kernel"`` for an elementwise op whose derivative's own error DT-GRAD-8 bounds
    (``oracle.grad_coefficients``); ``"composite"`` for ``softmax``, ``log_softmax``, ``var``,
    ``std``, ``layer_norm``, ``rms_norm`` and ``cross_entropy``, whose gradients DT-GRAD-9
    bounds (``oracle.grad_composite``); ``None`` for the others, whose gradients are judged on
    their layout alone."""
    if op in LINEAR_GRADIENT:
        return "linear"
    if op in COMPOSITE_GRADIENTS:
        return "composite"
    return "kernel" if op in COEFFICIENTS else None


def gradient_magnitudes(
    op: str, sample: Sample
) -> Callable[[list[torch.Tensor], torch.Tensor], list[torch.Tensor]] | None:
    """DT-GRAD-8's magnitudes of the op's derivative on this sample, or ``None`` for an op
    outside that class."""
    entry = COEFFICIENTS.get(op) if op not in LINEAR_GRADIENT else None
    if entry is None:
        return None
    return lambda xs, y: entry(xs, y, sample.kwargs)


def runner(op: str, sample: Sample) -> Callable[[list[torch.Tensor]], list[Any]]:
    """The op on a list of its tensor arguments (the sample's, replaced in order), returning
    its output leaves: what autograd differentiates (DT-GRAD-7)."""

    def run(tensors: list[torch.Tensor]) -> list[Any]:
        return pytree.tree_leaves(call(op, sample.with_tensors(tensors)))

    return run


@functools.cache
def grad_ops() -> list[str]:
    """The core ops with a sample that a backward pass runs through (``grad_samples``)."""
    return [op for op in CORE_OPS if known(op) and any(grad_samples(op, d) for d in dtypes(op))]


def grad_core_ops() -> list[str]:
    """What the gradient test runs where ``--ops`` asks for the core list: the core ops and the
    model layers (``MODEL_LAYERS``) this release's OpInfo has; an op without a sample a
    backward pass runs through is skipped with that reason."""
    return [*CORE_OPS, *(op for op in MODEL_LAYERS if known(op))]


@functools.cache
def grad_samples(op: str, dtype: str) -> tuple[int, ...]:
    """The indices of the op's floating samples on which a backward pass runs on one device
    from an output that requires grad, with every floating argument a leaf that requires grad
    (``oracle.dt_grad.op_gradients``), and whose Jacobian (``op_gradient_bound``) has at most
    ``JACOBIAN_ELEMENTS`` elements. A sample the op writes (``embedding`` with ``max_norm``)
    is not one: a leaf that requires grad cannot be written in place; nor is one whose
    gradient is sparse (``embedding`` with ``sparse=True``): DTensor shards dense tensors. At
    most ``GRADIENT_SAMPLES``, the first."""
    if dtype not in ("float32", "float64"):
        return ()
    kept = []
    for i, sample in enumerate(samples(op, dtype)):
        if len(kept) == GRADIENT_SAMPLES:
            break
        if _writes(op, sample):
            continue
        tensors = sample.tensors()
        floating = sum(t.numel() for t in tensors if t.is_floating_point())
        outputs = [x for x in pytree.tree_leaves(call(op, sample)) if isinstance(x, torch.Tensor)]
        if floating * sum(y.numel() for y in outputs) > JACOBIAN_ELEMENTS:
            continue
        with quietly():
            try:
                chosen, grads = op_gradients(runner(op, sample), tensors, 0)
            except Exception:  # whichever it raises, the op has no gradient here
                continue
        dense = all(g is None or g.layout == torch.strided for g in grads)
        if chosen and dense and any(g is not None for g in grads):
            kept.append(i)
    return tuple(kept)


# The most samples of one dtype a gradient case draws from, the first that qualify: OpInfo makes
# over a thousand for max_pool2d, and each is differentiated once to be kept.
GRADIENT_SAMPLES = 32
# The most elements of a gradient case's Jacobian (outputs' elements times floating inputs'):
# DT-GRAD-7's bound reads it whole, one backward pass per output element.
JACOBIAN_ELEMENTS = 2**20


@functools.cache
def mixing_samples(op: str, dtype: str) -> tuple[int, ...]:
    """The indices of the op's samples with two tensor arguments or more: one stays a DTensor on
    the call's mesh, the others may be plain tensors or live on another mesh (DT-OP-12)."""
    return tuple(i for i, sample in enumerate(samples(op, dtype)) if len(sample.tensors()) > 1)


@functools.cache
def writes_its_inputs(op: str) -> bool:
    """Whether the op changes a tensor it is given (an in-place variant such as
    ``normal/in_place``): DT-OP-8 is about out-of-place ops only."""
    return any(_writes(op, sample) for dtype in dtypes(op) for sample in samples(op, dtype))


def _writes(op: str, sample: Sample) -> bool:
    """Whether the op changes a tensor of this sample."""
    given = [t.clone() for t in sample.tensors()]
    run = sample.with_tensors(given)
    with quietly():
        function(op)(*run.args, **run.kwargs)
    return any(not exact(a, b) for a, b in zip(given, sample.tensors(), strict=True))


@functools.cache
def samples(op: str, dtype: str) -> tuple[Sample, ...]:
    """The op's samples of ``dtype`` that a case can carry, made from a fixed seed on the CPU:
    every process of one PyTorch release gets the same tensors. Samples that name a device,
    hold more than ``MAX_ELEMENTS`` elements, or on which the op itself raises on one device (a
    sample OpInfo made for an error test) are left out."""
    info = _op_db()[op]
    state = random.getstate()
    random.seed(0)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            made = _on_a_short_stack(
                lambda: list(info.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False))
            )
    finally:
        random.setstate(state)
    kept = []
    for s in made:
        sample = Sample((s.input, *s.args), dict(s.kwargs))
        leaves = sample.leaves()[0]
        if any(isinstance(x, torch.device) or _names_a_device(x) for x in leaves):
            continue
        tensors = sample.tensors()
        if sum(t.numel() for t in tensors) > MAX_ELEMENTS or not tensors:
            continue
        if any(t.layout != torch.strided for t in tensors):  # sparse: DTensor shards dense ones
            continue
        if _real_result(info.op, sample):
            kept.append(sample)
    return tuple(kept)


def _on_a_short_stack(make: Callable[[], Any]) -> Any:
    """``make()`` in a thread of its own. OpInfo's sample iterator looks for a unittest test
    on the call stack (``inspect.stack()``, which reads the source of every frame) to seed its
    draws from the test's name: under pytest and Hypothesis that took 67 ms a call, most of an
    op test's time. A new thread's stack is short and holds no test, as the driver's and the
    ranks' hold none: the same samples everywhere."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(make).result()


# The dtypes an output may have: real ones that a rank's reply carries back to the driver
# (pickle does not rebuild uint16 to uint64 storages) and that the backends gather: neither Gloo
# nor NCCL has int16 collectives, so full_tensor() of an int16 result fails for the backend's
# reason, not the op's.
_CARRIED = frozenset(
    {torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
     torch.bfloat16, torch.float32, torch.float64}
)  # fmt: skip


def _real_result(fn: Callable[..., Any], sample: Sample) -> bool:
    """Whether ``fn`` returns on copies of the sample, with dense tensors of ``_CARRIED``
    dtypes only: a sample OpInfo made for an error test has no single-device result, and
    complex or sparse outputs are outside the dtypes a case draws."""
    run = sample.with_tensors([t.clone() for t in sample.tensors()])
    with quietly():
        try:
            result = fn(*run.args, **run.kwargs)
        except Exception:  # whichever it raises, the op has no single-device result here
            return False
    return all(
        x.layout == torch.strided and x.dtype in _CARRIED
        for x in pytree.tree_leaves(result)
        if isinstance(x, torch.Tensor)
    )


def call(op: str, sample: Sample) -> Any:
    """The op applied to copies of the sample's tensors: on plain tensors, the single-device
    result. Copies, since some ops write an argument (``embedding`` with ``max_norm`` renormalises
    its weight in place) and a sample is shared by every case that draws it."""
    run = sample.with_tensors([t.clone() for t in sample.tensors()])
    with quietly():
        return function(op)(*run.args, **run.kwargs)


def _names_a_device(value: Any) -> bool:
    """A device string (``"cpu"``, ``"cuda:0"``): a sample that moves a tensor across devices
    says nothing about sharding, and names a device a rank may not have."""
    return isinstance(value, str) and value.split(":")[0] in ("cpu", "cuda", "meta")
