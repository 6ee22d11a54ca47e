"""DP synthetic data: input-layer DP (seed 000, sections V-VI; seed 004, section 3.4.4).

A data publisher releases a synthetic table instead of the real one. Four methods behind one
interface (`fit(df, epsilon, delta)`, `sample(n)`, `guarantee`):

- `aim`: AIM (McKenna et al. 2022), workload-adaptive and marginal-based, on a junction-tree
  graphical model fitted by Private-PGM-style mirror descent (`synth/pgm.py`, NumPy);
- `mst`: MST (McKenna, Miklau & Sheldon 2021), marginal-based, implemented here on a tree
  model (no graphical-model library);
- `dpvae`: a variational autoencoder trained with DP-SGD (needs torch);
- `dpgan`: a GAN whose discriminator alone reads real rows, by DP-SGD (needs torch).
"""

from __future__ import annotations

from typing import Any

from privlab.errors import InvalidInputError
from privlab.synth.base import DEFAULT_DELTA, Synthesizer
from privlab.synth.domain import ADULT_DOMAIN, ColumnSpec, Domain, load_declaration
from privlab.synth.mst import MSTSynthesizer

METHODS = ("aim", "mst", "dpvae", "dpgan")


def make_synthesizer(method: str, **options: Any) -> Synthesizer:
    """A synthesizer by name ("aim", "mst", "dpvae" or "dpgan"), with its options."""
    if method == "aim":
        from privlab.synth.aim import AIMSynthesizer

        return AIMSynthesizer(**options)
    if method == "mst":
        return MSTSynthesizer(**options)
    if method == "dpvae":
        from privlab.synth.dpvae import DPVAESynthesizer

        return DPVAESynthesizer(**options)
    if method == "dpgan":
        from privlab.synth.dpgan import DPGANSynthesizer

        return DPGANSynthesizer(**options)
    raise InvalidInputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")


__all__ = ["ADULT_DOMAIN", "DEFAULT_DELTA", "METHODS", "ColumnSpec", "Domain",
           "MSTSynthesizer", "Synthesizer", "load_declaration", "make_synthesizer"]
