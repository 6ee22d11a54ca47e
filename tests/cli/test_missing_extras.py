"""A missing optional extra exits 5 with the install command, on every path and entry point.

The modules of an extra are hidden with `sys.modules[name] = None` (import raises
ModuleNotFoundError), in-process where the import happens at call time, in a subprocess
where a command must start from a fresh interpreter. Works with or without the extras.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

from privlab.cli.exits import run_command
from privlab.errors import EXTRA_OF_MODULE, InvalidInputError, MissingExtraError

ROOT = Path(__file__).resolve().parents[2]


def _cli_without(modules: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import sys
        for name in {modules!r}:
            sys.modules[name] = None
        from privlab.cli.main import main
        sys.exit(main({list(argv)!r}))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


@pytest.mark.parametrize("argv", [("audit", "adult", "--quick", "--epsilon", "1"),
                                  ("audit", "lm", "--quick", "--epsilon", "1")])
def test_audit_without_torch_exits_5_with_the_install_command(argv):
    out = _cli_without(("torch",), *argv)
    assert out.returncode == 5, out.stderr
    assert "pip install 'privlab[ml]'" in out.stderr
    assert "internal error" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def _raising(exc: BaseException) -> click.Command:
    @click.command()
    def cmd() -> None:
        raise exc
    return cmd


@pytest.mark.parametrize("module", sorted(EXTRA_OF_MODULE))
def test_an_import_of_any_extra_module_exits_5(module, capsys):
    exc = ModuleNotFoundError(f"No module named '{module}'", name=f"{module}.sub")
    assert run_command(_raising(exc), [], "privlab") == 5
    err = capsys.readouterr().err
    assert f"pip install 'privlab[{EXTRA_OF_MODULE[module]}]'" in err
    assert f"missing: {module}" in err


def test_a_missing_core_module_is_an_internal_error_not_an_extra(capsys):
    exc = ModuleNotFoundError("No module named 'numpy'", name="numpy")
    assert run_command(_raising(exc), [], "privlab") == 1
    assert "internal error: ModuleNotFoundError" in capsys.readouterr().err


@pytest.mark.parametrize("exc, code", [
    (InvalidInputError("--x: bad"), 2), (MissingExtraError("needs y"), 5),
    (FileNotFoundError(2, "No such file or directory", "a.csv"), 2), (click.Abort(), 130),
    (ModuleNotFoundError("No module named 'flwr'", name="flwr"), 5), (RuntimeError("bug"), 1),
])
def test_federated_entry_point_uses_the_cli_mapping(monkeypatch, capsys, exc, code):
    import privlab.cli.federated as fed
    from privlab.cli.federated import main

    monkeypatch.setattr(fed, "federated_app", _raising(exc))
    assert main([]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def _hidden(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)


def test_trajectory_map_without_folium_is_exit_5(monkeypatch):
    from privlab.trajectory.plots import map_document

    _hidden(monkeypatch, "folium")
    with pytest.raises(MissingExtraError, match=r"pip install 'privlab\[geo\]'") as err:
        map_document({}, None)  # type: ignore[arg-type]
    assert err.value.exit_code == 5


def test_spark_engine_without_pyspark_is_exit_5(monkeypatch):
    from privlab.engines import spark

    _hidden(monkeypatch, "pyspark")
    with pytest.raises(MissingExtraError, match=r"--engine spark .*pip install 'privlab\[spark\]'"):
        spark._pyspark()


def test_synth_dpsgd_without_torch_is_exit_5(monkeypatch):
    from privlab.synth.dpsgd import load_torch

    _hidden(monkeypatch, "torch")
    with pytest.raises(MissingExtraError, match=r"--method dpvae .*pip install 'privlab\[ml\]'"):
        load_torch("dpvae")


def test_flower_without_flwr_is_exit_5(monkeypatch):
    from privlab.federated.flower import _import_flwr

    _hidden(monkeypatch, "flwr")
    with pytest.raises(MissingExtraError, match=r"pip install 'privlab\[federated\]'"):
        _import_flwr()
