"""Default rules a production system runs today: the web-policy rule checker and the context-aware cache key."""

from __future__ import annotations

from jevserve.bench.sources import ChatMessage
from jevserve.bench.tasks.agent_web_policy import rules_broken
from jevserve.bench.tasks.cache_chats import user_text


def test_the_rule_checker_denies_only_when_the_action_is_in_the_rules_domain_and_the_profile_fails_it():
    minor = {"age": 16, "membership": True, "dr_license": True, "vaccine": True, "domestic": True}
    assert rules_broken(minor, "marriott Book a hotel room in Paris") == 1
    assert rules_broken(minor, "united Book a flight to Paris") == 0  # vaccinated: the flight rule holds
    assert rules_broken({**minor, "age": 30}, "marriott Book a hotel room in Paris") == 0
    assert rules_broken({**minor, "vaccine": False}, "united Book a flight and a hotel") == 2


def test_the_rule_checker_reads_whole_words_only():
    unlicensed = {"age": 30, "dr_license": False}
    assert rules_broken(unlicensed, "carnival cruise deals") == 0  # "carnival" is not "car"
    assert rules_broken(unlicensed, "enterprise rent a car at the airport") == 1


def test_the_cache_key_joins_the_user_messages_of_the_whole_conversation():
    chat = (ChatMessage("user", "My gym costs too much"), ChatMessage("assistant", "Cancel or freeze?"),
            ChatMessage("user", "cancel it"))
    assert user_text(chat) == "My gym costs too much\ncancel it"


def test_every_task_argues_why_its_default_is_what_production_does_today():
    from jevserve.bench.tasks import TASKS

    missing = [t.name for t in TASKS.values() if len(t.default_why) < 60]
    assert not missing, f"tasks without a written argument for their default: {missing}"
