"""Family ``neighbor``: in-neighbour sampling on a CSR view, DGL's blocks, PyG's hops, k-hop samples.

Kernels ``kernels/sampling.py`` -> here -> compiled twin ``core/jit/neighbor.py``; adapters
``sampling/neighbor.py`` (``NeighborSampler``), ``sampling/neighbor_hetero.py``, ``sampling/khop.py``
and ``pyg/sampler.py``; tests ``tests/core/sampling/test_neighbor.py``, ``tests/sampling/test_neighbor.py``;
bench ``bench/sampling_neighbor.py``.

* ``choice.py``           the neighbour choice: the specification the kernels reproduce, CPU twin.
* ``choice_device.py``    the weighted choice of ``choice.py`` on the CSR's device (torch ops).
* ``engine.py``           the transit-parallel engine (NextDoor): transits grouped and classed by work.
* ``launchers.py``        Triton launchers of the neighbour-choice kernels.
* ``sample.py``           the entry points: one layer (COO) and relabelled layers (blocks), path choice.
* ``sample_device.py``    ``sample.py``'s layers on the CSR's device (the Triton path).
* ``relations.py``        a heterograph's relations as one stacked CSR: one choice for all of them.
* ``relations_device.py`` ``relations.py``'s typed layers on the device.
* ``hops.py``             hop-by-hop sampling in PyG's layout (``dgl_accel.pyg.NeighborSampler``), and
                          the induced subgraph of the sampled nodes (PyG's ``subgraph_type="induced"``).
* ``khop.py``             k-hop samples per seed (NextDoor's k-hop application).

The entry points load on first use (PEP 562), from here as from ``sample.py``
(``from dgl_accel.core.sampling.neighbor import sample_layers``): this ``__init__`` imports nothing
else, so importing one file never loads the rest.
"""
import importlib as _importlib

_ENTRY = ("sample_neighbors", "sample_layers")  # sample.py's, the names the docs show here


def __getattr__(name):
    if name in _ENTRY:
        return getattr(_importlib.import_module(".sample", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ENTRY))
