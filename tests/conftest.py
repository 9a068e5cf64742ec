"""Fixtures for tests/: a ``path`` fixture that runs a test on both the native and the Triton path,
and a fresh state per test.  The environment (Triton interpreter on, DGL backend, hypothesis
profile) is set by ../conftest.py, which pytest loads first.  Works without DGL (tests/core runs in
a lane that has none): the patching module, which needs DGL, is touched only if a test loaded it."""
import sys

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
    if "dgl_accel.patching" in sys.modules:  # nothing can be patched unless a test imported it
        dgl_accel.disable()


@pytest.fixture
def fused_attention():
    """The drop-in attention modules take their fused op at every shape (the CPU rule,
    ``dgl_accel.policies.attention``, routes several narrow heads to DGL's forward): for the tests
    of the fused path through the modules (``pytestmark = pytest.mark.usefixtures("fused_attention")``)."""
    with dgl_accel.use_attention_path("fused"):
        yield
