"""The samplers' kernels on the report's device against their CPU twins: same seed, same output.

One check per registered variant of each kernel: neighbour choice (sub-warp, block and grid
classes, with and without replacement, with counter ids through k-hop sampling; the weighted
choice's torch ops through multi-layer blocks), random walks
(weights x restarts x edge ids), node2vec (uniform, weighted), the multi-dimensional random walk,
GraphSAINT's frontier kernel and its node / edge / walk draws with the counted normalisation's
pre-sampling, bulk sampling's draw / compact / relabel kernels, its device pipeline and bulk LADIES'
device layer.
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.backend import choose_path, use_backend
from ..core.csr import Structure
from ..core.sampling.bulk.its import RowSet, its_sample, its_sample_np, quantise, row_label
from ..core.sampling.bulk.ladies import ladies_matrix, normalise_rows
from ..core.sampling.bulk.ladies import sample_layer as ladies_layer
from ..core.sampling.bulk.ladies_device import ladies_layer_device
from ..core.sampling.bulk.launchers import relabel_triton
from ..core.sampling.bulk.matrix import canonical_adjacency
from ..core.sampling.bulk.neighbor import sample_bulk_cpu
from ..core.sampling.bulk.neighbor_device import sample_bulk_device
from ..core.sampling.induced.subgraph import InCSR
from ..core.sampling.induced.subgraph_device import induced_sets_device
from ..core.sampling.layer.importance import gather_in_edges, node_factors
from ..core.sampling.neighbor.choice import weight_tables
from ..core.sampling.neighbor.khop import khop_sample
from ..core.sampling.neighbor.sample import choose_neighbors, relabel_block, sample_layers
from ..core.sampling.output import assert_same_output
from ..core.sampling.saint.draw import build_tables, draw_edge, draw_node, draw_walk, edge_weights, node_weights
from ..core.sampling.saint.draw_device import (
    DeviceTables,
    count_inclusion_device,
    draw_edge_device,
    draw_node_device,
    draw_walk_device,
)
from ..core.sampling.saint.frontier import frontier_sample
from ..core.sampling.saint.norm import count_inclusion
from ..core.sampling.shadow.scope import induced_batch, khop_node_sets
from ..core.sampling.walks.mdrw import multi_dimensional_random_walk
from ..core.sampling.walks.node2vec import node2vec_random_walk
from ..core.sampling.walks.random_walk import WalkCSR, random_walk
from .graphs import Graph, hub_graph


def structure(g: Graph, device, direction: str = "in") -> Structure:
    """CSR of ``g`` on ``device`` (``"in"``: a row per destination; ``"out"``: per source)."""
    rows, cols = (g.dst, g.src) if direction == "in" else (g.src, g.dst)
    rows, cols = rows.to(device), cols.to(device)
    order = torch.argsort(rows * g.num_nodes + cols)
    indptr = torch.zeros(g.num_nodes + 1, dtype=torch.int64, device=device)
    torch.cumsum(torch.bincount(rows, minlength=g.num_nodes), 0, out=indptr[1:])
    return Structure(indptr=indptr, indices=cols[order], eids=order, num_rows=g.num_nodes, num_cols=g.num_nodes,
                     device=torch.device(device))


def assert_same(actual, expected, what: str) -> None:
    """Exact equality of (nested) tensors / arrays, compared on the CPU."""
    if isinstance(actual, (tuple, list)):
        assert len(actual) == len(expected), f"{what}: {len(actual)} vs {len(expected)} outputs"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{what}[{k}]")
        return
    if actual is None or expected is None:
        assert actual is None and expected is None, f"{what}: one output is None"
        return
    a, e = torch.as_tensor(np.asarray(actual.cpu() if isinstance(actual, torch.Tensor) else actual)), \
        torch.as_tensor(np.asarray(expected.cpu() if isinstance(expected, torch.Tensor) else expected))
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} vs CPU twin {tuple(e.shape)}"
    bad = int((a != e).sum())
    assert bad == 0, f"{what}: {bad}/{a.numel()} entries differ from the CPU twin"


def twin(fn, g: Graph, device, direction: str = "in"):
    """``(fn(csr on device), fn(csr on the CPU, native path))``."""
    ours = fn(structure(g, device, direction))
    with use_backend("native"):
        ref = fn(structure(g, "cpu", direction))
    return ours, ref


def check_neighbors(checks, g: Graph, hub: Graph, device, tiny: bool) -> None:
    s_dev, s_cpu = structure(hub, device), structure(hub, "cpu")
    for replace in (False, True):
        for fanout in (10, 20, 100, 600, 1100):  # K_PAD 16, 32 (sub-warp), 128, 1024 (block), grid
            # the hub (node 0) twice, plus other rows: fewer under tiny for the wide tiles
            many = (1 if fanout >= 600 else 3) if tiny and fanout >= 100 else 40
            transits = torch.cat([torch.arange(many), torch.tensor([0, 0])])
            def check(fanout=fanout, replace=replace, transits=transits):
                ours = choose_neighbors(s_dev.indptr, transits.to(device), fanout, seed=7, step=1,
                                        num_nodes=hub.num_nodes, replace=replace)
                with use_backend("native"):
                    ref = choose_neighbors(s_cpu.indptr, transits, fanout, seed=7, step=1,
                                           num_nodes=hub.num_nodes, replace=replace)
                assert_same(ours, ref, "positions")
            checks.run("neighbor", f"fanout={fanout} replace={replace}", check)
            # counter ids: k-hop sampling keys every (sample, step) draw by its own counter
            seeds = torch.arange(2 if tiny and fanout >= 100 else 30)
            def khop(s, fanout=fanout, replace=replace, seeds=seeds):
                return tuple(khop_sample(s, seeds.to(s.device), [fanout, 3], replace=replace, seed=11).steps)
            checks.run("neighbor", f"khop fanout={fanout} replace={replace}",
                       lambda khop=khop: assert_same(*twin(khop, hub, device), "k-hop steps"))
    # shaDow's per-target scopes and their batch, built on the device: the hub in several scopes
    def per_target(s):
        sets = khop_node_sets(s, torch.tensor([0, 1, 2, 0]), [600, 5], seed=9)
        if choose_path(s.indptr) == "native":
            return list(sets[:3]) + [torch.from_numpy(a) for a in induced_batch(
                *(t.numpy() for t in (s.indptr, s.indices, s.eids)), sets)]
        return list(sets[:3]) + list(induced_sets_device(s, sets.offsets, sets.nodes))
    checks.run("neighbor", "shaDow per-target sets and batch", lambda: assert_same(*twin(per_target, hub, device),
                                                                                 "per-target batch"))
    # weighted blocks (torch ops on the device, no kernel): zero weights, the hub above 1,024 in-edges
    prob = torch.rand(hub.src.numel(), generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    prob[::7] = 0
    for replace in (False, True):
        def weighted(s, replace=replace):
            return [sample_layers(s, torch.arange(20, device=s.device), [600, 10], seed=13, replace=replace,
                                  tables=weight_tables(s.indptr, s.eids, prob.to(s.device)))]
        checks.run("neighbor", f"weighted blocks [600, 10] replace={replace}",
                   lambda weighted=weighted: assert_same_output(*twin(weighted, hub, device)))


def check_walks(checks, g: Graph, device) -> None:
    gen = torch.Generator().manual_seed(3)
    w = torch.rand(g.num_edges, generator=gen) * (torch.rand(g.num_edges, generator=gen) > 0.2)
    nodes = torch.randint(g.num_nodes, (64,), generator=gen)
    for weighted in (False, True):
        for restart in (0.0, 0.2):
            for eids in (False, True):
                def walk(s, weighted=weighted, restart=restart, eids=eids):
                    weights = w.to(s.device) if weighted else None
                    return random_walk(WalkCSR(s), nodes.to(s.device), 12, weights=weights, restart_prob=restart,
                                       seed=5, return_eids=eids)
                checks.run("walks", f"random walk weighted={weighted} restart={restart} eids={eids}",
                           lambda walk=walk: assert_same(*twin(walk, g, device, "out"), "walk"))
        def n2v(s, weighted=weighted):
            weights = w.to(s.device) if weighted else None
            return node2vec_random_walk(WalkCSR(s), nodes.to(s.device), 0.5, 2.0, 10, weights=weights, seed=9,
                                        return_eids=True)
        checks.run("walks", f"node2vec weighted={weighted}", lambda n2v=n2v: assert_same(*twin(n2v, g, device, "out"),
                                                                                          "node2vec"))
    checks.run("walks", "multi-dimensional random walk", lambda: assert_same(*twin(
        lambda s: tuple(multi_dimensional_random_walk(WalkCSR(s), 8, 40, num_instances=6, seed=4)), g, device, "out"),
        "mdrw"))
    checks.run("saint_frontier", "frontier sample", lambda: assert_same(*twin(
        lambda s: frontier_sample(s, 8, 30, num_instances=5, seed=6), g, device, "out"), "frontier"))


def check_saint(checks, g: Graph, device) -> None:
    """GraphSAINT's draws (``saint/draw_device.py``) against the CPU path's (``saint/draw.py``) for several keys,
    and the counted normalisation's pre-sampling counts."""
    t = build_tables(InCSR.from_structure(structure(g, "cpu")), structure(g, "cpu", "out"))
    dt = DeviceTables.on(t, device)
    node_cdf, edge_cdf = np.cumsum(node_weights(t)), np.cumsum(edge_weights(t))
    node_d, edge_d = torch.from_numpy(node_cdf).to(device), torch.from_numpy(edge_cdf).to(device)
    keys = [0, 7, 2**63 + 5]
    draws = {"node": (lambda k: draw_node_device(node_d, 3000, k), lambda k: draw_node(node_cdf, 3000, k)),
             "edge": (lambda k: draw_edge_device(dt, edge_d, 3000, k), lambda k: draw_edge(t, edge_cdf, 3000, k)),
             "walk": (lambda k: draw_walk_device(dt, 500, 3, k), lambda k: draw_walk(t, 500, 3, k))}
    for mode, (dev, cpu) in draws.items():
        checks.run("saint", f"{mode} draws", lambda dev=dev, cpu=cpu, mode=mode: assert_same(
            [dev(k) for k in keys], [cpu(k) for k in keys], f"{mode} draws"))

    def counts():
        train = np.arange(g.num_nodes) % 2 == 0
        c_node, c_pos, n = count_inclusion(t, lambda i: draw_walk(t, 50, 2, 100 + i), train, 2.0)
        d_node, d_eid, dn = count_inclusion_device(structure(g, device), lambda i: draw_walk_device(dt, 50, 2, 100 + i),
                                                   torch.from_numpy(train).to(device), 2.0)
        assert n == dn, f"pre-samples: {dn} on the device, {n} on the CPU"
        assert_same([d_node, d_eid.cpu().numpy()[t.csr.eids]], [c_node, c_pos], "pre-sampling counts")
    checks.run("saint", "walk pre-sampling counts", counts)


def check_bulk(checks, g: Graph, hub: Graph, device, tiny: bool) -> None:
    s = structure(hub, "cpu")
    ip, eids = s.indptr.numpy(), s.eids.numpy()
    values = np.random.default_rng(0).random(ip[-1]) + 0.1
    prefix = np.cumsum(quantise(ip, values))
    for uniform in (True, False):
        for replace in (False, True):
            for fan in (10, 50, 200):  # S_PAD 16, 64, 256
                # row 0 is the hub; fewer rows for the wide tiles under tiny
                rows = np.arange((2 if fan > 50 else 4) if tiny and fan > 10 else 48, dtype=np.int64)
                batch_ptr = np.array([0, rows.shape[0] // 2, rows.shape[0]], dtype=np.int64)
                rs = RowSet(ip[rows], np.diff(ip)[rows], row_label(0, hub.num_nodes, rows), [3, 4], batch_ptr,
                            None if uniform else prefix)

                def check(rs=rs, fan=fan, replace=replace):
                    assert_same(its_sample(rs, fan, replace, device), its_sample_np(rs, fan, replace), "ITS picks")
                checks.run("bulk_sampling", f"ITS uniform={uniform} replace={replace} s={fan}", check)
    canon = canonical_adjacency(ip, s.indices.numpy().astype(np.int64), eids.astype(np.int64), hub.num_nodes)
    front = np.arange(min(hub.num_nodes, 40), dtype=np.int64)
    rs = RowSet(canon.indptr[front], np.diff(canon.indptr)[front], row_label(0, hub.num_nodes, front), [1],
                np.array([0, front.shape[0]]))
    flat, counts = its_sample_np(rs, 12, False)
    excl = np.sort(eids[:50]).astype(np.int64)
    checks.run("bulk_sampling", "relabel", lambda: assert_same(
        relabel_triton(flat, counts, front, canon, excl, hub.num_nodes, device),
        relabel_block(flat, counts, front, canon.pairs, excl, hub.num_nodes), "block"))


def check_bulk_pipeline(checks, g: Graph, device) -> None:
    """The device pipeline of bulk sampling (every layer of several minibatches, blocks relabelled
    on the device; weighted rows where the graph has parallel edges) against the CPU path's blocks,
    with and without an exclusion."""
    s = structure(g, "cpu")
    canon = canonical_adjacency(*(t.numpy().astype(np.int64) for t in (s.indptr, s.indices, s.eids)), g.num_nodes)
    gen = np.random.default_rng(2)
    batches = [np.unique(gen.integers(0, g.num_nodes, 64)) for _ in range(3)]
    arrays = [canon.on_device(name, device) for name in ("indptr", "indices", "eids")]
    for excl in (None, np.sort(gen.choice(canon.eids, min(200, canon.eids.size), replace=False))):
        def check(excl=excl):
            assert_same_output(sample_bulk_device(*arrays, canon.n, [torch.from_numpy(b).to(device) for b in batches],
                                                  [5, 6, 7], [5, 10, 15], replace=False,
                                                  exclude=None if excl is None else torch.from_numpy(excl),
                                                  prefix=None if canon.unit else canon.weight_prefix(device)),
                               sample_bulk_cpu(canon, batches, [5, 6, 7], [5, 10, 15], replace=False, excl=excl))
        checks.run("bulk_sampling", f"device pipeline, 3 minibatches, exclusion={excl is not None}", check)


def check_bulk_ladies(checks, g: Graph, device) -> None:
    """One layer of bulk LADIES on the device (``bulk/ladies_device.py``) against the CPU path: the same
    blocks, the weights to rounding (the CPU's row totals are pairwise sums)."""
    gen = np.random.default_rng(3)
    vs = [torch.from_numpy(np.unique(gen.integers(0, g.num_nodes, 40))) for _ in range(3)]
    sizes = [int(v.numel()) for v in vs]
    row_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    keys = [11, 12, 2**63 + 13]
    for replace in (False, True):
        def check(replace=replace):
            edges = []
            for s in (structure(g, device), structure(g, "cpu")):  # the gathered in-edges, weights c(e)
                rows = torch.cat(vs).to(s.device)
                row_pos, src, eid = gather_in_edges(s, rows, None)
                fd, fs = node_factors(s, "both")
                edges.append((row_pos, src, eid, fd[rows[row_pos]] * fs[src]))
            ours = ladies_layer_device(*edges[0], sizes, g.num_nodes, 1, 25, keys, replace)
            with use_backend("native"):
                p_ptr, p_cols, p_val = ladies_matrix(*edges[1][:2], edges[1][3], row_ptr, g.num_nodes, len(vs))
                ref = ladies_layer((p_ptr, p_cols, normalise_rows(p_ptr, p_val), p_val), edges[1], row_ptr, 1, 25,
                                   keys, replace, g.num_nodes)
            for a, b in zip(ours, ref):
                assert_same([t.long() for t in a[:3]], [t.long() for t in b[:3]], "LADIES block")
                torch.testing.assert_close(a[3].cpu(), b[3].cpu(), rtol=1e-9, atol=0)
        checks.run("bulk_sampling", f"LADIES device layer, replace={replace}", check)


def run(checks, g: Graph, hub_degree: int, device, tiny: bool, progress) -> None:
    hub = hub_graph(hub_degree + 50, hub_degree, 100 if tiny else 4 * hub_degree, "cpu", seed=1)
    check_neighbors(checks, g, hub, device, tiny)
    progress("  sampling: neighbour choice done")
    check_walks(checks, g, device)
    check_saint(checks, g, device)
    progress("  sampling: walks, frontier and GraphSAINT done")
    check_bulk(checks, g, hub, device, tiny)
    check_bulk_pipeline(checks, g, device)
    check_bulk_ladies(checks, g, device)
