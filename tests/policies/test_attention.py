"""Which path the drop-in attention layers take (``dgl_accel.policies.attention``, issue 31): the shape
rule on the CPU, its override, ``dgl_accel.explain(..., heads=H)``, and that the routed path is DGL's
own forward (with dropout on, the same numbers as DGL's module from the same torch seed)."""
import copy

import dgl
import dgl.nn
import pytest
import torch
import torch.nn.functional as F

import dgl_accel
import dgl_accel.nn
from dgl_accel.core import machine
from dgl_accel.policies.attention import choose_attention, fused_min_dim, use_attention_path
from dgl_accel.testing.tolerances import assert_close

CPU = torch.zeros(1)


@pytest.fixture
def amd(monkeypatch):
    """The rule of an AMD CPU (the tables of ``dgl_accel.policies.attention``), whatever this one is."""
    monkeypatch.setattr(machine, "_vendor", "AuthenticAMD")


@pytest.fixture
def intel(monkeypatch):
    monkeypatch.setattr(machine, "_vendor", "GenuineIntel")


@pytest.mark.parametrize("vendor", ["AuthenticAMD", "GenuineIntel"])
@pytest.mark.parametrize("op", ["gat", "gatv2"])
def test_cpu_rule_routes_several_narrow_heads_and_fuses_wide_or_single_ones(op, vendor, monkeypatch):
    monkeypatch.setattr(machine, "_vendor", vendor)
    least = fused_min_dim(op)
    assert least == (1 if (op, vendor) == ("gatv2", "GenuineIntel") else 32)
    with dgl_accel.use_backend("native"):
        assert choose_attention(op, 8, 8, CPU).fused is (least <= 8)
        if least > 1:
            assert not choose_attention(op, 4, least - 1, CPU).fused
        assert choose_attention(op, 4, least, CPU).fused
        assert choose_attention(op, 1, 8, CPU).fused  # the GAT recipe's output layer
        assert choose_attention("dot", 8, 8, CPU).fused  # the dot op is fused at every width
        with use_attention_path("fused"):
            assert choose_attention(op, 8, 8, CPU).fused
            with use_attention_path("routed"):
                assert not choose_attention(op, 4, 32, CPU).fused
            assert choose_attention(op, 8, 8, CPU).fused  # the outer mode is back
        assert choose_attention(op, 8, 8, CPU).fused is (least <= 8)


@pytest.mark.parametrize("vendor, routes", [("AuthenticAMD", None), ("GenuineIntel", ("edge_softmax",))])
def test_narrow_gat_heads_route_what_wins_on_the_cpu(vendor, routes, monkeypatch):
    """DGL's forward routes every op on AMD CPUs, only the edge softmax on Intel ones (where DGL's
    apply_edges and update_all kernels are faster than ours)."""
    monkeypatch.setattr(machine, "_vendor", vendor)
    with dgl_accel.use_backend("native"):
        choice = choose_attention("gat", 8, 8, CPU)
    assert not choice.fused and choice.routes == routes
    assert ("only edge_softmax routed" in str(choice)) is (routes is not None)


def test_triton_backend_keeps_the_fused_kernels():
    with dgl_accel.use_backend("triton"):
        choice = choose_attention("gat", 8, 8, CPU)
    assert choice.fused and choice.path == "triton"


def test_bad_op_and_mode_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"expected op in \('gat', 'gatv2', 'dot'\) \(got 'gcn'\)"):
        choose_attention("gcn", 1, 1, CPU)
    with pytest.raises(ValueError, match=r"expected an attention path in .* \(got 'fast'\)\. Fix"):
        with use_attention_path("fast"):
            pass


def test_explain_with_heads_tells_the_attention_path(amd):
    g = dgl.rand_graph(20, 60)
    with dgl_accel.use_backend("native"):
        narrow, wide = dgl_accel.explain(g, 8, heads=8), dgl_accel.explain(g, 32, heads=4, op="gatv2")
    assert not narrow.fused and "routed ops" in str(narrow) and "8 heads of 8 < 32" in str(narrow)
    assert wide.fused and "the fused op" in str(wide)
    assert dgl_accel.explain(g, 16).gs >= 1  # without heads: the group size, as before


def _gat_pair(heads, dim, **kw):
    torch.manual_seed(0)
    theirs = dgl.nn.GATConv(12, dim, heads, activation=F.elu, **kw)
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    return theirs, ours


def _step(conv, g, x, seed):
    torch.manual_seed(seed)
    conv.zero_grad()
    out = conv(g, x)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), {k: p.grad.clone() for k, p in conv.named_parameters()}


@pytest.mark.parametrize("module", ["gat", "gatv2"])
def test_routed_layer_with_dropout_is_dgls_forward_with_dgls_numbers(module, amd):
    g = dgl.add_self_loop(_graph())
    x = torch.randn(60, 12)
    kw = dict(feat_drop=0.3, attn_drop=0.6, residual=True)
    if module == "gat":
        theirs, ours = _gat_pair(8, 8, **kw)
    else:
        torch.manual_seed(0)
        theirs = dgl.nn.GATv2Conv(12, 8, 8, activation=F.elu, **kw)
        ours = copy.deepcopy(theirs)
        dgl_accel.swap(ours)
    with dgl_accel.use_backend("native"):
        dgl_accel.reset_stats()
        for seed in range(3):  # training mode: both dropouts drawn from torch's stream, as DGL draws them
            want, got = _step(theirs, g, x, seed), _step(ours, g, x, seed)
            assert_close(got[0], want[0])
            for k in want[1]:
                assert_close(got[1][k], want[1][k], msg=k)
        stats = dgl_accel.stats()
    assert not any(k.startswith(("gat_attention", "gatv2_attention")) for k in stats), stats
    assert any(k.startswith("edge_softmax") for k in stats), stats  # DGL's forward, on our routed ops
    assert any(k.startswith(("gspmm", "gsddmm")) for k in stats), stats


def test_narrow_gat_on_intel_routes_only_the_edge_softmax_with_dgls_numbers(intel):
    g = dgl.add_self_loop(_graph())
    x = torch.randn(60, 12)
    theirs, ours = _gat_pair(8, 8, feat_drop=0.3, attn_drop=0.6, residual=True)
    with dgl_accel.use_backend("native"):
        dgl_accel.reset_stats()
        for seed in range(2):
            want, got = _step(theirs, g, x, seed), _step(ours, g, x, seed)
            assert_close(got[0], want[0])
            for k in want[1]:
                assert_close(got[1][k], want[1][k], msg=k)
        stats = dgl_accel.stats()
    assert any(k.startswith("edge_softmax") for k in stats), stats
    assert not any(k.startswith(("gspmm", "gsddmm", "gat_attention")) for k in stats), stats
    assert not dgl_accel.patching.is_enabled()  # the block put DGL's ops back


def _graph():
    torch.manual_seed(1)
    return dgl.graph((torch.randint(0, 60, (400,)), torch.randint(0, 60, (400,))), num_nodes=60)


def test_wide_heads_take_the_fused_op():
    g = dgl.add_self_loop(_graph())
    theirs, ours = _gat_pair(2, 32)
    x = torch.randn(60, 12)
    with dgl_accel.use_backend("native"):
        dgl_accel.reset_stats()
        want, got = _step(theirs.eval(), g, x, 0), _step(ours.eval(), g, x, 0)
        assert "gat_attention" in dgl_accel.stats()
    assert_close(got[0], want[0])
    for k in want[1]:
        assert_close(got[1][k], want[1][k], msg=k)


@pytest.mark.parametrize("op", ["gat", "gatv2", "dot"])
def test_explain_names_the_fused_kernels_grid(op):
    """On the Triton path, 2-8 heads of few features run one program per row covering every head
    (``kernels/gat_heads.py``, ``gatv2_heads.py``, ``dot_heads.py``); one
    head or wide heads one per row and head."""
    with dgl_accel.use_backend("triton"):
        assert "every head (tile 8 heads x 8 features)" in str(choose_attention(op, 8, 8, torch.zeros(1)))
        assert "every head (tile 4 heads x 32 features)" in str(choose_attention(op, 3, 20, torch.zeros(1)))
        assert "one program per row and head" in str(choose_attention(op, 1, 64, torch.zeros(1)))
        assert "one program per row and head" in str(choose_attention(op, 2, 70, torch.zeros(1)))
