"""Facts of the machine this process runs on, read once.  The CPU rules fitted on the matrix bench
differ between Intel's CPUs and others' (``core.dense``'s oneDNN forward, the attention and extrema
policies), so they ask :func:`intel_cpu`; tests set ``_vendor`` to take either side."""
from __future__ import annotations

__all__ = ["cpu_vendor", "intel_cpu"]

_vendor: str | None = None


def cpu_vendor() -> str:
    """The CPU's vendor string (``GenuineIntel``, ``AuthenticAMD``; "" where /proc/cpuinfo says none)."""
    global _vendor
    if _vendor is None:
        _vendor = ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("vendor_id"):
                        _vendor = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
    return _vendor


def intel_cpu() -> bool:
    """Whether the CPU is Intel's (the MKL / LIBXSMM fast paths the vendor rules are about)."""
    return cpu_vendor() == "GenuineIntel"
