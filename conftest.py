"""Environment for every pytest item, tests/ and the doctests of dgl_accel alike (this file is
loaded before any of them is imported): Triton's interpreter on before anything imports triton,
DGL's backend chosen, and the hypothesis profile ("ci" unless $HYPOTHESIS_PROFILE says otherwise).
Fixtures for tests/ live in tests/conftest.py."""
import os

import pytest

os.environ["TRITON_INTERPRET"] = "1"  # kernels run on CPU tensors through the interpreter
os.environ.setdefault("DGLBACKEND", "pytorch")

from dgl_accel.testing.profiles import load_profile  # noqa: E402  (after the environment above)

load_profile()  # registers "ci" and "local" first


# ------------------------------------------------------------------ the quick lane covers every test function
_functions: set = set()


def _function(item) -> str:
    return item.nodeid.split("[", 1)[0]  # a parametrised test's cases share the function's node id


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Before ``-m`` deselects anything: every collected test function."""
    _functions.update(_function(item) for item in items)


def pytest_collection_finish(session):
    """The quick lane (``-m "not slow"``) runs at least one case of every test function it collected: a test
    whose every case is slow fails the run here, naming it (give it a quick case: ``testing.marks.quick_first``)."""
    markexpr = session.config.getoption("markexpr") or ""
    if "not slow" not in markexpr or session.config.getoption("keyword"):
        return
    kept = {_function(item) for item in session.items}
    uncovered = sorted(_functions - kept)
    if uncovered and not any(word in markexpr for word in ("interpreter", "aot", "datasets")):
        raise pytest.UsageError(
            f"the quick lane (-m {markexpr!r}) would run no case of {len(uncovered)} test function(s): "
            + ", ".join(uncovered[:20]) + (" ..." if len(uncovered) > 20 else "")
            + ". Fix: mark all but one case slow (dgl_accel.testing.marks.quick_first), not the whole test.")
