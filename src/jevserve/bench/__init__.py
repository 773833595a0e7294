"""JevServe-Bench: serving decisions from shipped public data, scored 0 (today's rule) to 100 (oracle).

    from jevserve.bench import TASKS, BenchData, split_items

    task = TASKS["guard-injection"]
    train, test = split_items(task.load_items(BenchData()))   # SourceMissingError names the fetch command
    body = task.request(train[0])                             # the fixed questions about the item's state
    targets = task.supervision(train[0])                      # per question, the answer the label implies

Decision training uses exactly this: train items, their requests and supervision; never a test item.
`state_key(item)` is the content id of an item's state, for checking a training manifest against every test side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevserve import lazy_exports

if TYPE_CHECKING:
    from jevserve.bench.answers_cache import AnswersCache, request_key
    from jevserve.bench.data import BenchData
    from jevserve.bench.task import CATEGORIES, Item, Task, split_items, state_key
    from jevserve.bench.tasks import TASKS, UnknownTaskError, select_tasks

# The exports load on first use (PEP 562): importing one bench module (the command line's, a data source) does not
# import scipy and scikit-learn, so `jevserve --help` stays fast and the base install (no extras) can list the bench.
_EXPORTS = {
    "AnswersCache": "answers_cache",
    "request_key": "answers_cache",
    "BenchData": "data",
    "CATEGORIES": "task",
    "Item": "task",
    "Task": "task",
    "split_items": "task",
    "state_key": "task",
    "TASKS": "tasks",
    "UnknownTaskError": "tasks",
    "select_tasks": "tasks",
}

__all__ = [
    "CATEGORIES",
    "TASKS",
    "AnswersCache",
    "BenchData",
    "Item",
    "Task",
    "UnknownTaskError",
    "request_key",
    "select_tasks",
    "split_items",
    "state_key",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
