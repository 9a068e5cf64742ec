"""Progress lines for the examples (as ``scripts/main.sh`` prints them): a line when a phase starts,
one at most every few seconds while it runs (step i/n, elapsed, time left, a note), one when it
ends; :meth:`Progress.summary` ends the run with every phase's time and the results.

    progress = Progress()
    with progress.phase("training", total=epochs) as phase:
        for epoch in range(epochs):
            ...
            phase.step(f"loss {loss:.4f}")
    progress.summary("test accuracy", [f"ours {acc:.4f}"])
"""
from __future__ import annotations

import contextlib
import time


class Phase:
    """One running phase: :meth:`step` after each unit of work, :attr:`note` for the summary."""

    def __init__(self, name: str, total: int | None, every: float):
        self.name, self.total, self.every = name, total, every
        self.done, self.note = 0, ""
        self.start = self.last = time.perf_counter()

    def step(self, note: str = "") -> None:
        self.done += 1
        now = time.perf_counter()
        if now - self.last >= self.every or self.done == self.total:
            self.last = now
            spent = now - self.start
            count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
            left = f", ~{spent / self.done * (self.total - self.done):.0f} s left" if self.total else ""
            print(f"  [{self.name}] {count} ({spent:.0f} s{left}) {note}".rstrip(), flush=True)


class Progress:
    """The phases of one run, for the closing summary."""

    def __init__(self, every: float = 5.0):
        self.every = every
        self.phases: list[tuple[str, float, str]] = []

    @contextlib.contextmanager
    def phase(self, name: str, total: int | None = None):
        print(f"[{name}] started" + (f" ({total} steps)" if total else ""), flush=True)
        phase = Phase(name, total, self.every)
        yield phase
        seconds = time.perf_counter() - phase.start
        self.phases.append((name, seconds, phase.note))
        print(f"[{name}] done in {seconds:.1f} s {phase.note}".rstrip(), flush=True)

    def summary(self, title: str, lines=()) -> None:
        print(f"== summary: {title}")
        for name, seconds, note in self.phases:
            print(f"  {name:48s} {seconds:8.1f} s  {note}".rstrip())
        total = sum(seconds for _, seconds, _ in self.phases)
        print(f"  {'total':48s} {total:8.1f} s")
        for line in lines:
            print(f"  {line}")
