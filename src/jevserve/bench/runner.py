"""Ask an endpoint every request the bench needs, through `jevserve.client`, at most `concurrency` at a time.

Requests already in the answers cache are not sent. Each answer is appended to the cache as it arrives, so a run
that is killed (or whose endpoint goes away) resumes where it stopped and a finished run is free to repeat. A
request the endpoint refuses as one it can never answer (400, 413, 422: answers_cache.REFUSAL_STATUSES) is recorded
as refused and scored as "no information" (P = 0.5). A 429 (overloaded) is asked again after its Retry-After for
up to OVERLOAD_BUDGET_S. A 200 reply that is not JSON, or lacks a valid answer to a question asked, is asked again
and never cached (replies.py). Any other failure (connection lost, 401/403/404, 5xx after the client's retries, a
reply still invalid) stops the run, keeping what was answered.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from jevserve.bench.answers_cache import REFUSAL_STATUSES, AnswersCache, request_key
from jevserve.bench.replies import DecisionClient, InvalidReply, ask_valid
from jevserve.client import AsyncSystemOne, RetryPolicy, SystemOneAPIError, SystemOneConnectionError

if TYPE_CHECKING:
    import httpx

    from jevserve.bench.endpoint import ServeEmbedded


# A 429 is asked again after its Retry-After (else a backoff of 1 s doubling to 30 s) for up to 5 minutes per
# request: the SDK's rules (2 retries within 30 s) give up too soon for a run of thousands of requests.
OVERLOAD_RETRY = RetryPolicy(max_retries=30, initial_backoff_s=1.0, max_backoff_s=30.0, budget_s=300.0)
OVERLOAD_BUDGET_S = OVERLOAD_RETRY.budget_s
_JITTER = random.Random()  # spreads the retries of workers that were refused at the same moment


class PatientSystemOne(AsyncSystemOne):
    """AsyncSystemOne that waits out an overloaded endpoint: a 429 is retried by OVERLOAD_RETRY, honouring its
    Retry-After (or retry-after-ms) up to the budget; every other answer keeps the client's (the SDK's) rules."""

    def after_attempt(
        self, retry_index: int, started: float, response: httpx.Response | None, error: Exception | None, what: str
    ) -> float | None:
        """A delay before asking a 429 again while the overload budget lasts; else the client's decision."""
        if response is not None and response.status_code == 429 and retry_index < OVERLOAD_RETRY.max_retries:
            delay = OVERLOAD_RETRY.delay_s(retry_index, response.headers, _JITTER)
            if time.monotonic() - started + delay <= OVERLOAD_RETRY.budget_s:
                return delay
        return super().after_attempt(retry_index, started, response, error, what)


@dataclass(frozen=True)
class AskStats:
    """What one round of asking did."""

    num_requests: int  # distinct requests the tasks need
    num_cached: int  # of those, already answered (or refused) before this round
    num_sent: int  # requests sent this round
    num_refused: int  # of those, refused with a 4xx
    num_decisions: int  # questions in all needed requests (one decision each)
    wall_s: float  # seconds spent asking


def keyed(model: str, bodies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Distinct request bodies by cache key (the same state and questions asked twice are asked once)."""
    return {request_key(model, body): body for body in bodies}


async def ask_missing(
    client: DecisionClient, model: str, requests: Mapping[str, dict[str, Any]], cache: AnswersCache, *,
    concurrency: int = 32, progress: bool = True,
) -> AskStats:
    """Send every request of `requests` (key → body without `model`) that the cache lacks; returns counts."""
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}; expected an integer >= 1")
    started = time.perf_counter()
    missing = [key for key, body in requests.items() if not cache.answered(key, body["questions"])]
    num_decisions = sum(len(body["questions"]) for body in requests.values())
    queue: asyncio.Queue[str] = asyncio.Queue()
    for key in missing:
        queue.put_nowait(key)
    counts = {"sent": 0, "refused": 0}
    invalid: list[tuple[dict[str, Any], str, InvalidReply]] = []
    # None: drawn only on a terminal, not into a redirected log
    bar = tqdm(total=len(missing), desc=f"asking {model}", unit="req",
               disable=True if not progress or not missing else None)

    async def worker() -> None:
        while True:
            try:
                key = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            body = {**requests[key], "model": model}
            counts["sent"] += 1
            try:
                answers = await ask_valid(client, body)
            except SystemOneConnectionError as exc:  # the endpoint went away on this request: named too
                exc.bench_request, exc.bench_key = body, key
                raise
            except (SystemOneAPIError, InvalidReply) as exc:
                if isinstance(exc, InvalidReply) and exc.same_each_time and len(invalid) < MAX_NAMED_INVALID - 1:
                    # the model's answer to this request, not a fault of the moment: the others are still asked, so
                    # one run names every such request (up to MAX_NAMED_INVALID), not one per rerun
                    invalid.append((body, key, exc))
                    bar.update(1)
                    continue
                if not isinstance(exc, SystemOneAPIError) or exc.status_code not in REFUSAL_STATUSES:
                    exc.bench_request, exc.bench_key = body, key  # the message names the request (_request_named)
                    if isinstance(exc, InvalidReply) and exc.same_each_time:
                        raise InvalidAnswers([*invalid, (body, key, exc)], complete=False) from exc
                    raise
                cache.record_error(key, exc.status_code, exc.message)
                counts["refused"] += 1
            else:
                cache.record(key, answers)
            bar.update(1)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, max(len(missing), 1))):
                group.create_task(worker())
    except BaseExceptionGroup as group_error:
        # Surface the first real failure (the others are usually the same one, or cancellations).
        raise group_error.exceptions[0] from None
    finally:
        bar.close()
    if invalid:
        raise InvalidAnswers(invalid, complete=True)
    return AskStats(
        num_requests=len(requests),
        num_cached=len(requests) - len(missing),
        num_sent=counts["sent"],
        num_refused=counts["refused"],
        num_decisions=num_decisions,
        wall_s=time.perf_counter() - started,
    )


LOCK_POLL_S = 0.5  # how often a run waiting for another on the same answers file tries again
MAX_NAMED_INVALID = 10  # requests answered invalidly the same way each time, named before a run stops asking


class InvalidAnswers(InvalidReply):
    """Requests the endpoint answered invalidly the same way each time (InvalidReply.same_each_time), each with its
    body and answers cache key: every other request was asked where `complete`, else the run stopped at the
    MAX_NAMED_INVALID-th (a model that answers everything invalidly is not asked thousands of times over)."""

    def __init__(self, found: list[tuple[dict[str, Any], str, InvalidReply]], *, complete: bool) -> None:
        found = sorted(found, key=lambda f: f[1])  # by cache key: the same order on every run, not the arrival order
        super().__init__(f"{len(found)} requests answered invalidly the same way each time, the first: {found[0][2]}",
                         same_each_time=True)
        self.found, self.complete = found, complete


class AskFailed(Exception):
    """Asking could not start or stopped; the message says what to do and `exit_code` what a command returns."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Asked:
    """The outcome of `ask_endpoint`: the model asked, the endpoint's label, its answers and the round's counts."""

    model: str
    label: str
    cache: AnswersCache
    stats: AskStats


def _api_failure(exc: SystemOneAPIError, model: str | None, cached: str) -> AskFailed:
    """What an error answer that stopped the run means to the user: a model the endpoint does not serve or a key it
    refuses is the command's to fix (exit 2; the same command would fail again), anything else may pass (exit 1)."""
    if exc.status_code == 404:
        return AskFailed(f"the endpoint does not serve --model {model!r} ({exc}); give --model a name it serves", 2)
    if exc.status_code in (401, 403):
        return AskFailed(f"the endpoint refused the request ({exc}): give --api-key-env the variable that holds a key "
                         f"it accepts; every answer received so far is cached{cached}, and the same command resumes "
                         "from them once the key is right", 2)
    return AskFailed(f"the endpoint failed ({exc}{_request_named(exc)}); every answer received so far is "
                     f"cached{cached}, so running the same command again resumes", 1)


def _request_named(exc: BaseException) -> str:
    """", on the request asking 'q1', 'q2' about 'state…' (answers cache key …)" where the run named the request
    that failed (`ask_missing`), else ""."""
    body, key = getattr(exc, "bench_request", None), getattr(exc, "bench_key", None)
    if not isinstance(body, Mapping):
        return ""
    state = body.get("state")
    text = state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)
    excerpt = text if len(text) <= 80 else text[:77] + "..."
    questions = ", ".join(repr(q) for q in list(body.get("questions", {}))[:5])
    return f", on the request asking {questions} about {excerpt!r} (answers cache key {key})"


def _invalid_answers_said(exc: InvalidAnswers, where: str) -> str:
    """What a run that met requests answered invalidly the same way each time says: what to do, then each one."""
    for body, key, reply in exc.found:
        reply.bench_request, reply.bench_key = body, key
    if len(exc.found) == 1:
        reply = exc.found[0][2]
        said = f"the endpoint answered one request invalidly the same way each time ({reply}{_request_named(reply)})"
    else:
        said = f"the endpoint answered {len(exc.found)} requests invalidly the same way each time"
    asked = ("every other request was asked" if exc.complete else
             f"the run stopped asking once it had met {MAX_NAMED_INVALID} such requests, so more may follow")
    one = len(exc.found) == 1
    them = "it" if one else "them"
    listed = "" if one else ":" + "".join(f"\n  {n}. {reply}{_request_named(reply)}"
                                          for n, (_, _, reply) in enumerate(exc.found, 1))
    return (f"{said}; {asked}, and every answer received is cached{where}. Running the same command again resumes, "
            f"but it will likely stop at {'this request' if one else 'these requests'} again: fix the model's "
            f"answer to {them}, or have the endpoint refuse {them} (400, 413 or 422: counted as unanswered){listed}")


def endpoint_version_now(
    endpoint: str, model: str, api_key_env: str | None, answers_dir: Path | None = None, label: str | None = None
) -> str:
    """A URL endpoint's answers version, asked before a command's slow start (the data, half a minute), so an endpoint
    that cannot be scored is told so at once: `label` (`--answers-version`) after one round of the probes (that it
    answers them validly), else the version its probe answers, asked twice, settle on (versioning.settle_version,
    among those recorded under `answers_dir`). Raises AskFailed as `ask_endpoint` would for the same failure."""
    from jevserve.bench.answers_cache import default_answers_dir
    from jevserve.bench.endpoint import DEFAULT_TIMEOUT_S, _api_key
    from jevserve.bench.versioning import ProbeFailed, UnstableVersion, probe_answers, probe_stable, settle_version

    async def probe() -> str:
        async with PatientSystemOne(endpoint, _api_key(api_key_env), timeout_s=DEFAULT_TIMEOUT_S) as client:
            if label is not None:
                await probe_answers(client, model)
                return label
            return settle_version(answers_dir or default_answers_dir(), model, *await probe_stable(client, model))

    try:
        return asyncio.run(probe())
    except ProbeFailed as exc:
        raise AskFailed(str(exc), 2 if isinstance(exc, UnstableVersion) else 1) from exc
    except SystemOneAPIError as exc:
        raise _api_failure(exc, model, " (none yet)") from exc
    except (SystemOneConnectionError, InvalidReply) as exc:
        raise AskFailed(f"the endpoint failed while the bench asked its version probes ({exc}); nothing else was "
                        "asked", 1) from exc


def ask_endpoint(
    endpoint: str,
    model: str | None,
    api_key_env: str | None,
    answers_dir: Path | None,
    requests_for: Callable[[str], Mapping[str, dict[str, Any]]],
    *,
    concurrency: int,
    progress: bool = True,
    serve_embedded: ServeEmbedded | None = None,
    output_problem: Callable[[str], str | None] | None = None,
    version: str | None = None,
) -> Asked:
    """Open `endpoint` (a URL, or `embedded`, served by `serve_embedded`) and ask it every request of
    `requests_for(model)` its answers cache lacks. Raises AskFailed for endpoint arguments that cannot work (exit 2)
    or an endpoint that failed (exit 1); every answer received before a failure stays cached, so the same command
    resumes. Before any asking, the answers cache file is opened and `output_problem(model)` (why the model's results
    cannot be written, or None) is asked: either failing is AskFailed (exit 2), not a failure after the scoring.
    `version` names a URL endpoint's answers (`--answers-version`, or `endpoint_version_now`'s); None: probed."""
    from jevserve.bench.answers_cache import default_answers_dir
    from jevserve.bench.endpoint import DEFAULT_TIMEOUT_S, EndpointError, open_endpoint
    from jevserve.bench.versioning import ProbeFailed, UnstableVersion, probe_stable, settle_version
    from jevserve.client import SystemOneConnectionError

    cache: AnswersCache | None = None
    held_before = [0]  # answers the cache held when this run opened it
    interrupted: signal.Signals | None = None

    def on_signal(signum: signal.Signals, task: asyncio.Task) -> None:
        # Recorded as well as acted on: asyncio.run's own handler cancels the run, but a Ctrl-C that lands as the
        # last answers arrive can cancel a task that then returns without another await, and the run ended as if
        # none had come. SIGTERM (what `timeout`, docker and systemd send) ended the run without a word.
        nonlocal interrupted
        interrupted = signum
        task.cancel()

    async def versioned_ask(opened: Any) -> AskStats:
        # One event loop for the probe and the run: the HTTP client's connections belong to it.
        nonlocal cache
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(signum, on_signal, signum, asyncio.current_task())
        client = PatientSystemOne(opened.base_url, opened.api_key, timeout_s=DEFAULT_TIMEOUT_S)
        # A URL's version: what /v1/models says of the model and its answers to the probe set (embedded: weights).
        directory = answers_dir or default_answers_dir()
        answers_version = opened.version or version or settle_version(
            directory, opened.model, *await probe_stable(client, opened.model))
        try:
            cache = AnswersCache(directory, opened.model, answers_version)
            cache.open()
            held = cache.try_lock()
        except OSError as exc:
            name = Path(exc.filename).name if exc.filename else "its answers file"
            raise AskFailed(f"--answers-cache {directory}: cannot read and write {name} ({exc.strerror or exc}); "
                            "name a folder this user can write", 2) from None
        held_before[0] = len(cache.answers)
        problem = output_problem(opened.model) if output_problem is not None else None
        if problem:
            cache.close()
            raise AskFailed(problem, 2)
        try:
            if not held:  # another run is asking this model into this cache: wait, then reuse its answers
                print(f"another run is asking {opened.model} into {cache.path}; waiting for it to end, then its "
                      "answers are reused (Ctrl-C stops waiting)", file=sys.stderr, flush=True)
                while not cache.try_lock():
                    await asyncio.sleep(LOCK_POLL_S)
                cache.reread()
                held_before[0] = len(cache.answers)
            return await ask_missing(client, opened.model, requests_for(opened.model), cache,
                                     concurrency=concurrency, progress=progress)
        finally:
            cache.close()

    def where() -> str:
        if cache is None:
            return f" (none yet) under {answers_dir or default_answers_dir()}"
        this_run = len(cache.answers) - held_before[0]
        return f" ({this_run} answers from this run, {len(cache.answers)} in all) in {cache.path}"

    try:
        with open_endpoint(endpoint, model, api_key_env, serve_embedded=serve_embedded) as opened:
            try:
                stats = asyncio.run(versioned_ask(opened))
            except asyncio.CancelledError:
                if interrupted is None:
                    raise
            if interrupted is not None:
                raise KeyboardInterrupt
    except EndpointError as exc:
        raise AskFailed(str(exc), 2) from exc
    except SystemOneAPIError as exc:
        raise _api_failure(exc, model, where()) from exc
    except ProbeFailed as exc:  # answers that vary are the command's to name (--answers-version): exit 2
        raise AskFailed(str(exc), 2 if isinstance(exc, UnstableVersion) else 1) from exc
    except InvalidAnswers as exc:  # a rerun resumes, and stops at these requests again: the model is to fix
        raise AskFailed(_invalid_answers_said(exc, where()), 1) from exc
    except InvalidReply as exc:
        raise AskFailed(f"the endpoint failed ({exc}{_request_named(exc)}); every answer received so far is "
                        f"cached{where()}, so running the same command again resumes", 1) from exc
    except SystemOneConnectionError as exc:
        raise AskFailed(f"the endpoint failed ({exc}{_request_named(exc)}); every answer received so far is "
                        f"cached{where()}, so running the same command again resumes", 1) from exc
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the workers are cancelled and the cache is closed; one line, not their tracebacks,
        # and the shell's exit status for the signal (130, 143)
        signum = interrupted or signal.SIGINT
        said = "interrupted" if signum == signal.SIGINT else f"stopped by {signum.name}"
        raise AskFailed(f"{said}; every answer received so far is cached{where()}, so running the same "
                        "command again resumes", 128 + signum) from None
    return Asked(opened.model, opened.label, cache, stats)
