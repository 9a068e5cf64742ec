"""Check (``--check``) that upstream/ holds DGL's example files byte-identical, by their git blob
SHA-1 listed in upstream/SOURCES.txt, or re-extract them from a DGL git dir (``--git-dir``, e.g.
the bare repository that ``fetch github:dmlc/dgl`` gives, or a clone's .git) at ``--tag``.

    python scripts/dgl_examples/vendor.py --check
    python scripts/dgl_examples/vendor.py --git-dir /path/to/dgl/.git --tag v2.1.0
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

UPSTREAM = Path(__file__).resolve().parent / "upstream"
SOURCES = UPSTREAM / "SOURCES.txt"


def blob_sha1(data: bytes) -> str:
    """Git's object id of a blob with these bytes (what ``git hash-object`` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sources() -> list[tuple[str, str, str]]:
    """(blob sha1, path under upstream/, path in DGL) per vendored file."""
    rows = []
    for line in SOURCES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            sha, here, there = line.split()
            rows.append((sha, here, there))
    return rows


def check() -> list[str]:
    """One message per vendored file that is missing or differs from DGL's blob; [] when all match."""
    bad = []
    for sha, here, there in sources():
        path = UPSTREAM / here
        if not path.is_file():
            bad.append(f"{here}: missing (expected DGL's {there}, blob {sha})")
        elif (got := blob_sha1(path.read_bytes())) != sha:
            bad.append(f"{here}: blob {got} differs from DGL's {there} blob {sha}")
    return bad


def extract(git_dir: Path, tag: str) -> None:
    for _, here, there in sources():
        data = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{tag}:{there}"],
                              check=True, capture_output=True).stdout
        (UPSTREAM / here).parent.mkdir(parents=True, exist_ok=True)
        (UPSTREAM / here).write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true")
    p.add_argument("--git-dir", type=Path)
    p.add_argument("--tag", default="v2.1.0")
    a = p.parse_args(argv)
    if a.git_dir:
        extract(a.git_dir, a.tag)
    bad = check()
    print("\n".join(bad) if bad else f"{len(sources())} files byte-identical to DGL's (blob SHA-1s in {SOURCES.name})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
