"""Execution paths vs native DGL full-graph training (CPU), measured in one run.

Model (both sides): 2-layer GCN (GraphConv 128 -> hidden 128 -> classes, ReLU between, optional
dropout), random 128-wide features and random labels, self-loops added (Kipf & Welling), Adam.
* ``dgl``:        dgl.nn.GraphConv, plain full-graph training.
* ``ep``:         the same model after ``dgl_accel.nn.swap``, each step inside
                  ``dgl_accel.execution_paths(g, train_idx)`` (partial backward, the paper's method).
* ``ep_rf``:      as ``ep`` with ``restrict_forward=True`` (receptive-field forward as well).
* ``plain``:      the swapped model without execution paths (context: how much of the epoch gain
                  the drop-in layers give on their own, e.g. oneDNN dense products; ``paths_only``
                  = plain / ep is what the execution paths add on top).
Reported per graph and training ratio: epoch time (forward + loss + backward + optimizer step,
median of 15 interleaved repeats), backward-aggregation time (wall time inside DGL's GSpMM backward
vs our GSpMMFunction backward, which also applies the degree norms; for context also DGL's GSpMM
plus the backward of GraphConv's degree-norm multiplications), the one-off preparation time
and the extra memory of the paths.  The last line is for Slashdot at 10%:
``backward_speedup=<x> epoch_speedup=<y>`` (epoch speedup of ``ep``; ``ep_rf`` is printed too).

Usage: python bench/bench_execution_paths.py [--quick] [--graphs a,b] [--ratios 0.01,0.1] [--dropout 0.5]
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/x.py` from anywhere

import dgl  # noqa: E402
import dgl.nn  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from dgl.backend.pytorch.sparse import GSpMM  # noqa: E402

import dgl_accel  # noqa: E402
import dgl_accel.nn  # noqa: E402
from bench.harness import print_table, record  # noqa: E402
from dgl_accel import data  # noqa: E402
from dgl_accel.core.aggregation.function import GSpMMFunction  # noqa: E402
from dgl_accel.policies.exec_paths.paths import Paths  # noqa: E402
from dgl_accel.policies.exec_paths.plan import prepare_path  # noqa: E402
from dgl_accel.policies.exec_paths.session import prepare  # noqa: E402

GRAPHS = ("snap_soc-Slashdot0902", "graphdata_amazon_cs")


class GCN(torch.nn.Module):
    def __init__(self, in_feats, hidden, classes, dropout):
        super().__init__()
        self.conv1 = dgl.nn.GraphConv(in_feats, hidden, activation=F.relu)
        self.conv2 = dgl.nn.GraphConv(hidden, classes)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, g, x):
        return self.conv2(g, self.dropout(self.conv1(g, self.dropout(x))))


def _structure_bytes(g) -> int:
    """COO + CSR + CSC of the full graph, as DGL holds them for training."""
    itemsize = 8 if g.idtype == torch.int64 else 4
    return g.num_edges() * itemsize * 2 * 3 + (g.num_nodes() + 1) * itemsize * 2


class _BackwardTimer:
    """Wall time spent inside an autograd Function's backward (the aggregation's backward node):
    DGL's ``GSpMM`` for the baseline, our ``GSpMMFunction`` for dgl-accel."""

    def __init__(self, function):
        self.function, self.seconds = function, 0.0

    def __enter__(self):
        self.original = self.function.backward
        original = self.original

        def timed(ctx, *grads):
            start = time.perf_counter()
            try:
                return original(ctx, *grads)
            finally:
                self.seconds += time.perf_counter() - start

        self.function.backward = staticmethod(timed)
        return self

    def __exit__(self, *exc):
        self.function.backward = staticmethod(self.original)


def _norm_nodes(loss, num_nodes):
    """The backward nodes of DGL GraphConv's degree normalisations (``feat * norm`` with ``norm``
    of shape [N, 1]) in the autograd graph of ``loss``: part of DGL's normalised aggregation, whose
    scaling dgl-accel fuses into its aggregation kernel (and so times inside GSpMMFunction)."""
    found, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        other = getattr(node, "_saved_other", None) if node.name() == "MulBackward0" else None
        if isinstance(other, torch.Tensor) and tuple(other.shape) == (num_nodes, 1):
            found.append(node)
        stack.extend(nxt for nxt, _ in node.next_functions)
    return found


class _NodeTimer:
    """Wall time inside given autograd nodes (pre-hook to hook), for DGL's norm multiplications."""

    def __init__(self):
        self.seconds, self._start = 0.0, {}

    def attach(self, nodes):
        for node in nodes:
            node.register_prehook(lambda grads, node=node: self._start.__setitem__(node, time.perf_counter()))
            node.register_hook(lambda gi, go, node=node: self._add(node))

    def _add(self, node):
        self.seconds += time.perf_counter() - self._start.pop(node)


def _backward_aggregation_ms(cases, repeat) -> dict:
    """Median ms per step inside each case's aggregation backward, cases interleaved so that
    machine noise hits both alike.  ``cases``: {name: (step, autograd Function)}; ``step(hook)``
    calls ``hook(loss)`` between forward and backward (the DGL case times its norm nodes there)."""
    samples = {name: [] for name in cases}
    for r in range(repeat):
        for name in (list(cases) if r % 2 == 0 else list(reversed(cases))):
            step, function = cases[name]
            nodes = _NodeTimer()
            with _BackwardTimer(function) as timer:
                step(nodes)
            samples[name].append(timer.seconds * 1e3)
            if nodes.seconds:
                samples.setdefault(name + "_norm", []).append(nodes.seconds * 1e3)
    return {name: statistics.median(v) for name, v in samples.items()}


def run_case(g, name, ratio, args, seed=0):
    torch.manual_seed(seed)
    n = g.num_nodes()
    x = torch.randn(n, args.feats)
    y = torch.randint(0, args.classes, (n,))
    train_idx = torch.randperm(n)[: max(1, int(ratio * n))].sort().values
    native = GCN(args.feats, args.hidden, args.classes, args.dropout)
    ours = copy.deepcopy(native)
    dgl_accel.nn.swap(ours)
    opts = {k: torch.optim.Adam(m.parameters(), lr=0.01) for k, m in (("dgl", native), ("ours", ours))}

    # One-off preparation, as the steps use it: ep needs the backward path of layer 2 (layer 1's
    # input needs no gradient); ep_rf also the forward paths of both layers.
    start = time.perf_counter()
    ep_paths = Paths(g, train_idx)
    prepare_path(ep_paths, 0, "out")  # what the native backward of layer 2 builds
    prep_s = time.perf_counter() - start
    prepare(g, train_idx)  # the cached copy the steps will use (the warm-up steps fill it)

    def step(model, opt, block=contextlib.nullcontext, norm_timer=None):
        with block():
            loss = F.cross_entropy(model(g, x)[train_idx], y[train_idx])
            if norm_timer is not None:
                norm_timer.attach(_norm_nodes(loss, n))
            opt.zero_grad()
            loss.backward()
        opt.step()

    def step_dgl(norm_timer=None):
        step(native, opts["dgl"], norm_timer=norm_timer)

    def step_ep(restrict):
        step(ours, opts["ours"], lambda: dgl_accel.execution_paths(g, train_idx, restrict_forward=restrict,
                                                                    num_layers=2))

    def step_plain():  # our modules without execution paths: what the drop-in layers alone give
        step(ours, opts["ours"])

    providers = {"dgl": step_dgl, "plain": step_plain, "ep": lambda: step_ep(False), "ep_rf": lambda: step_ep(True)}
    for fn in providers.values():  # warm-up: caches, allocator, lazy formats
        fn()
        fn()
    times = {k: [] for k in providers}
    for r in range(args.repeat):
        order = list(providers) if r % 2 == 0 else list(reversed(providers))
        for k in order:
            t = time.perf_counter()
            providers[k]()
            times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    ep_times = times["ep"]
    bwd = _backward_aggregation_ms({"dgl": (step_dgl, GSpMM), "ep": (lambda _: step_ep(False), GSpMMFunction)},
                                   2 * args.repeat)
    # Headline: DGL's GSpMM backward alone vs ours (which also applies the degree norms inside, so
    # this is conservative).  For context, DGL's normalised aggregation also includes the backward
    # of GraphConv's degree-norm multiplications (128-wide on the input side of a weight-first layer).
    bwd_dgl, bwd_ep = bwd["dgl"], bwd["ep"]
    bwd_dgl_norms = bwd_dgl + bwd.get("dgl_norm", 0.0)
    paths = ep_paths
    # ep: what the paper's method needs; rf: everything the ep and ep_rf steps built in the shared cache
    extra, extra_rf = ep_paths.extra_bytes(), prepare(g, train_idx).extra_bytes()
    feat_bytes = x.numel() * x.element_size()
    return {"case": f"{name}@{ratio:g}", "graph": name, "train_ratio": ratio, "nodes": n, "edges": g.num_edges(),
            "dgl_epoch_ms": round(med["dgl"], 2), "ep_epoch_ms": round(med["ep"], 2),
            "ep_rf_epoch_ms": round(med["ep_rf"], 2), "plain_epoch_ms": round(med["plain"], 2),
            "plain_speedup": round(med["dgl"] / med["plain"], 3),
            "paths_only_speedup": round(med["plain"] / med["ep"], 3),
            "epoch_speedup": round(med["dgl"] / med["ep"], 3), "epoch_speedup_rf": round(med["dgl"] / med["ep_rf"], 3),
            "dgl_bwd_agg_ms": round(bwd_dgl, 3), "ep_bwd_agg_ms": round(bwd_ep, 3),
            "backward_speedup": round(bwd_dgl / max(bwd_ep, 1e-6), 2),
            "dgl_bwd_agg_with_norms_ms": round(bwd_dgl_norms, 3),
            "backward_speedup_with_norms": round(bwd_dgl_norms / max(bwd_ep, 1e-6), 2),
            "frontier1_frac": round(float(paths.frontier(1).float().mean()), 3),
            "sg0_edge_frac": round(paths.edge_ids(0).numel() / g.num_edges(), 3),
            "prep_ms": round(prep_s * 1e3, 2), "extra_mb": round(extra / 2**20, 2),
            "extra_vs_graph_pct": round(100 * extra / _structure_bytes(g), 1),
            "extra_vs_graph_feat_pct": round(100 * extra / (_structure_bytes(g) + feat_bytes), 1),
            "extra_rf_mb": round(extra_rf / 2**20, 2),
            "extra_rf_vs_graph_feat_pct": round(100 * extra_rf / (_structure_bytes(g) + feat_bytes), 1),
            "provider": "dgl_accel", "dropout": args.dropout,
            # the harness's timing columns: ep's epoch, seconds
            "median": statistics.median(ep_times), "min": min(ep_times), "max": max(ep_times)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--ratios", default="0.01,0.1,0.4,0.8")
    ap.add_argument("--feats", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="Slashdot only, ratios 0.1, 3 repeats")
    ap.add_argument("--results-dir", default=None)
    args = ap.parse_args(argv)
    graphs, ratios = args.graphs.split(","), [float(r) for r in args.ratios.split(",")]
    if args.quick:
        graphs, ratios, args.repeat = [GRAPHS[0]], [0.1], 3
    if data.datasets_root() is None:
        print("no ../shared/datasets here: using the synthetic graph (100k nodes) instead", file=sys.stderr)
        graphs = ["synthetic"]
    rows = []
    for name in graphs:
        g = data.synthetic_graph(num_nodes=100_000) if name == "synthetic" else data.load(name, features="none")
        g = dgl.add_self_loop(dgl.remove_self_loop(g))
        for ratio in ratios:
            rows.append(run_case(g, name, ratio, args))
            print(f"  {rows[-1]['case']}: epoch {rows[-1]['epoch_speedup']}x (rf {rows[-1]['epoch_speedup_rf']}x; "
                  f"our layers without paths {rows[-1]['plain_speedup']}x, "
                  f"paths alone {rows[-1]['paths_only_speedup']}x), "
                  f"backward aggregation {rows[-1]['backward_speedup']}x "
                  f"(counting DGL's norm multiplications too: {rows[-1]['backward_speedup_with_norms']}x)",
                  file=sys.stderr)
    cols = ["graph", "train_ratio", "dgl_epoch_ms", "plain_epoch_ms", "ep_epoch_ms", "ep_rf_epoch_ms", "epoch_speedup",
            "epoch_speedup_rf", "plain_speedup", "paths_only_speedup", "dgl_bwd_agg_ms", "ep_bwd_agg_ms",
            "backward_speedup", "dgl_bwd_agg_with_norms_ms",
            "backward_speedup_with_norms", "frontier1_frac",
            "sg0_edge_frac", "prep_ms", "extra_mb", "extra_vs_graph_pct", "extra_vs_graph_feat_pct",
            "extra_rf_mb", "extra_rf_vs_graph_feat_pct"]
    print(f"2-layer GCN {args.feats}->{args.hidden}->{args.classes}, dropout {args.dropout}, CPU threads "
          f"{torch.get_num_threads()}; speedups = dgl / dgl_accel")
    print_table(rows, columns=cols)
    record("execution_paths", rows, args.results_dir)
    key = next((r for r in rows if r["graph"] == GRAPHS[0] and abs(r["train_ratio"] - 0.1) < 1e-9), rows[0])
    print(f"{key['case']}: epoch speedup with receptive-field forward {key['epoch_speedup_rf']}x")
    print(f"backward_speedup={key['backward_speedup']} epoch_speedup={key['epoch_speedup']}")


if __name__ == "__main__":
    main()
