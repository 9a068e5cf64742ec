"""Execution paths (a policy): partially-active aggregation for full-graph training on a fixed
training set.

Xu et al., "Accelerating backward aggregation in GCN training with execution path preparing".
With training nodes Vt, define frontiers N^0 = Vt and N^k = N^{k-1} + in-neighbours(N^{k-1})
over exactly the graph the layers aggregate on.  If L aggregations run in a training step and
everything between them is row-wise (linear layers, activations, dropout, bias, residuals), the
gradient reaching the output of the i-th aggregation is zero outside N^{L-i}.  So its backward
only needs the execution-path subgraph SG_{L-i}: the in-edges of N^{L-i} (their sources lie in
N^{L-i+1}).  Skipping the other edges drops only exact zeros: gradients are unchanged.

Beyond the paper, ``restrict_forward=True`` also computes each aggregation's output only on the
rows the loss can reach (N^{L-i}; other rows are 0), once L is known (``num_layers=`` or learned
from the first step).  Then only the final-layer rows of Vt are meaningful inside the block.

    with dgl_accel.execution_paths(g, train_idx):
        loss = F.cross_entropy(model(g, x)[train_idx], y[train_idx])
        loss.backward()

Frontiers and subgraphs are built once per (graph version, Vt) and cached on the graph; a graph
mutated in place is detected and the paths rebuilt.  Forward passes without autograd (evaluation
under ``torch.no_grad()``) and other graphs stay all-active.  Not valid with layers that mix rows
between aggregations (BatchNorm over nodes, global pooling): pass ``model=`` to have such layers
rejected up front.

Files: ``paths.py`` (frontiers and path structures), ``session.py`` (the per-block state and the
layer plans it hands out), ``plan.py`` (:class:`~.plan.LayerPlan`, the aggregation plan the core
runs, and the row-restricted aggregation).  The ``with execution_paths(...)`` block itself is in
the DGL adapter (``dgl_accel.patching``), since it also switches DGL's message passing over.
This ``__init__`` imports nothing.
"""
