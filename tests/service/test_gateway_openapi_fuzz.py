"""OpenAPI-driven fuzz of a live gateway on 127.0.0.1 (Hypothesis over the served schema):
every operation, parameters in and out of their documented ranges, bodies from the
documented request schema and mutations of it (wrong types, extra and duplicate keys,
broken JSON), good, bad and missing keys. Zero 5xx, every status documented, every error
the JSON error schema, and no answer without a charge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from gw_fixtures import serve_on_loopback
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privlab.query.config import hash_key, parse_config
from privlab.query.gateway import Gateway
from privlab.service import create_app
from privlab.testing.gateway import BASE, KEY, PERSONS, gateway_sql, write_duckdb

BOB = "pk_openapi_fuzz_other_analyst"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d: Path = tmp_path_factory.mktemp("oafuzz")
    cfg = parse_config({
        "database": write_duckdb(d / "persons.duckdb", BASE), "ledger": str(d / "ledger.db"),
        "tables": {"persons": PERSONS},
        "analysts": {"analyst": {"key_sha256": hash_key(KEY), "epsilon": 1e6, "delta": 0.5},
                     "bob": {"key_sha256": hash_key(BOB), "epsilon": 0.05}},
        "limits": {"rate_per_second": 1e6, "burst": 10**6, "max_failed_auth": 10**6,
                   "max_epsilon_per_query": 10}})
    gateway = Gateway(cfg)
    with serve_on_loopback(create_app(gateway=gateway)) as url:
        client = httpx.Client(base_url=url, timeout=30)
        yield {"client": client, "gateway": gateway,
               "doc": client.get("/openapi.json").json()}
        client.close()


def _values(schema: dict[str, Any]) -> Any:
    """Values for one parameter: inside its documented range, at and past its edges, and
    of the wrong type."""
    options = [schema] + list(schema.get("anyOf", []))
    ints = [o for o in options if o.get("type") == "integer"]
    hostile = st.sampled_from(["", "abc", "1e3", "-0", "NaN", "9" * 40, "1' OR '1'='1",
                               "\u00e9", "%00", "2^63"])
    if ints:
        lo, hi = ints[0].get("minimum", -(2**63)), ints[0].get("maximum", 2**63)
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo - 1, hi + 1, 2**63, -1, 0]),
                         st.integers(), hostile).map(str)
    return st.one_of(st.text(max_size=80), hostile, st.sampled_from(["analyst", "bob"]))


def _bodies() -> Any:
    valid = gateway_sql().map(lambda q: {"sql": q[0], "epsilon": q[1], "delta": q[2]})
    json_ish = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) |
                            st.integers() | st.text(max_size=20),
                            lambda inner: st.lists(inner, max_size=3) |
                            st.dictionaries(st.text(max_size=8), inner, max_size=3),
                            max_leaves=6)
    mutated = st.tuples(valid, st.sampled_from(["sql", "epsilon", "delta", "mechanism", "x"]),
                        json_ish).map(lambda t: {**t[0], t[1]: t[2]})
    as_bytes = st.one_of(valid, mutated).map(lambda b: json.dumps(b).encode())
    duplicated = valid.map(lambda b: (json.dumps(b)[:-1] + ', "epsilon": 0.01}').encode())
    broken = st.one_of(st.binary(max_size=200),
                       valid.map(lambda b: json.dumps(b).encode()[:-3]),
                       st.just(b'{"sql": "SELECT COUNT(*) FROM persons", "epsilon": NaN}'))
    return st.one_of(as_bytes, as_bytes, duplicated, broken)


@st.composite
def requests(draw: Any, doc: dict[str, Any]) -> dict[str, Any]:
    ops = sorted((path, method) for path, item in doc["paths"].items() for method in item)
    path, method = draw(st.sampled_from(ops))
    op = doc["paths"][path][method]
    url, params = path, {}
    for p in op.get("parameters", []):
        if p["in"] == "path":
            value = draw(st.one_of(st.text(min_size=1, max_size=70).filter(
                lambda t: "/" not in t and t not in (".", "..")), st.just("0" * 32)))
            url = url.replace("{" + p["name"] + "}", quote(value, safe=""))
        elif draw(st.booleans()):
            params[p["name"]] = draw(_values(p["schema"]))
    key = draw(st.sampled_from([KEY, KEY, KEY, BOB, "pk_wrong", None]))
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    body = None
    if "requestBody" in op:
        body = draw(_bodies())
        headers["Content-Type"] = "application/json"
    return {"method": method.upper(), "url": url, "params": params, "headers": headers,
            "content": body, "documented": set(op["responses"]), "key": key}


def test_openapi_fuzz_against_a_live_gateway(live: dict[str, Any]) -> None:
    client, gateway, doc = live["client"], live["gateway"], live["doc"]
    seen: dict[int, int] = {}

    def charges() -> int:
        return sum(len(gateway.ledger.history(a.principal))
                   for a in gateway.config.analysts.values())

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(requests(doc))
    def check(req: dict[str, Any]) -> None:
        before = charges()
        r = client.request(req["method"], req["url"], params=req["params"],
                           headers=req["headers"], content=req["content"])
        seen[r.status_code] = seen.get(r.status_code, 0) + 1
        assert r.status_code < 500, (req, r.status_code, r.text[:300])
        assert str(r.status_code) in req["documented"] | {"404", "405"}, \
            (req["method"], req["url"], r.status_code, sorted(req["documented"]))
        assert r.headers["content-type"].startswith("application/json"), r.headers
        body = r.json()
        if r.status_code >= 400:
            assert set(body) == {"error", "reason"} and isinstance(body["reason"], str)
        answered = req["method"] == "POST" and r.status_code == 200
        if answered:
            assert body["epsilon_spent"] > 0
        assert charges() == before + int(answered)  # no answer without a charge, and no
        # charge without an answer

    check()
    assert seen.get(200, 0) >= 20 and seen.get(400, 0) >= 20 and seen.get(401, 0) >= 5, seen
