"""The reference keeps every tensor it makes on its data's device: an index or a buffer made on
the CPU beside CUDA data fails on a GPU runner only (``index_select`` refused ``take``'s index
there). The meta device stands in for the GPU, and a dispatch mode refuses any op whose tensor
arguments live on two devices, which meta kernels would otherwise accept."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from reference.dtensor.layout import assemble, take


class OneDevicePerOp(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        leaves = tree_leaves((args, kwargs or {}))
        devices = {t.device for t in leaves if isinstance(t, torch.Tensor) and t.dim() > 0}
        if len(devices) > 1:
            raise AssertionError(f"{func} mixes devices {sorted(map(str, devices))}")
        return func(*args, **(kwargs or {}))


def test_the_guard_refuses_an_op_on_two_devices():
    data = torch.empty(4, 3, device="meta")
    with OneDevicePerOp(), pytest.raises(AssertionError, match="mixes devices"):
        data.index_select(0, torch.tensor([1, 3]))


@pytest.mark.parametrize("positions", [range(1, 3), [3, 0, 2]], ids=["interval", "list"])
def test_take_selects_on_the_datas_device(positions):
    data = torch.empty(4, 3, device="meta")
    with OneDevicePerOp():
        assert take(data, 0, positions).device == data.device


def test_assemble_reorders_a_strided_shard_on_the_datas_device():
    pieces = [torch.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta")]
    with OneDevicePerOp():
        whole = assemble(pieces, 0, [[0, 2], [1, 3]])
    assert (whole.device, whole.shape) == (torch.device("meta"), torch.Size([4, 3]))
