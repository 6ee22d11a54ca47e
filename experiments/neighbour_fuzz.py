"""Long run of the neighbour fuzz over the command surface and the library API.

    PYTHONPATH=src .venv/bin/python experiments/neighbour_fuzz.py --examples 200 \
        [--commands release train audit synth federated trajectory choose-epsilon] \
        [--slow-examples 6] [--library] [--seed 1]

The CI tests (tests/soundness/test_command_fuzz.py, test_library_fuzz.py) run a few fixed
examples per command; this draws `--examples` fresh cases per command (`--slow-examples` for
choose-epsilon, which the CI file leaves out) (Hypothesis, random
with --seed, not shrunk) from the same strategies and checks each with the same
`fuzz.check_case` (D and D' with the same seed: exit code, stderr, warnings, stdout apart
from noised values, files, non-noised JSON fields, a claim covering the edit). With
--library also the library checks (queries, estimators, synthesizers, --max-users).
Printed and written to experiments/results/neighbour_fuzz.json: runs per command, how many
were compared, skipped (not a neighbour of a replace-one claim) or refused on one side by
the schema's refuse policy, and the problems (distinct messages, numbers masked, with one
example case each). Every problem count must be 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "soundness"))

import fuzz  # noqa: E402
import library_fuzz as lib  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hseed  # noqa: E402


def drive(strategy: Any, n: int, seed: int, body: Any) -> list[tuple[str, str, str]]:
    """Run `body(case)` on `n` drawn cases; (case, outcome, problem message) for each."""
    out: list[tuple[str, str, str]] = []

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(case=strategy)
    def run(case: Any) -> None:
        try:
            result = body(case)
            out.append((str(case), result or "compared", ""))
        except AssertionError as exc:
            out.append((str(case), "problem", str(exc).splitlines()[0][:400]))

    run()
    return out


def _key(message: str) -> str:
    """A problem without its case and numbers, to group repeats."""
    text = message.split("] ", 1)[-1] if message.startswith("[") else message
    return fuzz.mask_numbers(text)[:200]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=50, help="cases per command")
    ap.add_argument("--commands", nargs="*", default=list(fuzz.COMMANDS))
    ap.add_argument("--slow-examples", type=int, default=6,
                    help="cases of choose-epsilon (each trains and attacks several models)")
    ap.add_argument("--library", action="store_true", help="also the library checks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" /
                                         "neighbour_fuzz.json"))
    args = ap.parse_args()
    groups: dict[str, tuple[Any, Any]] = {
        c: (fuzz.cases([c]), fuzz.check_case) for c in args.commands}
    if args.library:
        tmp = Path(tempfile.mkdtemp(prefix="privlab-fuzz-"))
        groups.update({
            "lib:queries": (lib.query_cases(), lambda c: lib.check_query(*c)),
            "lib:estimators": (lib.estimator_cases(), lambda c: lib.check_estimator(*c)),
            "lib:synth": (lib.synth_cases(), lambda c: lib.check_synth(*c)),
            "lib:max_users": (lib.federated_cases(), lambda c: lib.check_max_users(tmp, *c)),
        })
    report: dict[str, Any] = {"examples_per_group": args.examples, "seed": args.seed,
                              "groups": {}}
    total_runs = total_problems = 0
    for name, (strategy, body) in groups.items():
        started = time.perf_counter()
        n = args.slow_examples if name == "choose-epsilon" else args.examples
        results = drive(strategy, n, args.seed, body)
        outcomes = Counter(r[1] for r in results)
        problems: dict[str, dict[str, Any]] = {}
        for case, outcome, message in results:
            if outcome == "problem":
                entry = problems.setdefault(_key(message), {"count": 0, "example": case,
                                                            "message": message})
                entry["count"] += 1
        report["groups"][name] = {"runs": len(results), "outcomes": dict(outcomes),
                                  "problems": list(problems.values()),
                                  "seconds": round(time.perf_counter() - started, 1)}
        total_runs += len(results)
        total_problems += outcomes.get("problem", 0)
        print(f"{name}: {len(results)} runs, {dict(outcomes)}, "
              f"{time.perf_counter() - started:.0f}s", flush=True)
        for p in problems.values():
            print(f"  PROBLEM x{p['count']}: {p['message']}", flush=True)
    report["runs"], report["problems"] = total_runs, total_problems
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"total: {total_runs} runs, {total_problems} problems -> {args.out}")


if __name__ == "__main__":
    main()
