"""Family ``saint``: GraphSAINT's node sets, their normalisation and the frontier sampler.

Kernels ``kernels/saint_frontier.py`` (the frontier) -> here -> compiled twin ``core/jit/saint.py``
(the draws' uniforms); adapters ``sampling/saint.py`` (``SAINTSampler``) and ``sampling/frontier.py``;
tests ``tests/core/sampling/test_saint_device.py``, ``tests/core/sampling/test_saint_frontier.py``,
``tests/sampling/test_saint.py``, ``tests/sampling/test_frontier.py``; bench ``bench/saint_samplers.py``,
``bench/saint_frontier.py``.  The subgraph a node set induces is family ``induced``'s.

* ``draw.py``          node / edge / random-walk node sets from tables built once per graph.
* ``draw_device.py``   ``draw.py``'s sets on the graph's device, and the pre-sampling counts.
* ``norm.py``          the normalisation coefficients (exact for node / edge draws, counted otherwise).
* ``frontier.py``      the frontier sampler's entry points and path choice.
* ``frontier_cpu.py``  its CPU twin (numpy, vectorised over instances and one per instance).
* ``launchers.py``     Triton launcher of the frontier kernel.

This ``__init__`` imports nothing, so importing one file never loads the rest.
"""
