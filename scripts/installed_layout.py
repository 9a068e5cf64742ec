"""The package as a wheel installs it, for tools that read files rather than import them.

pyproject maps ``dgl_accel.kernels`` to the top-level ``kernels/`` folder (package-dir), so an
import graph built from ``dgl_accel/`` alone (grimp, import-linter) would miss the kernels and every
import of them.  ``build(dest)`` makes ``dest/dgl_accel/`` out of symlinks: one per entry of
``dgl_accel/`` plus one per package-dir mapping, so the view follows the working tree without a copy.

    python scripts/installed_layout.py DEST     # prints DEST; run tools with DEST as the directory
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "dgl_accel"


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Package name -> source folder, from pyproject's ``[tool.setuptools] package-dir``."""
    with open(root / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"].get("package-dir", {})
    dirs = {PACKAGE: root / PACKAGE}
    dirs.update({name: root / rel for name, rel in mapping.items()})
    return dirs


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the installed package -> its file in the working tree."""
    out: dict[str, Path] = {}
    dirs = package_dirs(root)
    for name, folder in sorted(dirs.items()):
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            # A folder mapped elsewhere (none today) belongs to its own mapping.
            if any(f"{name}.{'.'.join(rel.parts[:i])}" in dirs for i in range(1, len(rel.parts))):
                continue
            out[".".join([name, *parts])] = path
    return out


def build(dest, root: Path = ROOT) -> Path:
    """(Re)create ``dest/dgl_accel`` as the installed layout; returns ``dest``."""
    dest = Path(dest)
    top = dest / PACKAGE
    if top.exists() or top.is_symlink():
        shutil.rmtree(top)
    top.mkdir(parents=True)
    dirs = package_dirs(root)
    for entry in sorted(dirs[PACKAGE].iterdir()):
        if entry.name != "__pycache__":
            os.symlink(entry, top / entry.name)
    for name, folder in dirs.items():
        if name != PACKAGE:
            link = dest.joinpath(*name.split("."))
            if link.is_symlink():
                link.unlink()
            os.symlink(folder, link)
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/installed_layout.py DEST")
    print(build(sys.argv[1]))
