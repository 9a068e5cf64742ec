"""The one error of the samplers' DGL adapter: :class:`DGLSamplingInputError`, both a
``ValueError`` (what the DGL-free core raises, :class:`~dgl_accel.core.sampling.checks.SamplingInputError`)
and a ``dgl.DGLError`` (what DGL's own samplers raise), so ``except ValueError`` and
``except dgl.DGLError`` both catch every rejection of our public samplers and walk functions.

The core never imports DGL, so it cannot raise a ``DGLError`` itself; the conversion happens once,
at the adapter's public entries (:func:`dgl_errors`, applied to every exported sampler class and
function): a ``ValueError`` or a ``DGLError`` leaving an entry is re-raised as a
:class:`DGLSamplingInputError` with the same message (``expected <what> (got <what came>). Fix:
<how>``) and the original traceback.  Anything else (``TypeError`` for a wrong number of arguments,
``RuntimeError`` for an internal failure) passes through unchanged, as it does in DGL.

>>> from dgl_accel.sampling import NeighborSampler
>>> try:
...     NeighborSampler([])
... except dgl.DGLError as e:
...     print(isinstance(e, ValueError), str(e)[:39])
True expected fanouts to be a non-empty list
"""
from __future__ import annotations

import functools
import inspect

import dgl

from ..core.sampling.checks import SamplingInputError

__all__ = ["DGLSamplingInputError", "as_dgl_error", "dgl_errors"]


class DGLSamplingInputError(SamplingInputError, dgl.DGLError):
    """Bad input to a sampler or walk function: a ``ValueError`` and a ``dgl.DGLError`` at once.
    The message says what was expected, what came and how to fix it."""


def as_dgl_error(e: Exception) -> Exception:
    """``e`` as a :class:`DGLSamplingInputError` (same message, traceback and cause) if it is a
    ``ValueError`` or a ``dgl.DGLError`` but not both; else ``e`` itself."""
    if isinstance(e, ValueError) and isinstance(e, dgl.DGLError):
        return e
    if not isinstance(e, (ValueError, dgl.DGLError)):
        return e
    new = DGLSamplingInputError(*e.args)
    new.__cause__, new.__suppress_context__ = e.__cause__, True
    return new.with_traceback(e.__traceback__)


def _wrap(fn):
    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, dgl.DGLError) as e:
            new = as_dgl_error(e)
            if new is e:
                raise
            raise new from e.__cause__
    return entry


def dgl_errors(obj):
    """Make ``obj`` (a function, or a class: its ``__init__`` and public methods) raise
    :class:`DGLSamplingInputError` for every ``ValueError`` / ``dgl.DGLError`` (see the module
    docstring).  Signatures are kept (``inspect.signature`` follows ``__wrapped__``)."""
    if not isinstance(obj, type):
        return _wrap(obj)
    for name, attr in list(vars(obj).items()):
        if (name == "__init__" or not name.startswith("_")) and inspect.isfunction(attr):
            setattr(obj, name, _wrap(attr))
    return obj
