"""Where the shared (read-only) dataset folder lives."""
from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "DGL_ACCEL_DATASETS"


def datasets_root() -> Path | None:
    """``$DGL_ACCEL_DATASETS`` if set, else ``<repo>/../shared/datasets`` if it exists, else None.

    The folder is treated as read-only: loaders copy what they must write next to.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    # <repo>/dgl_accel/data/paths.py -> <repo>
    repo = Path(__file__).resolve().parents[2]
    shared = repo.parent / "shared" / "datasets"
    return shared if shared.is_dir() else None
