"""The run's environment (device, driver, versions, mode) and its result rows.

Every row of ``bench/results/gpu_<section>.jsonl`` carries the environment and a timestamp, so rows
of different runs and machines can share one file (it is appended to, like ``bench/harness.py``'s).
"""
from __future__ import annotations

import datetime
import json
import platform
import subprocess
from pathlib import Path

import torch


def driver_version() -> str:
    """The NVIDIA driver version (``nvidia-smi``), or ``"n/a"`` where there is none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return out.strip().splitlines()[0] if out.strip() else "n/a"
    except (OSError, subprocess.SubprocessError):
        return "n/a"


def environment(device: torch.device, mode: str) -> dict:
    """Device name, driver, torch / triton / CUDA versions, Python, host and the report's mode."""
    # lazy: importing triton fixes the process's Triton mode, which cli chooses first
    import triton

    if device.type == "cuda":
        name, cc = torch.cuda.get_device_name(device), ".".join(map(str, torch.cuda.get_device_capability(device)))
    else:
        name, cc = f"cpu ({platform.processor() or platform.machine()}, Triton interpreter)", ""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {"run": f"{started} {platform.node()}", "device": name, "compute_capability": cc,
            "driver": driver_version() if device.type == "cuda" else "n/a",
            "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda or "n/a",
            "python": platform.python_version(), "host": platform.node(), "mode": mode}


class Results:
    """Rows by section; :meth:`write` appends them to ``<out>/bench/results/gpu_<section>.jsonl``."""

    def __init__(self, env: dict, stream_to: Path | None = None):
        self.env = env
        self.rows: dict[str, list[dict]] = {}
        self.written: dict[str, int] = {}  # rows per section already appended to its file
        # with a folder, every row is appended the moment it is added: the first GPU lease was cut
        # inside the sampling section and lost the cases it had measured there
        self.stream_to = stream_to

    def add(self, section: str, **fields) -> dict:
        row = {"section": section, **fields, **self.env,
               "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        self.rows.setdefault(section, []).append(row)
        if self.stream_to is not None:
            self.write(self.stream_to)
        return row

    def section(self, name: str) -> list[dict]:
        return self.rows.get(name, [])

    def write(self, out: Path) -> list[Path]:
        """Append the rows not yet written (with ``stream_to``, on every :meth:`add`), so a run cut
        short by its lease still leaves what it measured."""
        folder = out / "bench" / "results"
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for section, rows in self.rows.items():
            path = folder / f"gpu_{section}.jsonl"
            paths.append(path)
            done = self.written.get(section, 0)
            if done == len(rows):  # nothing new: streaming calls this on every add
                continue
            with open(path, "a") as f:
                for row in rows[done:]:
                    f.write(json.dumps(row, default=str) + "\n")
            self.written[section] = len(rows)
        return paths
