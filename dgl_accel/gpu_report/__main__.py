"""``python -m dgl_accel.gpu_report``: see :mod:`dgl_accel.gpu_report.cli`."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
