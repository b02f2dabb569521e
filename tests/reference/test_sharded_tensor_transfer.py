"""``transfer.in_place``: when the pieces a rank sends or receives travel without a copy."""

from __future__ import annotations

import torch

from reference.sharded_tensor.transfer import in_place


def test_adjacent_row_windows_of_one_tensor_travel_as_its_memory():
    tensor = torch.arange(12, dtype=torch.float64).reshape(6, 2)
    span = in_place([(tensor, tensor[1:3]), (tensor, tensor[3:6])])
    assert span is not None
    assert span.data_ptr() == tensor[1].data_ptr()
    assert torch.equal(span.view(torch.float64), tensor[1:6].flatten())


def test_pieces_that_do_not_follow_one_another_in_memory_are_packed():
    tensor = torch.arange(12).reshape(6, 2)
    assert in_place([(tensor, tensor[3:6]), (tensor, tensor[0:3])]) is None  # out of order
    assert in_place([(tensor, tensor[0:2]), (tensor, tensor[3:6])]) is None  # a gap
    assert in_place([(tensor, tensor[:, :1])]) is None  # a column: not contiguous
    other = torch.arange(12).reshape(6, 2)
    assert in_place([(tensor, tensor[0:3]), (other, other[3:6])]) is None  # two tensors
    transposed = torch.arange(12).reshape(2, 6).t()
    assert in_place([(transposed, transposed[0:1, 0:1])]) is None  # not a contiguous tensor
    assert in_place([]) is None
