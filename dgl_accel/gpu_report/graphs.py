"""The graphs of the report: the shared npz graphs (staged into an ignored folder that the device
call carries) and R-MAT graphs generated on the device.

Staging (on the machine that has ``../shared/datasets``; never writes there)::

    python -m dgl_accel.gpu_report.graphs stage            # -> data/gpu/*.npz

keeps ``num_nodes``, ``adj_indptr`` and ``adj_indices`` of every shared npz graph (the report draws
random features of each width), and the features and labels of the labelled graph with the most
nodes (:data:`LABELLED`: the training section's accuracy runs on it), about 14 MB together.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch

from .rmat import rmat_graph

ROOT = Path(__file__).resolve().parents[2]
STAGED = ROOT / "data" / "gpu"
SHARED = ROOT.parent / "shared" / "datasets" / "npz"
KEYS = ("num_nodes", "adj_indptr", "adj_indices")
LABELLED = "graphdata_coauthor_cs"  # the labelled graph with features of the most nodes (18,333)
FEATURE_KEYS = ("x", "x_indptr", "x_indices", "x_shape", "x_data", "y")


@dataclasses.dataclass
class Graph:
    """An edge list on the report's device: ``src[e] -> dst[e]``, ``num_nodes`` vertices."""

    name: str
    kind: str  # "shared" or "rmat"
    src: torch.Tensor
    dst: torch.Tensor
    num_nodes: int
    cache: dict = dataclasses.field(default_factory=dict, repr=False)  # views built from it, by name

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    def in_csr(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(indptr int64, indices int64) with one row per destination, sorted by (dst, src)."""
        key = self.dst * self.num_nodes + self.src
        order = torch.argsort(key)
        counts = torch.bincount(self.dst, minlength=self.num_nodes)
        indptr = torch.zeros(self.num_nodes + 1, dtype=torch.int64, device=self.src.device)
        torch.cumsum(counts, 0, out=indptr[1:])
        return indptr, self.src[order]


def load_npz(path: Path, device) -> Graph:
    """A shared-layout npz (symmetrised CSR adjacency) as a :class:`Graph` on ``device``."""
    with np.load(path) as z:
        n = int(z["num_nodes"])
        indptr = torch.from_numpy(z["adj_indptr"].astype(np.int64))
        indices = torch.from_numpy(z["adj_indices"].astype(np.int64))
    rows = torch.repeat_interleave(torch.arange(n, dtype=torch.int64), indptr[1:] - indptr[:-1])
    # adjacency row -> column; the graph is symmetric, so columns send to rows
    return Graph(path.stem, "shared", indices.to(device), rows.to(device), n)


def save_npz(path: Path, g: Graph, **extra: np.ndarray) -> None:
    """``g`` in the shared layout (adjacency CSR, plus ``extra`` arrays such as ``x`` and ``y``), e.g.
    for the tiny run's loader path."""
    indptr, indices = g.in_csr()
    np.savez_compressed(path, num_nodes=np.int64(g.num_nodes), adj_indptr=indptr.cpu().numpy(),
                        adj_indices=indices.cpu().numpy().astype(np.int32), **extra)


def shared_paths(data: Path | None) -> list[Path]:
    """The npz graphs to use, largest (by file size) first: ``data`` if given and present, else the
    staged folder, else the shared datasets beside the checkout; [] where none exists."""
    folder = _folder(data)
    return [] if folder is None else sorted(folder.glob("*.npz"), key=lambda p: -_adjacency_entries(p))


def _folder(data: Path | None) -> Path | None:
    """``data`` if given and holding npz graphs, else the staged folder, else the shared datasets."""
    for folder in ([data] if data is not None else []) + [STAGED, SHARED]:
        if folder is not None and folder.is_dir() and any(folder.glob("*.npz")):
            return folder
    return None


def _adjacency_entries(path: Path) -> int:
    with np.load(path) as z:
        return int(z["adj_indices"].size)


def labelled_path(data: Path | None) -> Path | None:
    """The staged (or shared) :data:`LABELLED` graph, if it has its features and labels."""
    folder = _folder(data)
    p = None if folder is None else folder / f"{LABELLED}.npz"
    if p is None or not p.is_file():
        return None
    with np.load(p) as z:
        return p if "y" in z.files and ("x" in z.files or "x_indptr" in z.files) else None


def rmat(scale: int, device, seed: int = 0) -> Graph:
    src, dst, n = rmat_graph(scale, seed=seed, device=device)
    return Graph(f"rmat{scale}", "rmat", src, dst, n)


def rmat_directed(scale: int, edge_factor: int, seed: int, device) -> Graph:
    """An unsymmetrised R-MAT graph (``rmat{scale}d{edge_factor}s{seed}``): in- and out-degrees differ,
    so the backward's transposed view is not the forward's."""
    src, dst, n = rmat_graph(scale, edge_factor, seed=seed, device=device, directed=True)
    return Graph(f"rmat{scale}d{edge_factor}s{seed}", "rmat", src, dst, n)


def hub_graph(num_nodes: int, hub_degree: int, extra_edges: int, device, seed: int = 0) -> Graph:
    """Random edges plus node 0 receiving ``hub_degree`` (> 1,024) distinct in-neighbours and node 1
    sending to as many: hub rows split into many neighbour groups in both directions."""
    gen = torch.Generator().manual_seed(seed)
    others = torch.randperm(num_nodes - 2, generator=gen)[:hub_degree] + 2
    src = torch.cat([others, torch.ones_like(others), torch.randint(num_nodes, (extra_edges,), generator=gen)])
    dst = torch.cat([torch.zeros_like(others), others, torch.randint(num_nodes, (extra_edges,), generator=gen)])
    return Graph(f"hub{hub_degree}", "synthetic", src.to(device), dst.to(device), num_nodes)


def stage(dest: Path = STAGED, source: Path = SHARED) -> list[Path]:
    """Copy the adjacency of every shared npz graph into ``dest`` (which .gitignore ignores)."""
    if not source.is_dir():
        raise FileNotFoundError(f"expected the shared datasets at {source} (not found). Fix: pass --source DIR.")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source.glob("*.npz")):
        with np.load(path) as z:
            keep = KEYS + (FEATURE_KEYS if path.stem == LABELLED else ())
            arrays = {k: z[k] for k in keep if k in z.files}
        out = dest / path.name
        np.savez_compressed(out, **arrays)
        written.append(out)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dgl_accel.gpu_report.graphs")
    parser.add_argument("command", choices=["stage"])
    parser.add_argument("--source", type=Path, default=SHARED)
    parser.add_argument("--dest", type=Path, default=STAGED)
    args = parser.parse_args(argv)
    written = stage(args.dest, args.source)
    total = sum(p.stat().st_size for p in written)
    print(f"staged {len(written)} graphs into {args.dest} ({total / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
