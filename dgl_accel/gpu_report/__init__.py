"""``python -m dgl_accel.gpu_report``: one DGL-free command that measures every kernel on a GPU.

Modules, one job each: ``cli`` (arguments, the run, the summary), ``env`` (device and versions,
result rows), ``timing`` (events / wall clock, copy bandwidth), ``graphs`` (shared npz graphs and
their staging), ``rmat`` (Graph500 R-MAT on the device), ``coverage`` (which registered kernel
specialisations ran), ``correctness``, ``aggregation``, ``peers``, ``sampling``, ``exec_paths``
(the report's sections), ``table`` (markdown) and ``roofline`` (the plot).  The how-to is in
``cli``'s docstring.  This ``__init__`` imports nothing.
"""
