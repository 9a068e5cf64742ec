"""Tests for dgl_accel.data: DGL classes offline, shared npz files, SNAP lists, synthetic."""
import gzip

import dgl
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dgl_accel.data as data
from dgl_accel.data import (
    available,
    datasets_root,
    load,
    load_dgl_dataset,
    load_npz,
    load_npz_arrays,
    load_snap_edgelist,
    synthetic_graph,
)

ROOT = datasets_root()
HAVE_DATASETS = ROOT is not None and (ROOT / "npz").is_dir() and (ROOT / "dgl").is_dir()
_skip_no_datasets = pytest.mark.skipif(
    not HAVE_DATASETS,
    reason="shared datasets not found (set DGL_ACCEL_DATASETS or provide ../shared/datasets)")


def needs_datasets(f):
    return pytest.mark.datasets(_skip_no_datasets(f))


# stem -> (nodes, undirected edges, feature width or 0, classes or 0), from the README table
NPZ_TABLE = {
    "planetoid_cora": (2708, 5278, 1433, 7),
    "planetoid_citeseer": (3327, 4552, 3703, 6),
    "graphdata_amazon_cs": (13752, 245861, 767, 10),
    "graphdata_coauthor_cs": (18333, 81894, 6805, 15),
    "graphdata_flickr": (7575, 239738, 12047, 9),
    "hetero_tolokers": (11758, 519000, 10, 2),
    "fb100_Cornell5": (18660, 790777, 0, 2),
    "musae_github": (37700, 289003, 0, 2),
    "snap_email-Enron": (36692, 183831, 0, 0),
    "snap_soc-Slashdot0902": (82168, 504230, 0, 0),
}
HEAVY_FEATURES = {"graphdata_coauthor_cs", "graphdata_flickr"}  # dense is 0.4-0.5 GB


def _listing(root):
    return sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*"))


@pytest.fixture(scope="module", autouse=True)
def shared_folder_untouched():
    """Whatever this module loads, the shared folder must not change."""
    before = _listing(ROOT) if HAVE_DATASETS else None
    yield
    if HAVE_DATASETS:
        assert _listing(ROOT) == before, "something wrote under the shared dataset folder"


@pytest.fixture
def no_download(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("download attempted")
    monkeypatch.setattr(dgl.data.utils, "download", boom)
    monkeypatch.setattr(dgl.data.dgl_dataset, "download", boom)


def _masks(g):
    return [int(g.ndata[k].sum()) for k in ("train_mask", "val_mask", "test_mask")]


# ---------------------------------------------------------------- DGL classes

@pytest.mark.parametrize("name,nodes,edges,feats,classes,split", [
    ("cora", 2708, 10556, 1433, 7, [140, 500, 1000]),
    ("citeseer", 3327, 9228, 3703, 6, [120, 500, 1000]),
])
@pytest.mark.usefixtures("no_download")
@needs_datasets
def test_dgl_dataset(name, nodes, edges, feats, classes, split):
    g = load_dgl_dataset(name)
    assert (g.num_nodes(), g.num_edges()) == (nodes, edges)
    assert g.ndata["feat"].shape == (nodes, feats) and g.ndata["feat"].dtype == torch.float32
    assert g.ndata["label"].dtype == torch.int64
    assert int(g.ndata["label"].max()) + 1 == classes
    assert _masks(g) == split
    assert load(name).num_edges() == edges


@pytest.mark.usefixtures("no_download")
@needs_datasets
def test_dgl_dataset_save_dir_is_a_reusable_cache(tmp_path):
    g1 = load_dgl_dataset("cora", save_dir=tmp_path)
    (folder,) = list(tmp_path.iterdir())
    assert folder.name.startswith("cora_v2_")  # DGL's hashed folder name is kept
    assert any(p.name.endswith(".bin") for p in folder.iterdir())  # DGL's processed cache
    g2 = load_dgl_dataset("cora", save_dir=tmp_path)
    assert torch.equal(torch.stack(g1.edges()), torch.stack(g2.edges()))


def test_dgl_dataset_missing_raw_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected"):
        load_dgl_dataset("cora", raw_dir=tmp_path)


# ---------------------------------------------------------------- shared npz files

@pytest.mark.parametrize("stem", sorted(NPZ_TABLE))
@needs_datasets
def test_shared_npz_loads(stem):
    nodes, und_edges, feats, classes = NPZ_TABLE[stem]
    path = ROOT / "npz" / f"{stem}.npz"
    heavy = stem in HEAVY_FEATURES
    g = load_npz(path, features="none" if heavy else "dense")
    assert (g.num_nodes(), g.num_edges()) == (nodes, 2 * und_edges)
    src, dst = g.edges()
    assert not bool((src == dst).any())
    if feats and not heavy:
        assert g.ndata["feat"].shape == (nodes, feats)
        assert g.ndata["feat"].dtype == torch.float32
    elif feats:
        a = load_npz_arrays(path)
        assert tuple(a["x_shape"]) == (nodes, feats) and "feat" not in g.ndata
    else:
        assert "feat" not in g.ndata
    if classes:
        y = g.ndata["label"]
        assert y.dtype == torch.int64
        assert y[y >= 0].unique().numel() == classes  # graphdata_flickr's labels are 1..9
    else:
        assert "label" not in g.ndata


@needs_datasets
def test_every_shared_npz_is_in_the_table():
    assert {p.stem for p in (ROOT / "npz").glob("*.npz")} == set(NPZ_TABLE)


@needs_datasets
def test_npz_splits_and_directed():
    cora = load_npz(ROOT / "npz" / "planetoid_cora.npz")
    assert _masks(cora) == [140, 500, 1000]
    tol = ROOT / "npz" / "hetero_tolokers.npz"
    m0, m9 = load_npz(tol, split=0), load_npz(tol, split=9)
    assert not torch.equal(m0.ndata["train_mask"], m9.ndata["train_mask"])
    with pytest.raises(ValueError, match=r"expected split in \[0, 10\) \(got 10\)"):
        load_npz(tol, split=10)
    g = load_npz(ROOT / "npz" / "snap_soc-Slashdot0902.npz", directed=True)
    assert g.num_nodes() == 82168 and 504230 <= g.num_edges() < 2 * 504230
    with pytest.raises(ValueError, match="dir_mask"):
        load_npz(ROOT / "npz" / "snap_email-Enron.npz", directed=True)


@needs_datasets
def test_load_dispatch_names():
    names = available()
    assert {"synthetic", "cora", "citeseer", "planetoid_cora"} <= set(names)
    assert load("amazon_cs", features="none").num_nodes() == 13752
    assert load("graphdata_amazon_cs", features="none").num_nodes() == 13752
    assert load("soc-Slashdot0902").num_nodes() == 82168
    assert load(str(ROOT / "npz" / "planetoid_cora.npz")).num_nodes() == 2708
    with pytest.raises(ValueError, match="amazon_cs"):  # "cs" is ambiguous
        load("cs")


def test_load_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as e:
        load("no_such_dataset")
    assert "expected" in str(e.value) and "synthetic" in str(e.value)


def test_load_paths(tmp_path):
    p = tmp_path / "edges.txt"
    p.write_text("0 1\n1 2\n")
    assert load(p).num_edges() == 2
    g = synthetic_graph(200, seed=3)
    npz = tmp_path / "g.npz"
    _write_npz(npz, **_csr_from_graph(g))
    h = load(str(npz))
    assert h.num_nodes() == 200 and h.num_edges() == g.num_edges()


# ---------------------------------------------------------------- npz errors

def _csr_from_graph(g):
    src, dst = (t.numpy() for t in g.edges())
    order = np.lexsort((dst, src))
    n = g.num_nodes()
    return dict(num_nodes=np.int64(n),
                adj_indptr=np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]),
                adj_indices=dst[order].astype(np.int32))


def _valid(**over):
    """A tiny valid npz dict: path 0-1-2-3, dense features, labels, one public split."""
    a = dict(num_nodes=np.int64(4),
             adj_indptr=np.array([0, 1, 3, 5, 6], dtype=np.int64),
             adj_indices=np.array([1, 0, 2, 1, 3, 2], dtype=np.int32),
             x=np.eye(4, 3, dtype=np.float32),
             y=np.array([0, 1, 1, -1], dtype=np.int64),
             train_idx=np.array([0, 1]), val_idx=np.array([2]), test_idx=np.array([3]))
    a.update(over)
    return {k: v for k, v in a.items() if v is not None}


def _write_npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_npz_tiny_valid(tmp_path):
    p = _write_npz(tmp_path / "ok.npz", **_valid())
    g = load_npz(p)
    assert g.num_edges() == 6 and _masks(g) == [2, 1, 1]
    assert g.ndata["label"].tolist() == [0, 1, 1, -1]
    assert "feat" not in load_npz(p, features="none").ndata
    # CSR features, x_data omitted -> all ones
    csr = dict(x=None, x_indptr=np.array([0, 1, 1, 2, 2]), x_indices=np.array([2, 0], np.int32),
               x_shape=np.array([4, 3]))
    g = load_npz(_write_npz(tmp_path / "csr.npz", **_valid(**csr)))
    assert g.ndata["feat"].tolist() == [[0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]]
    # directed: keep only arcs 0->1, 1->2, 2->3
    bits = np.packbits(np.array([1, 0, 1, 0, 1, 0], dtype=bool))
    g = load_npz(_write_npz(tmp_path / "dir.npz", **_valid(dir_mask=bits)), directed=True)
    assert [e.tolist() for e in g.edges()] == [[0, 1, 2], [1, 2, 3]]


BAD_NPZ = {
    "missing_key": dict(adj_indices=None),
    "indptr_length": dict(adj_indptr=np.array([0, 1, 3, 6], dtype=np.int64)),
    "indptr_non_monotone": dict(adj_indptr=np.array([0, 3, 1, 5, 6], dtype=np.int64)),
    "indptr_end": dict(adj_indptr=np.array([0, 1, 3, 5, 5], dtype=np.int64)),
    "indptr_dtype": dict(adj_indptr=np.array([0, 1, 3, 5, 6], dtype=np.float64)),
    "index_out_of_range": dict(adj_indices=np.array([1, 0, 2, 1, 4, 2], dtype=np.int32)),
    "feature_rows": dict(x=np.ones((3, 3), np.float32)),
    "csr_feature_rows": dict(x=None, x_indptr=np.array([0, 1, 2]), x_shape=np.array([2, 3]),
                             x_indices=np.array([0, 1], np.int32)),
    "label_length": dict(y=np.zeros(5, np.int64)),
    "split_index": dict(test_idx=np.array([7])),
}


@pytest.mark.parametrize("case", sorted(BAD_NPZ))
def test_npz_errors(tmp_path, case):
    p = _write_npz(tmp_path / f"{case}.npz", **_valid(**BAD_NPZ[case]))
    with pytest.raises(ValueError) as e:
        load_npz(p)
    assert str(p) in str(e.value) and "expected" in str(e.value)


def test_npz_missing_file(tmp_path):
    p = tmp_path / "absent.npz"
    with pytest.raises(FileNotFoundError) as e:
        load_npz(p)
    assert str(p) in str(e.value) and "expected" in str(e.value)


@pytest.mark.parametrize("content", [b"not a zip at all\n", b"\x93NUMPY fake npy", b""])
def test_npz_not_a_zip(tmp_path, content):
    p = tmp_path / "fake.npz"
    p.write_bytes(content)
    with pytest.raises(ValueError) as e:
        load_npz(p)
    assert str(p) in str(e.value) and "expected" in str(e.value)


def test_npz_bad_split_and_directed(tmp_path):
    p = _write_npz(tmp_path / "s.npz", **_valid())
    with pytest.raises(ValueError) as e:
        load_npz(p, split=1)
    assert str(p) in str(e.value) and "expected split in [0, 1) (got 1)" in str(e.value)
    masks = np.zeros((2, 4), bool)
    p = _write_npz(tmp_path / "m.npz", **_valid(train_idx=None, val_idx=None, test_idx=None,
                                                 train_masks=masks, val_masks=masks,
                                                 test_masks=masks))
    with pytest.raises(ValueError, match=r"expected split in \[0, 2\) \(got -1\)"):
        load_npz(p, split=-1)
    with pytest.raises(ValueError) as e:
        load_npz(p, directed=True)
    assert str(p) in str(e.value) and "expected" in str(e.value)


# ---------------------------------------------------------------- SNAP edge lists

def test_snap_edgelist(tmp_path):
    text = "# Directed graph\n# FromNodeId\tToNodeId\n10\t20\n20 30\n\n10 30\n30 10\n"
    p = tmp_path / "g.txt"
    p.write_text(text)
    g = load_snap_edgelist(p)
    assert g.num_nodes() == 3 and g.num_edges() == 4
    assert g.ndata["orig_id"].tolist() == [10, 20, 30]
    assert [e.tolist() for e in g.edges()] == [[0, 1, 0, 2], [1, 2, 2, 0]]
    u = load_snap_edgelist(p, directed=False)
    assert u.num_edges() == 6  # 3 unordered pairs, both ways
    assert load_snap_edgelist(p, relabel=False).num_nodes() == 31
    gz = tmp_path / "g.txt.gz"
    with gzip.open(gz, "wt") as f:
        f.write(text)
    assert load_snap_edgelist(gz).num_edges() == 4


@pytest.mark.parametrize("bad", ["1 2 3", "1 x", "7", "-1 2"])
def test_snap_bad_line(tmp_path, bad):
    p = tmp_path / "bad.txt"
    p.write_text(f"# c\n0 1\n{bad}\n")
    with pytest.raises(ValueError) as e:
        load_snap_edgelist(p)
    assert f"{p}:3" in str(e.value) and "expected" in str(e.value)


def test_snap_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected"):
        load_snap_edgelist(tmp_path / "nope.txt")


# ---------------------------------------------------------------- synthetic

def _graph_arrays(g):
    return [t.numpy() for t in g.edges()] + [g.ndata[k].numpy() for k in sorted(g.ndata)]


def test_synthetic_deterministic():
    a, b = synthetic_graph(seed=1), synthetic_graph(seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(_graph_arrays(a), _graph_arrays(b)))
    c = synthetic_graph(seed=2)
    assert not np.array_equal(a.ndata["feat"].numpy(), c.ndata["feat"].numpy())
    assert a.num_edges() != c.num_edges() or not torch.equal(a.edges()[0], c.edges()[0])
    assert load("default").num_edges() == synthetic_graph().num_edges()


@pytest.mark.parametrize("n", [20, 300, 3000, 20000])
def test_synthetic_structure(n):
    g = synthetic_graph(n, seed=n)
    src, dst = (t.numpy().astype(np.int64) for t in g.edges())
    assert not (src == dst).any()
    keys = src * n + dst
    assert len(np.unique(keys)) == len(keys)  # no duplicates
    assert np.array_equal(np.sort(keys), np.sort(dst * n + src))  # symmetric
    deg = g.in_degrees().float()
    assert deg.min() >= 1
    if n >= 3000:
        assert deg.max() > 10 * deg.mean()  # power-law hubs
        assert abs(deg.mean().item() - 8) < 0.5
    assert g.ndata["feat"].dtype == torch.float32 and g.ndata["feat"].shape == (n, 64)
    assert g.ndata["label"].dtype == torch.int64
    tr, va, te = (g.ndata[k] for k in ("train_mask", "val_mask", "test_mask"))
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    assert va.sum() > 0 and te.sum() > 0
    assert torch.bincount(g.ndata["label"][tr]).unique().numel() == 1  # equal per class
    if n >= 3000:
        assert _masks(g) == [100, 500, 1000]
    if n >= 300:  # tiny graphs saturate, leaving no room for homophily
        lab = g.ndata["label"].numpy()
        assert (lab[src] == lab[dst]).mean() > 0.7


class _GCN(nn.Module):
    def __init__(self, i, h, o):
        super().__init__()
        self.c1, self.c2 = dgl.nn.GraphConv(i, h), dgl.nn.GraphConv(h, o)

    def forward(self, g, x):
        return self.c2(g, F.dropout(F.relu(self.c1(g, F.dropout(x, 0.5, self.training))),
                                    0.5, self.training))


class _MLP(nn.Module):
    def __init__(self, i, h, o):
        super().__init__()
        self.l1, self.l2 = nn.Linear(i, h), nn.Linear(h, o)

    def forward(self, g, x):
        return self.l2(F.dropout(F.relu(self.l1(F.dropout(x, 0.5, self.training))),
                                 0.5, self.training))


def _test_accuracy(g, model_cls, epochs=100):
    torch.manual_seed(0)
    x, y = g.ndata["feat"], g.ndata["label"]
    tr, te = g.ndata["train_mask"], g.ndata["test_mask"]
    model = model_cls(x.shape[1], 32, int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        model.train()
        loss = F.cross_entropy(model(g, x)[tr], y[tr])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        return (model(g, x)[te].argmax(1) == y[te]).float().mean().item()


@pytest.mark.parametrize("seed", [0, 1])
def test_synthetic_learnable_gcn_beats_mlp(seed):
    g = dgl.add_self_loop(synthetic_graph(seed=seed))
    gcn, mlp = _test_accuracy(g, _GCN), _test_accuracy(g, _MLP)
    assert gcn > 0.7 and gcn > mlp + 0.2, (gcn, mlp)


def test_datasets_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DGL_ACCEL_DATASETS", str(tmp_path))
    assert datasets_root() == tmp_path
    assert available() == ["synthetic", "default"]  # empty root: only synthetic
    monkeypatch.delenv("DGL_ACCEL_DATASETS")
    root = datasets_root()
    assert root is None or root.is_dir()


def test_public_api():
    assert set(data.__all__) <= set(dir(data))
