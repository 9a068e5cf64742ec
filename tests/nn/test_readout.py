"""``ShaDowReadout`` (``nn/readout.py``): every mode against a per-subgraph loop, gradients, the
output width, bad input; and end to end on a per-target batch of ShaDowPPRSampler / ShaDowKHopSampler
with a SAGEConv stack: each row equals the same model run on that target's subgraph alone."""
import dgl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_accel.nn import SAGEConv, ShaDowReadout
from dgl_accel.nn.readout import MODES
from dgl_accel.sampling import ShaDowKHopSampler, ShaDowPPRSampler, shadow_index
from dgl_accel.sampling.shadow import GRAPH_ID


def _reference(mode, h, gid, tpos):
    rows = []
    for b in range(tpos.numel()):
        part = h[gid == b]
        pool = part.mean(0) if mode.endswith("mean") else part.max(0).values
        center = h[tpos[b]]
        rows.append(center if mode == "center" else pool if "+" not in mode else torch.cat([center, pool]))
    return torch.stack(rows)


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6), F=st.integers(1, 5), mode=st.sampled_from(MODES),
       seed=st.integers(0, 2**31))
def test_modes_equal_a_per_subgraph_loop(sizes, F, mode, seed):
    g = torch.Generator().manual_seed(seed)
    gid = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    starts = torch.tensor([0] + sizes).cumsum(0)[:-1]
    tpos = starts + torch.tensor([int(torch.randint(s, (), generator=g)) for s in sizes])
    h = torch.randn(gid.numel(), F, dtype=torch.float64, generator=g, requires_grad=True)
    ro = ShaDowReadout(mode)
    out = ro(h, gid, tpos)
    assert out.shape == (len(sizes), ro.out_dim(F))
    torch.testing.assert_close(out, _reference(mode, h, gid, tpos), rtol=1e-12, atol=1e-12)
    torch.autograd.gradcheck(lambda x: ro(x, gid, tpos), (h,))


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6), F=st.integers(1, 4),
       mode=st.sampled_from(["mean", "center+mean"]), seed=st.integers(0, 2**31))
def test_weighted_mean_pool_equals_a_per_subgraph_loop(sizes, F, mode, seed):
    g = torch.Generator().manual_seed(seed)
    gid = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    tpos = torch.tensor([0] + sizes).cumsum(0)[:-1]
    h = torch.randn(gid.numel(), F, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.rand(gid.numel(), dtype=torch.float64, generator=g) + 0.01
    rows = []
    for b in range(len(sizes)):
        pool = (h[gid == b] * w[gid == b, None]).sum(0) / w[gid == b].sum()
        rows.append(pool if mode == "mean" else torch.cat([h[tpos[b]], pool]))
    ro = ShaDowReadout(mode)
    torch.testing.assert_close(ro(h, gid, tpos, w), torch.stack(rows), rtol=1e-12, atol=1e-12)
    torch.autograd.gradcheck(lambda x: ro(x, gid, tpos, w), (h,))


def test_bad_weights_are_refused():
    h, gid, tpos = torch.zeros(3, 2), torch.tensor([0, 0, 1]), torch.tensor([0, 2])
    with pytest.raises(ValueError, match="weights only with a mean pool"):
        ShaDowReadout("center+max")(h, gid, tpos, torch.ones(3))
    with pytest.raises(ValueError, match=r"weights a float tensor \[N\]"):
        ShaDowReadout("mean")(h, gid, tpos, torch.ones(2))
    with pytest.raises(ValueError, match="positive sum in every subgraph"):
        ShaDowReadout("mean")(h, gid, tpos, torch.tensor([1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="finite weights >= 0"):
        ShaDowReadout("mean")(h, gid, tpos, torch.tensor([1.0, -1.0, 1.0]))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match=r"mode to be one of \('center', 'mean'"):
        ShaDowReadout("sum")
    with pytest.raises(ValueError, match=r"graph_ids \[N\]"):
        ShaDowReadout("mean")(torch.zeros(3, 2), torch.zeros(2, dtype=torch.long), torch.zeros(1, dtype=torch.long))


class _Model(torch.nn.Module):
    def __init__(self, F, layers, mode):
        super().__init__()
        self.convs = torch.nn.ModuleList([SAGEConv(F, F, "mean") for _ in range(layers)])
        self.readout = ShaDowReadout(mode)

    def forward(self, sg, x):
        for conv in self.convs:
            x = torch.relu(conv(sg, x))
        return self.readout(x, *shadow_index(sg))


@pytest.mark.parametrize("sampler", [ShaDowPPRSampler(topk=12, eps=1e-4),
                                     ShaDowKHopSampler([5, 5], per_target=True, seed=2)], ids=["ppr", "khop"])
@pytest.mark.parametrize("mode", MODES)
def test_deeper_model_on_batched_scopes_equals_each_scope_alone(sampler, mode):
    torch.manual_seed(0)
    g = dgl.to_bidirected(dgl.rand_graph(300, 1500))
    x = torch.randn(300, 8)
    model = _Model(8, 4, mode)                    # depth 4 > scope (2 hops / 12 nodes)
    seeds = torch.arange(0, 300, 37)
    inp, out, sg = sampler.sample(g, seeds)
    got = model(sg, x[inp.long()])
    parts = dgl.unbatch(sg)
    for b, part in enumerate(parts):
        part.ndata[GRAPH_ID] = torch.zeros(part.num_nodes(), dtype=torch.int64)   # a batch of one
        alone = model(part, x[part.ndata[dgl.NID].long()])
        torch.testing.assert_close(got[b:b + 1], alone, rtol=1e-5, atol=1e-6)
