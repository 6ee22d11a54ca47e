"""Contract of privlab.core.pld_adapter with dp-accounting's private names.

The adapter's fast path reads private names of dp-accounting; these tests pin the contract:
the installed release is one the adapter was tested on (else fail loudly: re-run this file
on the new release, then add it to TESTED_VERSIONS and the pyproject pin), the private names
exist, the fast path gives the same PMFs and epsilons as the public API, and no other module
of privlab reads a private name of dp-accounting.
"""

from __future__ import annotations

import ast
import math
import re
import tomllib
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as plm
from packaging.requirements import Requirement

from privlab.core import pld_adapter as ad

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "privlab"


def _pin() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(Requirement(d) for d in deps if Requirement(d).name == "dp-accounting")


def test_installed_dp_accounting_is_a_tested_release():
    version = ad.dp_accounting_version()
    assert version in ad.TESTED_VERSIONS, (
        f"dp-accounting {version} is installed but privlab.core.pld_adapter was tested only on "
        f"{ad.TESTED_VERSIONS}: run tests/core/test_pld_adapter.py on it and, if green, add it to "
        f"TESTED_VERSIONS and to the pin in pyproject.toml")
    assert ad.fast_path_available()


def test_pyproject_pins_dp_accounting_to_the_tested_range():
    spec = _pin().specifier
    assert all(spec.contains(v) for v in ad.TESTED_VERSIONS)
    # an upper bound: a new minor release is not installed before this file has run on it
    assert any(s.operator in ("<", "<=", "==", "~=") for s in spec), str(spec)
    assert not spec.contains("0.5.1") and not spec.contains("0.7.0"), str(spec)


def test_private_names_the_fast_path_reads_exist():
    assert callable(getattr(pld_lib, ad._MAKE_PMF))
    pmf = ad.poisson_gaussian_pld(1.0, 0.02, 100, 1e-2, fast=True).pmfs[0]
    assert isinstance(pmf, pld_pmf.DensePLDPmf)
    for name in ad._DENSE_FIELDS:
        assert hasattr(pmf, name), name
    assert isinstance(pmf._probs, np.ndarray) and math.isclose(
        float(pmf._probs.sum()) + pmf._infinity_mass, 1.0, rel_tol=1e-9)


@pytest.mark.parametrize("adjacency", [plm.AdjacencyType.ADD, plm.AdjacencyType.REMOVE])
@pytest.mark.parametrize("q", [0.01, 0.3, 1.0])
def test_vectorised_gaussian_loss_matches_dp_accounting(adjacency, q):
    ref = plm.GaussianPrivacyLoss(0.9, sampling_prob=q, adjacency_type=adjacency)
    fast = ad.VectorisedGaussianPrivacyLoss(0.9, sampling_prob=q, adjacency_type=adjacency)
    eps = np.linspace(-3, 6, 901)
    if adjacency == plm.AdjacencyType.ADD and q < 1:
        eps = eps[eps < -math.log1p(-q)]
    np.testing.assert_allclose(fast.get_delta_for_epsilon(eps), ref.get_delta_for_epsilon(eps),
                               rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("sigma, q, count, interval", [
    (1.0, 0.01, 3000, 1e-3), (0.7, 0.2, 50, 2e-3), (2.0, 1.0, 5, 1e-3), (1.3, 0.05, 1, 1e-3)])
def test_fast_path_equals_public_api(sigma, q, count, interval):
    fast = ad.poisson_gaussian_pld(sigma, q, count, interval, fast=True)
    public = ad.poisson_gaussian_pld(sigma, q, count, interval, fast=False)
    assert fast.pmfs and not public.pmfs  # the two paths really differ in how they build it
    # and the public path is exactly what dp-accounting's PLDAccountant composes
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), count)
    lib = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)
    lib.compose(event)
    for delta in (1e-9, 1e-5, 1e-2):
        ref = public.epsilon(delta)
        # PLDAccountant composes with an identity PLD first (FFT rounding, seen up to 8e-8)
        assert ref == pytest.approx(lib.get_epsilon(delta), rel=1e-6)
        # the one-step PMFs differ by float rounding (< 1e-12, test below); composed 3000
        # times that moves epsilon by ~6e-6 relative at delta 1e-9, < 1e-8 at delta >= 1e-5
        assert fast.epsilon(delta) == pytest.approx(ref, rel=1e-4 if delta < 1e-6 else 1e-8)
    for eps in (0.1, 1.0, 4.0):
        assert fast.delta(eps) == pytest.approx(public.delta(eps), rel=1e-8, abs=1e-11)


@pytest.mark.parametrize("q", [0.01, 0.3])
def test_one_step_pmfs_equal_to_float_rounding(q):
    fast = ad.poisson_gaussian_pld(1.0, q, 1, 1e-3, fast=True)
    public = ad.poisson_gaussian_pld(1.0, q, 1, 1e-3, fast=False).pld
    # REMOVE then ADD, as the adapter orders them; the public PLD lists them the same way
    ref = (public._pmf_remove, public._pmf_add)
    for mine, lib in zip(fast.pmfs, ref, strict=True):
        mine, lib = mine.to_dense_pmf(), lib.to_dense_pmf()
        assert mine._lower_loss == lib._lower_loss
        assert mine._infinity_mass == pytest.approx(lib._infinity_mass, rel=1e-9, abs=1e-20)
        np.testing.assert_allclose(mine._probs, lib._probs, rtol=0, atol=1e-12)


def test_dense_helpers_match_library():
    pmf = ad.poisson_gaussian_pld(1.0, 0.02, 1, 1e-3, fast=True).pmfs[0]
    lib = pmf.self_compose(500)
    mine = ad.self_compose_dense(pmf, 500)
    assert mine._lower_loss == lib._lower_loss
    np.testing.assert_array_equal(mine._probs, lib._probs)
    for delta in (1e-9, 1e-5, 1e-2, 0.5):
        assert ad.dense_epsilon(lib, delta) == pytest.approx(lib.get_epsilon_for_delta(delta),
                                                             rel=1e-10, abs=1e-12)


def test_public_path_is_taken_off_the_tested_releases(monkeypatch):
    monkeypatch.setattr(ad, "dp_accounting_version", lambda: "9.9.9")
    assert not ad.fast_path_available()
    assert not ad.poisson_gaussian_pld(1.0, 0.02, 10, 1e-2).pmfs


def _private_names_of_dp_accounting() -> set[str]:
    """Every _name defined or assigned (self._x = ...) anywhere in dp-accounting's source."""
    names: set[str] = set()
    for path in Path(dp_accounting.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_"):
                names.add(node.name)
    return {n for n in names if not n.startswith("__")}


def test_no_private_dp_accounting_name_outside_the_adapter():
    private = _private_names_of_dp_accounting()
    assert {"_probs", "_pmf_remove", "_pld", ad._MAKE_PMF} <= private  # the scan works
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "pld_adapter.py":
            continue
        text = path.read_text()
        if "dp_accounting" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                    "dp_accounting"):
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} import {a.name}"
                              for a in node.names if a.name.startswith("_")]
        offenders += [f"{path.relative_to(ROOT)}: getattr {m}" for m in
                      re.findall(r"getattr\([^)]*[\"'](_[a-z]\w*)[\"']", text) if m in private]
    assert not offenders, offenders
