"""No import cycle between privlab's top-level packages (scripts/import_graph.py reads the code
with `ast`, counting imports inside functions and under TYPE_CHECKING), and the diagram in
docs/architecture.md is the one the code gives.

Issue 24 item 3: the last cycle (query <-> engines: `privlab.engines.spark` subclassed
`query.engine.Engine`, `query` picked the Spark engine lazily) went when every engine moved
into `privlab.engines`, which imports nothing of privlab but `privlab.errors`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _graph_module():
    path = ROOT / "scripts" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_between_packages():
    g = _graph_module()
    edges = g.package_edges()
    assert ("cli", "core") in edges and ("query", "core") in edges  # the scan sees imports
    assert ("query", "engines") in edges and ("assess", "engines") in edges
    assert g.cycles(edges) == []


def test_engines_import_nothing_of_privlab_but_errors_and_utils():
    """engines stands on errors and the leaf helpers in utils (`utils.closing`) only."""
    g = _graph_module()
    edges = g.package_edges()
    assert {b for a, b in edges if a == "engines"} == {"errors", "utils"}
    assert {b for a, b in edges if a == "utils"} <= {"errors"}


def test_deferred_import_counts_as_an_edge(tmp_path):
    pkg = tmp_path / "privlab"
    for name in ("a", "b"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "a" / "m.py").write_text("from privlab.b import x\n")
    (pkg / "b" / "m.py").write_text("def f():\n    from privlab.a.m import y\n")
    g = _graph_module()
    edges = g.package_edges(pkg)
    assert edges == {("a", "b"): True, ("b", "a"): False}
    assert g.cycles(edges) == [["a", "b"]]


def test_committed_diagram_is_the_generated_one():
    assert _graph_module().main(["--check", str(ROOT / "docs" / "architecture.md")]) == 0


def test_cycle_finder_finds_a_planted_cycle():
    g = _graph_module()
    assert g.cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]
    assert g.cycles([("a", "b"), ("b", "c")]) == []


def _mutual(edges) -> list[tuple[str, str]]:
    return sorted((a, b) for a, b in edges if a < b and (b, a) in edges)


def test_no_import_circle_between_modules():
    """Issue 31 item 1: the four two-file circles (assess.declared_sql <-> assess.grouped,
    assess.pipeline <-> assess.recommend, data.census <-> data.datasets, schema.bundled <->
    schema.model) went when the piece both sides used moved below them (`assess.sources`,
    `assess.result`, `data.bundled`, `schema.load`). Imports inside functions and under
    TYPE_CHECKING count: they tie the two files together just the same."""
    g = _graph_module()
    edges = g.module_edges()
    # the scan sees module imports, deferred and TYPE_CHECKING ones included
    assert ("privlab.assess.grouped", "privlab.assess.declared_sql") in edges
    assert ("privlab.assess.recommend", "privlab.assess.result") in edges
    assert ("privlab.cli.main", "privlab.cli.exits") in edges
    assert _mutual(edges) == []
    assert g.cycles(edges) == []


def test_module_scan_finds_a_planted_two_module_circle(tmp_path):
    pkg = tmp_path / "privlab"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("from privlab.a.m import f\n")
    (pkg / "a" / "m.py").write_text("from typing import TYPE_CHECKING\n"
                                    "if TYPE_CHECKING:\n    from privlab.a import n\n")
    (pkg / "a" / "n.py").write_text("def g():\n    from .m import f\n")
    g = _graph_module()
    edges = g.module_edges(pkg)
    assert edges == {("privlab.a", "privlab.a.m"): True, ("privlab.a.m", "privlab.a.n"): False,
                     ("privlab.a.n", "privlab.a.m"): False}
    assert _mutual(edges) == [("privlab.a.m", "privlab.a.n")]


def test_nothing_outside_the_cli_imports_the_cli():
    """The CLI is the top floor: `python -m privlab.federated` imported `privlab.cli` (a
    back-edge); the federated verbs' own entry point is now `python -m privlab.cli.federated`."""
    g = _graph_module()
    back = sorted((a, b) for a, b in g.module_edges()
                  if b.startswith("privlab.cli") and not a.startswith("privlab.cli"))
    assert back == []
