#!/usr/bin/env python3
"""The import graph of privlab's top-level packages, generated from the code.

Reads every module under src/privlab with `ast` (nothing is imported), maps each
`import privlab.x...` / `from privlab.x ... import` to an edge between top-level packages
(`privlab.errors` and the other single-module packages count as packages), and prints:

* a mermaid flowchart (`--mermaid`, the default) for docs/architecture.md, edges drawn solid
  when some import runs when the module is imported, dotted when every import of that pair
  is inside a function (deferred until called);
* the cycles between packages (`--cycles`): strongly connected components of the graph;
* the cycles between modules (`--module-cycles`): the same with one node per module
  (`module_edges`).

`privlab/__init__.py` is the node "privlab". A `__main__.py` belongs to its package like any
other module (an entry point that runs CLI commands lives in `privlab.cli`).

`--write docs/architecture.md` replaces the text between the markers
`<!-- import-graph:start -->` and `<!-- import-graph:end -->`; `--check` exits 1 when that
text is not what the code gives (run it after moving modules).

Usage:  python scripts/import_graph.py [--mermaid | --cycles | --module-cycles]
                                      [--write FILE | --check FILE]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "privlab"
START, END = "<!-- import-graph:start -->", "<!-- import-graph:end -->"


def _package_of(module: str) -> str | None:
    """'privlab.query.engine' -> 'query'; None outside privlab or for privlab itself."""
    parts = module.split(".")
    if parts[0] != "privlab" or len(parts) < 2:
        return None
    return parts[1]


def _source_package(path: Path, src: Path = SRC) -> str:
    """Top-level package of a file; `privlab/__init__.py` is "privlab"."""
    rel = path.relative_to(src)
    if len(rel.parts) == 1:
        return "privlab" if rel.name == "__init__.py" else rel.name.removesuffix(".py")
    return rel.parts[0]


def _module_name(path: Path, src: Path = SRC) -> str:
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_lines(tree: ast.AST, module: str,
                  is_package: bool) -> Iterable[tuple[str, list[str], bool]]:
    """(module imported from, names taken, whether at import time) for every import in the
    file: `import a.b` is ("a.b", [], ...), `from a import b, c` is ("a", ["b", "c"], ...)."""
    deferred: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            deferred |= {id(n) for n in ast.walk(node) if n is not node}
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            deferred |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        eager = id(node) not in deferred
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], eager
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names], eager


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterable[tuple[str, bool]]:
    """(imported module, whether at import time) for every import in the file."""
    for target, names, eager in _import_lines(tree, module, is_package):
        yield target, eager
        for name in names:  # `from privlab import query` imports a package too
            yield f"{target}.{name}", eager


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def package_edges(src: Path = SRC) -> dict[tuple[str, str], bool]:
    """{(from package, to package): True when some such import runs at import time}."""
    edges: dict[tuple[str, str], bool] = {}
    for path in sorted(src.rglob("*.py")):
        source = _source_package(path, src)
        module = _module_name(path, src)
        tree = ast.parse(path.read_text(), filename=str(path))
        for target, eager in _imports(tree, module, path.name == "__init__.py"):
            dest = _package_of(target)
            if dest is None or dest == source or not _exists(src, dest):
                continue
            edges[(source, dest)] = edges.get((source, dest), False) or eager
    return edges


def _exists(src: Path, package: str) -> bool:
    return (src / package).is_dir() or (src / f"{package}.py").is_file()


def module_edges(src: Path = SRC) -> dict[tuple[str, str], bool]:
    """{(module, module it imports): True when some such import runs at import time}, one
    node per module under `src` (`privlab.assess.pipeline`; a package is its `__init__`).

    `from privlab.a import b` points at `privlab.a.b` when that is a module, else at
    `privlab.a` (where the name `b` is defined or re-exported); `import privlab.a.b` at the
    longest module it names. Running a package's `__init__` before its submodules is Python's
    doing, not the importer's, and is no edge."""
    modules = {_module_name(p, src) for p in src.rglob("*.py")}
    edges: dict[tuple[str, str], bool] = {}
    for path in sorted(src.rglob("*.py")):
        module = _module_name(path, src)
        tree = ast.parse(path.read_text(), filename=str(path))
        for target, names, eager in _import_lines(tree, module, path.name == "__init__.py"):
            reached = {f"{target}.{n}" if f"{target}.{n}" in modules else target
                       for n in names} or {target}
            for dest in filter(None, (_longest_module(t, modules) for t in reached)):
                if dest != module:
                    edges[(module, dest)] = edges.get((module, dest), False) or eager
    return edges


def _longest_module(name: str, modules: set[str]) -> str | None:
    """The longest prefix of a dotted name that is a module of the tree (None outside it)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan), sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def mermaid(edges: dict[tuple[str, str], bool]) -> str:
    lines = ["```mermaid", "flowchart LR"]
    for (a, b), eager in sorted(edges.items()):
        lines.append(f"    {a} {'-->' if eager else '-.->'} {b}")
    lines.append("```")
    return "\n".join(lines)


def section(edges: dict[tuple[str, str], bool]) -> str:
    found = cycles(edges)
    eager = cycles([e for e, at_import in edges.items() if at_import])
    text = [START,
            "Generated by `python scripts/import_graph.py --write docs/architecture.md` "
            "(solid: imported when the module is imported; dotted: only inside functions).",
            "", mermaid(edges), "",
            "Cycles between packages (any import): "
            + ("; ".join(" <-> ".join(c) for c in found) if found else "none") + ".",
            "At import time: "
            + ("; ".join(" <-> ".join(c) for c in eager) if eager else "none") + ".",
            END]
    return "\n".join(text)


def _replace(doc: str, new: str) -> str:
    if START not in doc or END not in doc:
        raise SystemExit(f"markers {START} ... {END} not found")
    head, rest = doc.split(START, 1)
    return head + new + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--mermaid", action="store_true")
    mode.add_argument("--cycles", action="store_true")
    mode.add_argument("--module-cycles", action="store_true")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--write", type=Path)
    out.add_argument("--check", type=Path)
    args = parser.parse_args(argv)
    edges = package_edges()
    if args.cycles or args.module_cycles:
        for comp in cycles(module_edges() if args.module_cycles else edges):
            print(" <-> ".join(comp))
        return 0
    if args.write or args.check:
        target = args.write or args.check
        doc = target.read_text()
        new = _replace(doc, section(edges))
        if args.check:
            if new != doc:
                print(f"{target}: import graph out of date; run scripts/import_graph.py "
                      f"--write {target}", file=sys.stderr)
                return 1
            return 0
        target.write_text(new)
        return 0
    print(section(edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
