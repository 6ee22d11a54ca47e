"""privlab.learn: differentially private model training.

- `make_private`: the user's own torch model / optimizer / DataLoader made DP-SGD by Opacus,
  with the noise multiplier calibrated by the PLD accountant (`private.py`).
- `train_classifier` / `TrainConfig`: privlab's DP-SGD trainer (Poisson sampling, one-pass
  per-example clipping, CSPRNG noise) and its plain twin (`dpsgd.py`, `engine.py`).
- `logistic_objective_perturbation`, `logistic_output_perturbation` (`objective.py`).
- scikit-learn estimators `DPLogisticRegression`, `DPMLPClassifier`, `DPCNNClassifier`.
- `train_many`: N models of one architecture at once (vmap), for shadow models and sweeps.
- `models` (zoo) and `data` (checks, public preprocessing, experiment datasets).

Names are imported lazily so `import privlab.learn` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "make_private": "privlab.learn.private",
    "PrivateTraining": "privlab.learn.private",
    "TrainConfig": "privlab.learn.dpsgd",
    "TrainResult": "privlab.learn.dpsgd",
    "DPSGDPlan": "privlab.learn.dpsgd",
    "plan_dpsgd": "privlab.learn.dpsgd",
    "train_classifier": "privlab.learn.dpsgd",
    "predict_logits": "privlab.learn.dpsgd",
    "GradientClipper": "privlab.learn.engine",
    "logistic_objective_perturbation": "privlab.learn.objective",
    "logistic_output_perturbation": "privlab.learn.objective",
    "logistic_plain": "privlab.learn.objective",
    "DPLogisticRegression": "privlab.learn.estimators",
    "DPMLPClassifier": "privlab.learn.estimators",
    "DPCNNClassifier": "privlab.learn.estimators",
    "NotPrivateWarning": "privlab.learn.estimators",
    "save_model": "privlab.learn.estimators",
    "load_model": "privlab.learn.estimators",
    "train_many": "privlab.learn.multi",
    "train_one": "privlab.learn.multi",
    "ManyResult": "privlab.learn.multi",
    "shadow_subsets": "privlab.learn.multi",
    "SeedMLP": "privlab.learn.models",
    "SmallCNN": "privlab.learn.models",
    "LogisticModel": "privlab.learn.models",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'privlab.learn' has no attribute {name!r}")
