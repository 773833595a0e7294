"""The supervised baseline `tfidf-lr`: what a bag of words learns per task from the task's own train side.

A general decision model answers every task with one readout; a specialist fitted per task is the learned
baseline it has to beat (or say where it does not). Recipe, fixed before any score was looked at and the same for
every task (scikit-learn):

- features: TF-IDF of word unigrams and bigrams of the state (lower-cased, sublinear term frequency, terms in at
  least 2 train states, at most 50,000 terms), fitted on the train side only;
- yes/no decisions (and routing, whose probability is P(the cheap model is right)): logistic regression, C = 1,
  balanced class weights, its P(positive) thresholded like any model's probability (threshold tuned on train);
- reply length: ridge regression (α = 1) from the same features plus log prompt tokens to log reply tokens.

It is scored by the bench's own `evaluate`/`score_row` on the same test items and bootstrap draws as every row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge

RECIPE = {
    "ngram_range": [1, 2], "min_df": 2, "max_features": 50_000, "sublinear_tf": True,
    "classifier": "LogisticRegression(C=1, class_weight='balanced')", "regressor": "Ridge(alpha=1) on log1p tokens",
}  # fmt: skip


def _vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, max_features=50_000, sublinear_tf=True)


def char_vectorizer() -> TfidfVectorizer:
    """The same TF-IDF over character 2-5-grams within words (`char_wb`), which see a tool call's arguments ("/",
    "*", "all", "DROP") as well as its words."""
    return TfidfVectorizer(lowercase=True, analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True)


class TfidfClassifier:
    """TF-IDF + logistic regression on the state text (estimator convention: fit returns self); `vectorizer` makes
    the TF-IDF step (default: the recipe's word 1-2-grams)."""

    def __init__(
        self, *, c: float = 1.0, seed: int = 0, vectorizer: Callable[[], TfidfVectorizer] = _vectorizer
    ) -> None:
        self.c = c
        self.seed = seed
        self.vectorizer = vectorizer

    def fit(self, texts: Sequence[str], labels: np.ndarray) -> TfidfClassifier:
        """Fit the vocabulary and the regression on train texts and their 0/1 labels."""
        y = labels.astype(int)
        if len(np.unique(y)) < 2:  # one class on train: nothing to learn, answer its share
            self.constant_ = float(y.mean()) if len(y) else 0.5
            return self
        self.constant_ = None
        self.vectorizer_ = self.vectorizer()
        features = self.vectorizer_.fit_transform(texts)
        self.model_ = LogisticRegression(
            C=self.c, class_weight="balanced", max_iter=2000, random_state=self.seed
        ).fit(features, y)
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(positive) per text."""
        if self.constant_ is not None:
            return np.full(len(texts), self.constant_)
        return self.model_.predict_proba(self.vectorizer_.transform(texts))[:, 1]


class TfidfLengthRegressor:
    """TF-IDF + log prompt tokens → log reply tokens by ridge regression; predicts reply tokens."""

    def __init__(self, *, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def _features(self, texts: Sequence[str], prompt_tokens: np.ndarray) -> sparse.csr_matrix:
        column = sparse.csr_matrix(np.log1p(np.asarray(prompt_tokens, dtype=np.float64))[:, None])
        return sparse.hstack([self.vectorizer_.transform(texts), column], format="csr")

    def fit(self, texts: Sequence[str], prompt_tokens: np.ndarray, reply_tokens: np.ndarray) -> TfidfLengthRegressor:
        """Fit on the train side."""
        self.vectorizer_ = _vectorizer().fit(texts)
        # Solved to convergence: at Ridge's default tolerance (1e-4) conjugate gradients stops where the BLAS
        # thread count moves the 5th digit of the predictions, so the committed row did not reproduce.
        ridge = Ridge(alpha=self.alpha, solver="sparse_cg", tol=1e-12)
        self.model_ = ridge.fit(self._features(texts, prompt_tokens), np.log1p(reply_tokens))
        return self

    def predict(self, texts: Sequence[str], prompt_tokens: np.ndarray) -> np.ndarray:
        """Predicted reply tokens."""
        return np.expm1(self.model_.predict(self._features(texts, prompt_tokens)))
