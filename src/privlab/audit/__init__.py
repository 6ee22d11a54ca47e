"""Privacy audits: membership inference, empirical epsilon, secret extraction from an LM.

- `privlab.audit.target`: any classifier as float64 log-probabilities, per-record features.
- `privlab.audit.metrics`: ROC, AUC, advantage, TPR at fixed FPR, counts.
- `privlab.audit.epsilon`: empirical epsilon lower bounds (Clopper-Pearson, Bayesian).
- `privlab.audit.attacks`: loss / confidence / entropy thresholds, shadow models, LiRA.
- `privlab.audit.lm`: planted-secret corpus, tiny GPT-2, DP-SGD fine-tuning, extraction,
  exposure (imports torch and transformers lazily).
- `privlab.audit.runner`: the end-to-end audit behind `privlab audit`.
"""

from privlab.audit.attacks import (
    AttackResult,
    Calibration,
    Records,
    check_disjoint,
    lira,
    reference_calibration,
    shadow_attack,
    threshold_attack,
)
from privlab.audit.epsilon import EmpiricalEpsilon, empirical_epsilon, epsilon_from_rates
from privlab.audit.metrics import auc, roc_curve, summarise, tpr_at_fpr
from privlab.audit.target import RecordStats, TargetModel, as_target
from privlab.audit.trainers import SklearnTrainer, TorchTrainer

__all__ = [
    "AttackResult", "Calibration", "EmpiricalEpsilon", "RecordStats", "Records",
    "SklearnTrainer", "TargetModel", "TorchTrainer", "as_target", "auc", "check_disjoint",
    "empirical_epsilon", "epsilon_from_rates", "lira", "reference_calibration", "roc_curve",
    "shadow_attack", "summarise", "threshold_attack", "tpr_at_fpr",
]
