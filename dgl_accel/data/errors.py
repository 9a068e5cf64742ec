"""One message shape for every data error: '<file>: expected X (got Y). <fix>'."""
from __future__ import annotations


def data_error(path, expected: str, got: str, fix: str = "", cls=ValueError) -> Exception:
    msg = f"{path}: expected {expected} (got {got})."
    return cls(f"{msg} {fix}".rstrip())
