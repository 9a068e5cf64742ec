"""DGL's own Cora/Citeseer classes, loaded offline from the shared raw folders."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import dgl

from .errors import data_error
from .paths import datasets_root

# name -> (DGL class, prefix of DGL's raw folder; the suffix is DGL's URL hash)
_CLASSES = {
    "cora": (dgl.data.CoraGraphDataset, "cora_v2_"),
    "citeseer": (dgl.data.CiteseerGraphDataset, "citeseer_"),
}
DGL_NAMES = tuple(_CLASSES)


def _offline(cls):
    """Subclass whose download() fails loudly instead of reaching the network."""

    class Offline(cls):
        def download(self):
            raise data_error(self.raw_path, "DGL's raw dataset folder", "nothing there",
                             "Copy it from <datasets>/dgl/ (keep the folder name).",
                             FileNotFoundError)

    Offline.__name__ = cls.__name__
    return Offline


def find_raw_folder(name: str, raw_dir=None) -> Path:
    """The shared raw folder for ``name`` (e.g. ``.../dgl/cora_v2_d697a464``)."""
    key = name.lower()
    if key not in _CLASSES:
        raise ValueError(f"expected one of {sorted(_CLASSES)} (got {name!r}).")
    if raw_dir is None:
        root = datasets_root()
        if root is None:
            raise data_error("<datasets>/dgl", "a shared dataset folder", "none found",
                             "Set DGL_ACCEL_DATASETS or pass raw_dir.", FileNotFoundError)
        raw_dir = root / "dgl"
    raw_dir = Path(raw_dir)
    prefix = _CLASSES[key][1]
    hits = sorted(p for p in raw_dir.glob(prefix + "*") if p.is_dir()) if raw_dir.is_dir() else []
    if len(hits) != 1:
        raise data_error(raw_dir, f"exactly one folder '{prefix}<hash>'", f"{len(hits)}",
                         "Point raw_dir at the folder holding DGL's raw datasets.",
                         FileNotFoundError)
    return hits[0]


def load_dgl_dataset(name: str, raw_dir=None, save_dir=None) -> dgl.DGLGraph:
    """Load DGL's ``CoraGraphDataset``/``CiteseerGraphDataset`` without any download.

    DGL writes its processed cache into ``raw_dir``, so the raw folder is copied into
    ``save_dir`` (kept, reused as a cache next time) or a temporary dir (removed after).
    """
    src = find_raw_folder(name, raw_dir)
    cls = _offline(_CLASSES[name.lower()][0])
    tmp = None
    if save_dir is None:
        tmp = tempfile.mkdtemp(prefix="dgl_accel_")
        work = Path(tmp)
    else:
        work = Path(save_dir)
        work.mkdir(parents=True, exist_ok=True)
    try:
        dst = work / src.name  # keep the name: DGL finds the folder by its URL hash
        if not dst.exists():
            shutil.copytree(src, dst)
            for p in [dst, *dst.rglob("*")]:  # shared copies are read-only; DGL writes here
                p.chmod(p.stat().st_mode | 0o200)
        ds = cls(raw_dir=str(work), verbose=False)
        return ds[0]
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
