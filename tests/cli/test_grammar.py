"""Issue 23, one CLI grammar: walk the Typer app and hold every command to privlab.cli.grammar."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click
import typer

from privlab.cli import grammar
from privlab.cli.main import app


def _commands() -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            out[" ".join(path)] = cmd
            if hasattr(cmd, "plan_command"):  # `release plan` (cli/release_plan.py)
                out[" ".join([*path, "plan"])] = cmd.plan_command

    walk(typer.main.get_command(app), [])
    return out


def _options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option)]


def test_each_concept_has_its_one_spelling_and_short_flag() -> None:
    by_long = {long: short for long, short, _ in grammar.SPELLINGS.values()}
    problems = []
    for name, cmd in _commands().items():
        for opt in _options(cmd):
            longs = [o for o in opt.opts if o.startswith("--")]
            shorts = [o for o in opt.opts if not o.startswith("--")]
            for long in longs:
                if long in by_long:
                    want = by_long[long]
                    if shorts and shorts != [want]:
                        problems.append(f"{name}: {long} has {shorts}, grammar says {want}")
                    if long in grammar.REQUIRED_SHORT and want not in shorts:
                        problems.append(f"{name}: {long} lacks {want}")
            for short in shorts:
                owner = [lg for lg, sh in by_long.items() if sh == short]
                allowed = set(owner) | grammar.SHARED_SHORT.get(short, set())
                if not set(longs) & allowed:
                    problems.append(f"{name}: {short} means {longs}, grammar says {allowed}")
    assert problems == []


def test_choose_epsilon_takes_dash_t() -> None:
    opts = {o for p in _options(_commands()["choose-epsilon"]) for o in p.opts}
    assert {"--target", "-t"} <= opts


def test_every_command_reading_rows_takes_schema() -> None:
    cmds = _commands()
    assert set(cmds) >= grammar.READS_ROWS
    missing = sorted(name for name in grammar.READS_ROWS
                     if not any("--schema" in p.opts for p in _options(cmds[name])))
    assert missing == [], f"read rows without --schema: {missing}"
    # and each that uses the rows offers the --on-invalid policy beside it (`schema check`
    # only lists every violation: it has nothing to refuse or coerce)
    no_policy = sorted(name for name in grammar.READS_ROWS - {"schema check"}
                       if not any("--on-invalid" in p.opts for p in _options(cmds[name])))
    assert no_policy == [], f"--schema without --on-invalid: {no_policy}"


def test_every_default_is_shown_in_help() -> None:
    root = typer.main.get_command(app)
    assert root.context_settings.get("show_default") is True  # inherited by every sub-command
    for name, cmd in _commands().items():
        for opt in _options(cmd):
            if opt.show_default is False:
                raise AssertionError(f"{name}: {opt.opts} hides its default")


def test_help_shows_a_default(capsys) -> None:
    from privlab.cli.main import main

    with contextlib.suppress(SystemExit):
        main(["choose-epsilon", "--help"])
    assert "[default: 0.5,1,2,4,8,16]" in " ".join(capsys.readouterr().out.split())


def test_docs_table_is_generated_from_the_grammar() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert grammar.markdown_table() in doc


def test_deprecated_spellings_are_hidden_aliases_only() -> None:
    """`--drop` (old) may only survive as a hidden option next to its new spelling."""
    for name, cmd in _commands().items():
        opts = {o: p for p in _options(cmd) for o in p.opts}
        for old, new in grammar.DEPRECATED.items():
            if old in opts:
                assert opts[old].hidden, f"{name}: {old} is shown in --help"
                assert new in opts, f"{name}: {old} without {new}"


def test_no_help_documents_a_range_as_lo_comma_hi() -> None:
    """A numeric range is `LO:HI` everywhere (grammar.VALUE_SYNTAX); `LO,HI` is deprecated."""
    import re

    problems = []
    seen = set()
    for name, cmd in _commands().items():
        for opt in _options(cmd):
            text = " ".join((opt.help or "").split())
            if re.search(r"\bLO\s*,\s*HI\b", text):
                problems.append(f"{name} {opt.opts[0]}: {text}")
            if set(opt.opts) & grammar.RANGE_OPTIONS:
                seen.add(opt.opts[0])
                if "LO:HI" not in text:
                    problems.append(f"{name} {opt.opts[0]} does not say LO:HI: {text}")
    assert problems == []
    assert seen == grammar.RANGE_OPTIONS  # every listed range option exists


def test_docs_show_the_value_spellings() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert grammar.value_table() in doc


def test_out_is_dash_o_in_every_command() -> None:
    """`--out` (the output file or folder) is `-o` everywhere, `privlab demo` included."""
    assert "--out" in grammar.REQUIRED_SHORT
    lacking = [name for name, cmd in _commands().items() for opt in _options(cmd)
               if "--out" in opt.opts and "-o" not in opt.opts]
    assert lacking == []
    for name in ("demo", "schema draft"):
        assert any({"--out", "-o"} <= set(p.opts) for p in _options(_commands()[name])), name


def test_schema_draft_writes_with_dash_o(tmp_path) -> None:
    from privlab.cli.main import main

    data = tmp_path / "t.csv"
    data.write_text("age,city\n30,a\n40,b\n")
    out = tmp_path / "s.yaml"
    assert main(["schema", "draft", str(data), "-o", str(out)]) == 0
    assert "age" in out.read_text()


def _says_when_omitted(opt: click.Option) -> bool:
    text = " ".join((opt.help or "").split()).lower()
    return any(word in text for word in grammar.OMITTED_WORDS)


def test_an_option_without_a_shown_default_says_what_omitting_it_does() -> None:
    """An option whose default is None shows no `[default: ...]`, so its help says what
    happens without it ("default: ...", "if unset", "if omitted", "without it", "optional")."""
    problems = []
    for name, cmd in _commands().items():
        for opt in _options(cmd):
            if opt.hidden or opt.required or opt.default is not None or opt.is_flag:
                continue
            if not _says_when_omitted(opt):
                problems.append(f"{name} {opt.opts[0]}: {opt.help!r}")
    assert problems == []


#: Command modules that still spell a grammar flag in their own `typer.Option` (issue 31 item
#: 2 moved every other one onto `privlab.cli.options`); this list may only shrink.
NOT_YET_ON_SHARED_OPTIONS: frozenset[str] = frozenset()


def _hand_spelled_flags(source: str) -> list[str]:
    """`typer.Option(...)` calls (and `typer.Option` aliases) in `source` that name a flag of
    the grammar table themselves instead of taking it from `privlab.cli.options`."""
    import ast

    table = {f for long, short, _ in grammar.SPELLINGS.values() for f in (long, short) if f}
    table |= set(grammar.DEPRECATED)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option":
            flags = {a.value for a in node.args if isinstance(a, ast.Constant)} & table
            found += [f"line {node.lineno}: {f}" for f in sorted(flags)]
    return found


def test_grammar_flags_are_declared_once_in_options() -> None:
    """Issue 31: `--json` was declared 24 times in 16 files. Every option concept of the
    grammar table now comes from `privlab.cli.options` (flags generated from the table), so
    no command module passes one of its flags to `typer.Option` itself."""
    cli = Path(__file__).resolve().parents[2] / "src" / "privlab" / "cli"
    problems = {p.name: found for p in sorted(cli.glob("*.py"))
                if p.name not in {"options.py"} | NOT_YET_ON_SHARED_OPTIONS
                and (found := _hand_spelled_flags(p.read_text()))}
    assert problems == {}
    assert all((cli / name).exists() for name in NOT_YET_ON_SHARED_OPTIONS)
    assert _hand_spelled_flags('x = typer.Option(False, "--json", help="h")\n') == [
        "line 1: --json"]


def test_shared_options_carry_the_grammar_flags() -> None:
    import typing

    from privlab.cli import options

    for concept, (long, short, _) in grammar.SPELLINGS.items():
        assert options.option(concept, "h").param_decls == tuple(f for f in (long, short) if f)
    info = typing.get_args(options.Json)[1]
    assert info.param_decls == ("--json",) and info.help == "Machine-readable output."
    assert typing.get_args(options.DropAlias)[1].hidden
