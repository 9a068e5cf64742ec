"""numba availability, the work threshold, parallel-region policy and the in-register Philox
shared by every compiled loop (see :mod:`dgl_accel.core.jit`).

The only module of ``dgl_accel`` that imports numba, behind this optional-import guard.  Without
numba, ``njit`` and ``prange`` below are plain-Python stand-ins (the loops stay importable and
callable, just slow) and :func:`enabled` is False, so callers take their numpy paths.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import types

import numpy as np
import torch

try:  # pragma: no branch
    if os.environ.get("DGL_ACCEL_NUMBA", "1") == "0":
        raise ImportError("disabled by DGL_ACCEL_NUMBA=0")
    import numba
    import numba.core.registry
    from llvmlite import ir
    from numba import njit, prange
    from numba import types as nbtypes
    from numba.core import cgutils
    from numba.core.compiler import CompilerBase, DefaultPassBuilder
    from numba.core.compiler_lock import global_compiler_lock
    from numba.extending import intrinsic, overload
    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised where numba is absent
    AVAILABLE = False
    prange = range

    def njit(*args, **kwargs):
        """Stand-in for ``numba.njit`` (bare or with options): the plain function."""
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn

__all__ = ["AVAILABLE", "MIN_WORK", "enabled", "worth", "parallel_allowed", "claim_parallel", "one_thread", "twins",
           "pick", "follow_torch_threads", "NOALIAS", "njit", "prange", "philox", "M32", "S32", "bf16_bits", "widen",
           "narrow", "as_float", "cast_like", "exp32", "prefetch_row"]

# Work (sampled slots, gathered entries) below which the numpy path is used: a compiled call has
# ~10 us of dispatch overhead, a thread fork-join more; tiny batches gain nothing.
MIN_WORK = 2048

M32 = np.uint64(0xFFFFFFFF)  # low 32 bits
S32 = np.uint64(32)          # shift of the high word
_KA, _KB = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_RA, _RB = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)


def enabled() -> bool:
    """Whether the compiled loops run (numba importable and not disabled by DGL_ACCEL_NUMBA=0)."""
    return AVAILABLE


def worth(work: int) -> bool:
    """Whether a call of ``work`` slots / entries should take a compiled loop: enabled and at
    least :data:`MIN_WORK` (read at call time, so tests can move the threshold)."""
    return work >= MIN_WORK and enabled()


_PARALLEL_PID = None
_CLAIMED = False  # claim_parallel() ran in this process


def parallel_allowed() -> bool:
    """Whether this process may run numba's parallel regions (``twins``' first version).

    Why not always: without TBB numba runs them on GNU OpenMP, which kills a forked child that
    enters a parallel region after its parent did ("fork() called from a process already using
    GNU OpenMP"): exactly a DGL DataLoader with ``num_workers > 0`` after any sampling in the main
    process, and a child of a parent that used GNU OpenMP in any library can hang instead.  So
    parallel regions run only in a process that is not a multiprocessing child, and only in the
    one that ran the first; children (and everyone under ``DGL_ACCEL_NUMBA_PARALLEL=0``) run the
    serial twins, unless they :func:`claim_parallel`: the same results (bit for bit in the samplers;
    a loop compiled to reorder its sums, fastmath ``reassoc``, may round its last bit otherwise)."""
    global _PARALLEL_PID
    if _CLAIMED:
        return _PARALLEL_PID == os.getpid()
    if os.environ.get("DGL_ACCEL_NUMBA_PARALLEL", "1") == "0":
        return False
    if multiprocessing.parent_process() is not None:
        # a DataLoader worker or other multiprocessing child: its parent may have used GNU OpenMP
        # (DGL's and numba's kernels share the system libgomp), and a forked child entering a
        # parallel region then hangs
        return False
    pid = os.getpid()
    if _PARALLEL_PID is None:
        _PARALLEL_PID = pid
    return _PARALLEL_PID == pid


def claim_parallel() -> None:
    """Let this process run the parallel twins though it is a multiprocessing child or runs under
    ``DGL_ACCEL_NUMBA_PARALLEL=0``, as a main process does (its forked children again run the serial
    twins).  Only for a process whose ancestors never entered a GNU OpenMP parallel region: a child
    forked from a process that ran the serial twins only (``DGL_ACCEL_NUMBA_PARALLEL=0``) and no other
    library's OpenMP threads, as the training bench's provider processes are."""
    global _PARALLEL_PID, _CLAIMED
    _CLAIMED, _PARALLEL_PID = True, os.getpid()


if AVAILABLE:
    class _NoAliasPipeline(CompilerBase):
        """numba's nopython pipeline with the array arguments marked ``noalias`` (no written array
        shares memory with another argument), as numba compiles a ``prange`` body in a parallel
        function: without it the serial twin's inner loops re-read what the parallel one keeps."""

        def define_pipelines(self):
            self.state.flags.noalias = True
            return [DefaultPassBuilder.define_nopython_pipeline(self.state)]

# ``njit`` options of a loop whose written arrays share memory with no other argument: compiled as
# numba compiles a prange body (arrays noalias); nothing without numba
NOALIAS = {"pipeline_class": _NoAliasPipeline} if AVAILABLE else {}


def twins(fn, *, noalias: bool = False, slp: bool = False, **options):
    """(parallel, serial) compiled versions of the plain function ``fn`` (``prange`` loops run
    serially in the second), with further ``njit`` ``options`` (e.g. ``fastmath``).  Each gets its own
    name so numba's disk cache, which keys entries by function name and signature but not by the
    parallel flag, keeps them apart.  ``noalias``: the caller promises that no array ``fn`` writes
    shares memory with another of its arguments, and the serial twin is compiled as the parallel
    one's loop body is (its arrays ``noalias``).  ``slp``: compiled with LLVM's superword (SLP)
    vectoriser, which numba leaves off by default (numba#8852: miscompilations with older LLVMs), for
    loops whose short constant-length inner loops only it packs into vectors; such a loop needs a
    test against its reference."""
    out = []
    for suffix, parallel in (("_parallel", True), ("_serial", False)):
        f = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
        f.__qualname__ = fn.__qualname__ + suffix
        f.__doc__ = fn.__doc__
        extra = NOALIAS if noalias and not parallel else {}
        dispatcher = njit(cache=True, parallel=parallel, **options, **extra)(f)
        if slp and AVAILABLE:
            dispatcher.compile = _with_slp(dispatcher.compile)
        out.append(dispatcher)
    return tuple(out)


def _with_slp(compile_fn):
    """A dispatcher's ``compile`` run with ``numba.core.config.SLP_VECTORIZE`` on, under numba's compiler
    lock so no other compilation sees it.  numba >= 0.61 reads the setting whenever it builds a pass
    pipeline; older ones build their module pipeline once per process, so it is rebuilt for the
    compile and the process's own put back after."""
    def compile(sig):
        with global_compiler_lock:
            codegen = numba.core.registry.cpu_target.target_context.codegen()
            before, full = numba.core.config.SLP_VECTORIZE, getattr(codegen, "_mpm_full", None)
            numba.core.config.SLP_VECTORIZE = 1
            try:
                if full is not None:
                    codegen._mpm_full = codegen._module_pass_manager()
                return compile_fn(sig)
            finally:
                numba.core.config.SLP_VECTORIZE = before
                if full is not None:
                    codegen._mpm_full = full
    return compile


def one_thread() -> bool:
    """Whether the loops run on one thread: :func:`pick` takes the serial twin, or torch has one
    thread.  There a loop may scatter into rows another row's pass also writes (no races), where the
    parallel loops make a second pass over the other CSR instead (the GAT backward)."""
    return not parallel_allowed() or torch.get_num_threads() == 1


def pick(parallel, serial):
    """``parallel`` where :func:`parallel_allowed`, else ``serial`` (one of a pair of :func:`twins`).
    The parallel loops take torch's thread count (:func:`follow_torch_threads`)."""
    if not parallel_allowed():
        return serial
    follow_torch_threads()
    return parallel


_POOL_STARTED = False


@njit(cache=True, parallel=True)
def _start_pool(n):  # pragma: no cover - numba compiles it
    out = np.zeros(n)
    for i in prange(n):
        out[i] = i
    return out


def follow_torch_threads() -> int:
    """Make numba's parallel regions use ``torch.get_num_threads()`` threads (at most numba's pool),
    so ``torch.set_num_threads(n)`` governs dgl-accel's loops as it governs torch's and DGL's.  The
    first call starts numba's pool itself and then puts torch's count back: starting numba's
    OpenMP pool sets every OpenMP runtime of the process to all cores (measured: torch 1 -> 2
    threads on this 2-core machine after the first parallel loop).  Returns the thread count.

    >>> want = torch.get_num_threads()
    >>> follow_torch_threads() <= want and torch.get_num_threads() == want  # numba's count, torch's kept
    True
    """
    global _POOL_STARTED
    want = torch.get_num_threads()
    if not AVAILABLE:
        return want
    if not _POOL_STARTED:
        _start_pool(2)
        _POOL_STARTED = True
        if torch.get_num_threads() != want:
            torch.set_num_threads(want)
    n = max(1, min(want, numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)
    return n


@njit(cache=True, inline="always")
def philox(k0, k1, counter):
    """Philox4x32-10 of a non-negative int64 counter (words 2, 3 zero) under the key (k0, k1):
    the four words of ``rng.philox4x32_np`` / Triton's ``tl.randint4x``, as uint64 values."""
    c = np.uint64(counter)
    c0 = c & M32
    c1 = c >> S32
    c2 = np.uint64(0)
    c3 = np.uint64(0)
    for _ in range(10):
        b = c2 * _RB
        a = c0 * _RA
        c0 = (b >> S32) ^ c1 ^ k0
        c2 = (a >> S32) ^ c3 ^ k1
        c1 = b & M32
        c3 = a & M32
        k0 = (k0 + _KA) & M32
        k1 = (k1 + _KB) & M32
    return c0, c1, c2, c3


# ------------------------------------------------------------------------------------------- bfloat16
# numpy has no bfloat16: a bf16 tensor reaches a loop as its bits (``bf16_bits``: a uint16 view, no
# copy), and the loop widens each value to fp32 where it reads it (exact: bf16 is fp32's upper half)
# and narrows a result with round-to-nearest-even (torch's ``.to(torch.bfloat16)``).
# Half the bytes of a widened copy, and no N x F fp32 tensor to allocate per call.  numba's disk
# cache keys a loop by its own file's timestamp: after editing these helpers, delete
# dgl_accel/core/jit/__pycache__/*.nbi and *.nbc, or the loops that inline them keep the old code.

def bf16_bits(t: torch.Tensor) -> np.ndarray:
    """The bits of a contiguous CPU bf16 tensor as a uint16 numpy array sharing its memory."""
    return t.view(torch.int16).numpy().view(np.uint16)


def as_float(v):
    """A loop's read of an array element in float arithmetic: a float as it is, bf16 bits widened
    (:func:`widen`).  Lets one loop body serve float32/float64 arrays and bf16 bits alike."""
    return widen(v) if isinstance(v, np.uint16) else v


def exp32(x):
    """exp(x) a loop may vectorise: for float32, Cephes' expf polynomial in registers (within 2 ulp of
    ``math.exp``; results below 2^-126 flush to 0; no libm call, so numba packs it with its
    neighbours), ``math.exp`` for other types."""
    return math.exp(x)


def cast_like(v, arr):
    """``v`` (a float) as an element of ``arr``: bf16 bits (:func:`narrow`) for a uint16 array."""
    return narrow(np.float32(v)) if arr.dtype == np.uint16 else arr.dtype.type(v)


if AVAILABLE:
    @intrinsic
    def widen(typingctx, bits):
        """bf16 bits (uint16) -> the float32 they denote, in registers (a shift and a bitcast)."""
        if bits != nbtypes.uint16:
            return None

        def codegen(context, builder, sig, args):
            i32 = ir.IntType(32)
            return builder.bitcast(builder.shl(builder.zext(args[0], i32), ir.Constant(i32, 16)), ir.FloatType())
        return nbtypes.float32(nbtypes.uint16), codegen

    @intrinsic
    def narrow(typingctx, value):
        """float32 -> bf16 bits (uint16), rounded to nearest, ties to even; NaN -> the quiet NaN."""
        if value != nbtypes.float32:
            return None

        def codegen(context, builder, sig, args):
            i32 = ir.IntType(32)
            b = builder.bitcast(args[0], i32)
            odd = builder.and_(builder.lshr(b, ir.Constant(i32, 16)), ir.Constant(i32, 1))
            b = builder.add(builder.add(b, ir.Constant(i32, 0x7FFF)), odd)
            bits = builder.trunc(builder.lshr(b, ir.Constant(i32, 16)), ir.IntType(16))
            nan = builder.fcmp_unordered("uno", args[0], args[0])  # rounding could carry a NaN into inf
            return builder.select(nan, ir.Constant(ir.IntType(16), 0x7FC0), bits)
        return nbtypes.uint16(nbtypes.float32), codegen

    @overload(as_float, inline="always")
    def _as_float(v):
        if v == nbtypes.uint16:
            return lambda v: widen(v)
        if isinstance(v, nbtypes.Float):
            return lambda v: v
        return None

    @overload(cast_like, inline="always")
    def _cast_like(v, arr):
        if arr.dtype == nbtypes.uint16:
            return lambda v, arr: narrow(np.float32(v))
        return lambda v, arr: v

    @intrinsic
    def prefetch_row(typingctx, arr, i):
        """A hint to fetch row ``i`` of a C-contiguous array into the caches (its first four cache lines,
        256 bytes; a prefetch never faults): a loop gathering rows by index issues it some entries ahead,
        so their reads overlap instead of waiting one by one."""
        if not isinstance(arr, nbtypes.Array) or arr.layout != "C" or not isinstance(i, nbtypes.Integer):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            row = builder.mul(context.cast(builder, args[1], sig.args[1], nbtypes.intp),
                              cgutils.unpack_tuple(builder, ary.strides)[0])
            i8p = ir.IntType(8).as_pointer()
            start = builder.gep(builder.bitcast(ary.data, i8p), [row])
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                                "llvm.prefetch.p0")
            for line in range(4):  # read, keep in every cache level, data
                builder.call(fn, [builder.gep(start, [ir.Constant(ir.IntType(64), 64 * line)]),
                                  ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
            return context.get_dummy_value()
        return nbtypes.none(arr, i), codegen

    @intrinsic
    def _pow2(typingctx, t):
        # 2**n as float32 for t = n + 1.5 * 2**23 (an integer n in [-126, 127] in t's low mantissa bits)
        if t != nbtypes.float32:
            return None

        def codegen(context, builder, sig, args):
            i32 = ir.IntType(32)
            bits = builder.add(builder.bitcast(args[0], i32), ir.Constant(i32, 127 - 0x4B400000))
            return builder.bitcast(builder.shl(bits, ir.Constant(i32, 23)), ir.FloatType())
        return nbtypes.float32(nbtypes.float32), codegen

    @overload(exp32, inline="always")
    def _exp32(x):
        if x != nbtypes.float32:
            return lambda x: math.exp(x)

        def f(x):  # Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, e^r a degree-7 polynomial; 2^n by its bits
            lo, hi = np.float32(-87.33654), np.float32(88.72284)  # beyond: 0 (no subnormals) and inf
            c = min(max(x, lo), hi)
            t = c * np.float32(1.44269504) + np.float32(12582912.0)  # n + 1.5 * 2**23: n rounded to nearest
            n = t - np.float32(12582912.0)
            big = c > 0  # 2^n as 2^(n - 1) * 2: n = 128 has no float32 of its own
            r = c - n * np.float32(0.693359375) + n * np.float32(2.12194440e-4)
            p = np.float32(1.9875691500e-4)
            p = p * r + np.float32(1.3981999507e-3)
            p = p * r + np.float32(8.3334519073e-3)
            p = p * r + np.float32(4.1665795894e-2)
            p = p * r + np.float32(1.6666665459e-1)
            p = p * r + np.float32(5.0000001201e-1)
            e = (p * r * r + r + np.float32(1)) * _pow2(t - np.float32(1) if big else t) * np.float32(2 if big else 1)
            e = np.float32(0) if x < lo else e
            e = np.float32(np.inf) if x > hi else e
            return x if x != x else e
        return f
else:  # pragma: no cover - exercised where numba is absent (the loops then run as Python)
    def prefetch_row(arr, i):
        return None

    def widen(bits):
        return np.array([int(bits) << 16], dtype=np.uint32).view(np.float32)[0]

    def narrow(value):
        if value != value:
            return np.uint16(0x7FC0)
        b = int(np.array([value], dtype=np.float32).view(np.uint32)[0])
        return np.uint16(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF)
