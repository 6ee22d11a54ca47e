"""The studio's routes, one `APIRouter` per area of the console. Each route takes what it
needs as dependencies (`privlab.studio.web`): the session, config, ledger and the
CSRF-checked form of a state-changing POST. `ROUTERS` is the order `create_app` mounts them
in (the order in which paths are matched)."""

from __future__ import annotations

from privlab.studio.routes import (
           assess,
           choose,
           data,
           gateway,
           jobs,
           model,
           plan,
           release,
           schema,
           synth,
)

ROUTERS = [data.router, schema.router, release.router, plan.router, assess.router, synth.router,
           jobs.router, choose.router, model.router, gateway.router]

__all__ = ["ROUTERS"]
