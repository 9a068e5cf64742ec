"""Counting what makes a device stream wait for the host, for the device pipelines' tests.

``with HostReads() as reads: ...`` records, in ``reads.events``, every host read the code in the
block asks for: scalar reads (``item()``, ``int(t)``, ``bool(t)``), ``tolist()``, ``numpy()``,
copies to the CPU, and ops whose output size depends on the data (``nonzero``, ``masked_select``,
boolean indexing, ``unique``, ``repeat_interleave`` without ``output_size``).  On CUDA each is a
synchronisation; on the CPU (interpreted kernels) the same calls are counted, so a test bounds them
on any machine.  ``HostReads(leave_out=[(module, "launcher")])`` leaves out what those functions
do for the block's duration (a kernel launch: the interpreter reads its arguments on the host;
compiled, a launch reads nothing); ``with reads.paused(): ...`` does the same for a stretch of code.
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["HostReads"]

_aten = torch.ops.aten
_DATA_DEPENDENT = {_aten.nonzero.default: "nonzero", _aten.masked_select.default: "masked_select",
                   _aten._unique2.default: "unique", _aten.unique_dim.default: "unique",
                   _aten.unique_consecutive.default: "unique"}


class HostReads(TorchDispatchMode):
    def __init__(self, leave_out=()):
        super().__init__()
        self.events: list[str] = []
        self._paused = 0
        self._saved: dict = {}
        self._leave_out = [(module, name, getattr(module, name)) for module, name in leave_out]

    def _note(self, what: str) -> None:
        if not self._paused:
            self.events.append(what)

    @contextlib.contextmanager
    def paused(self):
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _aten._local_scalar_dense.default:
            self._note("scalar read")
        elif func in _DATA_DEPENDENT:
            self._note(_DATA_DEPENDENT[func])
        elif func is _aten.index.Tensor and any(i is not None and i.dtype == torch.bool for i in args[1]):
            self._note("boolean index")
        elif func is _aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
            self._note("repeat_interleave without output_size")
        elif func is _aten._to_copy.default and kwargs.get("device") is not None \
                and torch.device(kwargs["device"]).type == "cpu" and args[0].device.type != "cpu":
            self._note("copy to the CPU")
        return func(*args, **kwargs)

    def __enter__(self):
        for name in ("tolist", "numpy"):  # read on the host without an op torch dispatches
            original = self._saved[name] = getattr(torch.Tensor, name)

            def counted(t, *a, _original=original, _name=name, **k):
                self._note(_name)
                with self.paused():  # one read: on CUDA, tolist() also dispatches its copy to the CPU
                    return _original(t, *a, **k)
            setattr(torch.Tensor, name, counted)
        for module, name, fn in self._leave_out:
            def uncounted(*a, _fn=fn, **k):
                with self.paused():
                    return _fn(*a, **k)
            setattr(module, name, uncounted)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        for module, name, fn in self._leave_out:
            setattr(module, name, fn)
        return super().__exit__(*exc)
