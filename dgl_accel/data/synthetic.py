"""Deterministic synthetic node-classification graph (works with no dataset on disk)."""
from __future__ import annotations

import dgl
import numpy as np
import torch


def _split_sizes(n, c, train_per_class, num_val, num_test):
    """Shrink the 20-per-class / 500 / 1000 split so small graphs keep every part non-empty."""
    tpc = max(1, min(train_per_class, n // (5 * c)))
    rest = n - tpc * c
    nv = min(num_val, rest // 3)
    nt = min(num_test, rest - nv)
    return tpc, nv, nt


def _sample_edges(rng, label, theta, m, homophily):
    """Degree-corrected SBM: endpoints ~ theta; the second one mostly from the same class."""
    n = len(label)
    c = int(label.max()) + 1
    order = np.argsort(label, kind="stable")  # nodes grouped by class
    cdf = np.cumsum(theta[order])
    ends = cdf[np.searchsorted(label[order], np.arange(c), side="right") - 1]
    starts = np.concatenate([[0.0], ends[:-1]])

    def draw(lo, width):  # inverse-CDF sampling over [lo, lo + width) of the grouped cdf
        r = lo + rng.random(len(width)) * width
        return order[np.minimum(np.searchsorted(cdf, r, side="right"), n - 1)]

    keys = np.empty(0, dtype=np.int64)
    for _ in range(20):  # hubs collide often; top up until m distinct pairs
        k = int((m - len(keys)) * 1.3) + 16
        u = draw(np.zeros(k), np.full(k, cdf[-1]))
        intra = rng.random(k) < homophily
        cu = label[u]
        v = draw(np.where(intra, starts[cu], 0.0), np.where(intra, ends[cu] - starts[cu], cdf[-1]))
        ok = u != v
        lo, hi = np.minimum(u, v)[ok], np.maximum(u, v)[ok]
        keys = np.union1d(keys, lo * n + hi)
        if len(keys) >= m:
            break
    if len(keys) > m:
        keys = np.sort(rng.choice(keys, m, replace=False))
    # Give isolated nodes one same-class neighbour so GraphConv works without self loops.
    iso = np.flatnonzero(np.bincount(np.concatenate([keys // n, keys % n]), minlength=n) == 0)
    if len(iso):
        cu = label[iso]
        nb = draw(starts[cu], ends[cu] - starts[cu])
        for _ in range(10):  # redraw the rare self-picks
            bad = nb == iso
            if not bad.any():
                break
            nb[bad] = draw(starts[cu[bad]], ends[cu[bad]] - starts[cu[bad]])
        nb = np.where(nb == iso, (iso + 1) % n, nb)
        keys = np.union1d(keys, np.minimum(iso, nb) * n + np.maximum(iso, nb))
    return keys // n, keys % n


def synthetic_graph(num_nodes: int = 3000, num_classes: int = 5, feat_dim: int = 64,
                    avg_degree: float = 8, seed: int = 0, homophily: float = 0.8,
                    degree_exponent: float = 2.5, feat_signal: float = 0.15,
                    train_per_class: int = 20, num_val: int = 500,
                    num_test: int = 1000) -> dgl.DGLGraph:
    """Homophilous DC-SBM with power-law degrees and noisy class-mean features.

    Same arguments -> identical graph, features, labels and masks. Edges are symmetric,
    simple (no self loops, no duplicates); ``homophily`` is the chance an edge is drawn
    inside its class (others go anywhere); degree propensities follow a power law with
    pdf exponent ``degree_exponent`` (a few hubs). Features are ``feat_signal * mean[class]
    + N(0, 1)``: too noisy for an MLP alone, easy once neighbours are averaged.

    >>> g = synthetic_graph(num_nodes=200, num_classes=4, feat_dim=8, seed=1)
    >>> g.num_nodes(), tuple(g.ndata["feat"].shape), sorted(g.ndata)
    (200, (200, 8), ['feat', 'label', 'test_mask', 'train_mask', 'val_mask'])
    >>> again = synthetic_graph(num_nodes=200, num_classes=4, feat_dim=8, seed=1)
    >>> all(bool((a == b).all()) for a, b in zip(g.edges(), again.edges()))  # same arguments, same graph
    True
    """
    n, c = int(num_nodes), int(num_classes)
    if n < 2 * c or c < 2:
        raise ValueError(f"expected num_nodes >= 2 * num_classes >= 4 (got {n}, {c}).")
    rng = np.random.default_rng(seed)
    label = rng.permutation(np.arange(n) % c)  # balanced classes

    # Pareto propensities (tail index exponent-1); cap so a hub wants at most ~n/2 neighbours.
    theta = rng.pareto(degree_exponent - 1.0, n) + 1.0
    theta /= theta.mean()
    theta = np.minimum(theta, max(1.0, (n - 1) / (2.0 * avg_degree)))
    m = min(int(round(n * avg_degree / 2)), n * (n - 1) // 4)
    lo, hi = _sample_edges(rng, label, theta, m, homophily)

    means = rng.normal(size=(c, feat_dim))
    feat = (feat_signal * means[label] + rng.normal(size=(n, feat_dim))).astype(np.float32)

    # Splits: train = first k of each class in a random order; val/test from the rest.
    tpc, nv, nt = _split_sizes(n, c, train_per_class, num_val, num_test)
    perm = rng.permutation(n)
    by_class = perm[np.argsort(label[perm], kind="stable")]
    first = np.searchsorted(label[by_class], np.arange(c))
    rank = np.arange(n) - first[label[by_class]]
    train = np.zeros(n, dtype=bool)
    train[by_class[rank < tpc]] = True
    rest = perm[~train[perm]]
    val = np.zeros(n, dtype=bool)
    val[rest[:nv]] = True
    test = np.zeros(n, dtype=bool)
    test[rest[nv:nv + nt]] = True

    src = np.concatenate([lo, hi])
    dst = np.concatenate([hi, lo])
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    g.ndata["feat"] = torch.from_numpy(feat)
    g.ndata["label"] = torch.from_numpy(label.astype(np.int64))
    g.ndata["train_mask"] = torch.from_numpy(train)
    g.ndata["val_mask"] = torch.from_numpy(val)
    g.ndata["test_mask"] = torch.from_numpy(test)
    return g
