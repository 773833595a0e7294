"""The JevServe-Bench tasks, one module each, registered by name in the order the board shows them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from jevserve.bench.task import CATEGORIES, Task
from jevserve.bench.tasks.agent_action_risk import AgentActionRisk
from jevserve.bench.tasks.agent_clarify import AgentClarify
from jevserve.bench.tasks.agent_tool_fit import AgentToolFit
from jevserve.bench.tasks.agent_web_policy import AgentWebPolicy
from jevserve.bench.tasks.cache_chats import CacheChats
from jevserve.bench.tasks.cache_pairs import CachePairs
from jevserve.bench.tasks.guard_harmful import GuardHarmful
from jevserve.bench.tasks.guard_injection import GuardInjection
from jevserve.bench.tasks.guard_jailbreak import GuardJailbreak
from jevserve.bench.tasks.guard_overrefusal import GuardOverrefusal
from jevserve.bench.tasks.route_math import RouteMath
from jevserve.bench.tasks.schedule_continue import ScheduleContinue
from jevserve.bench.tasks.schedule_reply_length import ScheduleReplyLength
from jevserve.bench.tasks.schedule_return import ScheduleReturn
from jevserve.bench.tasks.verify_answer import VerifyAnswer
from jevserve.bench.tasks.verify_math_steps import VerifyMathSteps


class UnknownTaskError(ValueError):
    """A task name that is not registered."""


def build_tasks(tasks: Iterable[Task]) -> Mapping[str, Task]:
    """A read-only name -> task mapping; a duplicate name or an unknown category is an error."""
    registry: dict[str, Task] = {}
    for task in tasks:
        if task.name in registry:
            raise ValueError(f"task {task.name!r} is registered twice")
        if task.category not in CATEGORIES:
            expected = ", ".join(CATEGORIES)
            raise ValueError(f"task {task.name!r} has category {task.category!r}; expected one of: {expected}")
        registry[task.name] = task
    return MappingProxyType(registry)


TASKS = build_tasks(
    [
        GuardInjection(), GuardJailbreak(), GuardHarmful(), GuardOverrefusal(),
        AgentActionRisk(), AgentWebPolicy(), AgentToolFit(), AgentClarify(),
        VerifyMathSteps(), VerifyAnswer(), RouteMath(), CachePairs(), CacheChats(),
        ScheduleReplyLength(), ScheduleReturn(), ScheduleContinue(),
    ]
)  # fmt: skip


def select_tasks(names: str | None, tasks: Mapping[str, Task] = TASKS) -> list[Task]:
    """The tasks named in a comma-separated list (all when None); unknown names list the known ones, and a list
    that names no task (`--tasks ""`) is an error, never a silent run of every task."""
    if names is None:
        return list(tasks.values())
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        raise UnknownTaskError(f"no task named in {names!r}; expected a comma-separated list of: {', '.join(tasks)}")
    unknown = [n for n in wanted if n not in tasks]
    if unknown:
        raise UnknownTaskError(f"unknown task(s) {', '.join(map(repr, unknown))}; expected one of: {', '.join(tasks)}")
    return [tasks[n] for n in dict.fromkeys(wanted)]


__all__ = ["TASKS", "UnknownTaskError", "build_tasks", "select_tasks"]
