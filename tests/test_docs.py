"""The docs name only what exists: every repository path, ``dgl_accel.*`` name and command in README.md,
CONTRIBUTING.md and the pages under docs/ that describe today's code.

Checked in each page:

* paths: relative paths in backticks (inline or in code blocks) and markdown link targets. A backticked
  token is a repository path when it contains a ``/`` and starts with a top-level entry of the repository
  (``scripts/test.sh``, ``tests/core/``), or ends with a known file extension (``core/launch.py``,
  ``extrema.py``: then it must be the end of some file's path in the tree). Link targets resolve from the
  page's folder. Left alone: URLs, placeholders and globs (``<op>``, ``*``, ``$OUT``), paths outside the
  repository (``../shared/datasets``) and other projects' files the pages cite (:func:`is_external`).
* names: ``dgl_accel.a.b`` in backticks or code blocks must import, or be an attribute of the longest
  importable prefix (``dgl_accel.core.dense.onednn_enabled``); so must every name of a shown
  ``from dgl_accel.x import a, b`` (pages) and of every ``dgl_accel`` import of ``examples/*.py``, the
  public import paths users copy.
* commands: ``python -m X`` names a module ``importlib.util.find_spec`` finds; ``bash X`` / ``python X`` /
  ``torchrun ... X`` name an existing file; ``make T`` a target of the Makefile; ``dgl-accel[E]`` an extra
  of pyproject.toml.

Dated records are not checked (they may name what was true when they were written): docs/history/ and
the GPU run logs and notes (docs/gpu_notes.md, docs/gpu_report_*).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Dated records under docs/: they describe a run or a state of the tree on a day, so they may name old paths.
HISTORY = ("docs/history/", "docs/gpu_notes.md", "docs/gpu_report_")

# Files of other projects that the pages cite by their own paths: DGL's examples (vendored copies are under
# scripts/dgl_examples/upstream/), DGL's and PyG's test suites and sources.
EXTERNAL_PREFIXES = ("examples/pytorch/", "tests/python/", "test/", "dgl/", "torch_geometric/")
EXTERNAL_NAMES = {"test_nn.py", "test_dataloader.py", "test_sampling.py", "test_link_neighbor_loader.py"}


def is_external(token: str) -> bool:
    return token.startswith(EXTERNAL_PREFIXES) or token in EXTERNAL_NAMES


EXTENSIONS = ("py", "sh", "md", "toml", "txt", "log", "png", "json", "jsonl", "csv", "cfg", "ini", "yaml", "yml")
SKIP_DIRS = {".git", ".venv", ".venv-core", "build", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
             "node_modules"}
# Top-level entries that make a backticked token with a "/" a repository path.
TOP_LEVEL = sorted({p.name for p in ROOT.iterdir() if p.name not in SKIP_DIRS and not p.name.startswith(".")}
                   | {".ci"})

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)((?:(?!\n\s*\n).)+?)\1", re.S)  # not across paragraphs
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
DOTTED = re.compile(r"(?<![\w.])dgl_accel(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"\bfrom\s+(dgl_accel(?:\.\w+)*)\s+import\s+\(?\s*(\w+(?:\s+as\s+\w+)?(?:\s*,\s*\w+(?:\s+as\s+\w+)?)*)")
COMMAND = re.compile(r"(?<![\w/.-])(python3?(?:\.\d+)?|bash|sh|torchrun|make)((?:\s+\S+)+)")
EXTRA = re.compile(r"dgl-accel\[([\w,\s-]+)\]")
PLACEHOLDER = re.compile(r"[<>*?$~{}|\\]|\.\.|^/|://")
PATH_TOKEN = re.compile(r"^\.?[\w][\w.\-/+]*$")
STRIP = "`'\",;:()[]"


def is_history(page: str) -> bool:
    return page.startswith(HISTORY)


def pages() -> list[str]:
    """README.md, CONTRIBUTING.md and every docs page that describes today's code."""
    found = ["README.md", "CONTRIBUTING.md"]
    found += sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return [p for p in found if not is_history(p)]


def repo_files() -> list[str]:
    """Every file and folder of the working tree (ignored build outputs and environments apart), as posix paths."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        rel = Path(folder).relative_to(ROOT).as_posix()
        prefix = "" if rel == "." else rel + "/"
        out += [prefix + name for name in files + dirs]
    return out


_FILES: list[str] | None = None


def _path_exists(token: str, page_dir: Path, files: list[str]) -> bool:
    path = token.rstrip("/")
    if (ROOT / path).exists() or (page_dir / path).exists():
        return True
    first = path.split("/", 1)[0]
    if first in TOP_LEVEL:
        return False  # rooted at a top-level entry: it must be exactly there
    # A path named from inside a package (`core/launch.py`, `extrema.py`): the end of some path in the tree.
    return any(f == path or f.endswith("/" + path) for f in files)


def _looks_like_path(token: str) -> bool:
    if not token or PLACEHOLDER.search(token) or not PATH_TOKEN.match(token):
        return False
    path = token.rstrip("/")
    if "/" in path and path.split("/", 1)[0] in TOP_LEVEL:
        return True
    name = path.rsplit("/", 1)[-1]
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and bool(stem) and not stem.startswith(".") and ext in EXTENSIONS


def _module_resolves(name: str) -> str | None:
    """None when ``name`` is a module or an attribute of its longest importable prefix, else why not."""
    parts = name.split(".")
    own = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        try:
            obj = importlib.import_module(prefix)
        except ModuleNotFoundError as error:
            if error.name in own:
                continue  # not a module: an attribute of a shorter prefix, maybe
            return f"importing {prefix} fails: {error}"  # a dependency of it is missing
        except Exception as error:  # any other import-time failure is a finding too
            return f"importing {prefix} fails: {type(error).__name__}: {error}"
        for attr in parts[i:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif hasattr(obj, "__path__") and importlib.util.find_spec(f"{obj.__name__}.{attr}") is not None:
                obj = importlib.import_module(f"{obj.__name__}.{attr}")  # a submodule its package does not import
            else:
                return f"{prefix} has no attribute {attr!r}"
        return None
    return "no such module"


def _find_module(name: str) -> bool:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # `python -m bench.x` runs from the repository root
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text() if (ROOT / "Makefile").exists() else ""
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, flags=re.M))


def _extras() -> set[str]:
    """The extras of pyproject.toml's [project.optional-dependencies] (read as text: tomllib is 3.11+)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[-1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*=", section, flags=re.M))


def _check_command(prog: str, args: str, page_dir: Path, files: list[str]) -> list[str]:
    words = [w.strip(STRIP) for w in args.split()]
    problems = []
    if prog == "make":
        target = words[0] if words else ""
        if re.fullmatch(r"[\w-]+", target) and target not in _makefile_targets():
            problems.append(f"make {target}: no such Makefile target")
        return problems
    if prog.startswith("python") and len(words) >= 2 and words[0] == "-m":
        module = words[1]
        if re.fullmatch(r"[A-Za-z_][\w.]*", module) and not _find_module(module):
            problems.append(f"python -m {module}: module not found")
        return problems
    # bash X / python X / torchrun [--flags] X: the first word that is not a flag is the script
    script = next((w for w in words if not w.startswith("-")), "")
    if "=" in script or not _looks_like_path(script):
        return problems
    if not _path_exists(script, page_dir, files):
        problems.append(f"{prog} {script}: no such file")
    return problems


def _segments(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, text, is a fenced code block) for each run of the page, fences alternating with prose."""
    out: list[tuple[int, str, bool]] = []
    start, lines, fenced = 1, [], False
    for lineno, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            out.append((start, "\n".join(lines), fenced))
            start, lines, fenced = lineno + 1, [], not fenced
        else:
            lines.append(line)
    out.append((start, "\n".join(lines), fenced))
    return out


def _check_span(span: str, page_dir: Path, files: list[str]) -> list[str]:
    found: list[str] = []
    for prog, args in COMMAND.findall(span):
        found += _check_command(prog, args.split("\n", 1)[0], page_dir, files)
    for extras in EXTRA.findall(span):
        for extra in (e.strip() for e in extras.split(",")):
            if extra not in _extras():
                found.append(f"dgl-accel[{extra}]: no such extra in pyproject.toml")
    imported = [f"{module}.{name.split()[0]}" for module, names in FROM_IMPORT.findall(span)
                for name in names.split(",") if name.strip()]
    for name in dict.fromkeys(DOTTED.findall(span) + imported):
        why = _module_resolves(name)
        if why:
            found.append(f"{name}: {why}")
    for raw in span.split():
        token = raw.strip(STRIP).rstrip(".")
        if is_external(token) or not _looks_like_path(token):
            continue
        if not _path_exists(token, page_dir, files):
            found.append(f"{token}: no such file or folder")
    return found


def check_text(text: str, page: str = "README.md") -> list[str]:
    """Every name in the markdown ``text`` (read as the page ``page``) that does not exist, as "line N: name: why"."""
    global _FILES
    if _FILES is None:
        _FILES = repo_files()
    page_dir = (ROOT / page).parent
    problems: list[str] = []
    for first, segment, fenced in _segments(text):
        # (offset in the segment, what was found there)
        found: list[tuple[int, str]] = []
        if fenced:
            offset = 0
            for line in segment.split("\n"):
                found += [(offset, f) for f in _check_span(line, page_dir, _FILES)]
                offset += len(line) + 1
        else:
            for match in INLINE_CODE.finditer(segment):
                found += [(match.start(), f) for f in _check_span(match.group(2), page_dir, _FILES)]
            prose = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), segment)
            for match in LINK.finditer(prose):
                target = match.group(1).split("#", 1)[0]
                if not target or re.match(r"^[a-z][\w+.-]*:", target):  # URL, mailto:, an anchor in the page
                    continue
                if not (page_dir / target).exists():
                    where = page_dir.relative_to(ROOT).as_posix()
                    found.append((match.start(), f"{target}: linked file not found (from {where}/)"))
        lines = [f"line {first + segment.count(chr(10), 0, offset)}: {what}" for offset, what in found]
        problems += list(dict.fromkeys(lines))
    return problems


@pytest.mark.parametrize("page", pages())
def test_page_names_only_what_exists(page):
    problems = check_text((ROOT / page).read_text(encoding="utf-8"), page)
    assert not problems, f"{page} names what does not exist:\n  " + "\n  ".join(problems)


def example_imports(path: Path) -> list[str]:
    """Every ``dgl_accel`` name an example script imports (``import dgl_accel.x``, ``from dgl_accel.x import y``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.split(".")[0] == "dgl_accel"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "dgl_accel":
            names += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    return names


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_example_imports_resolve(example):
    names = example_imports(ROOT / "examples" / example)
    problems = [f"{name}: {why}" for name in names if (why := _module_resolves(name))]
    assert not problems, f"examples/{example} imports what does not exist:\n  " + "\n  ".join(problems)


def test_checker_reports_a_missing_path_module_and_command():
    text = "\n".join([
        "Run `bash scripts/does_not_exist.sh` and see `scripts/does_not_exist.sh`.",
        "Then `python -m dgl_accel.no_such_module`, `dgl_accel.core.no_such_name` and [a page](docs/nope.md).",
        "```bash",
        "python bench/bench_nothing.py --quick",
        "```",
        "Fine: `scripts/test.sh`, `dgl_accel.core.extras.missing_extra`, `tests/test_<op>.py`, `bench/results/*.csv`,",
        "`../shared/datasets/npz`, https://example.org/a/b.py, `sample/gather`, `python -m dgl_accel.gpu_report`.",
        "`from dgl_accel.sampling import NeighborSampler, NoSuchSampler` and `from dgl_accel import enable`.",
    ])
    problems = check_text(text)
    for name in ("scripts/does_not_exist.sh", "dgl_accel.no_such_module", "dgl_accel.core.no_such_name",
                 "docs/nope.md", "bench/bench_nothing.py", "dgl_accel.sampling.NoSuchSampler"):
        assert any(name in p for p in problems), (name, problems)
    assert all(p.startswith(("line 1", "line 2", "line 4", "line 8")) for p in problems), problems
    assert not any("NeighborSampler" in p or "enable" in p for p in problems), problems


def test_history_pages_are_not_checked():
    assert not is_history("docs/paths.md")
    assert is_history("docs/history/readme-2026-12-06.md") and is_history("docs/gpu_notes.md")
    assert "README.md" in pages() and "CONTRIBUTING.md" in pages()
    assert not any(is_history(p) for p in pages())


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference material to docs/ (at most 250)"
