"""People's scores: the bench's normalisation on the answered items, and accuracy against the model."""

from __future__ import annotations

import math

from jevserve.web.humans import expected_accuracy, human_cells, versus


def _refs():
    # four injection items: labels T, T, F, F; the default rule blocks every item (balanced accuracy 0.5)
    by_id = {"a": (True, True, True), "b": (True, True, True), "c": (False, True, False), "d": (False, True, False)}
    return {"guard-injection": {"metric": "balanced_accuracy", "by_id": by_id}}


def _answer(item_id, choice, truth, session="s1", round_id="r1", **extra):
    return {"decision": "injection", "item_id": item_id, "choice": choice, "truth": truth, "session_id": session,
            "round_id": round_id, "correct": choice == truth, "time_ms": 2000.0, "model_choice": None,
            "model_decision_ms": None, **extra}


def test_people_who_answer_every_item_right_score_100():
    answers = [_answer(i, "yes" if i in "ab" else "no", "yes" if i in "ab" else "no") for i in "abcd"]
    cell = human_cells(answers, _refs(), num_resamples=200)["guard-injection"]
    assert cell.score == 100.0
    assert (cell.num_answers, cell.num_rounds, cell.num_players) == (4, 1, 1)


def test_people_who_block_everything_score_0_like_the_default_rule():
    answers = [_answer(i, "yes", "yes" if i in "ab" else "no") for i in "abcd"]
    assert human_cells(answers, _refs(), num_resamples=200)["guard-injection"].score == 0.0


def test_half_right_on_positives_scores_50():
    # balanced accuracy (0.5 + 1.0) / 2 = 0.75; normalised 100 × (0.75 − 0.5) / (1 − 0.5) = 50
    answers = [_answer("a", "yes", "yes"), _answer("b", "no", "yes"), _answer("c", "no", "no"),
               _answer("d", "no", "no")]
    assert math.isclose(human_cells(answers, _refs(), num_resamples=200)["guard-injection"].score, 50.0)


def test_interval_resamples_players_not_answers_and_one_player_gives_none():
    # one player: every resample draws the same answers, so the interval was [100, 100], which an outside tester
    # read as measured exactly; it is not told
    answers = [_answer(i, "yes" if i in "ab" else "no", "yes" if i in "ab" else "no", session="one") for i in "abcd"]
    cell = human_cells(answers, _refs(), num_resamples=200)["guard-injection"]
    assert cell.score == 100.0 and math.isnan(cell.low) and math.isnan(cell.high)
    two = answers + [_answer(i, "yes", "yes" if i in "ab" else "no", session="two", round_id="r2") for i in "abcd"]
    cell = human_cells(two, _refs(), num_resamples=200)["guard-injection"]
    assert cell.low < cell.high  # two players: draws differ


def test_items_that_all_had_one_truth_leave_the_cell_undefined_for_reply_lengths_too():
    # an outside tester's single reply-length answer was shown 0.0 [0.0, 0.0] (τ-b of one item reads 0)
    refs = {"schedule-reply-length": {"metric": "kendall_tau_b", "by_id": {"x": (3.0, 2.0, 3.0)}}}
    answer = {**_answer("x", "medium", "medium"), "decision": "length"}
    cell = human_cells([answer], refs, num_resamples=50)["schedule-reply-length"]
    assert math.isnan(cell.score) and cell.num_answers == 1


def test_versus_reports_people_and_model_accuracy_and_median_times():
    answers = [
        _answer("a", "yes", "yes", model_choice="yes", model_decision_ms=4.0),
        _answer("c", "yes", "no", model_choice="no", model_decision_ms=6.0, time_ms=4000.0),
    ]
    (row,) = versus(answers)
    assert (row.people_accuracy, row.model_accuracy, row.num_model_answers) == (0.5, 1.0, 2)
    assert (row.people_median_ms, row.model_median_ms) == (3000.0, 5.0)
    # a call whose answer is not counted gives no time: the packaged site showed a model time beside "0 answers"
    (row,) = versus([_answer("a", "yes", "yes", model_choice=None, model_decision_ms=4.0)])
    assert row.num_model_answers == 0 and math.isnan(row.model_median_ms)


def test_versus_tells_no_interval_for_one_player_and_the_people_page_says_so(tmp_path):
    # an outside tester re-testing the one-player fix: the board said "no interval" while /people still showed
    # `0% [0, 0]` and the model's `67% [67, 67]`, intervals over players that one player cannot give
    from fastapi.testclient import TestClient

    from tests.web.builders import make_app, options

    one = [_answer("a", "yes", "yes", model_choice="yes"), _answer("c", "yes", "no", model_choice="no")]
    (row,) = versus(one)
    assert all(math.isnan(b) for b in (*row.people_interval, *row.model_interval))
    two = [*one, {**_answer("a", "yes", "no", model_choice="yes"), "session_id": "other"}]
    (row,) = versus(two)
    assert all(math.isfinite(b) for b in (*row.people_interval, *row.model_interval))

    client = TestClient(make_app(tmp_path / "db.sqlite"))
    first = client.post("/play/rounds", follow_redirects=False).headers["location"]
    client.post(f"{first}/answer", data={"position": "0", "choice": options(client.get(first).text)[0]})
    people = client.get("/people").text
    assert people.count("[one player: no interval]") == 2 and "[0, 0]" not in people and "[100, 100]" not in people


def test_expected_accuracy_is_the_mean_of_per_answer_shares():
    from jevserve.web.answering import StoredRow
    from jevserve.web.decisions import PoolItem, Pools

    pools = Pools.from_items({"injection": [PoolItem(i, "", None, t) for i, t in
                                            (("a", "yes"), ("b", "yes"), ("c", "no"), ("d", "no"), ("e", "no"))]})
    # right on a (yes), wrong on b (yes); right on c, d, wrong on e (no): (1/2 + 2/3) / 2
    row = StoredRow("m", "model", {"guard-injection": {"a": True, "b": False, "c": False, "d": False, "e": True}}, {})
    assert math.isclose(expected_accuracy(pools, [row])["m"]["injection"], (1 / 2 + 2 / 3) / 2)
