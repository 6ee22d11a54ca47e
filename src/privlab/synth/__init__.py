"""DP synthetic data: DP at the input layer (what a model or a contractor sees is synthetic).

A data publisher releases a synthetic table instead of the real one. Three methods behind one
interface (`fit(df, epsilon, delta)`, `sample(n)`, `guarantee`):

- `aim`: AIM (McKenna et al. 2022), workload-adaptive and marginal-based, on a junction-tree
  graphical model fitted by Private-PGM-style mirror descent (`synth/pgm.py`, NumPy);
- `mst`: MST (McKenna, Miklau & Sheldon 2021), marginal-based, implemented here on a tree
  model (no graphical-model library);
- `dpvae`: a variational autoencoder trained with DP-SGD (needs torch);

The DP-GAN (`dpgan`) was retired; `NOT_AVAILABLE` gives the reason.
"""

from __future__ import annotations

from typing import Any

from privlab.errors import InvalidInputError
from privlab.synth.base import DEFAULT_DELTA, Synthesizer
from privlab.synth.domain import ColumnSpec, Domain
from privlab.synth.mst import MSTSynthesizer

METHODS = ("aim", "mst", "dpvae")
#: Methods offered once, with the reason they are not any more (the code is in git history).
NOT_AVAILABLE = {
    "dpgan": ("retired: on Adult at epsilon 4 its train-on-synthetic AUC was 0.84 and 0.78 "
              "over two seeds (60 epochs, 128-wide discriminator; the earlier 10-epoch model "
              "stayed at the majority class) with 2-way TVD 0.19-0.25, 3-4x MST and AIM "
              "(docs/synth.md); use --method aim, or --method dpvae for a deep model"),
}


def make_synthesizer(method: str, **options: Any) -> Synthesizer:
    """A synthesizer by name ("aim", "mst" or "dpvae"), with its options."""
    if "domain" in options:  # the retired declaration format: refused with its replacement
        from privlab.synth.legacy import retired_domain_message

        raise InvalidInputError(retired_domain_message(str(options["domain"])).replace(
            "--domain", "domain=", 1))
    if method == "aim":
        from privlab.synth.aim import AIMSynthesizer

        return AIMSynthesizer(**options)
    if method == "mst":
        return MSTSynthesizer(**options)
    if method == "dpvae":
        from privlab.synth.dpvae import DPVAESynthesizer

        return DPVAESynthesizer(**options)
    if method in NOT_AVAILABLE:
        raise InvalidInputError(f"--method {method} is not available: {NOT_AVAILABLE[method]}")
    raise InvalidInputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")


__all__ = ["DEFAULT_DELTA", "METHODS", "NOT_AVAILABLE", "ColumnSpec", "Domain",
           "MSTSynthesizer", "Synthesizer", "make_synthesizer"]
