"""``dgl_accel.nn.EdgeConv``: DGL's outputs and gradients from two products over the nodes and one
min aggregation (``theta(x_v - x_u) + phi(x_v)``'s max over u, per node); with batch norm from one
edge tensor; DGL's error for destinations without in-edges when not allowed."""
import copy

import dgl
import dgl.nn
import pytest
import torch
from dgl import DGLError

import dgl_accel
from dgl_accel.testing.tolerances import assert_close


def _graph(kind):
    gen = torch.Generator().manual_seed(6)
    if kind == "relation pair":
        src, dst = torch.randint(0, 40, (200,), generator=gen), torch.randint(0, 26, (200,), generator=gen)
        return dgl.heterograph({("user", "rates", "item"): (src, dst)}, {"user": 40, "item": 30})  # 26-29: empty
    src, dst = torch.randint(0, 40, (300,), generator=gen), torch.randint(0, 36, (300,), generator=gen)
    g = dgl.graph((src, dst), num_nodes=40)  # 36-39: no in-edges
    if kind == "block":
        return dgl.to_block(dgl.in_subgraph(g, torch.arange(20)), torch.arange(20))
    return g if kind in ("graph", "graph pair") else dgl.add_self_loop(g)


def _run(conv, g, feat):
    conv.zero_grad()
    leaves = [f.clone().requires_grad_() for f in (feat if isinstance(feat, tuple) else (feat,))]
    out = conv(g, tuple(leaves) if isinstance(feat, tuple) else leaves[0])
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return [out.detach()] + [t.grad for t in leaves] + [p.grad.clone() for p in conv.parameters()]


@pytest.mark.parametrize("kind", ["self-loops", "graph", "block", "relation pair", "graph pair"])
@pytest.mark.parametrize("in_feats, out_feats", [(6, 4), (3, 7)])
def test_equals_dgls_module(path, kind, in_feats, out_feats):
    g = _graph(kind)
    torch.manual_seed(0)
    theirs = dgl.nn.EdgeConv(in_feats, out_feats, allow_zero_in_degree=True)
    ours = copy.deepcopy(theirs)
    assert dgl_accel.swap(ours).swapped
    x = torch.randn(g.num_src_nodes(), in_feats)
    feat = (x, torch.randn(g.num_dst_nodes(), in_feats)) if kind.endswith("pair") else x
    want = _run(theirs, g, feat)
    dgl_accel.reset_stats()
    got = _run(ours, g, feat)
    stats = dgl_accel.stats()
    if kind == "graph pair":  # one node frame: DGL's forward (its dstdata write replaces the sources)
        assert "copy_u_min" not in stats, stats
    else:
        assert "copy_u_min" in stats and not any(k.startswith(("gsddmm", "fallthrough")) for k in stats), stats
    if kind not in ("self-loops", "block"):  # rows without in-edges: 0, as DGL's update_all leaves them
        assert (got[0][(g.in_degrees() == 0)] == 0).all() and (g.in_degrees() == 0).any()
    for k, (a, b) in enumerate(zip(got, want)):
        if b is None:  # DGL's forward on a pair over one node frame reads no source features
            assert a is None and kind == "graph pair"
            continue
        assert_close(a, b, msg=f"{kind} output/gradient {k}")


@pytest.mark.parametrize("kind", ["self-loops", "graph", "block", "relation pair"])
def test_batch_norm_makes_one_edge_tensor_and_equals_dgls_module(path, kind):
    """With batch norm: e = (W x_v + b + phi(x_v)) - W x_u per edge (one SDDMM), normalised, its max
    per destination (0 without in-edges); DGL's outputs, gradients and running statistics."""
    g = _graph(kind)
    torch.manual_seed(0)
    theirs = dgl.nn.EdgeConv(6, 4, batch_norm=True, allow_zero_in_degree=True)
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    x = torch.randn(g.num_src_nodes(), 6)
    feat = (x, torch.randn(g.num_dst_nodes(), 6)) if kind.endswith("pair") else x
    want = _run(theirs, g, feat)
    dgl_accel.reset_stats()
    got = _run(ours, g, feat)
    stats = dgl_accel.stats()
    assert "gsddmm_sub" in stats and "copy_e_max" in stats and "copy_u_min" not in stats, stats
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, msg=f"output/gradient {k}")
    for name in ("running_mean", "running_var"):
        assert_close(getattr(ours.bn, name), getattr(theirs.bn, name), msg=name)


def test_rows_without_in_edges_raise_dgls_error_unless_allowed():
    g = _graph("graph")
    ours = dgl_accel.nn.EdgeConv(6, 4)
    with pytest.raises(DGLError, match="0-in-degree nodes"):
        ours(g, torch.randn(40, 6))
    ours(dgl.add_self_loop(g), torch.randn(40, 6))  # no empty rows: runs
