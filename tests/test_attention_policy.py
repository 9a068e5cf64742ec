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
from dgl_accel.policies.attention import FUSED_MIN_DIM, choose_attention, use_attention_path
from dgl_accel.testing.tolerances import assert_close

CPU = torch.zeros(1)


@pytest.mark.parametrize("op", ["gat", "gatv2"])
def test_cpu_rule_routes_several_narrow_heads_and_fuses_wide_or_single_ones(op):
    with dgl_accel.use_backend("native"):
        assert not choose_attention(op, 8, 8, CPU).fused
        assert not choose_attention(op, 4, FUSED_MIN_DIM[op] - 1, CPU).fused
        assert choose_attention(op, 4, FUSED_MIN_DIM[op], CPU).fused
        assert choose_attention(op, 1, 8, CPU).fused  # the GAT recipe's output layer
        assert choose_attention("dot", 8, 8, CPU).fused  # the dot op is fused at every width
        with use_attention_path("fused"):
            assert choose_attention(op, 8, 8, CPU).fused
            with use_attention_path("routed"):
                assert not choose_attention(op, 4, 32, CPU).fused
            assert choose_attention(op, 8, 8, CPU).fused  # the outer mode is back
        assert not choose_attention(op, 8, 8, CPU).fused


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


def test_explain_with_heads_tells_the_attention_path():
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
def test_routed_layer_with_dropout_is_dgls_forward_with_dgls_numbers(module):
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
    (``kernels/attention_heads.py``, ``attention_gatv2_heads.py``, ``attention_dot_heads.py``); one
    head or wide heads one per row and head."""
    with dgl_accel.use_backend("triton"):
        assert "every head (tile 8 heads x 8 features)" in str(choose_attention(op, 8, 8, torch.zeros(1)))
        assert "every head (tile 4 heads x 32 features)" in str(choose_attention(op, 3, 20, torch.zeros(1)))
        assert "one program per row and head" in str(choose_attention(op, 1, 64, torch.zeros(1)))
        assert "one program per row and head" in str(choose_attention(op, 2, 70, torch.zeros(1)))
