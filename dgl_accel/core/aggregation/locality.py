"""Locality split: the per-graph plan that runs an aggregation's gathers from the GPU's L2 cache.

A copy_u-sum over E edges reads one feature row per edge; on a large graph that is E rows from
HBM (the fetch-per-edge line) unless rows are reused from L2 while they are there.  On skewed
graphs a few columns carry most entries (R-MAT scale 20: the 2.3% most-read rows carry 65% of
the edges).  The split gives those columns, the *hot set*, a launch of their own: a CSR of the
entries whose column is hot, then a CSR of the others (the *cold* part).  The hot launch reads
only the hot rows' feature tile, sized to fit half the L2 cache, so each is fetched from HBM about
once; the cold launch reads the rest once per edge.  Both launches add into the same buffer (or
write their own partials, combined in order by the deterministic reduce), so results come back in
the user's ids and order, and every message kind, normalisation, edge weight and reduction takes
the same plan.  The transposed view (the backward) has a split of its own, hot set included.

The choice (:func:`choose_locality`) models the bytes both ways: plain
``E * row + compulsory`` against the split's ``(1 - h) * E * row + K * row + compulsory + the
second launch's pass over the output``, for ``h`` the hot entries' share and ``K`` the hot rows.
Policy ``"auto"`` splits on a GPU where the model saves at least :data:`MIN_SAVING` of the bytes
and a timing of both forwards agrees (once per graph, direction, width and dtype); ``"on"``
splits wherever the hot set leaves a cold part (tests, the report's timings); ``"off"`` never.
Sampled blocks are never split under ``"auto"``: each minibatch's block is a new graph.  The plan
is built once per graph and direction and cached with it; ``dgl_accel.explain`` prints it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from .. import backend
from ..csr import Structure
from ..grouping.size import GroupSizeChoice, choose_group_size
from ..groups import Groups, build_groups
from .launchers import feature_tile, gspmm_forward

__all__ = ["LocalitySplit", "LocalityChoice", "choose_locality", "locality_parts", "split_structure",
           "row_tile_bytes", "use_locality", "explain", "MODES", "HOT_SHARE_OF_L2", "MIN_SAVING", "DEFAULT_L2_BYTES"]

MODES = ("auto", "on", "off")
HOT_SHARE_OF_L2 = 0.5  # the hot rows' tile may fill half the L2; the other half serves the output and indices
MIN_SAVING = 0.15  # modelled share of the bytes the split must save before "auto" times it
DEFAULT_L2_BYTES = 50 * 2**20  # H100 / H200, where the device does not report its own
_state = {"mode": "auto", "l2_bytes": None}


@contextlib.contextmanager
def use_locality(mode: str = "auto", *, l2_bytes: int | None = None) -> Iterator[None]:
    """Inside the block aggregations take ``mode``'s locality split (:data:`MODES`); ``l2_bytes``
    replaces the device's L2 size in the plan (smaller: a smaller hot set).

    >>> with use_locality("off"):
    ...     _state["mode"]
    'off'
    """
    if mode not in MODES:
        raise ValueError(f"expected a locality mode in {MODES} (got {mode!r}). Fix: use_locality('auto').")
    if l2_bytes is not None and (not isinstance(l2_bytes, int) or isinstance(l2_bytes, bool) or l2_bytes < 1):
        raise ValueError(f"expected l2_bytes to be a positive int or None (got {l2_bytes!r}). "
                         f"Fix: pass e.g. l2_bytes=50 * 2**20, or None for the device's own.")
    saved = dict(_state)
    _state.update(mode=mode, l2_bytes=l2_bytes)
    try:
        yield
    finally:
        _state.update(saved)


@dataclass(frozen=True, eq=False)
class LocalitySplit:
    """One view's entries shared out: ``hot`` (columns in the hot set) and ``cold``, both CSRs over
    the same rows in the user's ids and edge ids; ``groups`` caches their neighbour groups per gs."""

    hot: Structure
    cold: Structure
    num_hot_cols: int
    groups: dict = field(default_factory=dict)

    def parts(self, gs: int) -> list[tuple[Structure, Groups]]:
        if gs not in self.groups:
            self.groups[gs] = [(s, build_groups(s, gs)) for s in (self.hot, self.cold)]
        return self.groups[gs]


def split_structure(structure: Structure, hot_cols: torch.Tensor) -> LocalitySplit:
    """``structure``'s entries whose column is in ``hot_cols`` (ids, any order) and the others, each a
    CSR over the same rows keeping the entries' order within a row.

    >>> s = Structure(torch.tensor([0, 2, 3]), torch.tensor([4, 1, 4]), torch.tensor([0, 1, 2]), 2, 5, "cpu")
    >>> sp = split_structure(s, torch.tensor([4]))
    >>> sp.hot.indptr.tolist(), sp.hot.eids.tolist(), sp.cold.indptr.tolist(), sp.cold.indices.tolist()
    ([0, 1, 2], [0, 2], [0, 1, 1], [1])
    """
    mask = torch.zeros(structure.num_cols, dtype=torch.bool, device=structure.indices.device)
    mask[hot_cols.long()] = True
    is_hot = mask.index_select(0, structure.indices)

    def part(pos: torch.Tensor, indptr: torch.Tensor) -> Structure:
        """The CSR of the entries at positions ``pos`` (in order) with row pointers ``indptr``."""
        return Structure(indptr=indptr, indices=structure.indices.index_select(0, pos),
                         eids=structure.eids.index_select(0, pos), num_rows=structure.num_rows,
                         num_cols=structure.num_cols, device=structure.device)
    hot_pos = is_hot.nonzero().squeeze(1)  # one host read on a GPU, as the cold positions' below
    # the hot entries before each row's start are the hot part's row pointers; the rest, the cold part's
    hot_ptr = torch.searchsorted(hot_pos, structure.indptr)
    return LocalitySplit(part(hot_pos, hot_ptr), part((~is_hot).nonzero().squeeze(1), structure.indptr - hot_ptr),
                         int(hot_cols.numel()))


@dataclass(frozen=True)
class LocalityChoice:
    """Whether one view (``direction``) at one width and dtype runs split, and the figures why."""

    direction: str
    split: bool
    mode: str
    reason: str
    hot_rows: int = 0
    hot_share: float = 0.0  # of the entries
    row_bytes: int = 0  # one gathered row's feature tile
    budget: int = 0
    bytes_plain: int = 0
    bytes_split: int = 0
    timed_ms: tuple[float, float] | None = None  # (plain, split) forward where "auto" timed them

    def __str__(self) -> str:
        head = f"locality split ({self.direction} view, mode {self.mode!r}): {'on' if self.split else 'off'}"
        lines = [f"{head} ({self.reason})"]
        if self.hot_rows:
            lines.append(f"  hot set: the {self.hot_rows:,} most-read rows ({self.row_bytes} B tiles in a "
                         f"{_size(self.budget)} budget) carry {self.hot_share:.1%} of the entries")
            lines.append(f"  modelled bytes per pass: {self.bytes_plain / 1e9:.3g} GB plain, "
                         f"{self.bytes_split / 1e9:.3g} GB split")
        if self.timed_ms is not None:
            lines.append(f"  timed forward: {self.timed_ms[0]:.3g} ms plain, {self.timed_ms[1]:.3g} ms split")
        return "\n".join(lines)


_DEVICE_L2: dict = {}


def _size(nbytes: int) -> str:
    """>>> _size(2560), _size(25 * 2**20)
    ('2.5 KiB', '25.0 MiB')"""
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def _l2_bytes(device: torch.device) -> int:
    if _state["l2_bytes"] is not None:
        return _state["l2_bytes"]
    if device.type != "cuda":
        return DEFAULT_L2_BYTES
    if device not in _DEVICE_L2:  # torch < 2.3 does not report it
        props = torch.cuda.get_device_properties(device)
        _DEVICE_L2[device] = int(getattr(props, "L2_cache_size", 0)) or DEFAULT_L2_BYTES
    return _DEVICE_L2[device]


def row_tile_bytes(feat_dim: int, dtype: torch.dtype) -> int:
    """Bytes of one gathered row's feature tile (the kernel's BLOCK_F columns of ``dtype``).

    >>> row_tile_bytes(100, torch.float32), row_tile_bytes(256, torch.bfloat16)
    (512, 256)
    """
    return feature_tile(feat_dim) * torch.empty(0, dtype=dtype).element_size()


def _sizes(device: torch.device, feat_dim: int, dtype: torch.dtype) -> tuple[int, int, int]:
    """(bytes of one gathered row's feature tile, the hot set's byte budget, the hot rows it holds)."""
    row_bytes = row_tile_bytes(feat_dim, dtype)
    budget = int(_l2_bytes(device) * HOT_SHARE_OF_L2)
    return row_bytes, budget, budget // row_bytes


def _hot_columns(views, direction: str, k: int) -> tuple[torch.Tensor, int]:
    """(the ``k`` most-read columns of the view, the entries they hold), cached per graph."""
    def build():
        s = views.csr(direction)
        reads = torch.bincount(s.indices.long(), minlength=s.num_cols)
        top = torch.topk(reads, k, sorted=False)
        return top.indices, int(top.values.sum())  # the one host read
    return views.cached(f"locality.hot.{direction}.{k}", build)


def choose_locality(views, direction: str, feat_dim: int, dtype: torch.dtype, *, path: str = "triton",
                    gs: int | None = None) -> LocalityChoice:
    """The locality split of ``views``' ``direction`` view for ``feat_dim``-wide ``dtype`` features on
    ``path`` (module docstring); cached per graph, direction, width, dtype, mode and L2 size."""
    mode, device = _state["mode"], views.device
    key = f"locality.choice.{direction}.{int(feat_dim)}.{dtype}.{mode}.{_l2_bytes(device)}.{path}"
    return views.cached(key, lambda: _choose(views, direction, int(feat_dim), dtype, mode, path, gs))


def _choose(views, direction, feat_dim, dtype, mode, path, gs) -> LocalityChoice:
    if mode == "off":
        return LocalityChoice(direction, False, mode, "use_locality('off')")
    if path != "triton":
        return LocalityChoice(direction, False, mode, f"the {path} path: the split is the Triton kernels' plan")
    if mode == "auto" and views.device.type != "cuda":
        return LocalityChoice(direction, False, mode, "not a GPU: no L2 to plan for")
    if mode == "auto" and views.bipartite:
        return LocalityChoice(direction, False, mode, "a sampled block: a new graph each minibatch, not worth a plan")
    s = views.csr(direction)
    row_bytes, budget, k = _sizes(views.device, feat_dim, dtype)
    if s.num_edges == 0 or k >= s.num_cols:
        return LocalityChoice(direction, False, mode, f"every row's tile fits the {_size(budget)} budget: "
                              f"the cache keeps them without a split", row_bytes=row_bytes, budget=budget)
    hot_cols, hot_entries = _hot_columns(views, direction, k)
    h = hot_entries / s.num_edges
    full_row = feat_dim * torch.empty(0, dtype=dtype).element_size()
    common = s.num_edges * s.indices.element_size() + 8 * (s.num_rows + 1) + s.num_rows * full_row
    plain = s.num_edges * full_row + common
    split = (s.num_edges - hot_entries) * full_row + k * full_row + common + 2 * s.num_rows * feat_dim * 4
    figures = dict(hot_rows=k, hot_share=h, row_bytes=row_bytes, budget=budget, bytes_plain=plain, bytes_split=split)
    if mode == "on":
        return LocalityChoice(direction, True, mode, "use_locality('on')", **figures)
    if split > (1 - MIN_SAVING) * plain:
        return LocalityChoice(direction, False, mode, f"the model saves {1 - split / plain:.0%} of the bytes, "
                              f"under {MIN_SAVING:.0%}", **figures)
    plain_ms, split_ms = _time_both(views, direction, feat_dim, dtype, gs, k)
    won = split_ms < plain_ms
    return LocalityChoice(direction, won, mode, f"the model saves {1 - split / plain:.0%} of the bytes; timed "
                          f"{'faster' if won else 'not faster'}", timed_ms=(plain_ms, split_ms), **figures)


def _time_both(views, direction, feat_dim, dtype, gs, k, repeats: int = 3) -> tuple[float, float]:
    """Median ms of one plain and one split copy_u-sum forward on the device, interleaved."""
    gs = gs if gs is not None else views.group_size(feat_dim, dtype)
    x = torch.randn(views.csr(direction).num_cols, feat_dim, device=views.device).to(dtype)
    plain = [(views.csr(direction), views.groups(direction, gs))]
    split = _split(views, direction, k).parts(gs)
    times: dict = {"plain": [], "split": []}
    for _ in range(repeats + 1):  # the first round compiles
        for name, parts in (("plain", plain), ("split", split)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            gspmm_forward(parts, x, None, None, None, False)
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end))
    return statistics.median(times["plain"][1:]), statistics.median(times["split"][1:])


def _split(views, direction: str, k: int) -> LocalitySplit:
    """The view's split for a hot set of ``k`` rows, built once per graph, direction and hot-set size."""
    hot_cols, _ = _hot_columns(views, direction, k)
    return views.cached(f"locality.split.{direction}.{k}", lambda: split_structure(views.csr(direction), hot_cols))


def locality_parts(views, direction: str, x: torch.Tensor, gs: int) -> list[tuple[Structure, Groups]]:
    """What :func:`~.launchers.gspmm_forward` runs for ``views``' ``direction`` view and features like
    ``x`` on the Triton path: the view and its groups, or its split's two parts."""
    if _state["mode"] != "off":  # "off": not even the cached choice's lookup
        choice = choose_locality(views, direction, x.shape[1], x.dtype, gs=gs)
        if choice.split:
            return _split(views, direction, choice.hot_rows).parts(gs)
    return [(views.csr(direction), views.groups(direction, gs))]


def explain(views, feat_dim: int, dtype: torch.dtype = torch.float32) -> GroupSizeChoice:
    """What ``choose_group_size(views, feat_dim, dtype)`` picks and why, with the locality split of
    the forward (``in``) and backward (``out``) views on the path features on the graph's device take;
    print it for the story.  It lives here, above the group-size models, because it needs both."""
    choice = choose_group_size(views, feat_dim, dtype)
    path = backend.choose_path(torch.empty(0, dtype=dtype, device=views.device))
    plans = tuple(choose_locality(views, d, feat_dim, dtype, path=path, gs=choice.gs) for d in ("in", "out"))
    return dataclasses.replace(choice, locality=plans)
