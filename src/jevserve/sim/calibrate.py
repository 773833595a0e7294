"""Fit step-time coefficients from a step log with non-negative least squares, checked on held-out rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from jevserve.sim.errors import TraceError
from jevserve.sim.step_time import COEFFICIENT_NAMES, StepTimeModel

HELD_OUT_EVERY = 5  # every 5th row (rows 4, 9, 14, ...) is held out: 20%, the same rows on every run


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """Fitted coefficients and their error on rows the fit did not see."""

    model: StepTimeModel
    num_train_rows: int
    num_test_rows: int
    test_mape: float  # mean absolute percentage error on held-out rows, as a fraction
    test_p90_ape: float  # 90th percentile of absolute percentage error on held-out rows, as a fraction
    test_r2: float


def design_matrix(rows: np.ndarray) -> np.ndarray:
    """Columns [1, prefill tokens, decode tokens, decode context, prefill attention pairs] of step-log rows."""
    return np.column_stack([np.ones(len(rows)), rows[:, :4]])


def fit_step_time(rows: np.ndarray) -> CalibrationResult:
    """Fit the coefficients (microseconds) on 80% of the rows by NNLS and report error on the other 20%."""
    if rows.ndim != 2 or rows.shape[1] != len(COEFFICIENT_NAMES):
        raise TraceError(f"step log has shape {rows.shape}; expected (rows, {len(COEFFICIENT_NAMES)})")
    held_out = np.arange(len(rows)) % HELD_OUT_EVERY == HELD_OUT_EVERY - 1
    train, test = rows[~held_out], rows[held_out]
    if len(train) < 2 * len(COEFFICIENT_NAMES) or len(test) < 1:
        raise TraceError(
            f"step log has {len(rows)} rows; expected at least {3 * len(COEFFICIENT_NAMES)} so that a fit and a "
            "held-out check are both possible"
        )
    x, y = design_matrix(train), train[:, 4]
    # Scale columns to unit norm so NNLS is well conditioned (attention pairs run to millions, the constant is 1).
    norms = np.linalg.norm(x, axis=0)
    norms[norms == 0] = 1.0
    scaled, _ = nnls(x / norms, y)
    coefficients = scaled / norms
    model = StepTimeModel(*map(float, coefficients))
    predicted = design_matrix(test) @ coefficients
    actual = test[:, 4]
    if np.any(actual <= 0):
        raise TraceError("step log has step_time_us = 0 in held-out rows; expected positive step times")
    ape = np.abs(predicted - actual) / actual
    residual = np.sum((predicted - actual) ** 2)
    total = np.sum((actual - actual.mean()) ** 2)
    return CalibrationResult(
        model=model,
        num_train_rows=len(train),
        num_test_rows=len(test),
        test_mape=float(np.mean(ape)),
        test_p90_ape=float(np.percentile(ape, 90)),
        test_r2=float(1 - residual / total) if total > 0 else float("nan"),
    )
