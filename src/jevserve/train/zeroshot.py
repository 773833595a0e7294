"""Calibrate the zero-shot readout's constants (temperatures, noul scale, bias, threshold) by maximum likelihood.

Only these five numbers are fitted, on the same train-side examples the trained readout learns from; the cosine
similarities themselves are the encoder's, untouched.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from jevserve.decide.readout import ZeroShotParams, ZeroShotReadout
from jevserve.train.dataset import EmbeddedExamples


def _nll(params: ZeroShotParams, data: EmbeddedExamples, rows: list[int]) -> float:
    readout = ZeroShotReadout(params)
    total = 0.0
    for i in rows:
        p = readout.probabilities(data.vectors[data.state_rows[i]], data.vectors[data.text_rows[i]], data.questions[i])
        total -= math.log(max(float(p[data.answers[i]]), 1e-12))
    return total / max(len(rows), 1)


def fit_zero_shot(data: EmbeddedExamples, start: ZeroShotParams | None = None) -> ZeroShotParams:
    """Fit each question type's constants on its own examples (Nelder–Mead on log temperatures and scales)."""
    by_kind = {k: [i for i, q in enumerate(data.questions) if q.kind == k] for k in ("noul", "choice", "score")}
    params = start or ZeroShotParams()
    for kind in ("choice", "score"):
        rows = by_kind[kind]
        if not rows:
            continue
        field = f"{kind}_temperature"

        def loss(x: np.ndarray, field=field, rows=rows, params=params) -> float:
            return _nll(ZeroShotParams(**{**params.__dict__, field: math.exp(x[0])}), data, rows)

        best = minimize(loss, [math.log(getattr(params, field))], method="Nelder-Mead", options={"xatol": 1e-3})
        params = ZeroShotParams(**{**params.__dict__, field: math.exp(best.x[0])})
    rows = by_kind["noul"]
    if rows:

        def noul_loss(x: np.ndarray) -> float:
            trial = ZeroShotParams(
                **{**params.__dict__, "noul_scale": math.exp(x[0]), "noul_bias": x[1], "noul_threshold": x[2]}
            )
            return _nll(trial, data, rows)

        x0 = [math.log(params.noul_scale), params.noul_bias, params.noul_threshold]
        best = minimize(noul_loss, x0, method="Nelder-Mead", options={"xatol": 1e-3, "maxiter": 400})
        params = ZeroShotParams(
            **{
                **params.__dict__,
                "noul_scale": math.exp(best.x[0]),
                "noul_bias": float(best.x[1]),
                "noul_threshold": float(best.x[2]),
            }
        )
    return params
