"""Drop-ins are never less accurate than DGL's modules (issue 31).

* Training: for every drop-in and its main configurations, a two-layer model built with ``dgl.nn`` and
  a swapped deep copy of it (``dgl_accel.swap``) train 20 Adam steps with dropout off from the same weights: the two
  loss trajectories, and the weights they end with, agree within the fp32 tolerance table at every
  step.  The native path runs with the compiled numba loops forced on (the CPU path users get from
  ``runtime.MIN_WORK`` edges); a few models also run on the Triton kernels under the interpreter.
* The GAT recipe (8 heads x 8 features, ELU, then one output head) with attention dropout off: outputs
  and every parameter gradient equal DGL's, with and without feature dropout (same torch draws).
* Attention dropout on (p = 0.6), the fused op's masks: on the native path drawn from torch's stream as
  DGL's ``nn.Dropout`` draws them (so a seeded run, 20 training steps of the recipe with both dropouts
  included, gives DGL's numbers), on the Triton path a counter-based hash of edge id, head and a seed
  from torch's generator (single runs differ from DGL's).  On both, the statistics are DGL's: the
  dropped fraction (overall and per head) within binomial bounds of p, kept attention scaled by
  1 / (1 - p), no correlation between heads, neighbouring edges or consecutive calls; on the native path
  also the mean and spread of outputs over many calls; ``torch.manual_seed`` reproduces a mask.
"""
import copy

import dgl
import dgl.nn
import pytest
import torch
import torch.nn.functional as F

import dgl_accel
import dgl_accel.nn
from dgl_accel.core.jit import runtime
from dgl_accel.testing.attention_modules import larger_graph, module_pair
from dgl_accel.testing.attention_variants import LABEL
from dgl_accel.testing.cpu_loops import forced_jit
from dgl_accel.testing.tolerances import assert_close

STEPS, LR, IN, CLASSES = 20, 0.01, 12, 4
P = 0.6  # the attention dropout of DGL's GAT example


def _act(last):
    return None if last else F.relu


# name -> (layer(in, out, last) of a two-layer model, hidden width, activation between the layers)
LAYERS = {
    "GraphConv-both": (lambda i, o, last: dgl.nn.GraphConv(i, o, norm="both", activation=_act(last)), 16, None),
    "GraphConv-right": (lambda i, o, last: dgl.nn.GraphConv(i, o, norm="right", activation=_act(last)), 16, None),
    "GraphConv-none": (lambda i, o, last: dgl.nn.GraphConv(i, o, norm="none", activation=_act(last)), 16, None),
    "SAGEConv-mean": (lambda i, o, last: dgl.nn.SAGEConv(i, o, "mean", activation=_act(last)), 16, None),
    "SAGEConv-gcn": (lambda i, o, last: dgl.nn.SAGEConv(i, o, "gcn", activation=_act(last)), 16, None),
    "SAGEConv-pool": (lambda i, o, last: dgl.nn.SAGEConv(i, o, "pool", activation=_act(last)), 16, None),
    "GINConv-sum": (lambda i, o, last: dgl.nn.GINConv(torch.nn.Linear(i, o), "sum", learn_eps=True,
                                                      activation=_act(last)), 16, None),
    "GINConv-max": (lambda i, o, last: dgl.nn.GINConv(torch.nn.Linear(i, o), "max", activation=_act(last)), 16, None),
    "GATConv-8x8": (lambda i, o, last: dgl.nn.GATConv(i, o, 1) if last else
                    dgl.nn.GATConv(i, 8, 8, residual=True, activation=F.elu), 64, None),
    "GATConv-4x4": (lambda i, o, last: dgl.nn.GATConv(i, o if last else 4, 1 if last else 4), 16, F.elu),
    "GATConv-1x64": (lambda i, o, last: dgl.nn.GATConv(i, o, 1, activation=None if last else F.elu), 64, None),
    "GATv2Conv": (lambda i, o, last: dgl.nn.GATv2Conv(i, o, 1) if last else
                  dgl.nn.GATv2Conv(i, 4, 4, residual=True, activation=F.elu), 16, None),
    "DotGatConv": (lambda i, o, last: dgl.nn.DotGatConv(i, o if last else 4, 1 if last else 4), 16, F.elu),
    "EdgeConv": (lambda i, o, last: dgl.nn.EdgeConv(i, o), 16, F.relu),
}
# models with compiled CPU loops (the others' native path on a DGL graph is DGL's own C kernels)
COMPILED = {"SAGEConv-pool", "GINConv-max", "GATConv-8x8", "GATConv-4x4", "GATConv-1x64", "GATv2Conv", "DotGatConv",
            "EdgeConv", "HeteroGraphConv"}


class TwoLayer(torch.nn.Module):
    """layer(IN -> hidden), heads flattened, ``act``; layer(hidden -> CLASSES), heads averaged."""

    def __init__(self, name):
        super().__init__()
        make, hidden, self.act = LAYERS[name]
        self.first, self.last = make(IN, hidden, False), make(hidden, CLASSES, True)

    def forward(self, g, x):
        h = self.first(g, x).flatten(1)
        h = self.last(g, h if self.act is None else self.act(h))
        return h.mean(1) if h.dim() == 3 else h


class Hetero(torch.nn.Module):
    """Two ``dgl.nn.HeteroGraphConv`` layers of GraphConv and SAGEConv relations (their norms and
    aggregators mixed), classes for both node types."""

    def __init__(self, hidden=16):
        super().__init__()

        def conv(norm, i, o, act=None):
            return dgl.nn.GraphConv(i, o, norm=norm, activation=act, allow_zero_in_degree=True)

        self.first = dgl.nn.HeteroGraphConv({
            "follows": conv("both", IN, hidden, F.relu), "buys": dgl.nn.SAGEConv(IN, hidden, "mean", activation=F.relu),
            "bought_by": dgl.nn.SAGEConv(IN, hidden, "pool", activation=F.relu)}, aggregate="sum")
        self.last = dgl.nn.HeteroGraphConv({
            "follows": dgl.nn.SAGEConv(hidden, CLASSES, "gcn"), "buys": conv("right", hidden, CLASSES),
            "bought_by": conv("none", hidden, CLASSES)}, aggregate="mean")

    def forward(self, g, x):
        return self.last(g, self.first(g, x))


def _graph(num_nodes, num_edges, seed=0):
    """A random graph with self-loops, drawn from torch's generator (DGL's rand_graph has its own)."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = (torch.randint(0, num_nodes, (num_edges,), generator=gen) for _ in range(2))
    return dgl.add_self_loop(dgl.graph((src, dst), num_nodes=num_nodes))


def _hetero_graph(users, items):
    gen = torch.Generator().manual_seed(1)

    def rel(ns, nd):
        return torch.randint(0, ns, (4 * ns,), generator=gen), torch.randint(0, nd, (4 * ns,), generator=gen)

    return dgl.heterograph({("u", "follows", "u"): rel(users, users), ("u", "buys", "i"): rel(users, items),
                            ("i", "bought_by", "u"): rel(items, users)}, num_nodes_dict={"u": users, "i": items})


def _problem(name, tiny):
    """(DGL's model built on torch seed 0, loss(model)): cross-entropy of random labels on a random half
    of the nodes (a training mask) of a random graph with random features."""
    if name == "HeteroGraphConv":
        g = _hetero_graph(*((12, 6) if tiny else (200, 100)))
    else:
        g = _graph(12, 36) if tiny else larger_graph()  # larger_graph: 300 nodes, 3300 edges
    torch.manual_seed(0)
    model = Hetero() if name == "HeteroGraphConv" else TwoLayer(name)
    gen, data = torch.Generator().manual_seed(3), {}
    for t in g.ntypes:  # (features, labels, training mask) per node type
        n = g.num_nodes(t)
        data[t] = (torch.randn(n, IN, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen),
                   torch.rand(n, generator=gen) < 0.5)

    def loss(m):
        out = m(g, data["_N"][0]) if g.is_homogeneous else m(g, {t: x for t, (x, _, _) in data.items()})
        out = {"_N": out} if g.is_homogeneous else out
        return sum(F.cross_entropy(out[t][mask], y[mask]) for t, (_, y, mask) in data.items())

    return model, loss


def _trajectory(model, loss_of, first_grads=None):
    """The losses of STEPS Adam steps (lr LR) of ``model`` in training mode; ``first_grads`` (a dict) gets
    the first step's parameter gradients (Adam is blind to a constant scale of a parameter's gradient)."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = loss_of(model)
        loss.backward()
        if step == 0 and first_grads is not None:
            first_grads.update((k, p.grad.clone()) for k, p in model.named_parameters() if p.grad is not None)
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses)


@pytest.fixture
def compiled_loops(monkeypatch):
    """The compiled numba loops forced on at every size; yields the list of ``runtime.worth`` answers,
    so a test can check that they ran."""
    answers, worth = [], runtime.worth
    monkeypatch.setattr(runtime, "MIN_WORK", 0)
    monkeypatch.setattr(runtime, "worth", lambda work: answers.append(worth(work)) or answers[-1])
    yield answers


def _assert_ran_on(path, stats):
    """dgl-accel ran, every op on ``path`` (the scatter of max's and min's gradient runs natively on
    every path), none of DGL's own code."""
    assert stats, "nothing ran on dgl-accel"
    for op, labels in stats.items():
        scatter = op.endswith(("_max_backward", "_min_backward"))
        allowed = {LABEL[path]} | ({LABEL["native"]} if scatter else set())
        assert set(labels) <= allowed, stats


def _assert_same_training(name, path, loops, tiny, attention="auto"):
    theirs, loss_of = _problem(name, tiny)
    ours = copy.deepcopy(theirs)
    report = dgl_accel.swap(ours)
    assert report.swapped, str(report)
    want_grads, got_grads = {}, {}
    want = _trajectory(theirs, loss_of, want_grads)
    assert dgl_accel.stats() == {}, "DGL's run went through dgl-accel: nothing would be compared"
    assert theirs.training and float(want[0] - want[-1]) > 0.02 * float(want[0]), f"DGL's model did not learn: {want}"
    with dgl_accel.use_backend(path), dgl_accel.use_attention_path(attention):
        dgl_accel.reset_stats()
        got = _trajectory(ours, loss_of, got_grads)
        stats = dgl_accel.stats()
    _assert_ran_on(path, stats)
    if attention == "fused":
        assert "edge_softmax" not in stats and any(op.endswith("_attention") for op in stats), stats
    where = f"{name} on {path}, attention {attention}"
    assert_close(got, want, msg=f"{where}: losses of steps 0..{STEPS - 1} (want {want.tolist()})")
    assert got_grads.keys() == want_grads.keys() == dict(theirs.named_parameters()).keys()
    for k in want_grads:
        assert_close(got_grads[k], want_grads[k], msg=f"{where}: gradient of {k} in step 0")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (k, a), b in zip(ours.named_parameters(), theirs.parameters()):
        assert_close(a.detach(), b.detach(), msg=f"{where}: {k} after {STEPS} steps")
    if name in COMPILED and path == "native":
        assert any(loops), f"{where}: the compiled loops never ran"


ATTENTION = ("GATConv-8x8", "GATConv-4x4", "GATv2Conv", "DotGatConv")


# every model as users get it (attention "auto": the CPU rule of dgl_accel.policies.attention picks the
# fused op or DGL's forward on our routed ops), and the attention models with the fused op forced
@pytest.mark.parametrize("name,attention", [(n, "auto") for n in [*LAYERS, "HeteroGraphConv"]]
                         + [(n, "fused") for n in ATTENTION])
def test_training_trajectory_equals_dgls_on_the_compiled_cpu_path(name, attention, compiled_loops):
    _assert_same_training(name, "native", compiled_loops, tiny=False, attention=attention)


@pytest.mark.interpreter
@pytest.mark.parametrize("name", ["GraphConv-both", "GINConv-max", "EdgeConv"] + [
    pytest.param(n, marks=pytest.mark.slow) for n in ("SAGEConv-pool", "HeteroGraphConv", "GATConv-4x4")])
def test_training_trajectory_equals_dgls_on_the_triton_kernels(name):
    _assert_same_training(name, "triton", [], tiny=True)  # 12 nodes: the interpreter is slow


# ------------------------------------------------------------------------------ the GAT recipe
class GATRecipe(torch.nn.Module):
    """The GAT paper's model: 8 heads x 8 features and ELU, then one head of class scores."""

    def __init__(self, feat_drop=0.0, attn_drop=0.0):
        super().__init__()
        self.first = dgl.nn.GATConv(IN, 8, 8, feat_drop=feat_drop, attn_drop=attn_drop, activation=F.elu)
        self.last = dgl.nn.GATConv(64, CLASSES, 1, feat_drop=feat_drop, attn_drop=attn_drop)

    def forward(self, g, x):
        return self.last(g, self.first(g, x).flatten(1)).mean(1)


def _step(model, g, x, weights):
    """(output, input gradient, parameter gradients) of one training step, the loss weighting every output;
    torch seeded first, so feature dropout draws the same numbers for both models."""
    model.train()
    model.zero_grad()
    x = x.clone().requires_grad_()
    torch.manual_seed(7)
    out = model(g, x)
    (out * weights).sum().backward()
    return out.detach(), x.grad, {k: p.grad for k, p in model.named_parameters()}


@pytest.mark.parametrize("path,attention", [("native", "auto"), ("native", "fused"), ("triton", "auto")])
@pytest.mark.parametrize("feat_drop", [0.0, 0.6])
def test_gat_recipe_outputs_and_gradients_equal_dgls(path, attention, feat_drop, compiled_loops):
    g = larger_graph() if path == "native" else _graph(10, 30)
    torch.manual_seed(0)
    theirs = GATRecipe(feat_drop)
    ours = copy.deepcopy(theirs)
    assert len(dgl_accel.swap(ours).swapped) == 2
    x, weights = torch.randn(g.num_nodes(), IN), torch.randn(g.num_nodes(), CLASSES)
    out0, dx0, grads0 = _step(theirs, g, x, weights)
    assert dgl_accel.stats() == {}
    with dgl_accel.use_backend(path), dgl_accel.use_attention_path(attention):
        out1, dx1, grads1 = _step(ours, g, x, weights)
    _assert_ran_on(path, dgl_accel.stats())
    assert "gat_attention" in dgl_accel.stats()  # the output layer (one head) is fused on every path
    assert_close(out1, out0, msg="output")
    assert_close(dx1, dx0, msg="input gradient")
    assert grads1.keys() == grads0.keys() and all(v is not None for v in grads0.values())
    for k in grads0:
        assert_close(grads1[k], grads0[k], msg=f"gradient of {k}")
    if path == "native":
        assert any(compiled_loops), "the compiled loops never ran"


# ------------------------------------------------------------------------------ attention dropout
def _within_binomial(dropped: torch.Tensor, n: int, what: str) -> None:
    """The fraction of dropped entries (bool, ``n`` of them) within 5 standard deviations of P."""
    frac, sigma = dropped.double().mean().item(), (P * (1 - P) / n) ** 0.5
    assert abs(frac - P) <= 5 * sigma, f"{what}: dropped {frac:.4f}, expected {P} +- {5 * sigma:.4f} (5 sigma)"


def _uncorrelated(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    """Two equally long bool masks have |correlation| <= 5 / sqrt(n) (independent: about N(0, 1 / n))."""
    corr = torch.corrcoef(torch.stack([a.reshape(-1), b.reshape(-1)]).double())[0, 1].item()
    assert abs(corr) <= 5 / a.numel() ** 0.5, f"{what}: correlation {corr:.4f} over {a.numel()} entries"


def _attention(conv, g, x, training: bool) -> torch.Tensor:
    """The attention [E, H] that ``conv`` returns (after dropout while training)."""
    conv.train(training)
    with torch.no_grad():
        return conv(g, x, get_attention=True)[1].squeeze(-1)


@pytest.mark.parametrize("path", ["native", pytest.param("triton", marks=pytest.mark.slow)])
def test_attention_dropout_mask_statistics_match_dgls(path, compiled_loops, fused_attention):
    # a few thousand edges x 8 heads (fewer nodes under the interpreter: its time grows with the rows)
    g = larger_graph() if path == "native" else _graph(60, 2000)
    theirs, ours = module_pair(dgl.nn.GATConv, dgl_accel.nn.GATConv, IN, 8, 8, attn_drop=P)
    x = torch.randn(g.num_nodes(), IN)
    edges, heads = g.num_edges(), 8
    clean = _attention(theirs, g, x, training=False)  # ours is equal (tests/nn/test_gatconv.py)
    assert bool((clean > 0).all())  # so a 0 after dropout is a dropped entry
    for name, conv in (("DGL", theirs), (f"dgl-accel on {path}", ours)):
        masks = []
        for call in range(2):
            with dgl_accel.use_backend(path):
                att = _attention(conv, g, x, training=True)
            kept = att != 0
            where = f"{name}, call {call}"
            _within_binomial(~kept, edges * heads, where)
            for h in range(heads):
                _within_binomial(~kept[:, h], edges, f"{where}, head {h}")
                for k in range(h):
                    _uncorrelated(kept[:, h], kept[:, k], f"{where}, heads {k} and {h}")
            _uncorrelated(kept[1:], kept[:-1], f"{where}, neighbouring edge ids")
            assert_close(att[kept], clean[kept] / (1 - P), msg=f"{where}: kept attention is scaled by 1 / (1 - p)")
            masks.append(kept)
        assert not torch.equal(*masks), f"{name}: two calls drew the same mask"
        _uncorrelated(*masks, f"{name}, consecutive calls")
    assert set(dgl_accel.stats()["gat_attention"]) == {LABEL[path]}  # ours ran fused, on this path
    if path == "native":
        assert any(compiled_loops), "the compiled loops never ran"


def test_attention_dropout_outputs_average_to_the_undropped_output_as_dgls(compiled_loops, fused_attention):
    g = larger_graph()
    theirs, ours = module_pair(dgl.nn.GATConv, dgl_accel.nn.GATConv, IN, 8, 8, attn_drop=P)
    x = torch.randn(g.num_nodes(), IN)
    theirs.eval()
    with torch.no_grad():
        expected = theirs(g, x)
    runs, variance = 400, {}
    for name, conv in (("DGL", theirs), ("dgl-accel", ours)):
        conv.train()
        with torch.no_grad():
            samples = torch.stack([conv(g, x) for _ in range(runs)])
        sem = samples.std(0) / runs**0.5
        err = (samples.mean(0) - expected).abs()
        assert bool((err <= 6 * sem + 1e-5).all()), f"{name}: max |mean - undropped| / sem {(err / sem).max():.2f}"
        # each run's scale along the undropped output: independent across runs, mean 1 without bias
        scale = (samples * expected).flatten(1).sum(1) / expected.square().sum()
        bias, se = scale.mean().item() - 1, scale.std().item() / runs**0.5
        assert abs(bias) <= 5 * se, f"{name}: outputs scaled by 1 + {bias:.2e} on average (5 standard errors: {5 * se:.1e})"
        variance[name] = samples.var(0).mean().item()
    ratio = variance["dgl-accel"] / variance["DGL"]
    assert 0.9 < ratio < 1.1, f"variance of the outputs, ours / DGL's: {ratio:.3f}"


@pytest.mark.interpreter  # 10 nodes: about 1 s on 2 cores with the interpreter
def test_our_mask_follows_torch_seed_on_every_path(fused_attention):
    g = _graph(10, 30)
    _, ours = module_pair(dgl.nn.GATConv, dgl_accel.nn.GATConv, IN, 4, 8, attn_drop=P)
    ours.train()
    x = torch.randn(10, IN)
    runs = {}
    for path, loops in (("native", False), ("native", True), ("triton", False)):
        with dgl_accel.use_backend(path), forced_jit(loops), torch.no_grad():
            dgl_accel.reset_stats()
            torch.manual_seed(5)
            first, second = ours(g, x, get_attention=True), ours(g, x, get_attention=True)
            torch.manual_seed(5)
            again = ours(g, x, get_attention=True)
        assert set(dgl_accel.stats()["gat_attention"]) == {LABEL[path]}
        assert torch.equal(first[1] != 0, again[1] != 0) and torch.equal(first[0], again[0]), "torch.manual_seed"
        assert not torch.equal(first[1] != 0, second[1] != 0), "two consecutive calls drew the same mask"
        runs[path, loops] = first
    (out0, att0), (out1, att1) = runs["native", False], runs["native", True]  # torch code, compiled loops
    assert torch.equal(att1 != 0, att0 != 0)
    assert_close(out1, out0)


@pytest.mark.parametrize("attention", ["auto", "fused"])
def test_seeded_native_training_with_dropout_gives_dgls_numbers(attention, compiled_loops):
    """The native path draws DGL's masks from torch's stream: the recipe with feature and attention
    dropout 0.6 trains 20 steps as DGL's from the same torch seed."""
    g = larger_graph()
    theirs, ours = module_pair(dgl.nn.GATConv, dgl_accel.nn.GATConv, IN, 8, 8, attn_drop=P)
    x = torch.randn(g.num_nodes(), IN)
    masks = []
    with dgl_accel.use_backend("native"), dgl_accel.use_attention_path(attention):
        for conv in (theirs, ours):
            torch.manual_seed(5)
            masks.append(_attention(conv, g, x, training=True) != 0)
    assert torch.equal(*masks), "one layer, one torch seed: not DGL's mask"
    torch.manual_seed(0)
    theirs = GATRecipe(feat_drop=P, attn_drop=P)
    ours = copy.deepcopy(theirs)
    dgl_accel.swap(ours)
    labels = torch.randint(0, CLASSES, (g.num_nodes(),))

    def loss(model):
        return F.cross_entropy(model(g, x), labels)

    torch.manual_seed(11)
    want = _trajectory(theirs, loss)
    with dgl_accel.use_backend("native"), dgl_accel.use_attention_path(attention):
        dgl_accel.reset_stats()
        torch.manual_seed(11)
        got = _trajectory(ours, loss)
    assert "gat_attention" in dgl_accel.stats()
    assert float(want[0] - want[-1]) > 0.02 * float(want[0]), want
    assert_close(got, want, msg=f"losses with dropout on (want {want.tolist()})")
