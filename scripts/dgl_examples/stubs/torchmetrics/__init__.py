"""Minimal stand-in for torchmetrics (scripts/dgl_examples/stubs): only ``functional.accuracy``,
which graphsage's node_classification.py uses.  run.py puts it on the path only when the real
package is not importable; the reported numbers use the real one (install_deps.sh)."""
