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


def _requests_with_outputs(lengths):
    return [Request(f"r{i}", 0.0, 100, n) for i, n in enumerate(lengths)]


def test_a_noisy_oracle_on_equal_output_lengths_is_refused_with_what_to_do():
    with pytest.raises(WorkloadError, match=r"every request's output length is 300 tokens.*oracle tau of 1"):
        noisy_oracle(_requests_with_outputs([300] * 40), kendall_tau=0.6)
    exact, tau = noisy_oracle(_requests_with_outputs([300] * 40), kendall_tau=1.0)
    assert tau == 1.0 and {r.predicted_output_tokens for r in exact} == {300.0}


def test_a_tau_that_ties_put_out_of_reach_is_refused_naming_the_highest():
    lengths = [100] * 30 + [200] * 30 + [300]  # tau-b with these ties cannot reach 0.99
    with pytest.raises(WorkloadError, match=r"out of reach.*highest tau a noisy oracle reaches is 0\.\d+"):
        noisy_oracle(_requests_with_outputs(lengths), kendall_tau=0.99)
    _, tau = noisy_oracle(_requests_with_outputs(lengths), kendall_tau=0.3)
    assert tau == pytest.approx(0.3, abs=0.02)
