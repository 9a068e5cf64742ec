"""Environment for every pytest item, tests/ and the doctests of dgl_accel alike (this file is
loaded before any of them is imported): Triton's interpreter on before anything imports triton,
DGL's backend chosen, and the hypothesis profile ("ci" unless $HYPOTHESIS_PROFILE says otherwise).
Fixtures for tests/ live in tests/conftest.py."""
import os

os.environ["TRITON_INTERPRET"] = "1"  # kernels run on CPU tensors through the interpreter
os.environ.setdefault("DGLBACKEND", "pytorch")

from dgl_accel.testing.profiles import load_profile  # noqa: E402  (after the environment above)

load_profile()  # registers "ci" and "local" first
