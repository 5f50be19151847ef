"""Small bounded least-squares solvers the step-cost fit uses: non-negative least squares, and a damped Gauss-Newton
step under θ ≥ 0."""

from __future__ import annotations

import numpy as np

__all__ = ["nnls", "damped_step"]


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min ‖a·x − b‖ subject to x ≥ 0 by removing negative coefficients one at a time (small problems only)."""
    free = np.ones(a.shape[1], dtype=bool)
    x = np.zeros(a.shape[1])
    while free.any():
        sol = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if (sol >= 0).all():
            x[:] = 0.0
            x[free] = sol
            return x
        idx = np.flatnonzero(free)[np.argmin(sol)]
        free[idx] = False
    return x


def damped_step(jac: np.ndarray, r: np.ndarray, theta: np.ndarray, lam: float) -> np.ndarray:
    """θ' minimising ‖r + J(θ'−θ)‖² + λ‖D(θ'−θ)‖² under θ' ≥ 0 (D: column norms of J)."""
    d = np.linalg.norm(jac, axis=0)
    free = d > 0
    r = r.copy()
    new = theta.copy()
    while free.any():
        a = np.vstack([jac[:, free] / d[free], np.sqrt(lam) * np.eye(int(free.sum()))])
        z = np.linalg.lstsq(a, np.concatenate([-r, np.zeros(int(free.sum()))]), rcond=None)[0]
        cand = theta[free] + z / d[free]
        if (cand >= 0).all():
            new[free] = cand
            return new
        idx = np.flatnonzero(free)[np.argmin(cand)]  # pin the most negative at 0 and solve again
        r = r - jac[:, idx] * theta[idx]
        new[idx] = 0.0
        free[idx] = False
    return new
