"""Long run of the train / estimator neighbour fuzz (CI: 4 + 6 drawn examples plus the
explicit ones in tests/soundness/test_train_fuzz.py).

    .venv/bin/python experiments/train_fuzz.py --examples 200

Runs the same two Hypothesis tests with `--examples` random (not derandomized) draws each:
method x --on-invalid x row/person unit x contribution bound x public/estimated sample rate x
one-row/one-person edit for `privlab train`, and estimator x n x replaced label x public
rate/size for the library. Any difference outside the noised keys fails the run. Results
JSON: experiments/results/train_fuzz.json (examples asked, exit status, seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    args = parser.parse_args()
    os.environ["PRIVLAB_FUZZ_EXAMPLES"] = str(args.examples)
    os.environ["PYTHONPATH"] = str(ROOT / "src")
    sys.path.insert(0, str(ROOT / "src"))
    import pytest

    started = time.perf_counter()
    code = pytest.main([str(ROOT / "tests/soundness/test_train_fuzz.py"), "-q", "-p",
                        "no:cacheprovider", "--hypothesis-show-statistics"])
    result = {"examples_per_test": args.examples, "tests": 2, "exit_status": int(code),
              "passed": int(code) == 0, "seconds": round(time.perf_counter() - started, 1)}
    out = ROOT / "experiments/results/train_fuzz.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
