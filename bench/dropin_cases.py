"""The configuration matrix of :mod:`bench.bench_dropins` (issue 31): which cells run, and how one cell
builds its module, its graph, its features and the training step each provider times.

A cell is (module, graph, input width, hidden width or heads x features, dropout on/off, the module's
extra option on/off, threads).  Defaults: input 128, hidden 64, heads x features 4 x 32, dropout off,
extra off, the first thread count.  The matrix (see :func:`matrix`):

* base: every module on every chosen graph at the defaults;
* one axis at a time, on the variation graphs (Cora, Amazon-CS, Slashdot; in ``--quick``, whose
  graphs are these three, Amazon-CS only, with the threads axis alone): input width 767 and 1433
  (Amazon-CS's and Cora's widths; on graphs up to 1M edges, so not Slashdot), hidden 16 and 256
  (heads x features 1 x 64 and 8 x 8 for the attention modules), dropout on, the extra option on
  where the module has one, and each further thread count.  DGL's EdgeConv keeps E x width tensors: its
  cells with edges x max(input, hidden) over :data:`EDGECONV_MAX` are left out (widths 767 / 1433
  on Amazon-CS, hidden 256 on Slashdot).

The attention modules also get the GAT paper's first layer ("recipe": input 767, 8 x 8, dropout on) on
the variation graphs, in ``--quick`` too.  All six graphs, threads 1,2: 303 cells (72 at the
defaults); ``--quick``: 51 (36 + 3 recipe + 12 at 2 threads).

Modules (``dgl.nn``; dgl-accel's side is a deep copy after ``dgl_accel.swap``):

=================  =========================================  ===================================
key                module                                     dropout on / extra option on
=================  =========================================  ===================================
graphconv          GraphConv(norm="both")                     nn.Dropout(0.5) on x / ReLU
sage_mean/gcn/pool SAGEConv(aggregator)                       feat_drop=0.5 (its own) / ReLU
gin_sum/max        GINConv(nn.Linear(in, hidden), agg)         nn.Dropout(0.5) on x / ReLU, learn_eps
gatconv            GATConv(in, feats, heads)                  feat_drop=attn_drop=0.6 / residual, ELU
gatv2conv          GATv2Conv(in, feats, heads)                feat_drop=attn_drop=0.6 / residual, ELU
dotgatconv         DotGatConv(in, feats, heads)               nn.Dropout(0.5) on x / (none offered)
edgeconv           EdgeConv(in, hidden)                       nn.Dropout(0.5) on x / batch_norm
hetero_graphconv   HeteroGraphConv of GraphConv per relation  nn.Dropout(0.5) on x / ReLU
hetero_sage        HeteroGraphConv of SAGEConv(mean)           feat_drop=0.5 / ReLU
=================  =========================================  ===================================

The heterograph (:func:`bench.sampling_hetero.hetero_graph`): node v becomes
``user`` or ``item`` by parity, edges split into three relations, two of them into ``user``
(relation GraphConvs allow zero in-degree: items have no self-loops there).  Homogeneous graphs get
self-loops as DGL's GCN/GAT examples add them (``dgl.add_self_loop(dgl.remove_self_loop(g))``).
Features are random (seeded) at the cell's width; the loss is cross-entropy against random labels
(one class per output column) on a fixed 10% of the nodes, MSE against a random target for the
attention modules' [N, heads, feats] outputs (flattened); Adam (lr 0.01) for each provider.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import dgl
import dgl.nn
import torch
import torch.nn.functional as F
from torch import nn

import dgl_accel
from bench.harness import TrainingStep
from bench.sampling_hetero import RELATIONS, hetero_graph
from dgl_accel import data

GRAPHS = ("cora", "citeseer", "amazon_cs", "coauthor_cs", "snap_soc-Slashdot0902", "fb100_Cornell5")
SHORT = {"snap_soc-Slashdot0902": "slashdot", "fb100_Cornell5": "cornell5"}
VARIATION_GRAPHS = ("cora", "amazon_cs", "snap_soc-Slashdot0902")
QUICK_GRAPHS = ("cora", "amazon_cs", "snap_soc-Slashdot0902")
QUICK_VARIATION_GRAPHS = ("amazon_cs",)
WIDTHS = (128, 767, 1433)         # default first
HIDDEN = (64, 16, 256)
HEADS = ((4, 32), (1, 64), (8, 8))  # heads x features per head
EDGECONV_MAX = 2.5e8              # edges x width: DGL's EdgeConv's per-edge tensors (1 GB each in fp32)
WIDE_MAX_EDGES = 1_000_000        # the width axis runs on graphs up to this many edges (cost)
TRAIN_FRACTION = 0.1
ATTENTION = ("GATConv", "GATv2Conv", "DotGatConv")


@dataclasses.dataclass(frozen=True)
class Cell:
    key: str              # a MODULES key
    graph: str            # a dgl_accel.data name
    in_feats: int = WIDTHS[0]
    hidden: int = HIDDEN[0]   # output width; per head for the attention modules
    heads: int = 1
    dropout: bool = False
    extra: bool = False   # the module's extra option (MODULES[key].extra says which)
    threads: int = 1
    axis: str = "base"    # which axis this cell moves away from the defaults

    @property
    def spec(self) -> Spec:
        return MODULES[self.key]

    @property
    def case(self) -> str:
        width = f"{self.heads}x{self.hidden}" if self.spec.attention else f"h{self.hidden}"
        parts = [self.key, SHORT.get(self.graph, self.graph), f"in{self.in_feats}", width]
        parts += ["drop"] if self.dropout else []
        parts += [self.spec.extra.replace(" ", "+")] if self.extra else []
        return " ".join([*parts, f"t{self.threads}"])

    def fields(self) -> dict:
        """The structured columns of the cell's rows."""
        return {"module": self.spec.module, "variant": self.spec.variant, "key": self.key, "axis": self.axis,
                "graph": self.graph, "in_feats": self.in_feats, "hidden": self.hidden, "heads": self.heads,
                "dropout": self.dropout, "extra": self.spec.extra if self.extra else "", "threads": self.threads}


@dataclasses.dataclass(frozen=True)
class Spec:
    module: str                 # the dgl.nn class
    variant: str
    build: Callable             # Cell -> the dgl.nn module
    input_dropout: bool         # dropout on: nn.Dropout(0.5) on the input (the module has none of its own)
    extra: str = ""             # what Cell.extra switches on; "" where the module offers nothing

    @property
    def attention(self) -> bool:
        return self.module in ATTENTION


def _act(cell, fn=F.relu):
    return fn if cell.extra else None


def _sage(agg):
    return lambda c: dgl.nn.SAGEConv(c.in_feats, c.hidden, agg, feat_drop=0.5 if c.dropout else 0.0,
                                     activation=_act(c))


def _gin(agg):
    return lambda c: dgl.nn.GINConv(nn.Linear(c.in_feats, c.hidden), agg, learn_eps=c.extra, activation=_act(c))


def _gat(cls):
    p = 0.6  # the GAT paper's dropouts
    return lambda c: cls(c.in_feats, c.hidden, c.heads, feat_drop=p if c.dropout else 0.0,
                         attn_drop=p if c.dropout else 0.0, residual=c.extra, activation=_act(c, F.elu))


def _hetero(relation):
    return lambda c: dgl.nn.HeteroGraphConv({rel: relation(c) for _, rel, _ in RELATIONS.values()}, aggregate="sum")


MODULES = {
    "graphconv": Spec("GraphConv", "both", lambda c: dgl.nn.GraphConv(c.in_feats, c.hidden, activation=_act(c)),
                      True, "relu"),
    "sage_mean": Spec("SAGEConv", "mean", _sage("mean"), False, "relu"),
    "sage_gcn": Spec("SAGEConv", "gcn", _sage("gcn"), False, "relu"),
    "sage_pool": Spec("SAGEConv", "pool", _sage("pool"), False, "relu"),
    "gin_sum": Spec("GINConv", "sum", _gin("sum"), True, "relu learn_eps"),
    "gin_max": Spec("GINConv", "max", _gin("max"), True, "relu learn_eps"),
    "gatconv": Spec("GATConv", "", _gat(dgl.nn.GATConv), False, "residual elu"),
    "gatv2conv": Spec("GATv2Conv", "", _gat(dgl.nn.GATv2Conv), False, "residual elu"),
    "dotgatconv": Spec("DotGatConv", "", lambda c: dgl.nn.DotGatConv(c.in_feats, c.hidden, c.heads), True),
    "edgeconv": Spec("EdgeConv", "", lambda c: dgl.nn.EdgeConv(c.in_feats, c.hidden, batch_norm=c.extra), True,
                     "batch_norm"),
    "hetero_graphconv": Spec("HeteroGraphConv", "GraphConv", _hetero(
        lambda c: dgl.nn.GraphConv(c.in_feats, c.hidden, activation=_act(c), allow_zero_in_degree=True)), True, "relu"),
    "hetero_sage": Spec("HeteroGraphConv", "SAGEConv mean", _hetero(
        lambda c: dgl.nn.SAGEConv(c.in_feats, c.hidden, "mean", feat_drop=0.5 if c.dropout else 0.0,
                                  activation=_act(c))), False, "relu"),
}


def resolve(names: str | None, table, kind: str, aliases=None) -> list[str]:
    """The entries of ``table`` that comma-separated ``names`` pick (all if None); a name picks the
    entry of that name, or every entry starting with ``name_`` (``sage`` picks the three SAGEConvs)."""
    if not names:
        return list(table)
    aliases = aliases or {}
    out = []
    for name in (s.strip() for s in names.split(",") if s.strip()):
        name = aliases.get(name, name)
        hits = [k for k in table if k == name or k.startswith(name + "_")]
        if not hits:
            raise SystemExit(f"expected {kind} from {', '.join(table)} (got {name!r})")
        out += [k for k in hits if k not in out]
    return out


def _default(key: str, graph: str, threads: int) -> Cell:
    heads, feats = HEADS[0] if MODULES[key].attention else (1, HIDDEN[0])
    return Cell(key, graph, hidden=feats, heads=heads, threads=threads)


def _variations(base: Cell, threads: list[int], quick: bool) -> list[Cell]:
    more = [dataclasses.replace(base, threads=t, axis="threads") for t in threads]
    spec = base.spec
    if spec.attention:  # the GAT paper's first layer: 8 x 8 on bag-of-words inputs, dropout 0.6
        more.insert(0, dataclasses.replace(base, in_feats=WIDTHS[1], heads=8, hidden=8, dropout=True, axis="recipe"))
    if quick:
        return more
    cells = [dataclasses.replace(base, in_feats=w, axis="width") for w in WIDTHS[1:]]
    if spec.attention:
        cells += [dataclasses.replace(base, heads=h, hidden=f, axis="heads") for h, f in HEADS[1:]]
    else:
        cells += [dataclasses.replace(base, hidden=h, axis="hidden") for h in HIDDEN[1:]]
    cells.append(dataclasses.replace(base, dropout=True, axis="dropout"))
    if spec.extra:
        cells.append(dataclasses.replace(base, extra=True, axis="extra"))
    return cells + more


def keep(cell: Cell, edges: int) -> bool:
    """Whether a cell stays in the matrix: wide inputs only on graphs up to WIDE_MAX_EDGES edges (one
    SAGE-pool step at width 1433 on Slashdot takes 30 s), EdgeConv only up to EDGECONV_MAX."""
    if cell.axis == "width" and edges > WIDE_MAX_EDGES:
        return False
    return cell.key != "edgeconv" or edges * max(cell.in_feats, cell.hidden) <= EDGECONV_MAX


def matrix(graphs: list[str], modules: list[str], threads: list[int], quick: bool,
           edges: Callable[[str], int] | None = None) -> list[Cell]:
    """The cells of the module docstring, graph by graph (each graph is loaded once).  ``edges(graph)``
    (the self-looped edge count) drops the cells :func:`keep` rejects; None keeps every cell."""
    varied = [g for g in graphs if g in (QUICK_VARIATION_GRAPHS if quick else VARIATION_GRAPHS)] or graphs[:1]
    cells = []
    for graph in graphs:
        for key in modules:
            base = _default(key, graph, threads[0])
            cells.append(base)
            if graph in varied:
                cells += _variations(base, threads[1:], quick)
    if edges is not None:
        cells = [c for c in cells if keep(c, edges(c.graph))]
    return cells


class Graph:
    """One shared graph: the self-looped homogeneous graph, the heterograph (built on first use) and
    seeded features per width."""

    def __init__(self, name: str):
        raw = data.load(name) if name in ("cora", "citeseer") else data.load(name, features="none")
        self.name = name
        self.raw = dgl.graph(raw.edges(), num_nodes=raw.num_nodes())  # structure only
        self.g = dgl.add_self_loop(dgl.remove_self_loop(self.raw))
        self._hetero, self._feats = None, {}

    @property
    def hetero(self):
        if self._hetero is None:
            self._hetero = hetero_graph(dgl.remove_self_loop(self.raw))
        return self._hetero

    def features(self, width: int, hetero: bool):
        key = (width, hetero)
        if key not in self._feats:
            gen = torch.Generator().manual_seed(width)
            if hetero:
                hg = self.hetero
                self._feats[key] = {t: torch.randn(hg.num_nodes(t), width, generator=gen) for t in hg.ntypes}
            else:
                self._feats[key] = torch.randn(self.g.num_nodes(), width, generator=gen)
        return self._feats[key]


class Model(nn.Module):
    """What a user's model does around the layer: dropout on the input (where the layer has none of
    its own), then the layer as users call it."""

    def __init__(self, conv: nn.Module, dropout: float):
        super().__init__()
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.conv = conv

    def forward(self, g, x):
        x = {k: self.drop(v) for k, v in x.items()} if isinstance(x, dict) else self.drop(x)
        return self.conv(g, x)


def _loss_fn(out_example, seed: int):
    """The training loss on a fixed 10% of the rows: cross-entropy on [N, C] logits, MSE on
    [N, heads, feats] outputs (flattened); a dict of outputs sums the per-type losses."""
    gen = torch.Generator().manual_seed(seed)

    def one(example):
        n = example.shape[0]
        rows = torch.randperm(n, generator=gen)[: max(1, int(TRAIN_FRACTION * n))].sort().values
        if example.dim() == 2:
            labels = torch.randint(0, example.shape[1], (n,), generator=gen)[rows]
            return lambda out: F.cross_entropy(out[rows], labels)
        target = torch.randn(n, example[0].numel(), generator=gen)[rows]
        return lambda out: F.mse_loss(out[rows].flatten(1), target)

    if isinstance(out_example, dict):
        fns = {k: one(v) for k, v in out_example.items()}
        return lambda out: sum(fn(out[k]) for k, fn in fns.items())
    return one(out_example)


def _max_diff(a, b) -> float:
    if isinstance(a, dict):
        return max(_max_diff(a[k], b[k]) for k in a)
    return float((a - b).abs().max())


def _runs_under(autocast, model, g, x) -> str:
    """"" where ``model`` runs under ``autocast`` (a dtype, or None: no autocast), else the error it
    raises there, in one line."""
    if autocast is None:
        return ""
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=autocast):
            model(g, x)
    except Exception as e:  # noqa: BLE001  (the peer's own error, whatever it is, goes into the row)
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return ""


def setup(cell: Cell, graph: Graph, seed: int = 0, autocast: torch.dtype | None = None) -> tuple[dict, dict]:
    """({provider: one training step, a :class:`bench.harness.TrainingStep`}, facts): both providers
    start from the same weights.  ``autocast`` (a dtype): every step's forward and loss run under
    ``torch.autocast("cpu", dtype=autocast)``; where DGL's module raises there (GATConv, GATv2Conv),
    DGL's step runs in fp32, the best its user has.  Facts: nodes, edges, the modules swapped, the
    eval-mode forward's max |ours - DGL|, each provider's precision and DGL's error under autocast."""
    spec = cell.spec
    hetero = spec.module == "HeteroGraphConv"
    g = graph.hetero if hetero else graph.g
    x = graph.features(cell.in_feats, hetero)
    torch.manual_seed(seed)
    theirs = Model(spec.build(cell), 0.5 if cell.dropout and spec.input_dropout else 0.0)
    ours = copy.deepcopy(theirs)
    swapped = len(dgl_accel.swap(ours).swapped)
    if not swapped:
        raise RuntimeError(f"dgl_accel.swap left {spec.module} alone: expected a drop-in for it")
    theirs.eval()
    ours.eval()
    peer_error = _runs_under(autocast, theirs, g, x)
    precision = {p: f"autocast {str(autocast).replace('torch.', '')}" if autocast is not None else "fp32"
                 for p in ("dgl", "dgl_accel")}
    if peer_error:
        precision["dgl"] = "fp32"
    with torch.no_grad():  # both compute one thing (eval: no dropout), and the loss's shapes
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None and not peer_error):
            out = theirs(g, x)
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            diff = _max_diff(ours(g, x), out)
    theirs.train()
    ours.train()
    loss = _loss_fn(out, seed)

    def step(model, opt, provider):
        on = precision[provider] != "fp32"

        def run():
            with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=on):
                value = loss(model(g, x))
            value.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return TrainingStep(model, opt, run)

    steps = {"dgl": step(theirs, torch.optim.Adam(theirs.parameters(), lr=0.01), "dgl"),
             "dgl_accel": step(ours, torch.optim.Adam(ours.parameters(), lr=0.01), "dgl_accel")}
    return steps, {"nodes": g.num_nodes(), "edges": g.num_edges(), "swapped": swapped, "max_abs_diff": diff,
                   "precision": precision["dgl_accel"], "peer_precision": precision["dgl"],
                   "peer_error": peer_error}
