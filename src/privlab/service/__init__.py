"""HTTP services over the library: `create_app` builds the DP query gateway (FastAPI)."""

from privlab.service.app import create_app

__all__ = ["create_app"]
