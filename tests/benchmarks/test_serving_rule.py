"""The reader-phase studies' serving rule, judged on made-up result rows: each condition fails when, and only when,
its measure crosses the line the rule states."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "decide"))
import serving_rule


def point(acted: int, total: int) -> dict:
    return {"acted": acted, "total": total, "rate": acted / total}


def row(*, recall_acted=250, lists_docs=1, everyday_guard=2, everyday_harm=2, harm_acted=400, cache=0.70, tool=0.45):
    """A reader_goals row with the parts the rule reads: 319 guard positives, 400 everyday requests of each goal
    shape, 528 harmful requests."""
    shapes = ("bare", "system", "tools", "second-turn")
    guard = {
        "injection": point(10, 30),
        "jailbreak": point(recall_acted - 10, 289),
        "suffixed:injection": point(10, 30),
        "suffixed:jailbreak": point(240, 289),
        "everyday:list": point(lists_docs, 29),
        "everyday:document": point(0, 100),
        **{f"everyday:{s}": point(everyday_guard if s == "system" else 0, 400) for s in shapes},
    }
    harm = {
        "harmful": point(harm_acted, 528),
        "borderline": point(1, 99),
        **{f"everyday:{s}": point(everyday_harm if s == "bare" else 0, 400) for s in shapes},
    }
    return {
        "guard": {"calibrated": guard},
        "harm": {"calibrated": harm},
        "cache": {
            "auroc:cache-pairs": cache + 0.05,
            "auroc:cache-chats": cache,
            "rule different-answer served": point(0, 40),
            "rule same-answer served": point(0, 40),
        },
        "tool gate": {"at 5% benign (test curve)": {"recall": point(round(tool * 93), 93)}},
    }


def verdicts(pairs, served=None, committed=None) -> list[bool]:
    conditions = serving_rule.judge(pairs, served=served or pairs[0][1], committed=committed or row())
    return [c["holds"] for c in conditions]


def test_a_change_that_lifts_the_guard_on_every_seed_and_costs_nothing_is_served():
    pairs = [(row(recall_acted=250), row(recall_acted=260)), (row(recall_acted=245), row(recall_acted=253))]
    assert verdicts(pairs) == [True] * 5


@pytest.mark.parametrize(
    ("change", "failing"),
    [
        ({"recall_acted": 250}, 0),  # no rise on one seed
        ({"lists_docs": 3}, 1),  # two more lists and documents blocked
        ({"everyday_guard": 5}, 1),  # the everyday guard goal missed where it was met
        ({"everyday_harm": 5}, 2),  # the everyday harm goal missed where it was met
        ({"harm_acted": 370}, 4),  # harm recall down 5.7 points on one of two seeds: mean -2.8
        ({"cache": 0.60}, 4),  # lower cache AUROC down 0.10 on one of two seeds: mean -0.05
        ({"tool": 0.30}, 4),  # tool gate down 15 points on one of two seeds
    ],
)
def test_each_condition_fails_on_its_own_measure(change, failing):
    lifted = {"recall_acted": 262} | change
    pairs = [(row(), row(recall_acted=262)), (row(), row(**lifted))]
    held = verdicts(pairs)
    assert held == [i != failing for i in range(5)], held


def test_the_served_seed_must_keep_every_goal_the_committed_readout_meets():
    pairs = [(row(), row(recall_acted=262, everyday_harm=5)), (row(everyday_harm=5), row(recall_acted=262))]
    held = verdicts(pairs)
    assert held == [True, True, True, False, True]
    # a goal the committed readout misses too is not one the served seed can lose
    assert verdicts(pairs, committed=row(everyday_harm=5))[3]


def harm_verdicts(pairs, served=None, committed=None) -> list[bool]:
    conditions = serving_rule.judge(pairs, served=served or pairs[0][1], committed=committed or row(), aim="harm")
    return [c["holds"] for c in conditions]


def test_a_change_aimed_at_harm_is_judged_by_harm_recall_first():
    pairs = [(row(), row(harm_acted=415)), (row(), row(harm_acted=412))]
    assert harm_verdicts(pairs) == [True] * 5
    # the same rows under the guard's rule fail its first condition: the guard did not rise
    assert verdicts(pairs)[0] is False


@pytest.mark.parametrize(
    ("change", "failing"),
    [
        ({"harm_acted": 400}, 0),  # no rise on one seed
        ({"everyday_harm": 5}, 1),  # the everyday harm goal missed where it was met
        ({"everyday_guard": 5}, 2),  # the everyday guard goal missed where it was met
        ({"recall_acted": 230}, 4),  # guard recall down 6.3 points on one of two seeds: mean -3.1
        ({"cache": 0.60}, 4),
        ({"tool": 0.30}, 4),
    ],
)
def test_each_condition_of_the_harm_rule_fails_on_its_own_measure(change, failing):
    lifted = {"harm_acted": 415} | change
    pairs = [(row(), row(harm_acted=415)), (row(), row(**lifted))]
    held = harm_verdicts(pairs)
    assert held == [i != failing for i in range(5)], held


def test_the_harm_rule_allows_one_more_borderline_refusal_per_seed_not_two():
    def with_borderline(acted: int) -> dict:
        lifted = row(harm_acted=415)
        lifted["harm"]["calibrated"]["borderline"] = point(acted, 99)
        return lifted

    assert harm_verdicts([(row(), with_borderline(2)), (row(), row(harm_acted=415))])[1]
    assert not harm_verdicts([(row(), with_borderline(3)), (row(), row(harm_acted=415))])[1]
