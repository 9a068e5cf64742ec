"""Using plans automatically: ``attach(g, plan)``, ``use_redundancy(mode)``, and the gspmm hook.

The front door (``dgl_accel.functional.gspmm``) asks :func:`plan_for` on every copy_u sum/mean call; it costs one global
check unless plans are attached or auto-building is on.  Modes (``use_redundancy`` / ``set_mode``):

* ``False``   never route through a plan (the forced-off switch);
* ``True``    always route through the plan attached to the graph (the forced-on switch);
* ``"auto"``  (default) route only where the cost model says one aggregation through the plan is
              cheaper at this feature width and device (the transform is already paid).

``use_redundancy(mode, auto_build=True, num_layers=2)`` also plans graphs nobody attached a plan to,
on their first aggregation, e.g. every sampled GraphSAINT subgraph: the transform runs once, then
(mode "auto") the plan is kept only if :func:`~.cost.predicts_gain` says it pays over the model's
aggregations on that subgraph, else the graph is remembered as "not worth it".  Decisions are cached
per graph object and die with it.

Plans are found by graph object, and, for the fresh view objects DGL creates inside ``update_all``,
by :func:`dgl_accel.graph.structure.structure_id` (only looked up while plans are attached).  A plan
is used only if the graph it was attached to is alive and unmodified and its sizes match.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator

from ...core import backend
from ...core.redundancy.cost import predicts_gain
from ...core.redundancy.plan import RedundancyPlan
from ...graph.structure import cached, structure_id
from .transform import reduce_redundancy

__all__ = ["attach", "detach", "attached_plan", "use_redundancy", "set_mode", "get_mode", "plan_for",
           "route_count", "MODES"]

MODES = ("auto", True, False)
_lock = threading.Lock()
_by_graph: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # g -> (index ref, plan)
_by_structure: dict = {}  # structure_id -> (graph ref, index ref, plan)
_state = {"mode": "auto", "auto_build": False, "num_layers": 2, "aggregations_per_layer": 3,
          "theta": 2, "rounds": 3, "routed": 0}


def _check_mode(mode):
    if not (mode is True or mode is False or (isinstance(mode, str) and mode == "auto")):
        raise ValueError(f"expected mode to be 'auto', True or False (got {mode!r}). "
                         f"Fix: use_redundancy('auto') or use_redundancy(False).")
    return mode


def _sizes(g):
    return g.num_src_nodes(), g.num_dst_nodes(), g.num_edges()


def attach(g, plan) -> None:
    """Let aggregations on ``g`` run through ``plan`` (built by reduce_redundancy for this graph)."""
    if not isinstance(plan, RedundancyPlan):
        raise ValueError(f"expected a RedundancyPlan (got {type(plan).__name__}). "
                         f"Fix: attach(g, reduce_redundancy(g)).")
    if _sizes(g) != (plan.num_src, plan.num_dst, plan.num_edges):
        raise ValueError(f"expected the graph the plan was built for: (src, dst, edges) = "
                         f"{(plan.num_src, plan.num_dst, plan.num_edges)} (got {_sizes(g)}). "
                         f"Fix: attach(g, reduce_redundancy(g)).")
    _evict_dead()
    index_ref = weakref.ref(g._graph)
    with _lock:
        _by_graph[g] = (index_ref, plan)
        _by_structure[structure_id(g)] = (weakref.ref(g), index_ref, plan)
    # Drop the entry when g dies, so the hook's "any plans?" check goes back to being free.
    weakref.finalize(g, _evict_dead)


def detach(g) -> None:
    with _lock:
        _by_graph.pop(g, None)
        for key in [k for k, (gr, _, _) in _by_structure.items() if gr() is g]:
            del _by_structure[key]


def _evict_dead() -> None:
    with _lock:
        for key in [k for k, (gr, _, _) in _by_structure.items() if gr() is None]:
            del _by_structure[key]


def attached_plan(g):
    """The plan attached to ``g`` (or to the graph ``g`` is a view of), or None."""
    hit = _by_graph.get(g)
    if hit is not None:
        index_ref, plan = hit
        return plan if index_ref() is g._graph else None  # mutated in place since: stale
    if not _by_structure:
        return None
    hit = _by_structure.get(structure_id(g))
    if hit is None:
        return None
    graph_ref, index_ref, plan = hit
    owner = graph_ref()
    # Only while the owner lives are its CSR addresses unique; and it must be unmodified.
    if owner is None or index_ref() is not owner._graph or _sizes(g) != (plan.num_src, plan.num_dst, plan.num_edges):
        return None
    return plan


def get_mode():
    return _state["mode"]


def set_mode(mode: str | bool = "auto") -> None:
    _state["mode"] = _check_mode(mode)


@contextlib.contextmanager
def use_redundancy(mode: str | bool = "auto", *, auto_build: bool = True, num_layers: int = 2,
                   aggregations_per_layer: int = 3, theta: int = 2, rounds: int = 3) -> Iterator[None]:
    """``with use_redundancy("auto"): train on sampled subgraphs`` -- see the module docstring."""
    _check_mode(mode)
    for name, v in (("num_layers", num_layers), ("aggregations_per_layer", aggregations_per_layer)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"expected {name} to be an int >= 1 (got {v!r}).")
    saved = dict(_state)
    _state.update(mode=mode, auto_build=bool(auto_build) and mode is not False, num_layers=num_layers,
                  aggregations_per_layer=aggregations_per_layer, theta=theta, rounds=rounds)
    try:
        yield
    finally:
        routed = _state["routed"]
        _state.update(saved)
        _state["routed"] = routed


def _auto_plan(g, feat_dim: int):
    """Build once per graph; keep the plan if it pays (mode "auto") or always (mode True)."""
    def build(graph):
        plan = reduce_redundancy(graph if graph.device.type == "cpu" else graph.cpu(),
                                 theta=_state["theta"], rounds=_state["rounds"])
        if _state["mode"] is True:
            return plan
        ok = predicts_gain(plan, feat_dim, _state["num_layers"],
                           aggregations_per_layer=_state["aggregations_per_layer"], device=graph.device.type)
        return plan if ok else None

    return cached(g, f"redundancy.auto_plan.{feat_dim}", build)


def plan_for(graph, ufeat):
    """The plan to route this copy_u sum/mean aggregation through, or None (the gspmm hook)."""
    mode = _state["mode"]
    if mode is False or not (_by_structure or _state["auto_build"]):
        return None  # the common case: one dict truth test
    width = ufeat[0].numel() if ufeat.shape[0] else 1
    plan = attached_plan(graph)
    if plan is None and _state["auto_build"]:
        plan = _auto_plan(graph, int(width))
    if plan is None:
        return None
    if mode == "auto":
        if not predicts_gain(plan, max(1, int(width)), 1, aggregations_per_layer=1, device=ufeat.device.type,
                             include_transform=False):
            return None
    with _lock:
        _state["routed"] += 1
    backend.record("redundancy_plan", backend.choose_path(ufeat), ufeat.device)
    return plan


def route_count() -> int:
    """Aggregations routed through a plan so far (also in ``dgl_accel.stats()["redundancy_plan"]``)."""
    return _state["routed"]
