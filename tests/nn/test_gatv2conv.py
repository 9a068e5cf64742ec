"""``dgl_accel.nn.GATv2Conv`` (issue 18): DGL's GATv2Conv with the attention aggregation fused.  Same
parameters, outputs, attention and gradients (inputs and every parameter, the attention vector
included) as DGL's module on graphs with empty rows, self-loops and multi-edges, on blocks and
bipartite pairs, with and without shared weights, on the native and the Triton path (interpreted);
bf16 (DGL's CPU kernels have no fp16); int32 ids; DGL's zero-in-degree error; the unfused fallback (attention dropout while training)
still equals DGL; state_dict round trip."""
import copy

import dgl
import dgl.nn
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dgl_accel
import dgl_accel.nn
from dgl_accel.testing import attention_modules as am
from dgl_accel.testing import strategies as gst
from dgl_accel.testing.marks import quick_first
from dgl_accel.testing.tolerances import assert_close, assert_matches_reference

pytestmark = pytest.mark.usefixtures("fused_attention")  # these test the fused op through the modules


def _pair(in_feats, out_feats, heads, **kw):
    return am.module_pair(dgl.nn.GATv2Conv, dgl_accel.nn.GATv2Conv, in_feats, out_feats, heads, **kw)


@pytest.mark.interpreter
# 10 examples: over 2 s on 2 cores under the interpreter (the slow case); the quick case draws 2 of the same
@pytest.mark.parametrize("examples", quick_first([2, 10]))
def test_equals_dgls_gatv2conv_outputs_attention_and_gradients(examples):
    @settings(max_examples=examples, deadline=None)
    @given(g=st.one_of(gst.graphs(max_nodes=40, max_edges=160), gst.blocks(max_dst=16, max_edges=120)),
           heads=st.sampled_from([1, 3]), residual=st.booleans(), bias=st.booleans(), share=st.booleans(),
           get_attention=st.booleans())
    def check(g, heads, residual, bias, share, get_attention):
        assume(g.num_dst_nodes() > 0)  # DGL's own residual view fails on zero rows
        theirs, ours = _pair(5, 4, heads, residual=residual, bias=bias, share_weights=share, activation=torch.tanh)
        x = torch.randn(g.num_src_nodes(), 5)
        am.assert_same_on_backends(theirs, ours, g, x, get_attention, "gatv2_attention")

    check()


def test_bipartite_pair_of_features_uses_fc_src_and_fc_dst(path):
    g = dgl.heterograph({("a", "r", "b"): (torch.tensor([0, 1, 2, 2, 0]), torch.tensor([0, 0, 1, 2, 3]))},
                        num_nodes_dict={"a": 3, "b": 5}, idtype=torch.int32)  # "b" 4: no in-edges
    theirs, ours = _pair((6, 3), 4, 2, residual=True)
    x = (torch.randn(3, 6), torch.randn(5, 3))
    am.assert_same_steps(theirs, ours, g, x, path)
    assert "gatv2_attention" in dgl_accel.stats()


def test_compiled_loops_on_a_larger_graph_equal_dgl():
    g = am.larger_graph()  # past runtime.MIN_WORK: the native path runs the numba loops
    theirs, ours = _pair(8, 6, 4, residual=True)
    x = torch.randn(300, 8)
    with dgl_accel.use_backend("native"):
        am.assert_same_steps(theirs, ours, g, x)


def test_bf16_follows_the_reference_rule():
    torch.manual_seed(3)
    g = dgl.add_self_loop(dgl.graph((torch.randint(0, 40, (160,)), torch.randint(0, 40, (160,))), num_nodes=40))
    theirs, ours = _pair(8, 6, 2)
    x = torch.randn(40, 8)

    def run(conv, xx):
        conv = copy.deepcopy(conv).to(xx.dtype)
        rst, _, gx, grads = am.run_module(conv, g, xx)
        return (rst, gx[0], grads["attn"], grads["fc_src.weight"])

    # bf16: DGL's CPU kernels refuse fp16 (the core tests take fp16 against the pure-torch reference)
    got = run(ours, x.bfloat16())
    assert all(t.dtype == torch.bfloat16 for t in got)
    assert_matches_reference(got, lambda xx: run(theirs, xx), x.bfloat16(), msg="bf16 against DGL's module")


def test_zero_in_degree_is_dgls_error_before_any_work():
    am.assert_dgls_zero_in_degree_error(dgl.nn.GATv2Conv)


def test_state_dict_keys_and_load_both_ways():
    for share in (False, True):
        theirs, ours = _pair(4, 3, 2, residual=True, share_weights=share)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        fresh = dgl.nn.GATv2Conv(4, 3, 2, residual=True, share_weights=share, allow_zero_in_degree=True)
        fresh.load_state_dict(ours.state_dict())
        mine = dgl_accel.nn.GATv2Conv(4, 3, 2, residual=True, share_weights=share, allow_zero_in_degree=True)
        mine.load_state_dict(theirs.state_dict())
        g = dgl.add_self_loop(dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])), num_nodes=3))
        x = torch.randn(3, 4)
        assert_close(mine(g, x), theirs(g, x))
        dgl_accel.nn.unswap(ours)
        assert type(ours) is dgl.nn.GATv2Conv


def test_attention_dropout_in_training_takes_dgls_path_with_same_numbers():
    torch.manual_seed(1)
    g = dgl.add_self_loop(dgl.graph((torch.randint(0, 30, (90,)), torch.randint(0, 30, (90,))), num_nodes=30))
    theirs, ours = _pair(5, 4, 2, attn_drop=0.5)
    theirs.train(), ours.train()
    x = torch.randn(30, 5)
    dgl_accel.reset_stats()
    torch.manual_seed(7)
    out0 = theirs(g, x)
    torch.manual_seed(7)
    out1 = ours(g, x)
    assert_close(out1, out0)
    assert "gatv2_attention" not in dgl_accel.stats()
    theirs.eval(), ours.eval()  # eval: dropout off, the fused op runs
    assert_close(ours(g, x), theirs(g, x))
    assert "gatv2_attention" in dgl_accel.stats()


def test_blocks_from_our_sampler_train_as_dgl():
    g = dgl.add_self_loop(dgl.graph((torch.randint(0, 50, (200,)), torch.randint(0, 50, (200,))), num_nodes=50))
    _, _, (block,) = dgl_accel.sampling.NeighborSampler([4], seed=0).sample_blocks(g, torch.arange(10))
    for share in (False, True):
        theirs, ours = _pair(5, 4, 2, residual=True, share_weights=share)
        x = torch.randn(block.num_src_nodes(), 5)
        am.assert_same_steps(theirs, ours, block, x)
