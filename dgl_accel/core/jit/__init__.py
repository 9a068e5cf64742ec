"""Compiled CPU loops (numba), one place for all of them, bit-identical to the numpy / torch code
they replace (tests compare them on hypothesis inputs).

numba is an accelerator, not a dependency: it is imported only by :mod:`.runtime`, behind an
optional-import guard; without it, or with ``DGL_ACCEL_NUMBA=0``, ``runtime.enabled()`` is False
and every caller runs its numpy path.  Loops compile on first use (about a second each) and are
cached on disk next to their module.

Modules, by job:

* ``runtime``       numba availability (``AVAILABLE``, ``enabled()``, ``worth(work)``, ``MIN_WORK``),
                    ``parallel_allowed()`` (DataLoader workers run the serial twins), ``twins``,
                    and the in-register Philox4x32-10 (``philox``) every sampling loop uses;
* ``aggregation``   ``rows_spmm``, ``scatter_rows`` (execution paths of the aggregation ops);
* ``extrema``       max/min aggregation with its arg, one pass per CSR row (:mod:`dgl_accel.core.extrema`);
* ``edge_softmax``  the edge softmax, forward and backward (:mod:`dgl_accel.core.attention.edge_softmax_paths`);
* ``gat``, ``gatv2``, ``dot``  the fused attention ops, forward and backward, one pass per CSR row
                    (their ``core/attention/<op>_paths.py`` call them); ``attention_common`` their shared pieces;
* ``sddmm``         gsddmm's per-edge op in one pass over the edges (:mod:`dgl_accel.core.sddmm.native`);
* ``neighbor``      uniform neighbour choice and block relabelling (family ``neighbor``);
* ``induced``       node-induced subgraph filters (GraphSAINT subgraphs);
* ``walks``         node2vec walks (family ``walks``);
* ``bulk_sampling`` bulk ITS sampling and per-minibatch extraction (family ``bulk``: ``core/sampling/bulk/``).

This ``__init__`` imports nothing (importing one loop module never compiles the others).
"""
