"""Run one DGL example file unchanged in this process, after seeding and (``--provider ours``)
substituting dgl-accel's samplers and walks into ``dgl.dataloading`` / ``dgl.sampling`` and its
drop-in layers into ``dgl.nn``.

    python launch.py --provider ours --seed 0 -- upstream/node2vec/main.py --dataset cora --epochs 5

run.py calls it in a subprocess with the environment around the example set up (the ogb shim on
PYTHONPATH, DGL's download dir pointing at a copy of the shared raw datasets).  The example runs
as ``__main__`` with its own folder first on ``sys.path`` (as ``python main.py`` would), and
after it a ``DGL_EXAMPLES_BINDINGS`` JSON line says where the substituted names the example's
modules hold come from, and the classes of the substituted layers inside the example's models,
which proves the swap (or its absence on plain DGL); with ours a ``DGL_EXAMPLES_STATS`` line
holds ``dgl_accel.stats()`` (which paths ran, e.g. the fused attention).
"""
from __future__ import annotations

import argparse
import importlib
import json
import random
import runpy
import sys
from pathlib import Path

import dgl
import dgl.dataloading
import dgl.nn
import dgl.sampling
import numpy as np
import torch

# name -> (the DGL module whose attribute is replaced, our module holding the replacement), as
# scripts/dgl_suite/conftest.py does; ours are named by module path so plain-DGL runs never import us
SUBSTITUTED = {
    "NeighborSampler": (dgl.dataloading, "dgl_accel.sampling"),
    "MultiLayerNeighborSampler": (dgl.dataloading, "dgl_accel.sampling"),
    "MultiLayerFullNeighborSampler": (dgl.dataloading, "dgl_accel.sampling"),
    "SAINTSampler": (dgl.dataloading, "dgl_accel.sampling"),
    "random_walk": (dgl.sampling, "dgl_accel.sampling"),
    "node2vec_random_walk": (dgl.sampling, "dgl_accel.sampling"),
    "GATConv": (dgl.nn, "dgl_accel.nn"),  # examples call dglnn.GATConv(...): an attribute, not a name
}


def seed_everything(seed: int) -> None:
    """The examples set no seed themselves: seed every RNG they (and the samplers) draw from."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)


def substitute() -> None:
    for name, (module, ours) in SUBSTITUTED.items():
        # dgl_accel is imported only when substituting, so plain-DGL runs never load it here
        setattr(module, name, getattr(importlib.import_module(ours), name))


def bindings(main_globals: dict, example_dir: Path) -> dict[str, list[str]]:
    """Substituted name -> sorted set of '<module of the object>' over the example's modules."""
    spaces = [main_globals]
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and Path(f).resolve().parent == example_dir:
            spaces.append(vars(mod))
    out: dict[str, set[str]] = {}
    for space in spaces:
        for name in SUBSTITUTED:
            if name in space:
                out.setdefault(name, set()).add(getattr(space[name], "__module__", "?"))
        for value in space.values():  # layers built through an attribute (dglnn.GATConv): their classes
            if isinstance(value, torch.nn.Module):
                for module in value.modules():
                    if type(module).__name__ in SUBSTITUTED:
                        out.setdefault(type(module).__name__, set()).add(type(module).__module__)
    return {k: sorted(v) for k, v in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--provider", choices=("dgl", "ours"), required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("example", help="path of the example's script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the example (after --)")
    a = p.parse_args(argv)
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    example = Path(a.example).resolve()
    seed_everything(a.seed)
    if a.provider == "ours":
        substitute()
    sys.argv = [str(example), *args]
    sys.path.insert(0, str(example.parent))
    main_globals = runpy.run_path(str(example), run_name="__main__")
    print("DGL_EXAMPLES_BINDINGS " + json.dumps(bindings(main_globals, example.parent)), flush=True)
    if a.provider == "ours":
        print("DGL_EXAMPLES_STATS " + json.dumps(importlib.import_module("dgl_accel").stats()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
