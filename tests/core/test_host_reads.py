"""``dgl_accel.testing.HostReads``, which the device pipelines' tests use to bound their host reads:
it sees each kind of read, leaves out what it is told to, and restores what it patched."""
import sys
import types

import torch

from dgl_accel.testing.host_reads import HostReads


def test_each_kind_of_host_read_is_counted_and_plain_ops_are_not():
    x = torch.arange(10)
    with HostReads() as reads:
        y = (x * 2 + 1).sort().values  # no read
        torch.repeat_interleave(x[:3], torch.tensor([1, 2, 3]), output_size=6)
    assert reads.events == [] and y.numel() == 10
    with HostReads() as reads:
        int(x.sum())
        x.tolist()
        x.numpy()
        x.nonzero()
        x[x > 3]
        torch.unique(x)
        torch.repeat_interleave(x[:3], torch.tensor([1, 2, 3]))
    assert reads.events == ["scalar read", "tolist", "numpy", "nonzero", "boolean index", "unique",
                            "repeat_interleave without output_size"]


def test_left_out_functions_and_paused_code_are_not_counted_and_patches_are_undone():
    module = types.ModuleType("fake_launcher")
    module.launch = lambda t: t.tolist()
    sys.modules["fake_launcher"] = module
    original_tolist, original_launch = torch.Tensor.tolist, module.launch
    try:
        with HostReads(leave_out=[(module, "launch")]) as reads:
            module.launch(torch.arange(3))
            with reads.paused():
                torch.arange(3).tolist()
            torch.arange(3).tolist()
        assert reads.events == ["tolist"]
    finally:
        del sys.modules["fake_launcher"]
    assert torch.Tensor.tolist is original_tolist and module.launch is original_launch


def test_a_tolist_counts_once_whatever_it_dispatches(monkeypatch):
    """On CUDA ``tolist()`` dispatches a copy to the CPU: one host read, not two (the H100's profile
    counted 11 reads for the blocks' 10)."""
    inner = torch.Tensor.tolist

    def tolist_with_a_copy(t):  # what CUDA's tolist does below the Python call
        torch.nonzero(t)
        return inner(t)
    monkeypatch.setattr(torch.Tensor, "tolist", tolist_with_a_copy)
    with HostReads() as reads:
        torch.tensor([1, 0, 2]).tolist()
    assert reads.events == ["tolist"], reads.events
