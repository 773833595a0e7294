import pytest
from scipy import stats

from jevserve.serving import Request
from jevserve.sim.errors import WorkloadError
from jevserve.sim.workloads.predictions import attach_predictions, noisy_oracle, read_predictions
from jevserve.sim.workloads.sharegpt import sample_sharegpt


def test_read_and_attach_predictions(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"request_id": "a", "predicted_tokens": 12}\n{"request_id": "b", "predicted_tokens": 3.5}\n')
    requests = attach_predictions([Request("b", 0.0, 5, 5), Request("a", 0.0, 5, 5)], read_predictions(path))
    assert [r.predicted_output_tokens for r in requests] == [3.5, 12.0]


def test_missing_predictions_are_counted_and_named():
    with pytest.raises(WorkloadError, match=r"1 of 2 requests have no prediction \(e.g. b\)"):
        attach_predictions([Request("a", 0.0, 5, 5), Request("b", 0.0, 5, 5)], {"a": 1.0})


@pytest.mark.parametrize("line, message", [
    ('{"request_id": "a"}', "expected the fields request_id and predicted_tokens"),
    ('{"request_id": "a", "predicted_tokens": -3}', "predicted_tokens = -3; expected a number >= 0"),
    ("nope", "not valid JSON"),
])
def test_bad_prediction_lines_name_the_line(tmp_path, line, message):
    path = tmp_path / "p.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(WorkloadError, match=f"p.jsonl:1: .*{message}"):
        read_predictions(path)


def test_noisy_oracle_hits_the_target_kendall_tau_and_is_seeded():
    requests = sample_sharegpt(500, seed=0, split="test")
    predicted, tau = noisy_oracle(requests, kendall_tau=0.6, seed=0)
    truth = [r.num_output_tokens for r in predicted]
    guess = [r.predicted_output_tokens for r in predicted]
    assert stats.kendalltau(truth, guess).statistic == pytest.approx(0.6, abs=0.005)
    assert tau == pytest.approx(0.6, abs=0.005)
    assert noisy_oracle(requests, kendall_tau=0.6, seed=0)[0] == predicted


def test_a_perfect_oracle_predicts_the_true_lengths():
    requests = sample_sharegpt(50, seed=0, split="test")
    predicted, tau = noisy_oracle(requests, kendall_tau=1.0, seed=0)
    assert tau == 1.0 and all(r.predicted_output_tokens == r.num_output_tokens for r in predicted)
