"""privlab studio: a local web console over the library (docs/studio.md).

Server-rendered pages (FastAPI + Jinja2, a few lines of vanilla JS, nothing fetched at run
time) for the data's curator and the gateway's administrator: choose data and review its
schema, assess re-identification risk, release DP statistics and synthetic tables charged to
a budget ledger, download each release with its guarantee and a script that reruns it, and
verify a gateway's audit log. Every guarantee of the library holds: previews read no private
row, releases are charged before they are computed, and browser sessions are isolated.
"""

from privlab.studio.config import StudioConfig

__all__ = ["StudioConfig", "create_app"]


def create_app(config: StudioConfig):  # noqa: ANN201 - FastAPI is an optional extra
    """The studio's ASGI app (imports FastAPI lazily: `pip install privlab[studio]`)."""
    from privlab.studio.app import create_app as _create

    return _create(config)
