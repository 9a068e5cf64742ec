"""Fixtures for tests/: a ``path`` fixture that runs a test on both the native and the Triton path,
and a fresh state per test.  The environment (Triton interpreter on, DGL backend, hypothesis
profile) is set by ../conftest.py, which pytest loads first.  Works without DGL (tests/core runs in
a lane that has none): the patching module, which needs DGL, is touched only if a test loaded it."""
import os
import sys

import pytest
import torch

import dgl_accel
from dgl_accel.kernels.loader import interpreted_fetches
from dgl_accel.testing.marks import PATHS

# Under pytest-xdist (scripts/test.sh: one worker per core) each worker runs one intra-op thread: two
# workers with two threads each on two cores made OpenMP's spinning barriers cost a full-graph Cora GCN
# run 2-10x its time.  A test that needs more threads says so: @pytest.mark.threads(2).
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"  # and the subprocesses a test starts (examples, the GPU report's run)


@pytest.fixture(params=PATHS)
def path(request):
    """Run the test once per path; ``triton`` executes the kernels under the interpreter (that case
    is marked ``interpreter`` by the fixture itself)."""
    with dgl_accel.use_backend(request.param):
        dgl_accel.reset_stats()
        yield request.param


@pytest.fixture(autouse=True)
def _fresh_state(request):
    """Each test starts with empty stats and ends with the env-selected backend and no patching; a test
    that ran a Triton kernel under the interpreter must carry the ``interpreter`` mark (the ``path``
    fixture and :data:`dgl_accel.testing.marks.PATHS` put it on their triton case), so that
    ``-m interpreter`` / ``-m "not interpreter"`` select what they say."""
    dgl_accel.reset_stats()
    before = interpreted_fetches()
    wanted, threads = request.node.get_closest_marker("threads"), torch.get_num_threads()
    if wanted:
        torch.set_num_threads(wanted.args[0])
    yield
    if wanted:
        torch.set_num_threads(threads)
    dgl_accel.set_backend(None)
    if "dgl_accel.patching" in sys.modules:  # nothing can be patched unless a test imported it
        dgl_accel.disable()
    if interpreted_fetches() > before and request.node.get_closest_marker("interpreter") is None:
        message = (f"{request.node.nodeid} ran {interpreted_fetches() - before} Triton kernel launch(es) under the "
                   f"interpreter without the 'interpreter' mark. Fix: take the path fixture, parametrize with "
                   f"dgl_accel.testing.marks.PATHS, or mark the test @pytest.mark.interpreter.")
        unmarked = os.environ.get("DGL_ACCEL_UNMARKED_INTERPRETER")  # a file: collect them all instead of failing
        if unmarked:
            with open(unmarked, "a") as out:
                out.write(request.node.nodeid + "\n")
        else:
            pytest.fail(message)


@pytest.fixture
def fused_attention():
    """The drop-in attention modules take their fused op at every shape (the CPU rule,
    ``dgl_accel.policies.attention``, routes several narrow heads to DGL's forward): for the tests
    of the fused path through the modules (``pytestmark = pytest.mark.usefixtures("fused_attention")``)."""
    with dgl_accel.use_attention_path("fused"):
        yield


def pytest_collection_modifyitems(items):
    """A case parametrised with the path ``"triton"`` (any parameter) runs kernels under the interpreter:
    it gets the ``interpreter`` mark here, as the ``path`` fixture's triton case does."""
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec and any(isinstance(v, str) and v == "triton" for v in spec.params.values()):
            item.add_marker(pytest.mark.interpreter)
