"""dgl_accel.distributed on several CPU processes (gloo): replicated data-parallel training equals
one process, the 1.5D partitioned SpGEMM equals the local product, partitioned and replicated bulk
sampling agree, and bad setups fail with clear errors instead of hanging.

Each multi-process test spawns its ranks once (torch.multiprocessing, MASTER_PORT from a free
socket, short collective timeouts) and runs several checks in them; ranks write their results to
files that the test process compares against an in-process 1-process reference.
"""
import os
import socket
import time

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.multiprocessing as mp

from dgl_accel import data
from dgl_accel.distributed import Grid, ReplicatedLoader, replicated_loader

S = 4  # minibatches per global step: fixed so W = 1, 2, 4 see the same global batches
BATCH = 12
EPOCHS = 3
FANOUTS = [4, 4]
TIMEOUT = 20  # seconds: generous for a loaded 2-core machine, short enough that a hang fails fast


def _graph(extra_edge=False):
    g = data.synthetic_graph(num_nodes=400, feat_dim=16, train_per_class=30, num_val=50, num_test=150,
                             seed=1, feat_signal=0.6)
    if extra_edge:
        g.add_edges(torch.tensor([0]), torch.tensor([1]))
    return g


def _bulk_sampler(**kw):
    from dgl_accel.sampling import BulkNeighborSampler
    return BulkNeighborSampler(FANOUTS, **kw)


def _records(steps):
    """What a rank sampled: {global index: (output ids, per-block (src ids, dst ids, edge ids))}."""
    out = {}
    for step in steps:
        for j, _inp, outp, blocks in step.minibatches:
            out[j] = (outp.numpy().copy(), [(b.srcdata["_ID"].numpy().copy(), b.dstdata["_ID"].numpy().copy(),
                                             b.edata["_ID"].numpy().copy()) for b in blocks])
    return out


def _train(g, group_world):
    """Train SAGE with the replicated loader (DDP when distributed); return params, acc, records."""
    import torch.distributed as dist

    from dgl_accel.distributed import SAGE, evaluate, train_epoch
    from dgl_accel.sampling import NeighborSampler
    torch.manual_seed(0)
    model = SAGE(16, 16, 5, num_layers=2)
    if group_world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    loader = replicated_loader(g, g.ndata["train_mask"], NeighborSampler(FANOUTS, seed=7), BATCH,
                               minibatches_per_step=S, seed=11)
    recs = {}
    for _ in range(EPOCHS):
        recs.update(_records(list(loader)))
    loader.set_epoch(0)
    for _ in range(EPOCHS):
        train_epoch(model, loader, opt, g.ndata["feat"], g.ndata["label"])
    acc = evaluate(model, g, g.ndata["test_mask"], g.ndata["feat"], g.ndata["label"], 2)
    module = getattr(model, "module", model)
    params = {k: v.detach().clone() for k, v in module.state_dict().items()}
    if group_world > 1:
        dist.barrier()
    return params, acc, recs


def _random_q(n, m, seed):
    rng = np.random.default_rng(seed)
    nnz = rng.integers(1, 4, m)
    rows = np.repeat(np.arange(m), nnz)
    cols = rng.integers(0, n, nnz.sum())
    q = sp.csr_matrix((rng.random(len(rows)).astype(np.float32) + 0.5, (rows, cols)), shape=(m, n))
    from dgl_accel.distributed.comm import to_torch_csr
    return to_torch_csr(q)


def _worker(rank, world, port, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    import torch.distributed as dist

    from dgl_accel import distributed as D
    from dgl_accel.sampling import NeighborSampler
    D.init("gloo", timeout=TIMEOUT)
    res = {}
    g = _graph()

    # 1. replicated DDP training (identical global batches to the 1-process reference)
    res["params"], res["acc"], res["recs"] = _train(g, world)

    # 2. partitioned SpGEMM == local product, for every valid c
    from dgl_accel.sampling.bulk_matrix import adjacency_tensor, canonical_csr, local_spgemm
    A_t = adjacency_tensor(g)
    res["spgemm"] = {}
    for c in [c for c in (1, 2, 4) if world % c == 0]:
        mult = D.PartitionedSpGEMM(g, c=c)
        for seed, m in enumerate((37, 38, 1)):  # 1 row: most ranks get an empty block of Q
            Q = _random_q(g.num_nodes(), m, seed)
            shape = (Q.shape[0], g.num_nodes())
            P = canonical_csr(mult(Q, A_t), shape)
            ref = canonical_csr(local_spgemm(Q, A_t), shape)
            res["spgemm"][(c, seed)] = (np.array_equal(P[0], ref[0]) and np.array_equal(P[1], ref[1])
                                        and np.allclose(P[2], ref[2], rtol=1e-6, atol=0))
        res.setdefault("fetched", {})[c] = (mult.rows_fetched, mult.rows_needed_total)

    # 3. partitioned bulk sampling == replicated bulk sampling
    res["bulk"] = {}
    rep = replicated_loader(g, g.ndata["train_mask"], _bulk_sampler(bulk=2, seed=5), BATCH,
                            minibatches_per_step=S, seed=3)
    res["bulk"]["replicated"] = _records(list(rep))
    for c in [c for c in (1, 2) if world % c == 0]:
        part = replicated_loader(g, g.ndata["train_mask"],
                                 _bulk_sampler(bulk=2, seed=5, spgemm=D.PartitionedSpGEMM(g, c=c)), BATCH,
                                 minibatches_per_step=S, seed=3)
        res["bulk"][c] = _records(list(part))

    # 4. bad grid: validated on every rank before any collective
    try:
        D.PartitionedSpGEMM(g, c=3)
    except ValueError as e:
        res["bad_grid"] = str(e)

    if world == 2:
        # 5. our NeighborSampler under dgl's DataLoader(use_ddp=True) + DDP
        import dgl
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(D.SAGE(16, 16, 5))
        opt = torch.optim.Adam(model.parameters(), lr=0.02)
        tr = g.ndata["train_mask"].nonzero().squeeze(1)
        dl = dgl.dataloading.DataLoader(g, tr, NeighborSampler(FANOUTS, seed=rank), batch_size=BATCH,
                                        shuffle=True, use_ddp=True, ddp_seed=0)
        seen, losses = [], []
        for epoch in range(4):
            for inp, outp, blocks in dl:
                if epoch == 0:
                    seen.append(outp.clone())
                loss = torch.nn.functional.cross_entropy(model(blocks, g.ndata["feat"][inp]), g.ndata["label"][outp])
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss))
        res["ddp_seen"] = torch.cat(seen)
        res["ddp_loss"] = (np.mean(losses[:5]), np.mean(losses[-5:]))
        res["ddp_params"] = {k: v.detach().clone() for k, v in model.module.state_dict().items()}

        # 5b. GraphSAINT under DataLoader(use_ddp=True): SAINTSampler draws from its own call
        # counter (not the loader's indices), so each rank needs its own seed (per_rank_seed).
        from dgl_accel.sampling import SAINTSampler
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(D.SAGE(16, 16, 5))
        opt = torch.optim.Adam(model.parameters(), lr=0.02)
        saint = SAINTSampler("node", 120, seed=D.per_rank_seed(9))
        dl = dgl.dataloading.DataLoader(g, torch.arange(8), saint, batch_size=1, use_ddp=True)
        nodes, losses = [], []
        for sg in dl:
            nodes.append(sg.ndata[dgl.NID].clone())
            x, y = g.ndata["feat"][sg.ndata[dgl.NID]], g.ndata["label"][sg.ndata[dgl.NID]]
            loss = torch.nn.functional.cross_entropy(model([sg, sg], x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        res["saint_nodes"] = nodes
        res["saint_params"] = {k: v.detach().clone() for k, v in model.module.state_dict().items()}

        # 6. mismatched graphs across ranks: every rank raises, nobody hangs
        g_bad = _graph(extra_edge=(rank == 1))
        for name, make in [("loader", lambda: replicated_loader(g_bad, g_bad.ndata["train_mask"],
                                                                 NeighborSampler(FANOUTS, seed=0), BATCH)),
                           ("spgemm", lambda: D.PartitionedSpGEMM(g_bad, c=1))]:
            try:
                make()
            except ValueError as e:
                res["mismatch_" + name] = str(e)

        # 7. a rank that skips a collective: the other gets a CollectiveError after the timeout
        mult = D.PartitionedSpGEMM(g, c=1, timeout=2)
        t = time.time()
        if rank == 0:
            try:
                mult(_random_q(g.num_nodes(), 5, 0))
            except D.CollectiveError as e:
                res["timeout"] = (str(e), time.time() - t)
        else:
            time.sleep(4)
    torch.save(res, os.path.join(outdir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(world, tmp_path):
    mp.start_processes(_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True,
                       start_method="spawn")
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]


@pytest.fixture(scope="module")
def reference():
    """The 1-process run: no process group, same loader / model / seeds."""
    torch.set_num_threads(1)
    g = _graph()
    out = _train(g, 1)
    bulk = _records(list(replicated_loader(g, g.ndata["train_mask"], _bulk_sampler(bulk=2, seed=5), BATCH,
                                               minibatches_per_step=S, seed=3)))
    return out + (bulk,)


def _same_records(a, b):
    assert sorted(a) == sorted(b)
    for j in a:
        assert np.array_equal(a[j][0], b[j][0])
        for x, y in zip(a[j][1], b[j][1]):
            for u, v in zip(x, y):
                assert np.array_equal(u, v), j


@pytest.mark.slow  # over 2 s on 2 cores: the quick lane (scripts/test.sh --quick) leaves it out
@pytest.mark.parametrize("world", [2, 4])
def test_multi_process_equals_one_process(world, tmp_path, reference):
    ref_params, ref_acc, ref_recs, ref_bulk = reference
    res = _run(world, tmp_path)
    # Union of the ranks' minibatches == the 1-process sequence, rank r holding j = r mod W.
    union = {}
    for r, x in enumerate(res):
        assert all(j % world == r for j in x["recs"])
        union.update(x["recs"])
    _same_records(union, ref_recs)
    # Same global batches and DDP's gradient averaging: the same updates up to float summation
    # order, so parameters agree to ~1e-6 and the accuracy is the same.
    for x in res:
        for k, v in ref_params.items():
            torch.testing.assert_close(x["params"][k], v, rtol=1e-4, atol=1e-5)
        assert abs(x["acc"] - ref_acc) <= 1 / 150 + 1e-9  # at most one of 150 test nodes flips
    assert ref_acc > 0.5  # it did learn (5 classes: chance is 0.2)
    # Partitioned SpGEMM equals the local product on every rank and grid.
    for x in res:
        assert x["spgemm"] and all(x["spgemm"].values()), x["spgemm"]
        assert "expected the world size to be a multiple of c" in x["bad_grid"] and "Fix:" in x["bad_grid"]
    # Sparsity-aware: fewer rows shipped than whole remote block rows.
    fetched, dense = np.sum([x["fetched"][1] for x in res], axis=0)
    assert fetched < dense
    # bulk sampling: replicated shares union to the 1-process sequence; partitioned == replicated
    for r, x in enumerate(res):
        assert all(j % world == r for j in x["bulk"]["replicated"])
    rep_union = {}
    for x in res:
        rep_union.update(x["bulk"]["replicated"])
    _same_records(rep_union, ref_bulk)
    for c in (1, 2):
        if world % c == 0:
            for x in res:
                _same_records(x["bulk"][c], x["bulk"]["replicated"])
    if world == 2:
        seen = torch.cat([x["ddp_seen"] for x in res])
        tr = reference_train_ids()
        # DGL's DDP split: each rank a disjoint share (80 train nodes split evenly, so no padding).
        assert sorted(seen.tolist()) == sorted(tr.tolist())
        for x in res:
            first, last = x["ddp_loss"]
            assert last < first
            for k, v in res[0]["ddp_params"].items():
                torch.testing.assert_close(x["ddp_params"][k], v)  # DDP kept replicas in sync
            assert len(x["saint_nodes"]) == 4  # 8 subgraphs split over 2 ranks
            for k, v in res[0]["saint_params"].items():
                torch.testing.assert_close(x["saint_params"][k], v)
            for name in ("mismatch_loader", "mismatch_spgemm"):
                msg = x[name]
                assert msg.startswith("expected every rank to") and "Fix:" in msg and "rank 1" in msg
        # per-rank seeds: the ranks train on different subgraphs
        assert not any(torch.equal(a, b) for a, b in zip(res[0]["saint_nodes"], res[1]["saint_nodes"]))
        msg, waited = res[0]["timeout"]
        assert "expected every rank of the process group to join collective" in msg and "Fix:" in msg
        assert waited < 15


def reference_train_ids():
    return _graph().ndata["train_mask"].nonzero().squeeze(1)


# ------------------------------------------------------------------------ local (no processes)
def test_grid_validation():
    assert Grid(4, 2).rows == 2 and Grid(4, 2).coords(3) == (1, 1) and Grid(4, 2).row_ranks(1) == [2, 3]
    for p, c, text in [(4, 3, "multiple of c"), (4, 0, "c >= 1"), (2, -1, "c >= 1"), (0, 1, "world_size >= 1"),
                       (4, 2.0, "to be an int")]:
        with pytest.raises(ValueError, match=text) as e:
            Grid(p, c)
        assert "Fix:" in str(e.value)


def test_loader_bad_input():
    from dgl_accel.sampling import NeighborSampler
    g = _graph()
    s = NeighborSampler(FANOUTS, seed=0)
    for kw, text in [(dict(batch_size=0), "batch_size to be a positive int"),
                     (dict(batch_size=-3), "batch_size to be a positive int"),
                     (dict(batch_size=4, minibatches_per_step=0), "minibatches_per_step to be a positive int"),
                     (dict(batch_size=4, train_ids=torch.zeros(0, dtype=torch.int64)), "non-empty"),
                     (dict(batch_size=4, train_ids=torch.tensor([0, 10**6])), r"train_ids in \[0, 400\)"),
                     (dict(batch_size=4, train_ids=torch.tensor([3, 5, 3, 7])), "unique train_ids"),
                     (dict(batch_size=4, minibatches_per_step=8, train_ids=torch.arange(5)), "at least")]:
        ids = kw.pop("train_ids", g.ndata["train_mask"])
        with pytest.raises(ValueError, match=text) as e:
            replicated_loader(g, ids, s, **kw)
        assert "Fix:" in str(e.value)


def test_one_process_sequence_covers_every_seed_once_per_epoch():
    from dgl_accel.sampling import NeighborSampler
    g = _graph()
    loader = ReplicatedLoader(g, g.ndata["train_mask"], NeighborSampler(FANOUTS, seed=0), 7, minibatches_per_step=3)
    steps = list(loader)
    assert len(steps) == len(loader) and all(len(s.minibatches) == 3 for s in steps)
    seeds = np.concatenate([m[2].numpy() for s in steps for m in s.minibatches])
    assert sorted(seeds.tolist()) == sorted(reference_train_ids().tolist())
    assert all(abs(s.scale * s.global_size - 1) < 1e-12 for s in steps)


def test_bulk_size_must_be_positive():
    for k in (0, -2):
        with pytest.raises(ValueError, match="expected bulk to be a positive int") as e:
            _bulk_sampler(bulk=k)
        assert "Fix:" in str(e.value)
