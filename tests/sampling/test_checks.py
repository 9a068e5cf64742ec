"""The sampling toolkit's one set of argument checks (dgl_accel/core/sampling/checks.py): the seed
rule holds for every sampler, walk and choice function (a one-element integer tensor is the same
seed as its int; bools, floats, negatives, 2^64 and larger tensors are rejected), and every check
speaks the one error vocabulary "expected ... (got ...). Fix: ..."."""
import dgl
import numpy as np
import pytest
import torch

from dgl_accel.core.sampling.checks import check_fanouts, check_seed, expected, resolve_seed
from dgl_accel.core.sampling.rng import philox_randint
from dgl_accel.sampling import (
    BulkNeighborSampler,
    FastGCNSampler,
    LADIESSampler,
    NeighborSampler,
    SAINTSampler,
    frontier_sample,
    frontier_sample_sequential,
    khop_sample,
    multi_dimensional_random_walk,
    neighbor_choice,
    node2vec_random_walk,
    random_walk,
)

GOOD = [7, np.int64(7), np.uint64(7), torch.tensor(7), torch.tensor([7]), torch.tensor([[7]], dtype=torch.int32)]
BAD = [True, 7.0, -1, 2**64, torch.tensor([7, 8]), torch.tensor([7.0]), torch.tensor(True), "7", None]


@pytest.mark.parametrize("seed", GOOD, ids=repr)
def test_check_seed_accepts_ints_and_one_element_integer_tensors(seed):
    assert check_seed(seed) == 7 and type(check_seed(seed)) is int


@pytest.mark.parametrize("seed", BAD, ids=repr)
def test_check_seed_rejects_the_rest(seed):
    with pytest.raises(ValueError, match=r"^expected seed to be an int in \[0, 2\^64\).* \(got .*\)\. Fix: "):
        check_seed(seed)


def test_resolve_seed_draws_from_torch_when_none():
    torch.manual_seed(3)
    a = resolve_seed(None)
    torch.manual_seed(3)
    assert resolve_seed(None) == a and resolve_seed(torch.tensor([5])) == 5


def _graph():
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 40, 400), rng.integers(0, 40, 400)
    return dgl.to_simple(dgl.graph((torch.from_numpy(np.concatenate([src, dst])),
                                    torch.from_numpy(np.concatenate([dst, src]))), num_nodes=40))


def _outputs(x):
    """Tensors of a sampler's output, flattened (blocks by their edges and id columns)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dgl.DGLGraph):
        out = [*x.edges(order="eid"), x.edata[dgl.EID]]
        return out + ([x.srcdata[dgl.NID], x.dstdata[dgl.NID]] if x.is_block else [x.ndata[dgl.NID]])
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _outputs(y)]
    return _outputs(tuple(x))


CALLS = {
    "NeighborSampler": lambda g, s: NeighborSampler([3, 2], seed=s).sample_blocks(g, torch.arange(5)),
    "BulkNeighborSampler": lambda g, s: BulkNeighborSampler([3, 2], bulk=2, seed=s).sample_blocks(g, torch.arange(5)),
    "LADIESSampler": lambda g, s: LADIESSampler([6, 6], seed=s).sample_blocks(g, torch.arange(5)),
    "FastGCNSampler": lambda g, s: FastGCNSampler([6, 6], seed=s).sample_blocks(g, torch.arange(5)),
    "SAINTSampler": lambda g, s: SAINTSampler("walk", (5, 2), seed=s).sample(g),
    "random_walk": lambda g, s: random_walk(g, torch.arange(10), length=4, seed=s),
    "node2vec_random_walk": lambda g, s: node2vec_random_walk(g, torch.arange(10), 0.5, 2.0, 4, seed=s),
    "multi_dimensional_random_walk": lambda g, s: multi_dimensional_random_walk(g, 3, 8, seed=s),
    "frontier_sample": lambda g, s: frontier_sample(g, 3, 8, seed=s),
    "frontier_sample_sequential": lambda g, s: frontier_sample_sequential(g, 3, 8, seed=s),
    "khop_sample": lambda g, s: khop_sample(g, torch.arange(5), [2, 2], seed=s),
    "neighbor_choice": lambda g, s: neighbor_choice(torch.tensor([0, 3, 5]), torch.tensor([0, 1]), 2, seed=s, step=0,
                                                    num_nodes=2),
    "philox_randint": lambda g, s: philox_randint(s, torch.arange(4)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_one_seed_rule_everywhere(name):
    g, call = _graph(), CALLS[name]
    want = _outputs(call(g, 123456789))
    got = _outputs(call(g, torch.tensor([123456789])))
    assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))
    for bad in (True, 1.0, -1, torch.tensor([1, 2])):
        with pytest.raises(ValueError, match=r"^expected seed .*\(got .*\)\. Fix: "):
            call(g, bad)


def test_one_error_vocabulary():
    e = expected("fanouts to be a list", "3", "pass [3].")
    assert str(e) == "expected fanouts to be a list (got 3). Fix: pass [3]."
    for bad in ([], 3, [2, -2], [{"a": 1}]):
        with pytest.raises(ValueError, match=r"^expected .* \(got .*\)\. Fix: "):
            check_fanouts(bad)
