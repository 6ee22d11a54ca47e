"""Factorized rating model f(u(theta_u), v(theta_v, x_v)) for on-device personalization.

Prediction for user i and item j:

    r_hat = mu + c_j + u_i . v_j + b_i + beta_i . phi_j

* shared (released with DP): the item table [v_j, c_j] (n_items x (d + 1));
* local (billboard model, never leaves the device): theta_i = [u_i, b_i, beta_i];
* public: phi_j, the catalogue's item features (genres, year), used without protection, and
  mu, the midpoint of the declared rating range.

Every client computation is per user and vectorized over the users a `Client` holds: the
user's exact ridge solve (`local_solve`), DPAM sufficient statistics (`stats`) and the local
update of the item rows it rated (`update`, for DP-FedAvg / DP-FTRL). `solve_items` is the
server's step of DP alternating minimization: ridge solve from the noisy sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from privlab.errors import InvalidInputError
from privlab.federated.data import Interactions, RatingsData
from privlab.federated.messages import Contributions, ParameterSubset, Part


@dataclass(frozen=True)
class FactorizedConfig:
    """Hyperparameters (public). Defaults chosen on a validation split of the training data."""

    dim: int = 4  # d, latent dimension
    user_reg: float = 10.0  # ridge on u_i and beta_i (local solve)
    bias_reg: float = 1.0  # ridge on b_i
    item_reg: float = 5.0  # ridge on [v_j, c_j] (server solve), added to the noise term
    noise_reg: float = 2.0  # extra item ridge = noise_reg * expected noise norm of A_j
    count_threshold: float = 2.0  # zero items whose noisy weight < threshold * its noise std
    clip_gram: float = 1.0  # per-user L2 bound of the DPAM Gram part
    clip_moment: float = 1.0  # per-user L2 bound of the DPAM moment part
    clip_update: float = 0.5  # per-user L2 bound of the item-row update (FedAvg / FTRL)
    local_steps: int = 5
    local_lr: float = 0.2
    server_lr: float = 1.0
    init_scale: float = 0.1

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise InvalidInputError(f"dim must be >= 1, got {self.dim}")
        for name in ("user_reg", "bias_reg", "item_reg", "clip_gram", "clip_moment",
                     "clip_update", "local_lr", "server_lr"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}")
        if self.noise_reg < 0 or self.local_steps < 1:
            raise InvalidInputError("noise_reg must be >= 0 and local_steps >= 1")


@dataclass(frozen=True)
class RatingsBatch:
    """The ratings of the users one `Client` holds (global user indices in `users`)."""

    users: np.ndarray
    train: Interactions
    test: Interactions
    # device-side cache of per-user public-feature Gram blocks (never shared)
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_data(cls, data: RatingsData, users: np.ndarray | None = None) -> RatingsBatch:
        users = np.arange(data.n_users) if users is None else np.asarray(users, dtype=np.int64)
        return cls(users, data.train.select(users), data.test.select(users))

    def select(self, positions: np.ndarray) -> RatingsBatch:
        return RatingsBatch(self.users[positions], self.train.select(positions),
                            self.test.select(positions))


class FactorizedModel:
    """Math of the factorized model, shared by the client and server roles."""

    table = "items"

    def __init__(self, n_items: int, item_features: np.ndarray,
                 rating_range: tuple[float, float], config: FactorizedConfig | None = None):
        self.n_items = int(n_items)
        self.features = np.asarray(item_features, dtype=float).reshape(self.n_items, -1)
        self.rating_range = (float(rating_range[0]), float(rating_range[1]))
        self.mu = 0.5 * (self.rating_range[0] + self.rating_range[1])
        self.config = config or FactorizedConfig()
        self.dim = self.config.dim
        self.k = self.dim + 1  # shared columns: v_j (d) and c_j
        self.q = self.features.shape[1]
        self.p = self.dim + 1 + self.q  # local theta: u_i (d), b_i, beta_i (q)

    # ---------------------------------------------------------------- shapes and init
    def shapes(self) -> dict[str, tuple[int, int]]:
        return {self.table: (self.n_items, self.k)}

    def parts(self, kind: str) -> dict[str, tuple[int, int]]:
        if kind == "stats":
            return {"gram": (self.n_items, self.k * self.k), "moment": (self.n_items, self.k)}
        return {self.table: (self.n_items, self.k)}

    def clip_norms(self, kind: str) -> dict[str, float]:
        c = self.config
        if kind == "stats":
            return {"gram": c.clip_gram, "moment": c.clip_moment}
        return {self.table: c.clip_update}

    def init_params(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        table = np.zeros((self.n_items, self.k))
        table[:, : self.dim] = rng.normal(0.0, self.config.init_scale, (self.n_items, self.dim))
        return {self.table: table}

    # ---------------------------------------------------------------- client side
    def needed_rows(self, batch: RatingsBatch) -> dict[str, np.ndarray]:
        """The item rows a user needs: those it rated (train and test). Asked from the
        trusted distributor, which does not tell the server who took what."""
        return {self.table: np.unique(np.concatenate([batch.train.items, batch.test.items]))}

    def _public_gram(self, batch: RatingsBatch, uniq: np.ndarray, m: sparse.csr_matrix
                     ) -> np.ndarray:
        """sum_j [1, phi_j][1, phi_j]^T per user: public features do not change between
        rounds, so it is computed once per batch (on the device)."""
        key = ("public_gram", id(self.features))
        if key in batch.cache:
            return batch.cache[key]
        f = np.hstack([np.ones((len(uniq), 1)), self.features[uniq]])
        outer = (f[:, :, None] * f[:, None, :]).reshape(len(uniq), -1)
        value = np.asarray(m @ outer).reshape(-1, self.q + 1, self.q + 1)
        batch.cache[key] = value
        return value

    def local_solve(self, batch: RatingsBatch, subset: ParameterSubset) -> np.ndarray:
        """Exact ridge solve of every user's local theta_i given the items (on the device).

        theta_i = argmin sum_j (r_ij - mu - c_j - theta_i . z_j)^2 + ridge, z_j = [v_j, 1, phi_j]
        """
        tr = batch.train
        n, d = tr.n_users, self.dim
        if tr.nnz == 0:  # no sampled client holds a rating: the ridge solution is 0
            return np.zeros((n, self.p))
        uniq, inv = np.unique(tr.items, return_inverse=True)
        w = subset.lookup(self.table, uniq)
        v = w[:, :d]
        f = np.hstack([np.ones((len(uniq), 1)), self.features[uniq]])
        target = tr.values - self.mu - w[inv, d]
        owner = tr.row_users()
        m = sparse.csr_matrix((np.ones(tr.nnz), (owner, inv)), shape=(n, len(uniq)))
        vv = np.asarray(m @ (v[:, :, None] * v[:, None, :]).reshape(len(uniq), -1))
        vf = np.asarray(m @ (v[:, :, None] * f[:, None, :]).reshape(len(uniq), -1))
        gram = np.empty((n, self.p, self.p))
        gram[:, :d, :d] = vv.reshape(n, d, d)
        gram[:, :d, d:] = vf.reshape(n, d, self.q + 1)
        gram[:, d:, :d] = gram[:, :d, d:].transpose(0, 2, 1)
        gram[:, d:, d:] = self._public_gram(batch, uniq, m)
        mt = sparse.csr_matrix((target, (owner, inv)), shape=(n, len(uniq)))
        rhs = np.asarray(mt @ np.hstack([v, f]))
        c = self.config
        penalty = np.full(self.p, c.user_reg)
        penalty[d] = c.bias_reg
        gram[:, np.arange(self.p), np.arange(self.p)] += penalty
        return np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]

    def _residual_targets(self, batch: RatingsBatch, theta: np.ndarray) -> np.ndarray:
        """r_ij - mu - b_i - beta_i . phi_j: what the shared item part must explain."""
        tr = batch.train
        owner = tr.row_users()
        local = theta[owner, self.dim] + np.einsum(
            "nq,nq->n", theta[owner, self.dim + 1:], self.features[tr.items])
        return tr.values - self.mu - local

    def stats(self, batch: RatingsBatch, subset: ParameterSubset) -> Contributions:
        """DPAM: per-user sufficient statistics of the item least-squares problem.

        For each rated item j: Gram x_i x_i^T and moment t_ij x_i with x_i = [u_i, 1], t_ij the
        residual target. Only these go to the aggregator; u_i itself is never sent.
        """
        theta = self.local_solve(batch, subset)
        x = np.hstack([theta[:, : self.dim], np.ones((len(theta), 1))])
        tr = batch.train
        owner = tr.row_users()
        t = self._residual_targets(batch, theta)
        xx = (x[:, :, None] * x[:, None, :]).reshape(len(x), -1)
        parts = {
            "gram": Part(self.n_items, self.k * self.k, tr.indptr, tr.items, xx[owner]),
            "moment": Part(self.n_items, self.k, tr.indptr, tr.items, t[:, None] * x[owner]),
        }
        return Contributions(batch.users, parts)

    def update(self, batch: RatingsBatch, subset: ParameterSubset,
               hyper: dict[str, float]) -> Contributions:
        """DP-FedAvg / DP-FTRL: local gradient steps on the item rows the user rated.

        Loss of user i: sum_j (t_ij - x_i . w_j)^2 / 2 + reg/2 ||w_j||^2 over its items; each
        item occurs once per user, so the steps are independent per rating and vectorized.
        """
        theta = self.local_solve(batch, subset)
        x = np.hstack([theta[:, : self.dim], np.ones((len(theta), 1))])
        tr = batch.train
        owner = tr.row_users()
        t = self._residual_targets(batch, theta)
        w0 = subset.lookup(self.table, tr.items)
        w = w0.copy()
        xo = x[owner]
        lr = float(hyper.get("local_lr", self.config.local_lr))
        reg = float(hyper.get("item_reg", 0.0))
        for _ in range(int(hyper.get("local_steps", self.config.local_steps))):
            err = t - np.einsum("nk,nk->n", xo, w)
            w += lr * (err[:, None] * xo - reg * w)
        return Contributions(batch.users, {
            self.table: Part(self.n_items, self.k, tr.indptr, tr.items, w - w0)})

    def predict(self, batch: RatingsBatch, subset: ParameterSubset,
                which: str = "test") -> np.ndarray:
        """On-device predictions (the result stays on the device)."""
        theta = self.local_solve(batch, subset)
        inter = batch.test if which == "test" else batch.train
        owner = inter.row_users()
        w = subset.lookup(self.table, inter.items)
        pred = (self.mu + w[:, self.dim] + np.einsum("nd,nd->n", theta[owner, : self.dim],
                                                      w[:, : self.dim])
                + theta[owner, self.dim]
                + np.einsum("nq,nq->n", theta[owner, self.dim + 1:],
                            self.features[inter.items]))
        return np.clip(pred, *self.rating_range)

    def evaluate(self, batch: RatingsBatch, subset: ParameterSubset) -> dict[str, float]:
        """Sums for the experimenter's test RMSE (not a DP release: held-out evaluation)."""
        pred = self.predict(batch, subset, "test")
        err = pred - batch.test.values
        return {"sse": float(err @ err), "n": float(len(err))}

    # ---------------------------------------------------------------- server side
    def noise_ridge(self, noise_std_gram: float) -> float:
        """Expected spectral norm of the symmetrized k x k Gaussian noise on A_j (public)."""
        return self.config.noise_reg * math.sqrt(2 * self.k) * noise_std_gram

    def solve_items(self, gram: np.ndarray, moment: np.ndarray,
                    noise_std_gram: float) -> np.ndarray:
        """Server step of DPAM: v_j = (PSD(A_j) + lambda I)^-1 b_j from the noisy sums.

        Symmetrizing, projecting onto the PSD cone and the ridge are post-processing.
        """
        a = gram.reshape(self.n_items, self.k, self.k)
        a = 0.5 * (a + a.transpose(0, 2, 1))
        if noise_std_gram > 0:
            vals, vecs = np.linalg.eigh(a)
            a = np.einsum("nij,nj,nkj->nik", vecs, np.clip(vals, 0, None), vecs)
        weight = a[:, self.k - 1, self.k - 1].copy()  # noisy sum of the users' weights
        lam = self.config.item_reg + self.noise_ridge(noise_std_gram)
        a[:, np.arange(self.k), np.arange(self.k)] += lam
        out = np.linalg.solve(a, moment[:, :, None])[:, :, 0]
        if noise_std_gram > 0 and self.config.count_threshold > 0:
            out[weight < self.config.count_threshold * noise_std_gram] = 0.0
        return out


def item_mean_rmse(data: RatingsData) -> float:
    """Non-private baseline: each item's training mean (global training mean if unseen)."""
    tr, te = data.train, data.test
    if te.nnz == 0:
        return math.nan
    total = np.bincount(tr.items, weights=tr.values, minlength=data.n_items)
    count = np.bincount(tr.items, minlength=data.n_items)
    overall = tr.values.mean() if tr.nnz else 0.5 * sum(data.rating_range)
    means = np.where(count > 0, total / np.maximum(count, 1), overall)
    err = means[te.items] - te.values
    return float(np.sqrt(err @ err / len(err)))
