"""No import cycle between privlab's top-level packages (scripts/import_graph.py reads the code).

Issue 24 item 3 leaves one known cycle (query <-> engines: `privlab.engines.spark` subclasses
`query.engine.Engine`, `query` picks the Spark engine lazily) until the engines move into
`privlab.engines`. Any new cycle fails here, and so does the known one once it is gone (then
empty KNOWN_CYCLES).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KNOWN_CYCLES = [["engines", "query"]]


def _graph_module():
    path = ROOT / "scripts" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_between_packages_beyond_the_known_one():
    g = _graph_module()
    edges = g.package_edges()
    assert ("cli", "core") in edges and ("query", "core") in edges  # the scan sees imports
    assert g.cycles(edges) == KNOWN_CYCLES
    assert g.cycles([e for e, at_import in edges.items() if at_import]) == []


def test_cycle_finder_finds_a_planted_cycle():
    g = _graph_module()
    assert g.cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]
    assert g.cycles([("a", "b"), ("b", "c")]) == []
