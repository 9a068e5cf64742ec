"""Test-wide setup: Triton interpreter on (before anything imports triton), hypothesis profiles,
and a ``path`` fixture that runs a test on both the native and the Triton path."""
import os

os.environ["TRITON_INTERPRET"] = "1"  # kernels run on CPU tensors through the interpreter
os.environ.setdefault("DGLBACKEND", "pytorch")

import pytest  # noqa: E402

import dgl_accel  # noqa: E402
from dgl_accel.testing.profiles import load_profile, register_profiles  # noqa: E402

register_profiles()
load_profile()


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
