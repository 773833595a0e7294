import pytest

from jevserve.serving import (
    QUEUE_POLICIES,
    DuplicatePolicyError,
    ShortestPromptFirst,
    UnknownPolicyError,
    make_queue_policy,
    queue_policy_names,
    register_queue_policy,
)


def test_registry_holds_the_queue_policies_by_short_key():
    assert queue_policy_names() == ["fcfs", "plf", "plf-edf", "plf-relage", "priority", "spf", "tlf"]


def test_make_queue_policy_passes_aging_and_delay():
    policy = make_queue_policy("spf", aging_s=3.0, decision_delay_s=0.5)
    assert isinstance(policy, ShortestPromptFirst)
    assert (policy.aging_s, policy.decision_delay_s) == (3.0, 0.5)


def test_unknown_policy_error_lists_the_known_names():
    known = "fcfs, plf, plf-edf, plf-relage, priority, spf, tlf"
    with pytest.raises(UnknownPolicyError, match=f"unknown queue policy 'fifo'; expected one of: {known}"):
        make_queue_policy("fifo")


def test_registering_a_name_twice_raises():
    with pytest.raises(DuplicatePolicyError, match="'fcfs' is already registered"):
        register_queue_policy("fcfs", ShortestPromptFirst)


def test_a_new_policy_can_be_registered_once():
    register_queue_policy("test-only", ShortestPromptFirst)
    try:
        assert isinstance(make_queue_policy("test-only"), ShortestPromptFirst)
    finally:
        del QUEUE_POLICIES["test-only"]
