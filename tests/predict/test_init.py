import jevserve.predict as predict


def test_public_exports_are_pinned():
    assert sorted(predict.__all__) == ["ReplyLengthRegressor", "answer_features", "design", "feature_names"]
