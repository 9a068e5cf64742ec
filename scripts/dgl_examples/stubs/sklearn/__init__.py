"""Minimal stand-in for scikit-learn (scripts/dgl_examples/stubs): only what node2vec's model.py
uses, ``linear_model.LogisticRegression(...).fit(x, y).score(x, y)``.  run.py puts it on the path
only when the real package is not importable (the regression test on a machine without it);
the reported numbers use the real one (install_deps.sh)."""
