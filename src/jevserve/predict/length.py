"""Reply-length regression: log reply tokens from decision answers and log prompt tokens (ridge, scikit-learn).

Features: the answer columns of `jevserve.predict.features`, log(1 + prompt tokens), and each answer column times
log(1 + prompt tokens) (so a "rewrite this" answer can say "as long as the prompt"). Standardised, then ridge with
the penalty chosen by cross-validation on the training rows only. Predictions are exp of the fitted log length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

DEFAULT_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)


def design(answer_columns: np.ndarray, prompt_tokens: np.ndarray, *, interactions: bool = True) -> np.ndarray:
    """The regression's inputs: answers, log prompt length and (optionally) their products."""
    log_prompt = np.log1p(np.asarray(prompt_tokens, dtype=np.float64))[:, None]
    parts = [answer_columns, log_prompt]
    if interactions and answer_columns.shape[1]:
        parts.append(answer_columns * log_prompt)
    return np.hstack(parts)


class ReplyLengthRegressor:
    """Predict reply tokens from answer columns and prompt tokens (estimator convention: fit returns self)."""

    def __init__(self, *, alphas: tuple[float, ...] = DEFAULT_ALPHAS, interactions: bool = True) -> None:
        self.alphas = alphas
        self.interactions = interactions

    def fit(
        self, answer_columns: np.ndarray, prompt_tokens: np.ndarray, reply_tokens: np.ndarray
    ) -> ReplyLengthRegressor:
        """Fit log(reply tokens) on the training rows; sets `pipeline_`, `alpha_` and `num_features_`."""
        reply = np.asarray(reply_tokens, dtype=np.float64)
        if reply.size == 0 or np.any(reply < 0):
            raise ValueError("reply_tokens must be a non-empty array of counts >= 0")
        x = design(answer_columns, prompt_tokens, interactions=self.interactions)
        self.pipeline_: Pipeline = make_pipeline(StandardScaler(), RidgeCV(alphas=self.alphas)).fit(x, np.log1p(reply))
        self.alpha_ = float(self.pipeline_[-1].alpha_)
        self.num_features_ = x.shape[1]
        return self

    def predict(self, answer_columns: np.ndarray, prompt_tokens: np.ndarray) -> np.ndarray:
        """Predicted reply tokens (≥ 0) per row."""
        x = design(answer_columns, prompt_tokens, interactions=self.interactions)
        return np.maximum(np.expm1(self.pipeline_.predict(x)), 0.0)

    def get_params(self) -> dict[str, Any]:
        """The settings, for results files."""
        return {"alphas": list(self.alphas), "interactions": self.interactions}
