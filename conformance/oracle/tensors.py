"""The global tensors every party builds from ``(shape, dtype, seed)``.

Values come from splitmix64 of ``(seed << 32) + i`` for flat index ``i``, so any language can
rebuild them without torch's generator. They are chosen so that a float32 round trip changes
them (ERR-10): float64 values carry fractions like 0.1 that float32 cannot hold, int64 values are
odd and just above ``2**24``, ``2**53`` or ``2**55``. float32 values are multiples of 0.25 in
``[-256, 256]``, so sums and averages of a few of them are exact (DT-REDIST-5).
"""

from __future__ import annotations

import math
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "bool": torch.bool,
}

_MASK = (1 << 64) - 1
_FRACTIONS = (0.1, 0.3, 1 / 3, 0.7)
_INT_BASES = (2**24, 2**53, 2**55)


def torch_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}; got dtype={name!r}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _value(dtype: str, i: int, w: int) -> float | int | bool:
    sign = -1 if w >> 63 else 1
    if dtype == "float32":
        return (w % 2049 - 1024) / 4
    if dtype == "float64":
        return w % 2**21 - 2**20 + _FRACTIONS[(w >> 32) % len(_FRACTIONS)]
    if dtype == "int64":
        return sign * (_INT_BASES[i % len(_INT_BASES)] + 2 * (w % 2**20) + 1)
    return bool(w & 1)


def make_global(
    shape: tuple[int, ...] | list[int], dtype: str, seed: int, data: Any = None
) -> torch.Tensor:
    """The global tensor of a case: deterministic in ``(shape, dtype, seed)``, contiguous; or,
    for a golden vector of ``fixtures/``, its explicit nested-list ``data``."""
    if data is not None:
        return torch.tensor(data, dtype=torch_dtype(dtype)).reshape(tuple(shape))
    shape = tuple(shape)
    base = (seed & 0xFFFFFFFF) << 32
    values = [_value(dtype, i, splitmix64(base + i)) for i in range(math.prod(shape))]
    return torch.tensor(values, dtype=torch_dtype(dtype)).reshape(shape)


# How an input tensor lies in memory: its values are the same whatever the layout.
MEMORY = ("contiguous", "transposed", "strided")


def laid_out(tensor: torch.Tensor, memory: str) -> torch.Tensor:
    """``tensor``'s values in the memory layout ``memory``: ``contiguous`` as it is; ``transposed``
    a view whose dims are stored in reverse order (column-major for 2-D); ``strided`` a view of
    every other element of a buffer twice as long in the last dim. A tensor of fewer than two
    elements along every dim that could show it stays contiguous in effect, as torch says."""
    if memory == "contiguous" or tensor.dim() == 0:
        return tensor
    if memory == "transposed":
        backwards = list(range(tensor.dim()))[::-1]
        return tensor.permute(backwards).contiguous().permute(backwards)
    buffer_shape = [*tensor.shape[:-1], 2 * tensor.shape[-1]]
    view = torch.zeros(buffer_shape, dtype=tensor.dtype, device=tensor.device)[..., ::2]
    return view.copy_(tensor)
