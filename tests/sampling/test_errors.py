"""Every documented rejection of the public samplers and walk functions (``dgl_accel.sampling``)
is catchable both as ``dgl.DGLError`` (what DGL's samplers raise, issue 17) and as ``ValueError``
(what the DGL-free core raises), with one message vocabulary: ``expected ... (got ...). Fix: ...``.

The catalogue names each rejection once; the core's own checks stay plain ``ValueError``
(``SamplingInputError``), which the last test pins down."""
import dgl
import pytest
import torch

from dgl_accel.core.sampling.checks import SamplingInputError, check_fanouts
from dgl_accel.graph.structure import in_csr
from dgl_accel.sampling import (
    BulkNeighborSampler,
    DGLSamplingInputError,
    FastGCNSampler,
    LADIESSampler,
    MultiLayerFullNeighborSampler,
    NeighborSampler,
    SAINTSampler,
    choose_neighbors,
    frontier_sample,
    frontier_sample_sequential,
    khop_sample,
    multi_dimensional_random_walk,
    neighbor_choice,
    node2vec_random_walk,
    random_walk,
    weighted_neighbor_choice,
)
from dgl_accel.sampling.errors import as_dgl_error, dgl_errors

VOCABULARY = r"expected .* \(got .*\)\. Fix: "


def _graph():
    g = dgl.rand_graph(30, 200, idtype=torch.int64)
    g = dgl.to_simple(dgl.add_reverse_edges(g))
    g.edata["neg"] = -torch.ones(g.num_edges())
    g.edata["nan"] = torch.full((g.num_edges(),), float("nan"))
    g.edata["short"] = torch.ones(g.num_edges(), 2)
    g.edata["m"] = torch.ones(g.num_edges(), dtype=torch.bool)
    g.ndata["none"] = torch.zeros(g.num_nodes(), dtype=torch.bool)
    return g


G = _graph()
HG = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0, 1], [1, 0])})
CSR = in_csr(G)
S = torch.arange(4)

REJECTIONS = {
    # NeighborSampler: construction
    "neighbor: empty fanouts": lambda: NeighborSampler([]),
    "neighbor: fanout -2": lambda: NeighborSampler([5, -2]),
    "neighbor: edge_dir out": lambda: NeighborSampler([5], edge_dir="out"),
    "neighbor: bad seed": lambda: NeighborSampler([5], seed=-1),
    "neighbor: prob not a name": lambda: NeighborSampler([5], prob=torch.ones(3)),
    # NeighborSampler: sampling
    "neighbor: seed out of range": lambda: NeighborSampler([5], seed=0).sample_blocks(G, torch.tensor([0, 999])),
    "neighbor: float seeds": lambda: NeighborSampler([5], seed=0).sample_blocks(G, torch.tensor([0.5])),
    "neighbor: prob and mask": lambda: NeighborSampler([5], prob="p", mask="m"),
    "neighbor: missing mask": lambda: NeighborSampler([5], mask="nope", seed=0).sample_blocks(G, S),
    "walk: neither length nor metapath": lambda: random_walk(G, [0]),
    "walk: metapath and length": lambda: random_walk(HG, [0], metapath=["r"], length=2),
    "walk: unknown etype in metapath": lambda: random_walk(HG, [0], metapath=["r", "zz"]),
    "walk: metapath that does not chain": lambda: random_walk(HG, [0], metapath=["r", "r"]),
    "neighbor: missing prob": lambda: NeighborSampler([5], prob="nope", seed=0).sample_blocks(G, S),
    "neighbor: negative prob": lambda: NeighborSampler([5], prob="neg", seed=0).sample_blocks(G, S),
    "neighbor: nan prob": lambda: NeighborSampler([5], prob="nan", seed=0).sample_blocks(G, S),
    "neighbor: 2-D prob": lambda: NeighborSampler([5], prob="short", seed=0).sample_blocks(G, S),
    "neighbor: heterograph seeds without types": lambda: NeighborSampler([5], seed=0).sample_blocks(HG, torch.tensor([0])),
    "neighbor: per-type fanouts missing a type": lambda: NeighborSampler([{"r": 2}], seed=0).sample_blocks(
        HG, {"a": torch.tensor([0])}),
    # bulk and layer-wise samplers
    "bulk: bulk 0": lambda: BulkNeighborSampler([3], bulk=0),
    "bulk: memory budget": lambda: BulkNeighborSampler([3], memory_budget=0),
    "bulk: empty batch": lambda: BulkNeighborSampler([3], seed=0).sample_blocks(G, torch.tensor([], dtype=torch.int64)),
    "ladies: no layers": lambda: LADIESSampler([]),
    "ladies: heterograph": lambda: LADIESSampler([2]).sample_blocks(HG, {"a": torch.tensor([0])}),
    "fastgcn: bad seed": lambda: FastGCNSampler([4], seed=1.5),
    # SAINT
    "saint: mode": lambda: SAINTSampler("nodes", 10),
    "saint: budget": lambda: SAINTSampler("walk", (0, 2)),
    "saint: coverage": lambda: SAINTSampler("node", 3, coverage=0),
    "saint: budget > nodes": lambda: SAINTSampler("node", G.num_nodes() + 1).sample(G),
    "saint: heterograph": lambda: SAINTSampler("node", 1).sample(HG),
    "saint: empty train mask": lambda: SAINTSampler("node", 2, normalize=True, train_mask="none").sample(G),
    # walks
    "walk: negative length": lambda: random_walk(G, [0], length=-1),
    "walk: node out of range": lambda: random_walk(G, [0, G.num_nodes()], length=3),
    "walk: missing prob": lambda: random_walk(G, [0], length=3, prob="missing"),
    "walk: negative prob": lambda: random_walk(G, [0], length=3, prob="neg"),
    "walk: restart_prob > 1": lambda: random_walk(G, [0], length=3, restart_prob=1.5),
    "walk: restart_prob entries": lambda: random_walk(G, [0], length=3, restart_prob=torch.tensor([0.1, 0.2])),
    "walk: heterograph without metapath": lambda: random_walk(HG, [0], length=2),
    "walk: metapath a string": lambda: random_walk(HG, [0], metapath="r"),
    "walk: prob on no relation of the metapath": lambda: random_walk(HG, [0], metapath=["r", "s"], prob="nope"),
    "walk: start node of the wrong type": lambda: random_walk(HG, [2], metapath=["r", "s"]),
    "full neighbour sampler: 0 layers": lambda: MultiLayerFullNeighborSampler(0),
    "node2vec: p = 0": lambda: node2vec_random_walk(G, [0], 0.0, 1.0, 3),
    "node2vec: negative length": lambda: node2vec_random_walk(G, [0], 1.0, 1.0, -3),
    "node2vec: heterograph": lambda: node2vec_random_walk(HG, [0], 1.0, 1.0, 3),
    "mdrw: zero roots": lambda: multi_dimensional_random_walk(G, 0, 5),
    "frontier: empty graph": lambda: frontier_sample(dgl.graph(([], []), num_nodes=5), 1, 2),
    "frontier: heterograph": lambda: frontier_sample_sequential(HG, 1, 1),
    "khop: node out of range": lambda: khop_sample(G, torch.tensor([3, 999]), [2], seed=0),
    # the choice primitives
    "choice: fanout": lambda: neighbor_choice(CSR.indptr, torch.arange(3), -3, seed=0, step=0, num_nodes=G.num_nodes()),
    "choice: transit": lambda: neighbor_choice(CSR.indptr, torch.tensor([-1]), 2, seed=0, step=0,
                                               num_nodes=G.num_nodes()),
    "choice: weights": lambda: weighted_neighbor_choice(CSR.indptr, CSR.eids, torch.ones(3), torch.arange(3), 2, seed=0,
                                                        step=0, num_nodes=G.num_nodes()),
    "choose_neighbors: seed": lambda: choose_neighbors(CSR.indptr, torch.arange(3), 2, seed=-1, step=0,
                                                       num_nodes=G.num_nodes()),
}


@pytest.mark.parametrize("name", sorted(REJECTIONS))
def test_rejection_is_dgl_error_and_value_error(name):
    call = REJECTIONS[name]
    with pytest.raises(dgl.DGLError, match=VOCABULARY) as caught:
        call()
    assert isinstance(caught.value, ValueError) and type(caught.value) is DGLSamplingInputError
    with pytest.raises(ValueError, match=VOCABULARY):
        call()


def test_one_class_for_both_catches():
    assert issubclass(DGLSamplingInputError, ValueError) and issubclass(DGLSamplingInputError, dgl.DGLError)
    assert issubclass(DGLSamplingInputError, SamplingInputError)
    # the core stays DGL-free: its error is a ValueError only
    with pytest.raises(SamplingInputError) as caught:
        check_fanouts([])
    assert not isinstance(caught.value, dgl.DGLError)


def test_conversion_keeps_message_traceback_and_passes_other_errors():
    def deep():
        raise ValueError("expected x (got y). Fix: z")

    @dgl_errors
    def entry(kind):
        if kind == "type":
            raise TypeError("wrong call")
        if kind == "dgl":
            raise dgl.DGLError("from DGL")
        deep()

    with pytest.raises(DGLSamplingInputError, match=r"^expected x \(got y\)\. Fix: z$") as caught:
        entry("value")
    assert caught.traceback[-1].name == "deep"  # the frame that raised, not the wrapper
    with pytest.raises(DGLSamplingInputError, match="from DGL"):
        entry("dgl")
    with pytest.raises(TypeError):
        entry("type")
    both = DGLSamplingInputError("already both")
    assert as_dgl_error(both) is both
