"""The optional dependencies of the adapters, named by the pip extra that brings each.

``pip install dgl-accel`` brings what the DGL-free core needs (torch, numpy, scipy, numba);
``dgl-accel[dgl]`` adds DGL for the DGL adapter (``dgl_accel.nn``, ``swap``, ``enable()``, the
samplers for ``dgl.dataloading``), ``dgl-accel[pyg]`` adds torch-geometric for ``dgl_accel.pyg``.
Each adapter entry imports its peer library first and turns a failure into :func:`missing_extra`'s
ImportError, which names the extra, instead of a bare ``No module named 'dgl'`` from deep inside.
"""
from __future__ import annotations

__all__ = ["EXTRAS", "missing_extra"]

# top-level module -> (pip extra, what it is)
EXTRAS = {"dgl": ("dgl", "DGL"), "torch_geometric": ("pyg", "PyTorch Geometric")}


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
