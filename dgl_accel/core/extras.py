"""The optional dependencies of the adapters, named by the pip extra that brings each.

``pip install dgl-accel`` brings what the DGL-free core needs (torch, numpy, scipy, numba);
``dgl-accel[dgl]`` adds DGL for the DGL adapter (``dgl_accel.nn``, ``swap``, ``enable()``, the
samplers for ``dgl.dataloading``), ``dgl-accel[pyg]`` adds torch-geometric for ``dgl_accel.pyg``.
Each adapter package calls :func:`require` first, so importing it without its peer library raises
an ImportError that names the extra instead of a bare ``No module named 'dgl'`` from deep inside.
"""
from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "missing_extra", "require"]

# top-level module -> (pip extra, what it is)
EXTRAS = {"dgl": ("dgl", "DGL"), "torch_geometric": ("pyg", "PyTorch Geometric")}


def require(module: str, needed_by: str):
    """Import ``module`` (a key of :data:`EXTRAS`) for ``needed_by`` (the adapter's name), or raise an
    ImportError saying which extra installs it.

    >>> require("importlib", "doctest").__name__  # any importable module comes back
    'importlib'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        raise missing_extra(error, needed_by) from error


def missing_extra(error: ModuleNotFoundError, needed_by: str) -> Exception:
    """The ImportError to raise for ``error`` (an import of a peer library that failed) in
    ``needed_by``: it names the extra that installs the library.  ``error`` itself where the missing
    module is not a peer library (a broken install inside it is not ours to rename).

    >>> str(missing_extra(ModuleNotFoundError("No module named 'dgl'", name="dgl"), "dgl_accel.nn"))[:60]
    "dgl_accel.nn needs DGL (the 'dgl' module), which is not inst"
    """
    module = error.name
    if module not in EXTRAS:
        return error
    extra, library = EXTRAS[module]
    others = "the PyG adapter (dgl_accel.pyg)" if extra == "dgl" else "the DGL adapter (dgl_accel.nn, swap, enable())"
    return ImportError(
        f"{needed_by} needs {library} (the '{module}' module), which is not installed. "
        f"Fix: pip install 'dgl-accel[{extra}]'. The DGL-free core (dgl_accel.core) and {others} work without it.",
        name=module)
