"""On-device personalization with user-level DP (the ODP design note, docs/references.md).

Roles (`roles`): untrusted `Server`, `TrustedDistributor`, `TrustedAggregator`, `Client`.
Algorithms: DPAM (private alternating least squares for the factorized model, user embeddings
never leave the device), DP-FedAvg (Poisson client sampling) and DP-FTRL (tree aggregation),
all accounted at the user level with dp-accounting (`accounting`). Engines: the vectorized
in-process simulation (`simulation.train`) and a Flower deployment (`flower.serve`,
`flower.run_client`). Names are imported lazily so a Flower client process stays light.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "RunConfig": "privlab.federated.simulation",
    "train": "privlab.federated.simulation",
    "FactorizedConfig": "privlab.federated.factorized",
    "FactorizedModel": "privlab.federated.factorized",
    "MLPConfig": "privlab.federated.mlp",
    "Server": "privlab.federated.roles",
    "TrustedDistributor": "privlab.federated.roles",
    "TrustedAggregator": "privlab.federated.roles",
    "Client": "privlab.federated.roles",
    "NoisyAggregate": "privlab.federated.messages",
    "PrivacyBoundaryError": "privlab.federated.messages",
    "serve": "privlab.federated.flower",
    "run_client": "privlab.federated.flower",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'privlab.federated' has no attribute {name!r}")
