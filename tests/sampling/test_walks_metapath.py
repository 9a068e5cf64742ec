"""``random_walk(g, nodes, metapath=...)`` on heterographs (issue 17): our engine
(:mod:`dgl_accel.core.sampling.walks.metapath`) against DGL 2.1.0's ``dgl.sampling.random_walk``
for properties, not for equal samples (the RNGs differ): every step is an edge of that step's
relation, the output layout (shapes, dtypes, node-type vector) is DGL's, walks stop with -1 padding
at dead ends and restarts, and transitions follow ``prob`` (uniform on relations without it)."""
import dgl
import numpy as np
import pytest
import torch
from scipy import stats

from dgl_accel.core.sampling.walks.metapath import metapath_walk, relation_csr
from dgl_accel.core.sampling.walks.random_walk import WalkCSR
from dgl_accel.core.sampling.walks.random_walk import random_walk as core_random_walk
from dgl_accel.graph.structure import out_csr
from dgl_accel.sampling import random_walk

ALPHA = 1e-4
METAPATH = ["follow", "view", "viewed-by"] * 2


def _hetero(idtype=torch.int64, seed=0):
    """Users follow users, view items; items are viewed by users.  Users 0-9 view nothing (dead
    ends on 'view'); item 0 has no 'viewed-by' edge."""
    rng = np.random.default_rng(seed)
    nu, ni = 60, 30
    fu, fv = rng.integers(0, nu, 400), rng.integers(0, nu, 400)
    vu, vi = rng.integers(10, nu, 300), rng.integers(0, ni, 300)
    bi, bu = rng.integers(1, ni, 300), rng.integers(0, nu, 300)
    g = dgl.heterograph({("user", "follow", "user"): (fu, fv), ("user", "view", "item"): (vu, vi),
                         ("item", "viewed-by", "user"): (bi, bu)}, num_nodes_dict={"user": nu, "item": ni},
                        idtype=idtype)
    return g


def _check_steps(g, metapath, traces, eids):
    """Each step is an edge of its relation with that edge id; -1 from the first stop on."""
    rels = [g.to_canonical_etype(e) for e in metapath]
    for s, rel in enumerate(rels):
        src, dst = g.edges(etype=rel, order="eid")
        live = traces[:, s + 1] >= 0
        e = eids[live, s].long()
        assert torch.equal(src[e], traces[live, s]) and torch.equal(dst[e], traces[live, s + 1])
        assert bool((eids[~live, s] == -1).all())
        dead = traces[:, s] < 0
        assert bool((traces[dead, s + 1] < 0).all())  # padding: once stopped, stopped


@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_layout_and_steps_like_dgl(idtype):
    g = _hetero(idtype)
    nodes = torch.arange(60, dtype=idtype).repeat(5)
    ref_tr, ref_ei, ref_ty = dgl.sampling.random_walk(g, nodes, metapath=METAPATH, return_eids=True)
    tr, ei, ty = random_walk(g, nodes, metapath=METAPATH, return_eids=True, seed=0)
    assert tr.shape == ref_tr.shape and ei.shape == ref_ei.shape
    assert (tr.dtype, ei.dtype, ty.dtype) == (ref_tr.dtype, ref_ei.dtype, ref_ty.dtype) == (idtype,) * 3
    assert torch.equal(ty, ref_ty)  # node type id per step: user, user, item, user, ...
    _check_steps(g, METAPATH, tr, ei)
    _check_steps(g, METAPATH, ref_tr, ref_ei)  # the checker holds for DGL's own output
    # users without a view (0-9, and any the draw left out) stop at once, in both
    dead = g.out_degrees(nodes, etype="view") == 0
    assert bool(dead[nodes < 10].all())
    tr_v, _ = random_walk(g, nodes, metapath=["view", "viewed-by"], seed=0)
    ref_v, _ = dgl.sampling.random_walk(g, nodes, metapath=["view", "viewed-by"])
    assert torch.equal(tr_v[dead], ref_v[dead]) and bool((tr_v[dead, 1:] == -1).all())
    assert bool((tr_v[~dead, 1] >= 0).all()) and bool((ref_v[~dead, 1] >= 0).all())
    # canonical triples work as names do
    tr2, _ = random_walk(g, nodes, metapath=[g.to_canonical_etype(e) for e in METAPATH], seed=0)
    assert torch.equal(tr2, tr)


def test_dead_end_fractions_match_dgl():
    """Walks die where the relation has no out-edge (item 0 on 'viewed-by', users 0-9 on 'view'):
    the fraction of walks alive after each step agrees with DGL's within sampling noise."""
    g = _hetero()
    nodes = torch.arange(10, 60).repeat(200)
    tr, _ = random_walk(g, nodes, metapath=METAPATH, seed=1)
    ref, _ = dgl.sampling.random_walk(g, nodes, metapath=METAPATH)
    for s in range(1, len(METAPATH) + 1):
        a, b = int((tr[:, s] >= 0).sum()), int((ref[:, s] >= 0).sum())
        table = [[a, nodes.numel() - a], [b, nodes.numel() - b]]
        assert a == b == nodes.numel() or stats.chi2_contingency(table)[1] > ALPHA, (s, a, b)


def test_restart_prob_float_and_per_step():
    g = _hetero()
    metapath = ["follow"] * 2 + ["view", "viewed-by"]
    nodes = torch.arange(10, 60).repeat(400)
    tr, _ = random_walk(g, nodes, metapath=metapath, restart_prob=torch.tensor([0.0, 0.0, 1.0, 0.0]), seed=2)
    assert bool((tr[:, 3:] == -1).all())  # certain restart before step 2 ('view')
    ref, _ = dgl.sampling.random_walk(g, nodes, metapath=metapath, restart_prob=torch.tensor([0.0, 0.0, 1.0, 0.0]))
    assert bool((ref[:, 3:] == -1).all())
    # follow has no dead end among users 10-59 that have an out-follow; restart 0.3 per step on a
    # cycle of follows: the stop step is geometric, and agrees with DGL's histogram
    cyc = dgl.heterograph({("user", "follow", "user"): (torch.arange(50), (torch.arange(50) + 1) % 50),
                           ("user", "view", "item"): ([0], [0])})
    start = torch.zeros(20000, dtype=torch.int64)
    tr, _ = random_walk(cyc, start, metapath=["follow"] * 6, restart_prob=0.3, seed=3)
    ref, _ = dgl.sampling.random_walk(cyc, start, metapath=["follow"] * 6, restart_prob=0.3)
    steps = (tr >= 0).sum(1) - 1
    ref_steps = (ref >= 0).sum(1) - 1
    probs = np.array([0.3 * 0.7 ** k for k in range(6)] + [0.7 ** 6])
    counts = np.bincount(steps.numpy(), minlength=7)
    assert stats.chisquare(counts, probs * start.numel())[1] > ALPHA
    assert stats.chi2_contingency([counts, np.bincount(ref_steps.numpy(), minlength=7)])[1] > ALPHA


def test_prob_weights_per_relation():
    """prob on 'view' only: the view step follows the weights, the other steps stay uniform (as
    DGL reads a relation without the feature)."""
    g = dgl.heterograph({("user", "view", "item"): ([0, 0, 0, 0], [0, 1, 2, 3]),
                         ("item", "viewed-by", "user"): ([0, 1, 2, 3, 3, 3], [1, 1, 1, 1, 2, 3])})
    g.edges["view"].data["w"] = torch.tensor([1.0, 2.0, 3.0, 0.0])
    start = torch.zeros(30000, dtype=torch.int64)
    for tr in (random_walk(g, start, metapath=["view", "viewed-by"], prob="w", seed=4)[0],
               dgl.sampling.random_walk(g, start, metapath=["view", "viewed-by"], prob="w")[0]):
        item = np.bincount(tr[:, 1].numpy(), minlength=4)
        assert item[3] == 0 and stats.chisquare(item[:3], np.array([1, 2, 3]) / 6 * start.numel())[1] > ALPHA
    # item 3 (weight 0 on its view edge) never reached; uniform from item 3 on 'viewed-by' otherwise
    g.edges["view"].data["w"] = torch.tensor([0.0, 0.0, 0.0, 1.0])
    tr, _ = random_walk(g, start, metapath=["view", "viewed-by"], prob="w", seed=5)
    users = np.bincount(tr[:, 2].numpy(), minlength=4)[1:]
    assert stats.chisquare(users, np.full(3, start.numel() / 3))[1] > ALPHA


@pytest.mark.parametrize("kw", [{}, {"restart_prob": 0.2}, {"prob": True}])
def test_engine_reproduces_random_walk_on_one_relation(kw):
    """The metapath engine uses random_walk's random-number layout: repeating one relation gives
    random_walk's traces bit for bit (so the adapter's fast path and the engine agree)."""
    rng = np.random.default_rng(1)
    g = dgl.graph((rng.integers(0, 50, 300), rng.integers(0, 50, 300)), num_nodes=50)
    w = torch.from_numpy(rng.random(g.num_edges())) if kw.get("prob") else None
    rp = kw.get("restart_prob")
    s = out_csr(g)
    nodes = torch.arange(50).repeat(3)
    want = core_random_walk(WalkCSR(s), nodes, 7, weights=w, restart_prob=rp, seed=9, return_eids=True)
    rel = relation_csr(s.indptr, s.indices, s.eids, 50, 50)
    got = metapath_walk([rel] * 7, nodes, 50, weights=[w] * 7, restart_prob=rp, seed=9, return_eids=True)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    # and through the adapter: metapath of the one edge type == length
    a, _ = random_walk(g, nodes, metapath=["_E"] * 7, seed=9)
    b, _ = random_walk(g, nodes, length=7, seed=9)
    assert torch.equal(a, b)


def test_bipartite_relation_with_more_destinations_than_sources():
    """A relation into a larger node type (destination ids beyond the source count) keeps rows apart."""
    g = dgl.heterograph({("a", "to", "b"): ([0, 0, 1], [90, 5, 99]), ("b", "back", "a"): ([90, 5, 99], [1, 1, 0])},
                        num_nodes_dict={"a": 2, "b": 100})
    tr, ei, ty = random_walk(g, torch.tensor([0, 1] * 50), metapath=["to", "back"], return_eids=True, seed=0)
    _check_steps(g, ["to", "back"], tr, ei)
    assert set(tr[1::2, 1].tolist()) == {99} and set(tr[::2, 1].tolist()) == {5, 90}
