"""Architecture rules that import-linter does not express (its contracts live in pyproject.toml).

Checked on the package as it installs (kernels/ as dgl_accel.kernels, see scripts/installed_layout.py):

  (a) no import cycle among dgl_accel modules: grimp's graph (module-level and function-local
      imports) plus the package ``__init__`` an import runs; a package importing its child while
      the child imports a name from the package's ``__init__`` is a cycle too
  (b) no private name (``_x``, not dunder) imported from another dgl_accel module, nor from a
      private module (``from ._errors import ...``, ``from . import _mod``)
  (c) no module over 450 lines unless its docstring says it "stays whole" and why
  (d) no module-level dgl import in core/ and kernels/; numba only in the one runtime module, inside
      a try/except ImportError guard
  (e) every function-local import has a one-line reason comment on its line or the line above
      (a run of consecutive imports shares one)
  (f) tests/core (the lane that runs without DGL and numba, scripts/bootstrap_core.sh) imports neither,
      anywhere in a module, and of dgl_accel only the package itself, core/, kernels/ and the testing
      modules that import no dgl; nor does it reach a DGL-needing name through ``dgl_accel.<name>``

Each checker returns "path:line: message" strings; the ``*_detects_*`` tests run it on tiny fixture
packages in tmp_path, so each checker is shown to find what it should even while the tree is clean.
"""
from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("installed_layout", ROOT / "scripts" / "installed_layout.py")
layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layout)

PACKAGE = layout.PACKAGE
MAX_LINES = 450
DGL_FREE = ("core", "kernels")            # (d): subpackages that never import dgl at module level
NUMBA_RUNTIME = "core.jit.runtime"        # (d): the one module that imports numba (guarded)
CORE_TESTS = (ROOT / "tests" / "core", ROOT / "tests" / "gpu_report")  # (f): the DGL-free test lane


# ------------------------------------------------------------------------------------ sources
def package_files(folder: Path, package: str) -> dict[str, Path]:
    """Module name -> file for a plain package folder (the fixtures)."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
        out[".".join([package, *parts])] = path
    return out


def shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository where it is inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _walk_with_parents(tree: ast.AST):
    """(node, enclosing function or None) for every node."""
    stack = [(tree, None)]
    while stack:
        node, func = stack.pop()
        yield node, func
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else func
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


# ------------------------------------------------------------------------------ (a) cycles
_GRAPH = """
import grimp, json, sys
sys.path.insert(0, sys.argv[2])
g = grimp.build_graph(sys.argv[1], cache_dir=None)
print(json.dumps([[m, i, d["line_number"]] for m in sorted(g.modules)
                  for i in sorted(g.find_modules_directly_imported_by(m))
                  for d in g.get_import_details(importer=m, imported=i)]))
"""


def import_edges(package: str, search_path: Path) -> list[tuple[str, str, int]]:
    """(importer, imported, line) of every import inside ``package``, found on ``search_path``.

    grimp runs in a subprocess: this process has already imported dgl_accel from the work tree,
    where dgl_accel/kernels does not exist, and grimp would find that copy."""
    out = subprocess.run([sys.executable, "-c", _GRAPH, package, str(search_path)], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"grimp could not build the import graph of {package}:\n{out.stderr[-3000:]}")
    return [tuple(e) for e in json.loads(out.stdout)]


def with_package_inits(edges):
    """Add the edges to the ``__init__`` files an import runs: importing a.b.c runs a.b's, unless the
    importer is inside a.b already (then a.b is being imported, not imported)."""
    out = {(m, i, line, None) for m, i, line in edges}
    for m, i, line in edges:
        parts = i.split(".")
        for k in range(1, len(parts)):
            pkg = ".".join(parts[:k])
            if not (m == pkg or m.startswith(pkg + ".")):
                out.add((m, pkg, line, i))
    return sorted(out, key=lambda e: (e[0], e[1], e[2], e[3] or ""))


def strongly_connected(nodes, succ) -> list[list[str]]:
    """Tarjan's components with more than one module (iterative)."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return comps


def check_cycles(edges, files: dict[str, Path]) -> list[str]:
    edges = with_package_inits(edges)
    succ = {}
    for m, i, _, _ in edges:
        if m != i:
            succ.setdefault(m, set()).add(i)
    problems = []
    for comp in strongly_connected(set(succ) | {i for s in succ.values() for i in s}, succ):
        members = set(comp)
        problems.append(f"import cycle among {len(comp)} modules: {', '.join(comp)}")
        for m, i, line, via in edges:
            if m in members and i in members and m != i:
                how = f" (runs its __init__: the import is of {via})" if via else ""
                problems.append(f"  {shown(files[m]) if m in files else m}:{line}: {m} imports {i}{how}")
    return problems


# --------------------------------------------------------------------------- (b) private names
def check_private_imports(files: dict[str, Path], package: str) -> list[str]:
    problems = []
    for module, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom):
                source = resolve(module, is_pkg, node)
                if source.split(".")[0] != package:
                    continue
                private = [p for p in source.split(".")[1:] if is_private(p)]
                if private:
                    problems.append(f"{shown(path)}:{node.lineno}: imports from private module {source} "
                                    f"({private[0]}): make it public")
                for alias in node.names:
                    if is_private(alias.name):
                        problems.append(f"{shown(path)}:{node.lineno}: imports private name {alias.name} from "
                                        f"{source}: make it public, or keep it inside its module")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == package and any(is_private(p) for p in parts[1:]):
                        problems.append(f"{shown(path)}:{node.lineno}: imports private module {alias.name}: "
                                        f"make it public")
    return problems


# ------------------------------------------------------------------------------- (c) length
_WHOLE = re.compile(r"stays whole\W+\w+(\W+\w+){2}", re.IGNORECASE)


def check_lengths(files: dict[str, Path], limit: int = MAX_LINES) -> list[str]:
    problems = []
    for path in files.values():
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > limit and not _WHOLE.search(ast.get_docstring(ast.parse(text)) or ""):
            problems.append(f"{shown(path)}:1: {n} lines (limit {limit}): split it, or say in the module "
                            f"docstring why it \"stays whole\" (the phrase and a reason)")
    return problems


# ---------------------------------------------------------------------------- (d) DGL-free
def _module_level(body, in_guard=False):
    """(import statement, inside a try/except ImportError) for every import run at import time."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_guard
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue  # runs when called: import-linter's dgl-free contract covers those
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            guarded = in_guard or any(_catches_import_error(h.type) for h in node.handlers)
            yield from _module_level(node.body, guarded)
            for part in (*[h.body for h in node.handlers], node.orelse, node.finalbody):
                yield from _module_level(part, in_guard)
        else:  # if/for/while/with/class bodies run at import time too
            for part in [getattr(node, f, []) for f in ("body", "orelse", "finalbody")] + [
                    c.body for c in getattr(node, "cases", [])]:
                if isinstance(part, list):
                    yield from _module_level(part, in_guard)


def _catches_import_error(t) -> bool:
    names = [t] if not isinstance(t, ast.Tuple) else t.elts
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _roots(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name.split(".")[0] for a in node.names]
    return [] if node.level else [(node.module or "").split(".")[0]]


def check_dgl_free(files: dict[str, Path], package: str) -> list[str]:
    scopes = tuple(f"{package}.{s}" for s in DGL_FREE)
    runtime = f"{package}.{NUMBA_RUNTIME}"
    problems = []
    for module, path in files.items():
        if not any(module == s or module.startswith(s + ".") for s in scopes):
            continue
        for node, guarded in _module_level(parse(path).body):
            roots = _roots(node)
            if "dgl" in roots:
                problems.append(f"{shown(path)}:{node.lineno}: module-level dgl import in a DGL-free layer "
                                f"({', '.join(DGL_FREE)}): move the code to dgl_accel.graph or above")
            if "numba" in roots and not (module == runtime and guarded):
                where = ("outside its try/except ImportError guard" if module == runtime
                         else f"outside {runtime}, the one module allowed to import it")
                problems.append(f"{shown(path)}:{node.lineno}: module-level numba import {where}")
    return problems


# ---------------------------------------------------------------------------- (f) tests/core
def _dgl_free_testing(package_dir: Path) -> set[str]:
    """The package's ``testing`` modules that import neither dgl nor numba anywhere."""
    out = set()
    for path in sorted((package_dir / "testing").glob("*.py")):
        roots = {r for n in ast.walk(parse(path)) if isinstance(n, (ast.Import, ast.ImportFrom)) for r in _roots(n)}
        if not roots & {"dgl", "numba"}:
            out.add(path.stem)
    return out


def _named_modules(node) -> list[str]:
    """What an absolute import names: ``import a.b`` -> a.b; ``from a import b`` -> a.b (b may be a
    module or a name, the caller decides)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [] if node.level else [f"{node.module}.{a.name}" for a in node.names]


def check_core_tests(folder: Path, package: str, package_dir: Path) -> list[str]:
    """(f): every import in every module under ``folder`` (function-local ones too) and every
    ``package.<name>`` attribute read stays inside the DGL-free part of ``package``."""
    testing_ok = _dgl_free_testing(package_dir)
    dgl_side = {p.name for p in package_dir.iterdir() if (p / "__init__.py").exists()}
    dgl_side |= {p.stem for p in package_dir.glob("*.py")}
    dgl_side -= {"__init__", "core", "kernels", "testing", "gpu_report"}  # gpu_report: DGL-free by contract
    allowed = f"{package}.core, kernels, testing.{{{','.join(sorted(testing_ok))}}}"
    problems = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(parse(path)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for bad in sorted(set(_roots(node)) & {"dgl", "numba"}):
                    problems.append(f"{shown(path)}:{node.lineno}: imports {bad}: tests/core runs where it is "
                                    f"not installed; move the test to tests/")
                for name in _named_modules(node):
                    parts = name.split(".")
                    if parts[0] != package or len(parts) < 2:
                        continue
                    if parts[1] in dgl_side or (parts[1] == "testing" and len(parts) > 2
                                                and parts[2] not in testing_ok):
                        problems.append(f"{shown(path)}:{node.lineno}: imports {'.'.join(parts[:3])}, which needs "
                                        f"DGL; tests/core may use {package}, {allowed}")
                        break
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == package
                  and node.attr in dgl_side):
                problems.append(f"{shown(path)}:{node.lineno}: {package}.{node.attr} loads DGL; "
                                f"tests/core may use {package}, {allowed}")
    return problems


# ------------------------------------------------------------------------ (e) local imports
_DIRECTIVE = re.compile(r"^\s*(noqa\b.*|type:\s*ignore.*|pragma:.*|isort:.*|fmt:.*)$", re.IGNORECASE)


def _reason_comments(text: str) -> dict[int, tuple[str, bool]]:
    """line -> (comment text without directives, whether the line holds only the comment)."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            words = [w for w in tok.string.lstrip("#").split("#") if not _DIRECTIVE.match(w)]
            reason = " ".join(w.strip() for w in words).strip()
            if re.search(r"[A-Za-z]{3}", reason):
                out[tok.start[0]] = (reason, tok.line[: tok.start[1]].strip() == "")
    return out


def check_local_import_reasons(files: dict[str, Path]) -> list[str]:
    problems = []
    for path in files.values():
        text = path.read_text(encoding="utf-8")
        comments = _reason_comments(text)
        justified_end = set()  # last lines of justified local imports: the next import may share it
        local = sorted((n for n, func in _walk_with_parents(ast.parse(text))
                        if func is not None and isinstance(n, (ast.Import, ast.ImportFrom))),
                       key=lambda n: n.lineno)
        for node in local:
            own = any(line in comments for line in range(node.lineno, node.end_lineno + 1))
            above = comments.get(node.lineno - 1, ("", False))[1]
            if own or above or (node.lineno - 1) in justified_end:
                justified_end.add(node.end_lineno)
            else:
                what = ast.get_source_segment(text, node).splitlines()[0]
                problems.append(f"{shown(path)}:{node.lineno}: function-local `{what.strip()}` without a reason: "
                                f"say why on its line or the line above (e.g. # lazy: triton loads only here)")
    return problems


# ----------------------------------------------------------------------------- the real tree
@pytest.fixture(scope="module")
def tree_files():
    return layout.module_files(ROOT)


@pytest.fixture(scope="module")
def tree_edges(tmp_path_factory):
    return import_edges(PACKAGE, layout.build(tmp_path_factory.mktemp("installed")))


def _report(problems: list[str], rule: str) -> None:
    if problems:
        shown_lines = problems[:150] + ([f"... and {len(problems) - 150} more"] if len(problems) > 150 else [])
        pytest.fail(f"{rule}: {len(problems)} problem lines\n" + "\n".join(shown_lines), pytrace=False)


def test_installed_layout_shows_the_kernels(tree_files, tree_edges):
    assert f"{PACKAGE}.kernels.registry" in tree_files
    assert any(i.startswith(f"{PACKAGE}.kernels.") and not m.startswith(f"{PACKAGE}.kernels")
               for m, i, _ in tree_edges), "no import of dgl_accel.kernels seen: the layout view is wrong"


def test_no_import_cycles(tree_edges, tree_files):
    _report(check_cycles(tree_edges, tree_files), "(a) import cycles")


def test_no_private_names_across_modules(tree_files):
    _report(check_private_imports(tree_files, PACKAGE), "(b) private names imported from another module")


def test_no_module_over_the_length_limit(tree_files):
    _report(check_lengths(tree_files), f"(c) modules over {MAX_LINES} lines")


def test_core_and_kernels_stay_dgl_free(tree_files):
    _report(check_dgl_free(tree_files, PACKAGE), "(d) DGL-free layers")


@pytest.mark.parametrize("folder", CORE_TESTS, ids=lambda f: f.name)
def test_core_tests_stay_dgl_free(folder):
    assert folder.is_dir() and any(folder.rglob("test_*.py"))
    _report(check_core_tests(folder, PACKAGE, ROOT / PACKAGE), f"(f) tests/{folder.name} imports DGL")


def test_function_local_imports_say_why(tree_files):
    _report(check_local_import_reasons(tree_files), "(e) function-local imports without a reason")


# ------------------------------------------------------------------- the checkers, on fixtures
def make_package(tmp_path: Path, name: str, files: dict[str, str]) -> dict[str, Path]:
    for rel, body in files.items():
        path = tmp_path / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return package_files(tmp_path / name, name)


def lines_of(problems: list[str], base: Path) -> list[str]:
    """'file:line' of each problem, the file relative to ``base`` (the fixture's tmp_path)."""
    found = (re.match(r"\s*(\S+?):(\d+):", p) for p in problems)
    return sorted(f"{Path(m.group(1)).relative_to(base).as_posix()}:{m.group(2)}" for m in found if m)


def test_cycle_checker_detects_cycles(tmp_path):
    files = make_package(tmp_path, "fx_cycles", {
        "__init__.py": "from .child import VALUE\nNAME = 'x'\n",          # package -> its child
        "child.py": "from . import NAME\nVALUE = 1\n",                     # child -> package __init__
        "b.py": "def f():\n    from .c import g  # lazy\n    return g\n",  # function-local edge
        "c.py": "from .b import f\n\ndef g():\n    return f\n",
        "sub/__init__.py": "from ..d import D\n",                          # d -> sub.e runs sub/__init__
        "sub/e.py": "E = 1\n",
        "d.py": "from .sub.e import E\nD = E\n",
        "clean.py": "from .sub.e import E\n",
    })
    problems = check_cycles(import_edges("fx_cycles", tmp_path), files)
    heads = [p for p in problems if p.startswith("import cycle")]
    assert sorted(heads) == [
        "import cycle among 2 modules: fx_cycles, fx_cycles.child",
        "import cycle among 2 modules: fx_cycles.b, fx_cycles.c",
        "import cycle among 2 modules: fx_cycles.d, fx_cycles.sub",
    ], problems
    assert any("fx_cycles/child.py:1: fx_cycles.child imports fx_cycles" in p for p in problems)
    assert any("fx_cycles/b.py:2: fx_cycles.b imports fx_cycles.c" in p for p in problems)
    assert any("fx_cycles/d.py:1: fx_cycles.d imports fx_cycles.sub (runs its __init__" in p for p in problems)
    assert not any("clean" in p for p in problems)


def test_cycle_checker_passes_an_acyclic_package(tmp_path):
    files = make_package(tmp_path, "fx_acyclic", {
        "__init__.py": "from .a import A\n",
        "a.py": "from .b import B\nA = B\n",
        "b.py": "B = 1\n",
        "sub/__init__.py": "",
        "sub/x.py": "from .y import Y\nfrom . import y\n",   # siblings inside a package: no cycle
        "sub/y.py": "Y = 1\n",
    })
    assert check_cycles(import_edges("fx_acyclic", tmp_path), files) == []


def test_private_name_checker_detects_private_imports(tmp_path):
    files = make_package(tmp_path, "fx_private", {
        "__init__.py": "from .util import __version__, helper as _helper\n",   # fine: dunder, public name
        "_errors.py": "def data_error(): ...\n",
        "util.py": "__version__ = '1'\n_secret = 1\ndef helper(): ...\n",
        "a.py": "from .util import _secret\n",                                  # line 1: private name
        "b.py": "import os\nfrom ._errors import data_error\n",                # line 2: private module
        "c.py": "from . import _errors\n",                                      # line 1: private module as name
        "d.py": "import fx_private._errors\nfrom os.path import _joinrealpath\n",  # line 1; os is not ours
        "e.py": "def f():\n    from fx_private.util import _secret  # lazy\n",  # line 2, also when local
    })
    assert lines_of(check_private_imports(files, "fx_private"), tmp_path) == [
        "fx_private/a.py:1", "fx_private/b.py:2", "fx_private/c.py:1", "fx_private/d.py:1", "fx_private/e.py:2"]


def test_length_checker_detects_long_modules(tmp_path):
    body = "x = 1\n" * 449
    files = make_package(tmp_path, "fx_length", {
        "ok.py": '"""Doc."""\n' + body,                                          # 450 lines
        "long.py": '"""Doc."""\n' + body + "y = 2\n",                            # 451
        "whole.py": '"""Parser. It stays whole: one state machine, split it and the states scatter."""\n'
                    + body + "y = 2\n",
        "bare.py": '"""It stays whole."""\n' + body + "y = 2\n",                 # the phrase without a reason
    })
    assert lines_of(check_lengths(files), tmp_path) == ["fx_length/bare.py:1", "fx_length/long.py:1"]


def test_dgl_free_checker_detects_dgl_and_stray_numba(tmp_path):
    files = make_package(tmp_path, "fx_free", {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "import numpy\nimport dgl\n",                               # line 2
        "core/b.py": "def f():\n    import dgl  # lazy: import-linter's job\n",  # not module level
        "core/c.py": "if True:\n    from dgl.ops import gspmm\n",                # line 2: still module level
        "core/d.py": "try:\n    import numba\nexcept ImportError:\n    numba = None\n",  # line 2: not the runtime
        "core/jit/__init__.py": "",
        "core/jit/runtime.py": "try:\n    from numba import njit\nexcept (ImportError, OSError):\n    njit = None\n",
        "kernels/__init__.py": "",
        "kernels/k.py": "import triton\nimport dgl.nn as dnn\n",                 # line 2
        "graph.py": "import dgl\n",                                               # fine: not a DGL-free layer
    })
    assert lines_of(check_dgl_free(files, "fx_free"), tmp_path) == [
        "fx_free/core/a.py:2", "fx_free/core/c.py:2", "fx_free/core/d.py:2", "fx_free/kernels/k.py:2"]


def test_dgl_free_checker_wants_the_runtime_guard(tmp_path):
    files = make_package(tmp_path, "fx_guard", {
        "core/__init__.py": "",
        "core/jit/runtime.py": "import os\nimport numba\ntry:\n    import numba.typed\nexcept Exception:\n    pass\n",
    })
    assert lines_of(check_dgl_free(files, "fx_guard"), tmp_path) == [
        "fx_guard/core/jit/runtime.py:2", "fx_guard/core/jit/runtime.py:4"]


def test_core_test_checker_detects_dgl_imports(tmp_path):
    make_package(tmp_path, "fx_pkg", {
        "__init__.py": "", "core/__init__.py": "", "core/x.py": "", "graph.py": "import dgl\n",
        "testing/__init__.py": "", "testing/free.py": "import torch\n", "testing/strat.py": "import dgl\n",
    })
    tests = tmp_path / "core_tests"
    for name, body in {
        "conftest.py": "import fx_pkg\nfrom fx_pkg.core import x\nfrom fx_pkg.testing.free import f\n",
        "test_a.py": "import numpy\nimport dgl.function as fn\n",                    # line 2
        "test_b.py": "def test():\n    from numba import njit  # lazy\n",            # line 2: local counts
        "test_c.py": "from fx_pkg.graph import views\nfrom fx_pkg import core, graph\n",  # lines 1, 2
        "test_d.py": "from fx_pkg.testing import strat\nimport fx_pkg.testing.free\n",  # line 1
        "test_e.py": "import fx_pkg\n\n\ndef test():\n    fx_pkg.graph.views()\n",  # line 5
    }.items():
        (tests / name).parent.mkdir(exist_ok=True)
        (tests / name).write_text(body, encoding="utf-8")
    assert lines_of(check_core_tests(tests, "fx_pkg", tmp_path / "fx_pkg"), tmp_path) == [
        "core_tests/test_a.py:2", "core_tests/test_b.py:2", "core_tests/test_c.py:1", "core_tests/test_c.py:2",
        "core_tests/test_d.py:1", "core_tests/test_e.py:5"]


def test_local_import_checker_wants_a_reason(tmp_path):
    files = make_package(tmp_path, "fx_local", {
        "m.py": '''
            import os  # module level: no reason needed


            def ok_trailing():
                import torch  # lazy: torch loads only on this path


            def ok_above():
                # cycle: graph imports this module
                from .graph import g
                from .graph import h  # (a run of imports shares the comment above it)
                import json


            def bad():
                """A docstring is not a reason."""
                import torch


            def bad_noqa():
                import torch  # noqa: F401


            def bad_after_code():
                # lazy: numpy
                x = 1
                import numpy


            class C:
                def method(self):
                    from . import m  # self-import for the test fixture
                    import sys
                    return [
                        0]
        ''',
    })
    assert lines_of(check_local_import_reasons(files), tmp_path) == ["fx_local/m.py:17", "fx_local/m.py:21",
                                                                     "fx_local/m.py:27"]


def test_pyproject_lists_every_package_of_the_tree():
    """A package missing from pyproject's explicit list installs in editable mode but not from a
    wheel; a listed one that no longer exists breaks every install."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"dgl_accel.kernels"} | {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "dgl_accel").rglob("__init__.py")
        if "__pycache__" not in p.parts}
    assert listed == found, f"missing from pyproject: {sorted(found - listed)}; listed but absent: {sorted(listed - found)}"
