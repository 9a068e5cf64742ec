"""Training end to end: PyG's models as a user writes them against the same models after
``dgl_accel.pyg.swap``, from the same initial weights, epoch by epoch in turn (interleaved).  The
report's ``training`` section, ``examples/pyg_train.py`` and ``bench/bench_pyg.py`` all train here.

Models (:func:`build`): ``gcn``: full graph, 2 x GCNConv (hidden 256); ``gat``: full graph,
GATConv 8 heads x 8 (ELU) then GATConv 1 head; ``sage``: minibatches, 3 x SAGEConv 256, fanouts
[15, 10, 5], batch 1,024, PyG's ``NodeLoader`` fed by our ``NeighborSampler``, each step split into
sample / gather (features, labels, the copy to the device) / forward / backward (with the optimiser).

A :class:`Provider` says which layers (PyG's or swapped), which adjacency (``edge_index``, or PyG's
``torch.sparse`` CSR ``adj_t``: cuSPARSE on a GPU) and, for minibatches, where the sampler and
the loader's gather run (the data's device, or the CPU: what a PyG user without our GPU path
does).  A provider that fails (out of device memory, an op missing for a dtype) stops there: its row
says so, the others go on.  Precisions: a dtype or ``autocast-<dtype>`` (:mod:`.steps`).  Each row
carries each epoch's loss and its largest relative gap to the first complete provider's (the same
function from the same weights: they agree).
"""
from __future__ import annotations

import copy
import dataclasses
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import graphs
from .rmat import rmat_graph
from .steps import Step, full_epoch, label, precision, sync

FANOUTS = [15, 10, 5]
BATCH = 1024
MODELS = ("gcn", "gat", "sage")


@dataclasses.dataclass(frozen=True)
class Provider:
    name: str
    swap: bool  # dgl_accel.pyg.swap(model) before training
    adjacency: str = "edge_index"  # or "sparse": PyG's torch.sparse CSR adj_t (rows = targets)
    sampler_device: str | None = None  # minibatches: None = the data's device, or "cpu"


PYG, OURS = Provider("pyg", False), Provider("dgl_accel", True)
PYG_SPARSE = Provider("pyg torch.sparse", False, adjacency="sparse")
PYG_CPU_SAMPLER = Provider("pyg + cpu sampler", False, sampler_device="cpu")


def random_data(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, feats: int = 128, classes: int = 16,
                seed: int = 0):
    """A PyG ``Data`` on the edges' device: ``feats`` random features, ``classes`` random labels, a
    10% training mask (drawn on the CPU, so every device gets the same values)."""
    from torch_geometric.data import Data  # lazy: PyG is optional; only this section needs it

    gen = torch.Generator().manual_seed(seed)
    data = Data(x=torch.randn(num_nodes, feats, generator=gen),
                y=torch.randint(0, classes, (num_nodes,), generator=gen),
                train_mask=torch.rand(num_nodes, generator=gen) < 0.1)
    data.edge_index = torch.stack([src, dst]).to(torch.int64).cpu()
    return data.to(src.device)


def example_graph(spec: str, device="cpu", seed: int = 0):
    """The PyG examples' :func:`random_data` graph: ``tiny`` (300 nodes, 3,000 random edges) or ``rmat:SCALE``."""
    n = 300
    if spec == "tiny":
        src, dst = torch.randint(0, n, (2, 3000), generator=torch.Generator().manual_seed(seed))
    elif spec.startswith("rmat:"):
        src, dst, n = rmat_graph(int(spec.split(":")[1]), seed=seed)
    else:
        raise ValueError(f"expected --graph tiny or rmat:SCALE (got {spec!r}). Fix: --graph rmat:16")
    return random_data(src.to(device), dst.to(device), n, seed=seed)


def build(name: str, feats: int, classes: int) -> torch.nn.Module:
    """The model as a PyG user writes it (PyG's classes)."""
    from torch_geometric import nn as pyg_nn  # lazy: PyG is optional; only this section needs it

    class Net(torch.nn.Module):
        def __init__(self, convs, act):
            super().__init__()
            self.convs, self.act = torch.nn.ModuleList(convs), act

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                x = self.act(x) if i + 1 < len(self.convs) else x
            return x

    if name == "gcn":
        return Net([pyg_nn.GCNConv(feats, 256), pyg_nn.GCNConv(256, classes)], F.relu)
    if name == "gat":
        return Net([pyg_nn.GATConv(feats, 8, heads=8), pyg_nn.GATConv(64, classes, heads=1)], F.elu)
    if name == "sage":
        return Net([pyg_nn.SAGEConv(feats, 256), pyg_nn.SAGEConv(256, 256), pyg_nn.SAGEConv(256, classes)], F.relu)
    raise ValueError(f"expected a model among {list(MODELS)} (got {name!r}). Fix: pick one of them.")


def sparse_adjacency(edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype) -> torch.Tensor:
    """PyG's ``adj_t`` as a ``torch.sparse`` CSR tensor: row = target, column = source."""
    from torch_geometric.utils import to_torch_csr_tensor  # lazy: PyG is optional; only this section needs it

    ones = torch.ones(edge_index.shape[1], dtype=dtype, device=edge_index.device)
    return to_torch_csr_tensor(edge_index.flip(0), ones, size=(num_nodes, num_nodes))


class Minibatches:
    """PyG's ``NodeLoader`` over the training rows of ``data`` with our sampler, its calls timed."""

    def __init__(self, data, seed: int):
        from torch_geometric.loader import NodeLoader  # lazy: PyG is optional; only this section needs it

        import dgl_accel.pyg  # lazy: PyG is optional; only this section needs it

        self.sampler = dgl_accel.pyg.NeighborSampler(data, FANOUTS, seed=seed)
        self.sample_s, timed = 0.0, self.sampler.sample_from_nodes
        device = data.x.device

        def sample_from_nodes(*args, **kwargs):  # the sampler's share of the loader's next()
            sync(device)
            t0 = time.perf_counter()
            out = timed(*args, **kwargs)
            sync(device)
            self.sample_s += time.perf_counter() - t0
            return out
        self.sampler.sample_from_nodes = sample_from_nodes
        seeds = data.train_mask.nonzero().flatten().cpu()
        self.loader = NodeLoader(data, node_sampler=self.sampler, input_nodes=seeds, batch_size=BATCH)


def sage_epoch(model, step: Step, batches: Minibatches, count: int, device, dtype) -> tuple[float, dict]:
    """``count`` minibatch steps; seconds split into sample / gather / forward / backward."""
    parts, losses = dict.fromkeys(("sample", "gather", "forward", "backward"), 0.0), []
    it = iter(batches.loader)
    for _ in range(count):
        sampled0 = batches.sample_s
        t0 = time.perf_counter()
        batch = next(it, None)
        if batch is None:
            break
        x, ei = batch.x.to(device=device, dtype=dtype), batch.edge_index.to(device)
        y = batch.y[: batch.batch_size].to(device)
        sync(device)
        t1 = time.perf_counter()
        step.opt.zero_grad()
        loss = step.forward(lambda x=x, ei=ei, n=batch.batch_size, y=y: F.cross_entropy(model(x, ei)[:n].float(), y))
        sync(device)
        t2 = time.perf_counter()
        step.backward(loss)
        sync(device)
        t3 = time.perf_counter()
        sample = batches.sample_s - sampled0
        for key, dt in zip(parts, (sample, t1 - t0 - sample, t2 - t1, t3 - t2)):
            parts[key] += dt
        losses.append(float(loss))
    return statistics.fmean(losses), {**parts, "step": sum(parts.values())}


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def train(name: str, data, classes: int, providers, *, epochs: int, batches: int = 8, seed: int = 0,
          dtype: torch.dtype | str = torch.float32, lr: float = 0.01, progress=None) -> list[dict]:
    """Every provider from one set of initial weights, epoch by epoch in turn; one row each.
    ``dtype``: a precision (:func:`precision`)."""
    import dgl_accel.pyg  # lazy: PyG is optional; only this section needs it

    case_dtype, (dtype, amp) = dtype, precision(dtype)
    device = data.x.device
    torch.manual_seed(seed)
    base = build(name, data.num_features, classes).to(device=device, dtype=dtype)
    x = None if name == "sage" else data.x.to(dtype)  # full graph: one copy in the dtype, for every provider
    runs = []
    for p in providers:
        model = copy.deepcopy(base)
        swapped = len(dgl_accel.pyg.swap(model).swapped) if p.swap else 0
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        run = dict(provider=p, model=model, opt=opt, step=Step(opt, device, amp), swapped=swapped,
                   times=[], losses=[], peak=0, error=None)
        if name == "sage":
            on = data if p.sampler_device is None else data.to(p.sampler_device)
            run["batches"] = Minibatches(on, seed)
        else:
            run["adj"] = (sparse_adjacency(data.edge_index, data.num_nodes, dtype) if p.adjacency == "sparse"
                          else data.edge_index)
        runs.append(run)
    for epoch in range(epochs):
        for run in runs:
            if run["error"]:
                continue
            torch.manual_seed(seed + epoch)  # the same dropout / sampling stream for every provider
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
                live = torch.cuda.memory_allocated(device)
            try:
                if name == "sage":
                    loss, parts = sage_epoch(run["model"], run["step"], run["batches"], batches, device, dtype)
                else:
                    loss, parts = full_epoch(run["model"], run["step"], x, run["adj"], data.y, data.train_mask)
            except Exception as exc:  # noqa: BLE001 - a provider that fails stops; the others go on
                what = "out of memory" if _out_of_memory(exc) else type(exc).__name__
                run["error"] = f"{what} at epoch {epoch}: {str(exc).splitlines()[0][:240]}"
                run["opt"].zero_grad(set_to_none=True)
                if device.type == "cuda":
                    run["peak"] = max(run["peak"], torch.cuda.max_memory_allocated(device) - live)
                    torch.cuda.empty_cache()
                continue
            run["times"].append(parts)
            run["losses"].append(loss)
            if device.type == "cuda":  # the step's own memory: beyond what was live when it started
                run["peak"] = max(run["peak"], torch.cuda.max_memory_allocated(device) - live)
        if progress:
            progress(f"    {name} epoch {epoch}: " + ", ".join(
                f"{r['provider'].name} " + (f"{r['times'][-1]['step'] * 1e3:.1f} ms loss {r['losses'][-1]:.4f}"
                                            if r["times"] and not r["error"] else r["error"].split(":")[0])
                for r in runs))
    return [_row(name, run, runs, data, case_dtype, epochs) for run in runs]


def require_ok(rows: list[dict]) -> list[dict]:
    """``rows`` of :func:`train`, for callers that compare every provider (the example, the CPU
    bench): RuntimeError naming each provider that stopped, and why."""
    failed = [f"{r['provider']}: {r['error']}" for r in rows if not r["ok"]]
    if failed:
        raise RuntimeError(f"{rows[0]['model']}: a provider stopped ({'; '.join(failed)}). Fix: a smaller graph "
                           "(--graph), or the device with the memory it needs.")
    return rows


def _row(name: str, run: dict, runs: list, data, dtype, epochs: int) -> dict:
    p = run["provider"]
    row = {"model": name, "provider": p.name, "swapped": run["swapped"], "dtype": label(dtype),
           "nodes": data.num_nodes, "edges": data.num_edges, "epochs": epochs, "ok": run["error"] is None,
           "error": run["error"], "losses": run["losses"], "final_loss": run["losses"][-1] if run["losses"] else None}
    if data.x.device.type == "cuda":
        row["step_peak_bytes"] = run["peak"]  # the largest epoch's allocations beyond the live tensors
    if run["error"] is None:
        later = run["times"][1:] or run["times"]  # the first epoch builds caches and compiles
        row["step_times"] = [t["step"] for t in later]
        row.update({f"{k}_s": statistics.median(t[k] for t in later) for k in later[0]})
    ref = next((r for r in runs if r["error"] is None), None)
    if ref is not None and ref is not run and row["ok"]:
        row["reference"] = ref["provider"].name
        row["max_relative_loss_gap"] = max(abs(a - b) / max(abs(a), 1e-12)
                                           for a, b in zip(ref["losses"], run["losses"]))
    return row


def split(labels: torch.Tensor, seed: int, train: int = 20, val: int = 30):
    """Boolean (train, val, test) masks: ``train`` and ``val`` nodes per class, the rest test."""
    gen = torch.Generator().manual_seed(seed)
    y = labels.cpu()
    masks = [torch.zeros(y.numel(), dtype=torch.bool) for _ in range(3)]
    for c in torch.unique(y[y >= 0]).tolist():
        idx = torch.nonzero(y == c).flatten()
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        masks[0][idx[:train]] = True
        masks[1][idx[train:train + val]] = True
    masks[2] = (y >= 0) & ~masks[0] & ~masks[1]
    return tuple(m.to(labels.device) for m in masks)


def accuracy(name: str, data, classes: int, seed: int, *, epochs: int = 200, lr: float = 0.01,
             weight_decay: float = 5e-4, per_class=(20, 30)) -> dict[str, float]:
    """Test accuracy at the best validation epoch, PyG's model and the swapped one from the same
    weights on the seed's split (``per_class`` training and validation labels): {provider: accuracy}."""
    import dgl_accel.pyg  # lazy: PyG is optional; only this section needs it

    train_mask, val_mask, test_mask = split(data.y, seed, *per_class)
    torch.manual_seed(seed)
    theirs = build(name, data.num_features, classes).to(data.x.device)
    ours = copy.deepcopy(theirs)
    dgl_accel.pyg.swap(ours)
    result = {}
    for provider, model in (("pyg", theirs), ("dgl_accel", ours)):
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        best_val, best_test = -1.0, 0.0
        for _ in range(epochs):
            model.train()
            opt.zero_grad()
            F.cross_entropy(model(data.x, data.edge_index)[train_mask], data.y[train_mask]).backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                pred = model(data.x, data.edge_index).argmax(1)
            val = float((pred[val_mask] == data.y[val_mask]).float().mean())
            if val > best_val:
                best_val, best_test = val, float((pred[test_mask] == data.y[test_mask]).float().mean())
        result[provider] = best_test
    return result


# ------------------------------------------------------------------------------ the report's section
SIZES = {  # per report size: R-MAT scale of the random-feature graph, epochs, SAGE batches, accuracy runs
    "full": dict(scale=21, epochs=20, sage_epochs=5, batches=8, seeds=5, acc_epochs=200, acc_models=("gcn", "gat"),
                 split=(20, 30), labelled_cases=True),
    "quick": dict(scale=18, epochs=5, sage_epochs=3, batches=4, seeds=2, acc_epochs=50, acc_models=("gcn", "gat"),
                  split=(20, 30), labelled_cases=True),
    # the interpreter: every code path once (one epoch, GCN accuracy alone, no timing cases on the labelled graph)
    "tiny": dict(scale=6, epochs=1, sage_epochs=1, batches=2, seeds=1, acc_epochs=2, acc_models=("gcn",),
                 split=(5, 5), labelled_cases=False),
}


def labelled_data(path, device):
    """A shared npz graph with its features and labels (``x`` CSR or dense, ``y``) as a PyG ``Data``."""
    from torch_geometric.data import Data  # lazy: PyG is optional; only this section needs it

    with np.load(path) as z:
        n = int(z["num_nodes"])
        indptr, indices = torch.from_numpy(z["adj_indptr"].astype(np.int64)), torch.from_numpy(z["adj_indices"])
        if "x" in z.files:
            x = torch.from_numpy(z["x"])
        else:
            values = torch.from_numpy(z["x_data"]) if "x_data" in z.files else torch.ones(z["x_indices"].size)
            cols = torch.from_numpy(z["x_indices"].astype(np.int64))
            x = torch.sparse_csr_tensor(torch.from_numpy(z["x_indptr"]), cols, values.float(),
                                        tuple(int(s) for s in z["x_shape"])).to_dense()
        y = torch.from_numpy(z["y"])
    rows = torch.repeat_interleave(torch.arange(n), indptr[1:] - indptr[:-1])
    data = Data(x=x, y=y, edge_index=torch.stack([indices.to(torch.int64), rows]))  # symmetric: columns send to rows
    data.train_mask = split(y, 0)[0]
    return data.to(device), int(y.max()) + 1


def save_labelled(path, feats: int = 16, classes: int = 2, seed: int = 0):
    """A small labelled graph in the shared npz layout (dense features, labels): the tiny run's."""
    g = graphs.rmat(6, "cpu", seed=seed)
    rng = np.random.default_rng(seed)
    x = (rng.random((g.num_nodes, feats)) < 0.1).astype(np.float32)
    graphs.save_npz(path, g, x=x, y=rng.integers(0, classes, g.num_nodes))
    return path


def repeat_calls(data, classes: int) -> dict:
    """A swapped 2-layer GCN, forward+backward three times on one ``edge_index``: the host reads of
    each call (``testing.HostReads``: syncs on a GPU), the edge_index cache's builds and each
    call's seconds.  After the first call, no graph-sized work: no build, and only the reads the
    layers need regardless of the graph."""
    import dgl_accel.pyg  # lazy: PyG is optional; only this section needs it
    from dgl_accel.pyg.graph import CACHE  # lazy: PyG is optional; only this section needs it

    from ..testing.host_reads import HostReads  # lazy: the report's one use of the test helpers

    torch.manual_seed(0)
    model = build("gcn", data.num_features, classes).to(data.x.device)
    dgl_accel.pyg.swap(model)
    edge_index = data.edge_index.clone()  # a tensor no earlier case cached
    reads, builds, seconds = [], [], []
    for _ in range(3):
        before = CACHE.builds
        sync(data.x.device)
        t0 = time.perf_counter()
        with HostReads() as events:
            model(data.x, edge_index).sum().backward()
        sync(data.x.device)
        seconds.append(time.perf_counter() - t0)
        reads.append(len(events.events))
        builds.append(CACHE.builds - before)
    return {"host_reads": reads, "cache_builds": builds, "seconds": seconds, "read_kinds": sorted(set(events.events))}


def cases(device: torch.device) -> list[tuple]:
    """(model, dtype, providers) of the section, in the order they run."""
    gcn = [PYG, PYG_SPARSE, OURS]
    sage = [PYG_CPU_SAMPLER, PYG, OURS] if device.type == "cuda" else [PYG, OURS]
    fixed = [("gcn", torch.float32, gcn), ("gat", torch.float32, [PYG, OURS]), ("sage", torch.float32, sage),
             ("gcn", torch.bfloat16, gcn)]
    # mixed precision as users train: bf16 autocast everywhere; fp16 autocast (with a GradScaler) on GPUs
    amps = ["autocast-bfloat16", "autocast-float16"] if device.type == "cuda" else ["autocast-bfloat16"]
    mixed = [(model, amp, [PYG, OURS]) for amp in amps for model in ("gcn", "gat", "sage")]
    return fixed + (mixed if device.type == "cuda" else mixed[:1])


def _case(results, graph_name: str, data, classes: int, model: str, dtype, providers, sz: dict, progress) -> list:
    """One training case's rows (added to ``results``); a crash is a row too."""
    epochs = sz["sage_epochs"] if model == "sage" else sz["epochs"]
    try:
        rows = train(model, data, classes, providers, epochs=epochs, batches=sz["batches"], dtype=dtype,
                     progress=progress)
    except Exception as exc:  # noqa: BLE001 - a failed case is a finding; the section goes on
        progress(f"    {model} {dtype}: FAILED {type(exc).__name__}: {exc}")
        results.add("training", graph=graph_name, model=model, dtype=label(dtype), ok=False,
                    provider="(all)", error=f"{type(exc).__name__}: {exc}"[:2000])
        return []
    for row in rows:
        results.add("training", graph=graph_name, **row)
    return rows


def run(results, device: torch.device, size: str, labelled, progress, deadline=None, which: str = "all",
        only: str = "") -> None:
    """The section: every case on an R-MAT graph with 128 random features (a full-graph case whose
    PyG provider ran out of memory there runs again on the next smaller scale, so that PyG has a
    figure), the full-graph cases on ``labelled`` (a shared npz path with features, or None), then
    GCN / GAT accuracy there.  ``which``: "all", "rmat" or "labelled" (the graphs); ``only``:
    comma-separated cases ``model-dtype`` (e.g. ``sage-float32``) or ``model-accuracy``; empty: all."""
    sz = SIZES[size]
    picked = {c.strip() for c in only.split(",") if c.strip()}
    todo = [c for c in cases(device) if not picked or f"{c[0]}-{label(c[1])}" in picked]
    sets = []  # (name, make the data, classes, the cases to run there)
    if which in ("all", "rmat"):
        sets.append((f"rmat{sz['scale']}", lambda s=sz["scale"]: _rmat_data(s, device), 16, todo))
    if labelled is not None and which in ("all", "labelled"):
        sets.append((labelled.stem, lambda: labelled_data(labelled, device), None,
                     [c for c in todo if c[0] != "sage"] if sz["labelled_cases"] else []))
    for graph_name, make, classes, to_run in sets:
        data, found = make()
        classes = classes or found
        progress(f"  training on {graph_name} ({data.num_nodes:,} nodes, {data.num_edges:,} edges, "
                 f"{data.num_features} features)")
        rmat, retry = graph_name.startswith("rmat"), []
        for model, dtype, providers in to_run:
            if deadline is not None and deadline.passed():
                progress(f"    {model} {dtype}: skipped (budget spent)")
                results.add("skipped", part=f"training {graph_name} {model}", reason="budget spent")
                continue
            rows = _case(results, graph_name, data, classes, model, dtype, providers, sz, progress)
            if rmat and model != "sage" and any(r["provider"].startswith("pyg") and (r.get("error") or "").startswith(
                    "out of memory") for r in rows):
                retry.append((model, dtype, providers))
            if model == "gcn" and dtype == torch.float32 and graph_name == f"rmat{sz['scale']}":
                calls = repeat_calls(data, classes)
                progress(f"    swapped GCN forward+backward, calls 1-3: host reads {calls['host_reads']}, "
                         f"edge_index builds {calls['cache_builds']}, "
                         f"ms {[round(t * 1e3, 1) for t in calls['seconds']]}")
                results.add("training_repeat_calls", graph=graph_name, model="gcn", **calls)
        if retry and graph_name == f"rmat{sz['scale']}":
            smaller = sz["scale"] - 1
            sets.append((f"rmat{smaller}", lambda s=smaller: _rmat_data(s, device), 16, retry))
        if rmat or (picked and not picked & {f"{m}-accuracy" for m in sz["acc_models"]}):
            continue
        for model in sz["acc_models"]:
            if picked and f"{model}-accuracy" not in picked:
                continue
            for seed in range(sz["seeds"]):
                if deadline is not None and deadline.passed():
                    break
                acc = accuracy(model, data, classes, seed, epochs=sz["acc_epochs"], per_class=sz["split"])
                progress(f"    accuracy {model} seed {seed}: PyG {acc['pyg']:.4f}, ours {acc['dgl_accel']:.4f}")
                results.add("training_accuracy", graph=graph_name, model=model, seed=seed, epochs=sz["acc_epochs"],
                            per_class=list(sz["split"]), **acc)


def _rmat_data(scale: int, device):
    g = graphs.rmat(scale, device)
    return random_data(g.src, g.dst, g.num_nodes), 16
