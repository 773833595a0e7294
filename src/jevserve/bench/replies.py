"""One request's answers, validated: what the bench asks through and caches (runner.py), and what an endpoint's
version is read from (versioning.py).

A 200 reply that is not JSON, or lacks a valid answer to a question asked (answers_cache.answers_problem: a missing
answer, a probability outside [0, 1] or NaN, a wrong type), is asked again INVALID_RETRIES times, then raises
InvalidReply: a broken reply is a fault of the endpoint, never an answer to cache or score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from jevserve.bench.answers_cache import answers_problem

INVALID_RETRIES = 2  # an invalid 200 reply is asked again this often before the run stops (as the client does 5xx)
INVALID_BACKOFF_S = 0.5  # doubled on each retry


class InvalidReply(Exception):
    """A 200 reply the bench cannot use (not JSON, or not a valid answer to every question asked), after retries;
    `same_each_time` when every try got the same invalid answer (a rerun would stop at the same request)."""

    def __init__(self, message: str, *, same_each_time: bool = False) -> None:
        super().__init__(message)
        self.same_each_time = same_each_time


class DecisionClient(Protocol):
    """What the runner needs of a client: `AsyncSystemOne` has it."""

    async def decide_raw(self, body: Mapping[str, Any]) -> dict:
        """POST one request body and return the JSON answer."""
        ...


async def ask_valid(client: DecisionClient, body: Mapping[str, Any]) -> dict[str, Any]:
    """The answers of one request, one valid answer per question asked (only those: nothing else is cached). A
    reply that is not JSON or not valid is asked again INVALID_RETRIES times, then raises InvalidReply."""
    questions = body["questions"]
    problems: list[str] = []
    answered = 0  # replies that were JSON: their problem is the model's answer, not the server's reply
    for attempt in range(INVALID_RETRIES + 1):
        if attempt:
            await asyncio.sleep(INVALID_BACKOFF_S * 2 ** (attempt - 1))
        try:
            response = await client.decide_raw(body)
        except ValueError as exc:  # the client's JSON decoding of a body that is not JSON (or not UTF-8)
            problems.append(f"the reply is not JSON ({exc})")
            continue
        answered += 1
        answers = response.get("answers") if isinstance(response, Mapping) else None
        problem = answers_problem(questions, answers)
        if problem is None:
            return {qid: answers[qid] for qid in questions}
        problems.append(problem)
    raise InvalidReply(f"{INVALID_RETRIES + 1} invalid replies to one request, the last: {problems[-1]}",
                       same_each_time=answered == len(problems) and len(set(problems)) == 1)
