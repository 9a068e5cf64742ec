"""Tolerance helpers accept correct low-precision kernels and reject wrong ones; the pure-torch
references agree with DGL's own ops in fp64."""
import dgl
import dgl.function as fn
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dgl_accel.testing import strategies as S
from dgl_accel.testing.profiles import load_profile
from dgl_accel.testing.reference import GCN_NORMS, GSPMM_REDUCES, ref_gcn_norm_aggregate, ref_gspmm, ref_scale
from dgl_accel.testing.tolerances import TOLERANCES, assert_close, assert_matches_reference, tolerance

load_profile()  # idempotent; conftest normally does this already

F64 = (torch.float64,)


def fp32_accumulating_kernel(g, op, reduce, ufeat, efeat=None):
    """What a correct Triton kernel does: load fp16, accumulate in fp32, store fp16."""
    up = lambda t: None if t is None else t.float()  # noqa: E731
    return ref_gspmm(g, op, reduce, up(ufeat), up(efeat)).to(ufeat.dtype)


def hub_graph(idtype=torch.int64):
    """Node 0 receives 2000 edges (one per other node), so fp16 accumulation error is large."""
    src = torch.arange(1, 2001)
    return dgl.graph((src, torch.zeros_like(src)), num_nodes=2001, idtype=idtype)


# ---------------------------------------------------------------- tolerance table / assert_close

def test_tolerance_table():
    assert set(TOLERANCES) == {torch.float64, torch.float32, torch.float16, torch.bfloat16}
    order = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    assert [tolerance(d).rtol for d in order] == sorted(tolerance(d).rtol for d in order)
    assert tolerance(torch.int32) == (0.0, 0.0)


def test_assert_close():
    x = torch.randn(10, 3, dtype=torch.float64)
    assert_close(x.half(), x)  # fp16 rounding of an fp64 value is within fp16 tolerance
    assert_close(x.float() * (1 + 1e-6), x)
    with pytest.raises(AssertionError, match="float32"):
        assert_close(x.float() * 1.01, x)
    with pytest.raises(AssertionError, match="shape"):
        assert_close(x[:5], x)
    assert_close(torch.empty(0, 3), torch.empty(0, 3, dtype=torch.float64))
    idx = torch.arange(5)
    assert_close(idx, idx.clone())
    with pytest.raises(AssertionError, match="integer"):
        assert_close(idx, idx + (idx == 4))
    inf_nan = torch.tensor([float("inf"), float("nan"), 1.0])
    assert_close(inf_nan, inf_nan.clone())
    with pytest.raises(AssertionError):
        assert_close(inf_nan, torch.tensor([float("inf"), 0.0, 1.0]))


# ----------------------------------------------------------------------- assert_matches_reference

@given(S.graph_and_features(dtypes=(torch.float16, torch.bfloat16)), st.data())
def test_correct_low_precision_kernel_passes(gf, data):
    g, feat = gf
    op = data.draw(st.sampled_from(["copy_u", "u_mul_e"]))
    reduce = data.draw(st.sampled_from(GSPMM_REDUCES))
    efeat = (data.draw(S.edge_weights(g.num_edges(), feat.shape[1], dtypes=(feat.dtype,)))
             if op == "u_mul_e" else None)
    actual = fp32_accumulating_kernel(g, op, reduce, feat, efeat)
    assert_matches_reference(actual, ref_gspmm, g, op, reduce, feat, efeat)


def test_correct_fp16_kernel_passes_on_hub_where_plain_tolerance_is_too_tight():
    g = hub_graph()
    feat = torch.randn(2001, 16).half()
    actual = fp32_accumulating_kernel(g, "copy_u", "sum", feat)
    assert_matches_reference(actual, ref_gspmm, g, "copy_u", "sum", feat)


@pytest.mark.parametrize("bug", ["drop_last_edge", "mean_as_sum", "scaled_1pct", "fp16_wrong_row"])
def test_wrong_fp16_kernel_fails(bug):
    g = hub_graph(torch.int32)
    torch.manual_seed(0)  # fixed draws: unseeded, one draw in many let the dropped edge hide in fp16's rounding
    feat = torch.randn(2001, 16).abs().half() + 0.5  # positive: no cancellation hides a bug
    if bug == "drop_last_edge":
        src, dst = g.edges()
        actual = fp32_accumulating_kernel((src[:-1], dst[:-1], 2001), "copy_u", "sum", feat)
        reduce = "sum"
    elif bug == "mean_as_sum":
        actual, reduce = fp32_accumulating_kernel(g, "copy_u", "sum", feat), "mean"
    elif bug == "scaled_1pct":
        actual, reduce = fp32_accumulating_kernel(g, "copy_u", "mean", feat) * 1.01, "mean"
    else:  # right values, written to the wrong (zero-in-degree) row
        actual, reduce = fp32_accumulating_kernel(g, "copy_u", "max", feat).roll(1, 0), "max"
    with pytest.raises(AssertionError) as err:
        assert_matches_reference(actual, ref_gspmm, g, "copy_u", reduce, feat, msg=bug)
    text = str(err.value)
    assert bug in text and "float16" in text and "(2001, 16)" in text
    assert text.count("e-") + text.count("e+") >= 3  # actual error, reference error, bound


@given(S.graph_and_features(S.graphs(), dtypes=(torch.float16,)), st.floats(0.5, 4.0))
def test_rule_boundary_is_exact(gf, factor):
    """An error of `factor` x the allowed bound passes iff factor <= 1 (the rule, not slack)."""
    g, feat = gf
    ref = lambda x: ref_gspmm(g, "copy_u", "sum", x)  # noqa: E731
    ref64, ref16 = ref(feat.double()), ref(feat)
    if ref64.numel() == 0:
        return
    bound = 2 * (ref16.double() - ref64).abs().max().item() + tolerance(torch.float16).atol
    actual = ref64.clone()
    actual.view(-1)[0] += factor * bound  # keep fp64 so the perturbation is exact
    if factor <= 0.99:
        assert_matches_reference(actual, ref, feat, atol=tolerance(torch.float16).atol)
    elif factor >= 1.01:
        with pytest.raises(AssertionError):
            assert_matches_reference(actual, ref, feat, atol=tolerance(torch.float16).atol)


def test_matches_reference_passthrough_and_empty():
    idx = torch.tensor([2, 0, 1])

    def ref(x, index, scale, tag):
        assert index.dtype == torch.int64 and tag == "keep" and isinstance(scale, int)
        return x[index] * scale

    x = torch.randn(3, 4).half()
    assert_matches_reference(x[idx] * 2, ref, x, idx, 2, "keep")
    assert_matches_reference(x[idx][:0], lambda t: t[:0], x)  # empty output
    with pytest.raises(AssertionError, match="shape"):
        assert_matches_reference(x[:2], lambda t: t, x)
    # tuple outputs and inputs
    assert_matches_reference((x, x * 2), lambda ts: (ts[0], ts[1] * 2), (x, x))


# ----------------------------------------------------------------------------- references vs DGL

def dgl_gspmm(g, op, reduce, ufeat, efeat):
    out = dgl.ops.gspmm(g, "copy_lhs" if op == "copy_u" else "mul", reduce,
                        ufeat.contiguous(), None if efeat is None else efeat.contiguous())
    # Raw gspmm leaves -inf/+inf in zero-in-degree rows for max/min; update_all zeroes them.
    return torch.where(out.isinf(), torch.zeros_like(out), out)


@given(S.graph_and_features(dtypes=F64), st.sampled_from(["copy_u", "u_mul_e"]),
       st.sampled_from(GSPMM_REDUCES), st.data())
def test_ref_gspmm_matches_dgl(gf, op, reduce, data):
    g, feat = gf
    efeat = (data.draw(S.edge_weights(g.num_edges(), feat.shape[1], dtypes=F64))
             if op == "u_mul_e" else None)
    expected = dgl_gspmm(g, op, reduce, feat, efeat)
    assert_close(ref_gspmm(g, op, reduce, feat, efeat), expected, msg=f"{op}/{reduce}")
    src, dst = g.edges()
    assert_close(ref_gspmm((src, dst, g.num_dst_nodes()), op, reduce, feat, efeat), expected)


@pytest.mark.parametrize("reduce", GSPMM_REDUCES)
def test_zero_in_degree_rows_are_zero_like_update_all(reduce):
    g = dgl.graph(([0, 0, 1], [1, 1, 1]), num_nodes=3)  # nodes 0 and 2: zero in-degree
    g.ndata["h"] = feat = torch.randn(3, 4, dtype=torch.float64)
    g.update_all(fn.copy_u("h", "m"), getattr(fn, reduce)("m", "out"))
    out = ref_gspmm(g, "copy_u", reduce, feat)
    assert_close(out, g.ndata["out"])
    assert (out[[0, 2]] == 0).all()


@given(S.graph_and_features(dtypes=F64), st.sampled_from(GCN_NORMS))
def test_ref_gcn_norm_matches_graphconv(gf, norm):
    g, feat = gf
    conv = dgl.nn.GraphConv(feat.shape[1], feat.shape[1], norm=norm, weight=False, bias=False,
                            allow_zero_in_degree=True)
    assert_close(ref_gcn_norm_aggregate(g, feat, norm), conv(g, feat.contiguous()), msg=norm)


def test_ref_scale_and_errors():
    x = torch.randn(4, 3).half()
    out = ref_scale(x, 0.5)
    assert out.dtype == torch.float16 and torch.equal(out, x * 0.5)
    g = dgl.graph(([0], [1]), num_nodes=2)
    with pytest.raises(ValueError):
        ref_gspmm(g, "u_add_e", "sum", torch.ones(2, 1))
    with pytest.raises(ValueError):
        ref_gspmm(g, "copy_u", "prod", torch.ones(2, 1))
    with pytest.raises(ValueError):
        ref_gspmm(g, "copy_u", "sum", torch.ones(3, 1))  # wrong number of rows
    with pytest.raises(ValueError):
        ref_gcn_norm_aggregate(g, torch.ones(2, 1), "sym")
