"""``transfer.in_place``: when the pieces a rank sends or receives travel without a copy."""

from __future__ import annotations

import torch

from reference.sharded_tensor.transfer import in_place

CPU = torch.device("cpu")


def test_adjacent_row_windows_of_one_tensor_travel_as_its_memory():
    tensor = torch.arange(12, dtype=torch.float64).reshape(6, 2)
    span = in_place([(tensor, tensor[1:3]), (tensor, tensor[3:6])], CPU)
    assert span is not None
    assert span.data_ptr() == tensor[1].data_ptr()
    assert torch.equal(span.view(torch.float64), tensor[1:6].flatten())


def test_pieces_that_do_not_follow_one_another_in_memory_are_packed():
    tensor = torch.arange(12).reshape(6, 2)
    assert in_place([(tensor, tensor[3:6]), (tensor, tensor[0:3])], CPU) is None  # out of order
    assert in_place([(tensor, tensor[0:2]), (tensor, tensor[3:6])], CPU) is None  # a gap
    assert in_place([(tensor, tensor[:, :1])], CPU) is None  # a column: not contiguous
    other = torch.arange(12).reshape(6, 2)
    assert in_place([(tensor, tensor[0:3]), (other, other[3:6])], CPU) is None  # two tensors
    transposed = torch.arange(12).reshape(2, 6).t()
    assert in_place([(transposed, transposed[0:1, 0:1])], CPU) is None  # not a contiguous tensor
    assert in_place([], CPU) is None


def test_a_view_whose_memory_does_not_hold_its_values_or_lies_elsewhere_is_packed():
    """``copy_`` resolves a conjugate or negative view; the collective's buffers live on the
    device the layout names, so a tensor on another one (a CPU ``out`` of CUDA shards) is
    packed there."""
    values = torch.arange(4.0).reshape(2, 2).to(torch.complex64)
    conj = values.conj()
    assert conj.is_contiguous()  # yet its memory holds the unconjugated values
    assert in_place([(conj, conj[0:2])], CPU) is None
    negative = torch._neg_view(values)
    assert in_place([(negative, negative[0:2])], CPU) is None
    plain = torch.arange(4.0).reshape(2, 2)
    assert in_place([(plain, plain[0:2])], torch.device("meta")) is None
