"""Fixtures for tests/: a ``path`` fixture that runs a test on both the native and the Triton path,
and a fresh state per test.  The environment (Triton interpreter on, DGL backend, hypothesis
profile) is set by ../conftest.py, which pytest loads first."""
import pytest

import dgl_accel


@pytest.fixture(params=["native", "triton"])
def path(request):
    """Run the test once per path; ``triton`` executes the kernels under the interpreter."""
    with dgl_accel.use_backend(request.param):
        dgl_accel.reset_stats()
        yield request.param


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts with empty stats and ends with the env-selected backend and no patching."""
    dgl_accel.reset_stats()
    yield
    dgl_accel.set_backend(None)
    dgl_accel.disable()
