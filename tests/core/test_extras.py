"""The adapters' peer libraries are extras: without DGL (or torch-geometric) each adapter entry raises an
ImportError that names ``dgl-accel[dgl]`` (``[pyg]``), while the core and the other adapter import; the
public modules list their lazy names in ``dir()``.  The peer is blocked in a subprocess
(``sys.modules[name] = None``), so both cases run in every lane, with or without the library installed."""
import json
import subprocess
import sys

import pytest

import dgl_accel

DGL_ENTRIES = ["patching", "functional", "dgl_rules", "grouping", "graph", "nn", "nn.graphconv", "sampling", "data",
               "routes", "distributed", "train_gcn"]
PYG_ENTRIES = ["pyg.nn", "pyg.nn.gcn_conv", "pyg.sampler", "pyg.loader", "pyg.swapping"]

PROBE = """
import importlib, json, sys
sys.modules[{blocked!r}] = None  # `import {blocked}` now fails as if it were not installed
import dgl_accel, dgl_accel.core, dgl_accel.pyg  # the core and the lazy PyG front door need neither peer
out = {{}}
for entry in {entries!r}:
    try:
        importlib.import_module("dgl_accel." + entry)
        out[entry] = ["imported", ""]
    except ImportError as error:
        out[entry] = [type(error).__name__, str(error)]
for name in {lazy!r}:
    try:
        getattr(dgl_accel if "." not in name else dgl_accel.pyg, name.split(".")[-1])
        out[name] = ["imported", ""]
    except ImportError as error:
        out[name] = [type(error).__name__, str(error)]
print(json.dumps(out))
"""


def _probe(blocked: str, entries: list[str], lazy: list[str]) -> dict:
    code = PROBE.format(blocked=blocked, entries=entries, lazy=lazy)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("blocked, entries, lazy, extra", [
    ("dgl", DGL_ENTRIES, ["swap", "enable"], "dgl"),
    ("torch_geometric", PYG_ENTRIES, ["pyg.swap", "pyg.GCNConv", "pyg.NeighborSampler", "pyg.NeighborLoader"], "pyg"),
])
def test_adapter_without_its_library_names_the_extra(blocked, entries, lazy, extra):
    results = _probe(blocked, entries, lazy)
    for entry, (kind, message) in results.items():
        assert kind == "ImportError", f"dgl_accel.{entry} without {blocked}: {kind} {message}"
        assert f"pip install 'dgl-accel[{extra}]'" in message, f"dgl_accel.{entry}: {message}"
        assert blocked in message


def test_a_broken_module_inside_a_peer_is_not_renamed():
    """Only the peer library's own absence becomes the extra's message; another missing module propagates."""
    from dgl_accel.core.extras import missing_extra
    other = ModuleNotFoundError("No module named 'dgl.sparse'", name="dgl.sparse")
    assert missing_extra(other, "dgl_accel.nn") is other


@pytest.mark.parametrize("module", ["dgl_accel", "dgl_accel.pyg"])
def test_dir_lists_the_lazy_names(module):
    mod = sys.modules.get(module) or __import__(module, fromlist=["_"])
    missing = [name for name in mod.__all__ if name not in dir(mod)]
    assert not missing, f"dir({module}) lacks {missing}"
    assert "pyg" in dir(dgl_accel) and "core" in dir(dgl_accel)
