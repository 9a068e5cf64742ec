"""SNAP-style text edge lists ('# comment' lines, then 'src dst' per line; .gz ok)."""
from __future__ import annotations

import gzip
from pathlib import Path

import dgl
import numpy as np
import torch

from .errors import data_error


def _read_pairs(path: Path) -> tuple[np.ndarray, np.ndarray]:
    opener = gzip.open if path.suffix == ".gz" else open
    src, dst = [], []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.split()
                if not parts or parts[0].startswith("#"):
                    continue
                try:
                    if len(parts) != 2:
                        raise ValueError
                    a, b = int(parts[0]), int(parts[1])
                    if a < 0 or b < 0:
                        raise ValueError
                except ValueError:
                    raise data_error(f"{path}:{lineno}",
                                     "two non-negative integer node ids 'src dst'",
                                     repr(line.rstrip("\n")[:80]),
                                     "Fix or comment out the line with '#'.") from None
                src.append(a)
                dst.append(b)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
        raise data_error(path, "a text (or gzipped text) edge list",
                         f"{type(e).__name__}: {e}", "Pass a SNAP-style edge list.") from e
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


def load_snap_edgelist(path, directed: bool = True, relabel: bool = True) -> dgl.DGLGraph:
    """Edge list -> DGLGraph.

    relabel=True compacts the ids that occur to 0..n-1 and keeps the file's ids in
    ndata["orig_id"]; relabel=False uses the ids as node ids (n = max id + 1).
    directed=False returns the symmetrised simple graph (both directions, each pair once;
    self loops kept once); directed=True keeps the arcs exactly as listed.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "edges.txt"
    ...     _ = path.write_text("# a toy graph\\n10 20\\n20 30\\n")
    ...     g, both = load_snap_edgelist(path), load_snap_edgelist(path, directed=False)
    >>> g.num_nodes(), g.num_edges(), g.ndata["orig_id"].tolist(), both.num_edges()
    (3, 2, [10, 20, 30], 4)
    """
    path = Path(path)
    if not path.is_file():
        raise data_error(path, "an existing edge-list file", "no such file",
                         "Check the path.", FileNotFoundError)
    src, dst = _read_pairs(path)
    orig = None
    if relabel:
        orig, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
        src, dst = inv[: len(src)], inv[len(src):]
        n = len(orig)
    else:
        n = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    if not directed:
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        pairs = np.unique(lo * n + hi)  # one key per unordered pair
        lo, hi = pairs // n, pairs % n
        loop = lo == hi
        src = np.concatenate([lo, hi[~loop]])
        dst = np.concatenate([hi, lo[~loop]])
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    if orig is not None:
        g.ndata["orig_id"] = torch.from_numpy(orig)
    return g
