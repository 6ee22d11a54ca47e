"""Issue 31, second pass: the plan page's optional per-statistic choices (group by a column
with declared groups; Laplace or Gaussian noise, composed by PLD when mixed), its packages on
/results, and a package that reruns from its own release.json."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from studio_helpers import make_client
from test_studio_plan import PLAN, PLAN_BY, package_of, people_client, strip_values

from privlab.studio import plan as sp

#: A mixed plan: a Laplace count, a (default, with a delta: Gaussian) mean, a Laplace
#: histogram.
MIXED = {"stat0": "count", "mech0": "laplace", "stat1": "mean", "col1": "age",
         "stat2": "histogram", "col2": "city", "mech2": "laplace", "epsilon": "3",
         "delta": "1e-5"}


def options_of(page: str, select: str) -> list[str]:
    """The choices of one <select> of the page (its first, empty, choice left out)."""
    body = re.search(rf'<select id="{select}"[^>]*>(.*?)</select>', page, re.S)
    assert body is not None, f"no select {select}"
    return [html.unescape(o) for o in re.findall(r"<option[^>]*>([^<]*)</option>",
                                                 body.group(1))][1:]


def test_by_offers_only_columns_with_declared_groups(workspace: Path) -> None:
    """age (integer with declared bounds: the histogram's bins), sex and city (declared
    categories) can group a statistic; income (numeric) cannot; the noise choice is
    Laplace or Gaussian, the default left to the library."""
    client, _ = people_client(workspace)
    page = client.get("/plan").text
    assert options_of(page, "by0") == ["age", "sex", "city"]
    assert options_of(page, "mech0") == ["laplace", "gaussian"]
    assert options_of(page, "col0") == ["age", "sex", "city", "income"]


def test_a_by_group_row_states_its_groups_and_is_in_the_package(workspace: Path) -> None:
    client, csrf = people_client(workspace)
    page = html.unescape(client.get("/plan", params=PLAN_BY).text)
    # the schema allows missing values: their group is declared too
    assert "by sex: 3 declared groups (F, M, <missing>)" in page
    assert "by city: 4 declared groups (Ankara, Izmir, Kyiv, <missing>)" in page
    # weights 1, 2, 1, 1, 1: the count by city gets epsilon 1/6 in each group (parallel),
    # and a count's half-width is ln(20)/epsilon rounded up: ceil(17.97) = 18
    assert "± 18 in each group" in page
    assert "none per group in closed form" in page  # the mean by sex: a ratio
    assert "by='sex'" in page  # the library call shown
    assert "Total: (1)-DP" in page  # the groups compose in parallel: still epsilon 1
    files = package_of(client.post("/plan/run", data={"csrf": csrf, **PLAN_BY}))
    package = json.loads(files["release.json"])
    by = [(r["statistic"], r["column"], r.get("by"), r.get("groups"))
          for r in package["releases"][3:]]
    assert by == [("mean", "income", "sex", ["F", "M", "<missing>"]),
                  ("count", None, "city", ["Ankara", "Izmir", "Kyiv", "<missing>"])]
    assert list(package["releases"][4]["value"]) == ["Ankara", "Izmir", "Kyiv", "<missing>"]
    assert package["guarantee"]["epsilon"] == 1.0
    assert "by: sex" in files["plan.yaml"] and "by: city" in files["plan.yaml"]
    listed = client.get("/plan").text
    assert "mean of income by sex" in listed and "count of rows by city" in listed
    # a by column is read too: a draft's review covers it
    assert sp.columns_used(PLAN_BY) == ["age", "city", "income", "sex"]


def test_the_package_reruns_from_release_jsons_plan(workspace: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Unzipped, the package's release.json's plan reruns with `privlab release plan` from
    the package's folder, no --schema: it names the schema.yaml beside it."""
    from typer.testing import CliRunner

    from privlab.cli.main import app as cli

    client, csrf = people_client(workspace)
    response = client.post("/plan/run", data={"csrf": csrf, **PLAN_BY})
    unzipped = workspace / "unzipped"
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        zf.extractall(unzipped)
    (folder,) = unzipped.iterdir()
    package = json.loads((folder / "release.json").read_text(encoding="utf-8"))
    assert package["plan"]["schema"] == "schema.yaml" and (folder / "schema.yaml").is_file()
    (folder / "plan-of-release.json").write_text(json.dumps(package["plan"]),
                                                 encoding="utf-8")
    monkeypatch.chdir(folder)
    out = CliRunner().invoke(cli, ["release", "plan", str(workspace / "people.csv"), "--plan",
                                   "plan-of-release.json", "-o", "rerun"])
    assert out.exit_code == 0, out.output
    rerun = json.loads((folder / "rerun" / "release.json").read_text(encoding="utf-8"))
    assert strip_values(rerun) == strip_values({k: v for k, v in package.items()
                                                if k != "ledger"})


def test_a_mixed_plan_names_its_accountant(workspace: Path) -> None:
    """Laplace beside Gaussian: the preview and the package name the accountant the library
    chose (PLD here, tighter than the sums and zCDP), and the ledger is charged that total."""
    from privlab.core.ledger import BudgetLedger
    from privlab.measure.analysis import Analysis
    from privlab.schema import load_schema

    client, csrf = people_client(workspace)
    schema = load_schema(str(workspace / "people.schema.yaml"))
    expected = (Analysis(schema, epsilon=3, delta=1e-5).add("count", mechanism="laplace")
                .add("mean", "age").add("histogram", "city", mechanism="laplace")).composed()
    assert expected.accountant.startswith("PLD (dp-accounting")
    page = html.unescape(client.get("/plan", params=MIXED).text)
    total = re.search(r'<p id="plan-total">(.*?)</p>', page, re.S).group(1)
    assert f"accountant: {expected.accountant}" in total
    noise = re.findall(r"<td>((?:(?:geometric|laplace|gaussian) scale [^,<]+(?:, )?)+)</td>",
                       page)  # Laplace noise on integer counts is the geometric (discrete)
    assert [re.findall(r"[a-z]+(?= scale)", n) for n in noise] == [
        ["geometric"], ["gaussian", "gaussian"], ["geometric"]]
    assert "mechanism='laplace'" in page
    files = package_of(client.post("/plan/run", data={"csrf": csrf, **MIXED}))
    package = json.loads(files["release.json"])
    assert package["guarantee"]["accountant"] == expected.accountant
    assert package["guarantee"]["epsilon"] == pytest.approx(expected.epsilon)
    assert [it.get("mechanism") for it in package["plan"]["statistics"]] == [
        "laplace", None, "laplace"]
    with BudgetLedger(str(workspace / ".privlab-studio" / "ledger.db")) as book:
        spent = [(e.epsilon, e.delta) for e in book.history("workspace:people.csv")]
    assert spent == [pytest.approx((expected.epsilon, expected.delta))]


@pytest.mark.parametrize(("change", "said"), [
    ({"mech0": "exponential"}, "noise of statistic 1: choose laplace or gaussian"),
    ({"mech1": "gaussian", "delta": ""}, "statistic 2: the gaussian mechanism needs delta > 0"),
    ({"by1": "income"}, "statistic 2: by: 'income' is declared numeric"),
])
def test_a_bad_choice_is_one_line_naming_the_row(workspace: Path, change: dict[str, str],
                                                 said: str) -> None:
    client, _ = people_client(workspace)
    page = html.unescape(client.get("/plan", params={**MIXED, **change}).text)
    assert page.count(said) == 1, re.findall(r'role="alert">(.*?)</p>', page)
    assert 'id="run-plan"' not in page


def test_results_lists_this_sessions_plan_packages(workspace: Path) -> None:
    client, csrf = people_client(workspace)
    assert "Nothing released in this session yet." in client.get("/results").text
    files = package_of(client.post("/plan/run", data={"csrf": csrf, **PLAN}))
    page = html.unescape(client.get("/results").text)
    listed = re.search(r'<ul id="plan-packages">(.*?)</ul>', page, re.S).group(1)
    assert "total ε = 1" in listed and "count of rows, mean of age, histogram of city" in listed
    link = re.search(r'href="(/plans/[0-9a-f]+/privlab-plan-[0-9a-f]+\.zip)"', listed).group(1)
    again = package_of(client.get(link))
    assert again["release.json"] == files["release.json"]
    other = make_client(client.app)
    assert link not in other.get("/results").text
    assert other.get(link).status_code == 404
