"""Name -> loader dispatch: `load("cora")`, `load("amazon_cs")`, `load("x.npz")`, ..."""
from __future__ import annotations

import re
from pathlib import Path

import dgl

from .dgl_datasets import DGL_NAMES, find_raw_folder, load_dgl_dataset
from .npz import load_npz
from .paths import datasets_root
from .snap import load_snap_edgelist
from .synthetic import synthetic_graph

SYNTHETIC_NAMES = ("synthetic", "default")


def _npz_files() -> dict[str, Path]:
    root = datasets_root()
    d = root / "npz" if root is not None else None
    return {p.stem: p for p in sorted(d.glob("*.npz"))} if d is not None and d.is_dir() else {}


def _dgl_available() -> list[str]:
    out = []
    for name in DGL_NAMES:
        try:
            find_raw_folder(name)
            out.append(name)
        except FileNotFoundError:
            pass
    return out


def available() -> list[str]:
    """Names `load` accepts on this machine (synthetic always; the rest need the datasets).

    >>> available()[:2]
    ['synthetic', 'default']
    """
    return [*SYNTHETIC_NAMES, *_dgl_available(), *_npz_files()]


def _match_npz(name: str, files: dict[str, Path]) -> list[str]:
    """Stems equal to ``name`` or ending in it after a '_'/'-' (case-insensitive)."""
    key = name.lower()
    exact = [s for s in files if s.lower() == key]
    return exact or [s for s in files if re.search(r"[_-]" + re.escape(key) + "$", s.lower())]


def load(name_or_path, **kw) -> dgl.DGLGraph:
    """Load a graph by name or path; ``kw`` go to the underlying loader.

    "synthetic"/"default" -> synthetic_graph; "cora"/"citeseer" -> DGL's classes offline;
    an npz stem ("planetoid_cora") or unambiguous short form ("amazon_cs") -> the shared
    npz; a path ending in .npz -> load_npz; any other existing file -> load_snap_edgelist.

    >>> load("synthetic", num_nodes=100, seed=0).num_nodes()
    100
    >>> load("no-such-graph")
    Traceback (most recent call last):
    ...
    ValueError: expected a dataset name or an existing file (got 'no-such-graph'). Valid names here...
    """
    s = str(name_or_path)
    key = s.lower()
    if key in SYNTHETIC_NAMES:
        return synthetic_graph(**kw)
    if key in DGL_NAMES:
        return load_dgl_dataset(key, **kw)
    if s.endswith(".npz"):
        return load_npz(s, **kw)
    if Path(s).is_file():
        return load_snap_edgelist(s, **kw)
    files = _npz_files()
    hits = _match_npz(s, files)
    if len(hits) == 1:
        return load_npz(files[hits[0]], **kw)
    valid = available()
    if hits:
        raise ValueError(f"expected an unambiguous dataset name (got {s!r}, which matches "
                         f"{hits}). Use one of: {', '.join(valid)}.")
    where = "" if files else " (no shared datasets found: set DGL_ACCEL_DATASETS)"
    raise ValueError(f"expected a dataset name or an existing file (got {s!r}). "
                     f"Valid names here{where}: {', '.join(valid)}.")
