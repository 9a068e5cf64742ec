"""Our public samplers and walk functions take DGL 2.1.0's signatures exactly (issue 17): every
parameter of DGL's counterpart, in its order, of its kind (positional / keyword-only / **kwargs),
with its default; our additions come after them and are keyword-only.  So a call written for DGL,
positional or not, means the same with ours."""
import inspect

import dgl
import dgl.dataloading
import dgl.sampling
import pytest

import dgl_accel.sampling as ours

PAIRS = {
    "NeighborSampler": (ours.NeighborSampler, dgl.dataloading.NeighborSampler),
    "MultiLayerNeighborSampler": (ours.MultiLayerNeighborSampler, dgl.dataloading.MultiLayerNeighborSampler),
    "MultiLayerFullNeighborSampler": (ours.MultiLayerFullNeighborSampler,
                                      dgl.dataloading.MultiLayerFullNeighborSampler),
    "SAINTSampler": (ours.SAINTSampler, dgl.dataloading.SAINTSampler),
    "random_walk": (ours.random_walk, dgl.sampling.random_walk),
    "node2vec_random_walk": (ours.node2vec_random_walk, dgl.sampling.node2vec_random_walk),
}
# methods the DataLoader calls, with DGL's parameters
METHODS = {
    "NeighborSampler.sample_blocks": (ours.NeighborSampler.sample_blocks,
                                      dgl.dataloading.NeighborSampler.sample_blocks),
    "SAINTSampler.sample": (ours.SAINTSampler.sample, dgl.dataloading.SAINTSampler.sample),
}


def _params(f):
    return list(inspect.signature(f).parameters.values())


def _same_prefix(mine, theirs):
    """Our parameters start with exactly DGL's (names, kinds, defaults); what follows is ours and
    keyword-only.  Returns our extras."""
    head = [(p.name, p.kind, p.default) for p in mine[:len(theirs)]]
    assert head == [(p.name, p.kind, p.default) for p in theirs]
    extras = mine[len(theirs):]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in extras), [str(p) for p in extras]
    return extras


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_signature_is_dgls_plus_keyword_only_extras(name):
    mine, theirs = PAIRS[name]
    _same_prefix(_params(mine), _params(theirs))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_dataloader_facing_methods_match(name):
    mine, theirs = METHODS[name]
    assert [p.name for p in _params(mine)] == [p.name for p in _params(theirs)]


def test_extras_are_what_we_document():
    extras = {name: [p.name for p in _same_prefix(_params(m), _params(t))] for name, (m, t) in PAIRS.items()}
    assert extras["NeighborSampler"] == ["seed"]
    assert extras["random_walk"] == ["seed"] and extras["node2vec_random_walk"] == ["seed"]
    assert extras["SAINTSampler"][0] == "seed"
    assert ours.MultiLayerNeighborSampler is ours.NeighborSampler


def test_positional_calls_written_for_dgl_mean_the_same():
    # DGL's fourth positional parameter is mask, then replace
    s = ours.NeighborSampler([2], "in", None, "m", True, seed=0)
    assert (s.mask, s.prob, s.replace, s.fused) == ("m", "m", True, True)
    s = ours.NeighborSampler([2], "in", None, None, False, None, None, None, None, False, seed=0)
    assert s.fused is False
    g = dgl.graph(([0, 1, 2], [1, 2, 0]))
    g.edata["w"] = dgl.backend.tensor([1.0, 1.0, 1.0])
    # DGL's node2vec example passes prob positionally
    traces = ours.node2vec_random_walk(g, [0], 1.0, 1.0, 3, "w", seed=0)
    assert traces.tolist() == [[0, 1, 2, 0]]
    traces, eids = ours.node2vec_random_walk(g, [0], 1.0, 1.0, 3, None, True, seed=0)
    assert eids.tolist() == [[0, 1, 2]]
