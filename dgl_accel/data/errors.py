"""One message shape for every data error: '<file>: expected X (got Y). <fix>'."""
from __future__ import annotations


def data_error(path, expected: str, got: str, fix: str = "", cls=ValueError) -> Exception:
    """The exception to raise (``cls``) for a data problem in ``path``.

    >>> data_error("toy.npz", "key 'y'", "keys ['x']", "Re-export it.")
    ValueError("toy.npz: expected key 'y' (got keys ['x']). Re-export it.")
    """
    msg = f"{path}: expected {expected} (got {got})."
    return cls(f"{msg} {fix}".rstrip())
