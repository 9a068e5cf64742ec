"""Run an example or CLI script in the test's own process, as ``python script args`` would (DGL-free):
the quick case of the example tests; their slow case starts a fresh interpreter."""
from __future__ import annotations

import runpy
import subprocess
import sys
import traceback
from pathlib import Path

__all__ = ["run_script_here"]


def run_script_here(monkeypatch, capsys, script: Path, *args, env=None,
                    local_modules=("coauthor_sage",)) -> subprocess.CompletedProcess:
    """``python script *args`` in this process (runpy, as __main__): its exit status, stdout and stderr
    as a ``CompletedProcess``.  ``env`` (a dict) is set for the call; modules next to the script import
    as they would there, and ``local_modules`` are dropped afterwards so that no later test sees them."""
    monkeypatch.syspath_prepend(str(script.parent))
    monkeypatch.setattr(sys, "argv", [str(script), *args])
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = 0
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:  # as the interpreter exits: a message to stderr and 1, or the code
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        code = 1 if isinstance(exc.code, str) else exc.code or 0
    except Exception:  # uncaught: as the interpreter, its traceback on stderr and 1
        traceback.print_exc()
        code = 1
    finally:
        for name in local_modules:
            sys.modules.pop(name, None)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(sys.argv, code, out.out, out.err)
