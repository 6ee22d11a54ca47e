"""make_private: the user's own model and DataLoader, PLD-calibrated, steps accounted."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from privlab.core import accounting
from privlab.errors import InvalidInputError
from privlab.learn.private import make_private

# Opacus warns about its own internals (secure_mode, hook kinds); not what these tests check
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _setup(bn: bool = False):
    torch.manual_seed(0)
    x = torch.randn(200, 5)
    y = (x[:, 0] > 0).long()
    layers = [torch.nn.Linear(5, 8)] + ([torch.nn.BatchNorm1d(8)] if bn else []) + [
        torch.nn.ReLU(), torch.nn.Linear(8, 2)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, opt, DataLoader(TensorDataset(x, y), batch_size=20)


@pytest.mark.parametrize("mode", ["hooks", "ghost"])
def test_user_loop_is_wrapped_and_accounted(mode):
    model, opt, loader = _setup()
    private = make_private(model, opt, loader, epsilon=2.0, delta=1e-4, epochs=2,
                           grad_sample_mode=mode)
    crit = private.criterion or torch.nn.CrossEntropyLoss()
    for _ in range(2):
        for xb, yb in private.data_loader:
            private.optimizer.zero_grad()
            crit(private.module(xb), yb).backward()
            private.optimizer.step()
    assert private.steps == private.planned_steps == 20
    assert private.sample_rate == pytest.approx(0.1)
    g = private.guarantee()
    assert 1.98 <= g.epsilon <= 2.0
    assert g.epsilon == pytest.approx(accounting.dpsgd_epsilon(private.noise_multiplier, 0.1,
                                                               20, 1e-4))
    assert private.epsilon("rdp") > g.epsilon
    assert g.neighbouring == "add_remove_record" and "PLD" in g.accountant


def test_pld_needs_less_noise_than_rdp():
    model, opt, loader = _setup()
    pld = make_private(model, opt, loader, epsilon=1.0, delta=1e-4, epochs=3)
    model2, opt2, loader2 = _setup()
    rdp = make_private(model2, opt2, loader2, epsilon=1.0, delta=1e-4, epochs=3,
                       accountant="rdp")
    assert pld.noise_multiplier < rdp.noise_multiplier


def test_refusals():
    model, opt, loader = _setup(bn=True)
    with pytest.raises(InvalidInputError, match="ModuleValidator"):
        make_private(model, opt, loader, epsilon=1.0, delta=1e-5, epochs=1)
    model, opt, loader = _setup()
    with pytest.raises(InvalidInputError, match="no DP-SGD step"):
        make_private(model, opt, loader, epsilon=1.0, delta=1e-5, epochs=1).guarantee()
    with pytest.raises(InvalidInputError, match="too small"):
        make_private(*_setup(), epsilon=1e-4, delta=1e-5, epochs=5)
