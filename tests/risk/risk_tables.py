"""Small declared tables shared by the choose-epsilon tests (a frame and its public schema)."""

import numpy as np
import pandas as pd

SMALL_SCHEMA = ("name: small\ncolumns:\n" + "".join(
    f"  f{i}: {{type: numeric, bounds: [-5, 5], missing: false}}\n" for i in range(5))
    + "  colour: {type: categorical, categories: [red, blue], missing: false}\n"
    "  label: {type: categorical, categories: ['no', 'yes'], missing: false}\n")


def small_schema(tmp_path) -> str:
    """The declared public schema of `small_frame` (bounds and categories by
    declaration, not read from the rows)."""
    path = tmp_path / "small.yaml"
    path.write_text(SMALL_SCHEMA)
    return str(path)


def small_frame(n: int = 240, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    y = (x[:, 0] + 0.5 * x[:, 1] + rng.normal(0, 0.5, n) > 0).astype(int)
    f = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
    f["colour"] = rng.choice(["red", "blue"], n)
    f["label"] = np.where(y == 1, "yes", "no")
    return f
