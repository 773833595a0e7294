"""Predictors fitted on decision answers: reply length from a fixed question set."""

from jevserve.predict.features import answer_features, feature_names
from jevserve.predict.length import ReplyLengthRegressor, design

__all__ = ["ReplyLengthRegressor", "answer_features", "design", "feature_names"]
