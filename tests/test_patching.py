"""enable()/disable()/enabled(): DGL's gspmm is routed to dgl-accel and restored exactly;
unsupported calls fall through to DGL unchanged, and stats() says why."""
import dgl
import dgl.function as fn
import dgl.ops
import dgl.ops.spmm
import pytest
import torch
from dgl.heterograph_index import HeteroGraphIndex

import dgl_accel
from dgl_accel import patching
from dgl_accel.testing.tolerances import assert_close

ORIGINAL = dgl.ops.spmm.gspmm
ORIGINAL_RELATION_GRAPH = HeteroGraphIndex.get_relation_graph


@pytest.fixture(autouse=True)
def _always_restore():
    yield
    dgl_accel.disable()
    assert dgl.ops.spmm.gspmm is ORIGINAL and dgl.ops.gspmm is ORIGINAL


def test_enable_disable_are_idempotent_and_restore_the_original_objects():
    assert not dgl_accel.is_enabled()
    dgl_accel.enable()
    dgl_accel.enable()
    assert dgl.ops.spmm.gspmm is patching.routed_gspmm and dgl.ops.gspmm is patching.routed_gspmm
    assert HeteroGraphIndex.get_relation_graph is not ORIGINAL_RELATION_GRAPH  # records views while enabled
    dgl_accel.disable()
    dgl_accel.disable()
    assert dgl.ops.spmm.gspmm is ORIGINAL and dgl.ops.gspmm is ORIGINAL
    assert HeteroGraphIndex.get_relation_graph is ORIGINAL_RELATION_GRAPH


def test_context_manager_nests_and_restores_on_error():
    with pytest.raises(RuntimeError):
        with dgl_accel.enabled():
            with dgl_accel.enabled():
                assert dgl_accel.is_enabled()
            assert dgl_accel.is_enabled()  # the outer block is still open
            raise RuntimeError("boom")
    assert not dgl_accel.is_enabled()
    dgl_accel.enable()
    with dgl_accel.enabled():
        pass
    assert dgl_accel.is_enabled()  # enable() outlives blocks


def test_enabled_routes_switch_each_op_alone_and_nest():
    from dgl_accel.routes import edge_softmax as es
    from dgl_accel.routes import gsddmm as sd

    def routed():
        return {"gspmm": dgl_accel.is_enabled(), "edge_softmax": dgl.ops.edge_softmax is es.routed_edge_softmax,
                "gsddmm": dgl.ops.gsddmm is sd.routed_gsddmm}

    nothing = dict.fromkeys(patching.ROUTES, False)
    assert routed() == nothing
    with dgl_accel.enabled(routes="edge_softmax"):
        assert routed() == {**nothing, "edge_softmax": True}
        with dgl_accel.enabled():
            assert routed() == dict.fromkeys(patching.ROUTES, True)
        assert routed() == {**nothing, "edge_softmax": True}  # the inner block's other routes are undone
        with dgl_accel.enabled(routes=("edge_softmax", "gsddmm")):
            assert routed() == {**nothing, "edge_softmax": True, "gsddmm": True}
        assert routed() == {**nothing, "edge_softmax": True}  # still open outside
    assert routed() == nothing
    dgl_accel.enable()
    with dgl_accel.enabled(routes=["gsddmm"]):
        pass
    assert routed() == dict.fromkeys(patching.ROUTES, True)  # enable() outlives blocks
    with pytest.raises(ValueError, match=r"expected names from \('gspmm', 'edge_softmax', 'gsddmm'\) \(got \['spmm'\]\)"):
        with dgl_accel.enabled(routes=["spmm"]):
            pass


def test_update_all_and_dgl_ops_are_routed(path):
    g = dgl.rand_graph(40, 200)
    x, w = torch.randn(40, 5), torch.rand(200)
    g.ndata["h"], g.edata["w"] = x, w
    g.update_all(fn.copy_u("h", "m"), fn.sum("m", "ref_sum"))
    g.update_all(fn.u_mul_e("h", "w", "m"), fn.mean("m", "ref_mean"))
    ref_div = dgl.ops.u_div_e_sum(g, x, w)
    with dgl_accel.enabled():
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "sum"))
        g.update_all(fn.u_mul_e("h", "w", "m"), fn.mean("m", "mean"))
        div = dgl.ops.u_div_e_sum(g, x, w)
        direct = dgl.ops.gspmm(g, "copy_lhs", "sum", x, None)
    assert_close(g.ndata["sum"], g.ndata["ref_sum"])
    assert_close(g.ndata["mean"], g.ndata["ref_mean"])
    assert_close(div, ref_div)
    assert_close(direct, g.ndata["ref_sum"])
    label = "native-cpu" if path == "native" else "triton-interpreter"
    assert dgl_accel.stats() == {"copy_u_sum": {label: 2}, "u_mul_e_mean": {label: 1}, "u_mul_e_sum": {label: 1}}


@pytest.mark.parametrize("name, run, reason", [
    ("u_sub_e_sum", lambda g, x, w: dgl.ops.u_sub_e_sum(g, x, w[:, None]), "op sub"),  # max/min of sub: ours
    ("u_add_e_sum", lambda g, x, w: dgl.ops.u_add_e_sum(g, x, w[:, None]), "op add"),
    # [E, 2, 1] weights on [N, 4] features: the node features broadcast to [N, 2, 4] (multi-head weights
    # on [N, H, D] features, and copy_e, run ours: tests/routes/test_headwise.py)
    ("u_mul_e_sum", lambda g, x, w: dgl.ops.u_mul_e_sum(g, x, w.reshape(60, 2)[:, :, None].repeat(2, 1, 1)),
     "broadcast shape"),
])
def test_unsupported_calls_fall_through_unchanged(name, run, reason, path):
    g = dgl.rand_graph(30, 120)
    x = torch.randn(30, 4)
    w = torch.rand(120)
    expected = run(g, x, w)
    with dgl_accel.enabled():
        got = run(g, x, w)
    assert torch.equal(got, expected)  # DGL itself ran: bit-identical
    assert dgl_accel.stats() == {name: {f"fallthrough: {reason}": 1}}


def test_integer_features_raise_dgls_error_type_with_a_clearer_message():
    g = dgl.rand_graph(10, 30)
    x = torch.ones(10, 2, dtype=torch.int32)
    with pytest.raises(dgl.DGLError, match="Feature data must be float type"):
        dgl.ops.copy_u_sum(g, x)
    with dgl_accel.enabled(), pytest.raises(dgl.DGLError, match=r"float32 or float64 features on cpu.*Fix"):
        dgl.ops.copy_u_sum(g, x)  # DGL's error type (see tests/test_dgl_rules.py), nothing ran
    assert dgl_accel.stats() == {}


def test_heterograph_falls_through():
    hg = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0, 1], [0, 0])})
    hg.nodes["a"].data["h"] = torch.randn(2, 3)
    hg.nodes["b"].data["h"] = torch.randn(2, 3)
    hg.multi_update_all({"r": (fn.copy_u("h", "m"), fn.sum("m", "o")), "s": (fn.copy_u("h", "m"), fn.sum("m", "o"))},
                        "sum")
    expected = {nt: hg.nodes[nt].data["o"].clone() for nt in ("a", "b")}
    with dgl_accel.enabled():
        hg.multi_update_all({"r": (fn.copy_u("h", "m"), fn.sum("m", "o")), "s": (fn.copy_u("h", "m"), fn.sum("m", "o"))},
                            "sum")
    for nt in ("a", "b"):
        assert torch.equal(hg.nodes[nt].data["o"], expected[nt])
    assert all(label.startswith("fallthrough") or label.startswith("native") for d in dgl_accel.stats().values()
               for label in d)


def test_max_min_are_routed_with_dgls_infinities_in_empty_rows(path):
    g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 1, 2])), num_nodes=4)
    x = torch.tensor([[1.0], [4.0], [2.0], [8.0]])
    expected = dgl.ops.copy_u_max(g, x), dgl.ops.copy_u_min(g, x)
    with dgl_accel.enabled():
        got = dgl.ops.copy_u_max(g, x), dgl.ops.copy_u_min(g, x)
    assert got[0].flatten().tolist() == [float("-inf"), 4.0, 2.0, float("-inf")]
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    label = "native-cpu" if path == "native" else "triton-interpreter"
    assert dgl_accel.stats() == {"copy_u_max": {label: 1}, "copy_u_min": {label: 1}}


def test_our_own_fallthrough_does_not_recurse_while_enabled():
    g = dgl.rand_graph(10, 30)
    x = torch.randn(10, 2)
    with dgl_accel.enabled():
        out = dgl_accel.functional.gspmm(g, "copy_u", "max", x)
    assert out.shape == (10, 2)
