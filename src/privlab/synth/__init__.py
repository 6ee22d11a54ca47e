"""DP synthetic data: input-layer DP (seed 000, sections V-VI; seed 004, section 3.4.4).

A data publisher releases a synthetic table instead of the real one. Three methods behind one
interface (`fit(df, epsilon, delta)`, `sample(n)`, `guarantee`):

- `mst`: MST (McKenna, Miklau & Sheldon 2021), marginal-based, implemented here on a tree
  model (no graphical-model library);
- `dpvae`: a variational autoencoder trained with DP-SGD (needs torch);
- `dpgan`: a GAN whose discriminator alone reads real rows, by DP-SGD (needs torch).

AIM is not implemented; `make_synthesizer` refuses it with the reason.
"""

from __future__ import annotations

from typing import Any

from privlab.errors import InvalidInputError
from privlab.synth.base import DEFAULT_DELTA, Synthesizer
from privlab.synth.domain import ADULT_DOMAIN, ColumnSpec, Domain, load_declaration
from privlab.synth.mst import MSTSynthesizer

METHODS = ("mst", "dpvae", "dpgan")
NOT_AVAILABLE = {
    "aim": "AIM needs inference on general (non-tree) graphical models, which privlab does not "
           "implement; use --method mst (same measurement style, tree model)",
}


def make_synthesizer(method: str, **options: Any) -> Synthesizer:
    """A synthesizer by name ("mst", "dpvae" or "dpgan"), with its options."""
    if method == "mst":
        return MSTSynthesizer(**options)
    if method == "dpvae":
        from privlab.synth.dpvae import DPVAESynthesizer

        return DPVAESynthesizer(**options)
    if method == "dpgan":
        from privlab.synth.dpgan import DPGANSynthesizer

        return DPGANSynthesizer(**options)
    if method in NOT_AVAILABLE:
        raise InvalidInputError(f"--method {method} is not available: {NOT_AVAILABLE[method]}")
    raise InvalidInputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")


__all__ = ["ADULT_DOMAIN", "DEFAULT_DELTA", "METHODS", "NOT_AVAILABLE", "ColumnSpec", "Domain",
           "MSTSynthesizer", "Synthesizer", "load_declaration", "make_synthesizer"]
