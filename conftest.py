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
# Test functions with no case cheap enough for the quick lane yet, each with why: the full run has them.
# Give one a quick case and take it off this list (the check below fails on a listed function that has one).
FULL_RUN_ONLY = {
    "tests/test_train_gcn.py::test_cora_accuracy_with_backend_enabled_matches_native_dgl":
        "15 trainings of Kipf & Welling's 200 epochs on Cora: the accuracy bound needs the full recipe",
    "tests/policies/test_execution_paths.py::test_cora_same_accuracy_with_execution_paths": "trains Cora to accuracy",
    "tests/sampling/test_neighbor.py::test_graphsage_accuracy_matches_dgl_sampler": "trains GraphSAGE to accuracy",
    "tests/examples/test_dgl_examples.py::test_gat_example_runs_unchanged_with_our_gatconv":
        "DGL's example, as shipped",
    "tests/examples/test_dgl_examples.py::test_graphsage_runs_unchanged_with_our_samplers": "DGL's example, as shipped",
    "tests/examples/test_dgl_examples.py::test_node2vec_runs_unchanged_with_our_walks": "DGL's example, as shipped",
    "tests/distributed/test_distributed.py::test_multi_process_equals_one_process":
        "starts torch.distributed process groups",
    "tests/sampling/test_golden.py::test_sampler_output_is_bit_identical": "recorder subprocesses per mode",
    "tests/pyg/test_ddp_example.py::test_two_ranks_train_a_swapped_model_in_step":
        "starts torch.distributed process groups (torchrun, two ranks)",
}


# ------------------------------------------------------------------ the longest modules start first
# pytest-xdist hands modules to workers in collection order; a module of minutes collected late ends its lane
# alone on one core.  These start first (the slowest tests of CONTRIBUTING.md's "Lane times"), in this order.
LONG_FIRST = (
    "tests/kernels/test_check.py",       # the AOT compile of every registered specialisation (main lane)
    "tests/gpu_report/test_report.py",   # the GPU report's --interpret --tiny run (core lane)
    "tests/test_train_gcn.py",           # Cora's accuracy, 15 trainings (main lane)
)


def _long_first(item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)



def _function(item) -> str:
    return item.nodeid.split("[", 1)[0]  # a parametrised test's cases share the function's node id


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Before ``-m`` deselects anything: every collected test function; and the longest modules first."""
    _functions.update(_function(item) for item in items)
    items.sort(key=_long_first)  # stable: every other test keeps its place


def pytest_collection_finish(session):
    """The quick lane (``-m "not slow"``) runs at least one case of every test function it collected: a test
    whose every case is slow fails the run here, naming it (give it a quick case: ``testing.marks.quick_first``)."""
    markexpr = session.config.getoption("markexpr") or ""
    if "not slow" not in markexpr or session.config.getoption("keyword") or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist worker cannot report a usage error: scripts/test.sh --quick checks with --collect-only first
    kept = {_function(item) for item in session.items}
    stale = sorted(f for f in FULL_RUN_ONLY if f in kept)
    if stale:
        raise pytest.UsageError(f"conftest.FULL_RUN_ONLY lists test functions that now have a quick case: "
                                f"{', '.join(stale)}. Fix: take them off the list.")
    uncovered = sorted(_functions - kept - set(FULL_RUN_ONLY))
    if uncovered and not any(word in markexpr for word in ("interpreter", "aot", "datasets")):
        raise pytest.UsageError(
            f"the quick lane (-m {markexpr!r}) would run no case of {len(uncovered)} test function(s): "
            + ", ".join(uncovered[:20]) + (" ..." if len(uncovered) > 20 else "")
            + ". Fix: mark all but one case slow (dgl_accel.testing.marks.quick_first), not the whole test.")
