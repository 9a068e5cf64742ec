"""Loader for the shared pickle-free npz layout (see <datasets>/README.md)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import dgl
import numpy as np
import torch

from .errors import data_error

_REQUIRED = ("num_nodes", "adj_indptr", "adj_indices")
_SPLITS = ("train", "val", "test")
_FIX = "Re-export the file in the layout described in <datasets>/README.md."


def _check_csr(path, name, indptr, indices, n_rows, n_cols):
    """Validate one CSR pair; ``name`` prefixes the keys in messages."""
    if indptr.ndim != 1 or indptr.dtype.kind not in "iu":
        raise data_error(path, f"'{name}_indptr' to be a 1-D integer array",
                         f"{indptr.dtype} of shape {indptr.shape}", _FIX)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise data_error(path, f"'{name}_indices' to be a 1-D integer array",
                         f"{indices.dtype} of shape {indices.shape}", _FIX)
    if len(indptr) != n_rows + 1:
        raise data_error(path, f"len({name}_indptr) == num rows + 1 == {n_rows + 1}",
                         f"{len(indptr)}", _FIX)
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise data_error(path, f"'{name}_indptr' to start at 0 and never decrease",
                         "a non-monotone indptr", _FIX)
    if indptr[-1] != len(indices):
        raise data_error(path, f"{name}_indptr[-1] == len({name}_indices) == {len(indices)}",
                         f"{int(indptr[-1])}", _FIX)
    if len(indices) and (indices.min() < 0 or indices.max() >= n_cols):
        raise data_error(path, f"'{name}_indices' in [0, {n_cols})",
                         f"values in [{int(indices.min())}, {int(indices.max())}]", _FIX)


def load_npz_arrays(path) -> dict[str, np.ndarray]:
    """Read and validate every array of an npz dataset; returns a plain dict.

    Use this for CSR features (``x_indptr``/``x_indices``/``x_shape``/``x_data``), which
    a DGLGraph cannot hold as node data.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "toy.npz"
    ...     np.savez(path, num_nodes=np.int64(2), adj_indptr=np.array([0, 1]), adj_indices=np.array([1]))
    ...     load_npz_arrays(path)
    Traceback (most recent call last):
    ...
    ValueError: .../toy.npz: expected len(adj_indptr) == num rows + 1 == 3 (got 2). Re-export the file ...
    """
    path = Path(path)
    if not path.is_file():
        raise data_error(path, "an existing .npz dataset file", "no such file",
                         "Check the path, or set DGL_ACCEL_DATASETS.", FileNotFoundError)
    if not zipfile.is_zipfile(path):  # np.load would fall back to pickle or .npy here
        raise data_error(path, "an .npz (zip) archive", "a file that is not a zip archive",
                         "Pass a file written by numpy.savez/savez_compressed.")
    try:
        with np.load(path, allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise data_error(path, "a readable pickle-free .npz", f"{type(e).__name__}: {e}",
                         _FIX) from e

    for k in _REQUIRED:
        if k not in a:
            raise data_error(path, f"key '{k}'", f"keys {sorted(a)}", _FIX)
    nn = a["num_nodes"]
    if nn.shape != () or nn.dtype.kind not in "iu" or nn < 0:
        raise data_error(path, "'num_nodes' to be a non-negative integer scalar",
                         f"{nn.dtype} of shape {nn.shape}", _FIX)
    n = int(nn)
    _check_csr(path, "adj", a["adj_indptr"], a["adj_indices"], n, n)
    nnz = len(a["adj_indices"])

    if "dir_mask" in a:
        dm = a["dir_mask"]
        if dm.dtype != np.uint8 or dm.shape != ((nnz + 7) // 8,):
            raise data_error(path, f"'dir_mask' to be uint8 packed bits of shape ({(nnz + 7) // 8},)",
                             f"{dm.dtype} of shape {dm.shape}", _FIX)

    if "x" in a:
        x = a["x"]
        if x.ndim != 2 or x.dtype.kind not in "fiub" or x.shape[0] != n:
            raise data_error(path, f"'x' to be a numeric [num_nodes={n}, F] array",
                             f"{x.dtype} of shape {x.shape}", _FIX)
    elif "x_indptr" in a:
        for k in ("x_indices", "x_shape"):
            if k not in a:
                raise data_error(path, f"key '{k}' next to 'x_indptr'", f"keys {sorted(a)}", _FIX)
        shp = a["x_shape"]
        if shp.shape != (2,) or shp.dtype.kind not in "iu":
            raise data_error(path, "'x_shape' to be 2 integers", f"{shp.dtype} {shp.shape}", _FIX)
        if int(shp[0]) != n:
            raise data_error(path, f"feature rows x_shape[0] == num_nodes == {n}",
                             f"{int(shp[0])}", _FIX)
        _check_csr(path, "x", a["x_indptr"], a["x_indices"], n, int(shp[1]))
        if "x_data" in a and a["x_data"].shape != a["x_indices"].shape:
            raise data_error(path, f"'x_data' of shape {a['x_indices'].shape}",
                             f"{a['x_data'].shape}", _FIX)

    if "y" in a:
        y = a["y"]
        if y.ndim != 1 or y.dtype.kind not in "iu" or len(y) != n:
            raise data_error(path, f"'y' to be 1-D integer labels of length num_nodes == {n}",
                             f"{y.dtype} of shape {y.shape}", _FIX)

    for s in _SPLITS:
        if f"{s}_idx" in a:
            idx = a[f"{s}_idx"]
            if idx.ndim != 1 or idx.dtype.kind not in "iu" or (
                    len(idx) and (idx.min() < 0 or idx.max() >= n)):
                raise data_error(path, f"'{s}_idx' to be 1-D integer ids in [0, {n})",
                                 f"{idx.dtype} of shape {idx.shape}", _FIX)
        if f"{s}_masks" in a:
            m = a[f"{s}_masks"]
            if m.dtype != np.bool_ or m.ndim != 2 or m.shape[1] != n:
                raise data_error(path, f"'{s}_masks' to be bool [S, num_nodes={n}]",
                                 f"{m.dtype} of shape {m.shape}", _FIX)
    return a


def dense_features(a: dict) -> np.ndarray | None:
    """Features of a validated array dict as dense float32 [N, F], or None if absent.

    >>> dense_features({"x_indptr": np.array([0, 1, 1]), "x_indices": np.array([2]), "x_shape": np.array([2, 3])})
    array([[0., 0., 1.],
           [0., 0., 0.]], dtype=float32)
    """
    if "x" in a:
        return np.ascontiguousarray(a["x"], dtype=np.float32)
    if "x_indptr" not in a:
        return None
    n, f = (int(v) for v in a["x_shape"])
    out = np.zeros((n, f), dtype=np.float32)
    rows = np.repeat(np.arange(n), np.diff(a["x_indptr"]))
    out[rows, a["x_indices"]] = a["x_data"] if "x_data" in a else 1.0
    return out


def _split_masks(path, a, n, split):
    """Bool masks for the chosen split, or {} when the file carries none."""
    if "train_masks" in a:
        num = a["train_masks"].shape[0]
    elif "train_idx" in a:
        num = 1
    else:
        num = 0
    ok = 0 <= split < num if num else split == 0  # split=0 is fine for split-less files
    if not ok:
        raise data_error(path, f"split in [0, {num})", f"{split}",
                         f"This file has {num} split(s).")
    out = {}
    for s in _SPLITS:
        if f"{s}_masks" in a:
            out[f"{s}_mask"] = torch.from_numpy(a[f"{s}_masks"][split].copy())
        elif f"{s}_idx" in a:
            m = torch.zeros(n, dtype=torch.bool)
            m[torch.from_numpy(a[f"{s}_idx"].astype(np.int64))] = True
            out[f"{s}_mask"] = m
    return out


def load_npz(path, directed: bool = False, split: int = 0,
             features: str = "dense") -> dgl.DGLGraph:
    """Build a DGLGraph from an npz dataset.

    directed=False: both directions of every symmetrised edge.
    directed=True: only the arcs of the original directed graph (needs ``dir_mask``).
    features: "dense" -> ndata["feat"] float32 when the file has features; "none" skips
    them (use ``load_npz_arrays`` to get CSR features without densifying).
    Labels go to ndata["label"] (-1 = unknown); splits to train/val/test_mask.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:  # a path 0 - 1 - 2, both directions stored
    ...     path = pathlib.Path(d) / "toy.npz"
    ...     np.savez(path, num_nodes=np.int64(3), adj_indptr=np.array([0, 1, 3, 4]),
    ...              adj_indices=np.array([1, 0, 2, 1]), y=np.array([0, 1, 0]), train_idx=np.array([0]))
    ...     g = load_npz(path)
    >>> g.num_edges(), g.ndata["label"].tolist(), g.ndata["train_mask"].tolist()
    (4, [0, 1, 0], [True, False, False])
    """
    if features not in ("dense", "none"):
        raise ValueError(f"expected features in ('dense', 'none') (got {features!r}).")
    a = load_npz_arrays(path)
    n = int(a["num_nodes"])
    indptr, indices = a["adj_indptr"], a["adj_indices"]
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dst = indices.astype(np.int64)
    if directed:
        if "dir_mask" not in a:
            raise data_error(path, "key 'dir_mask' for directed=True",
                             "an undirected-only file", "Load it with directed=False.")
        keep = np.unpackbits(a["dir_mask"], count=len(indices)).astype(bool)
        src, dst = src[keep], dst[keep]
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    masks = _split_masks(path, a, n, split)  # validate split before densifying features
    if features == "dense":
        x = dense_features(a)
        if x is not None:
            g.ndata["feat"] = torch.from_numpy(x)
    if "y" in a:
        g.ndata["label"] = torch.from_numpy(a["y"].astype(np.int64))
    g.ndata.update(masks)
    return g
