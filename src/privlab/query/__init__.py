"""DP SQL gateway: parse (sqlglot) -> validate -> rewrite (clamp, bound contributions) ->
engine (DuckDB / PostgreSQL) -> noise (privlab.core) -> ledger -> audit -> answer.

`Gateway` is the service without HTTP, `privlab.service.create_app` puts it behind FastAPI,
`Client` talks to it. See docs/gateway.md.
"""

from privlab.query.client import Client, RateLimited
from privlab.query.config import GatewayConfig, hash_key, load_config, new_key, parse_config
from privlab.query.planner import AccessDenied, Planner, QueryPlan, QueryRefused

__all__ = [
    "Client", "RateLimited", "GatewayConfig", "load_config", "parse_config", "hash_key",
    "new_key", "Planner", "QueryPlan", "QueryRefused", "AccessDenied", "Gateway",
]


def __getattr__(name: str):  # the gateway pulls in the engines and the ledger: load lazily
    if name == "Gateway":
        from privlab.query.gateway import Gateway

        return Gateway
    raise AttributeError(name)
