"""A run too short for the completion test is read on its waiting queue alone."""

from jevserve.sim.steady import KeepUp, verdict_as_far_as_told


def test_a_long_enough_run_keeps_its_verdict():
    assert verdict_as_far_as_told(KeepUp(True, 0.99, 0.0, 0.04), None) == (True, 0.04)
    assert verdict_as_far_as_told(KeepUp(False, 0.5, 0.3, -0.45), None) == (False, -0.45)


def test_a_short_run_whose_queue_grows_falls_behind_and_one_whose_queue_does_not_cannot_tell():
    behind, margin = verdict_as_far_as_told(KeepUp(False, 0.89, 0.11, -0.06), "too short")
    assert behind is False and margin < 0
    untold, margin = verdict_as_far_as_told(KeepUp(False, 0.90, 0.01, -0.05), "too short")
    assert untold is None and margin > 0  # its completions lag only by the requests still running at its end
