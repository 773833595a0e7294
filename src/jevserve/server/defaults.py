"""Default per-request limits, importable without the web framework (the CLI's --help reads them)."""

# per request: far above any real decision call, well below what stalls a server, and half the default --max-queue
# (max_request_questions)
DEFAULT_MAX_QUESTIONS = 1024


def max_request_questions(max_queue: int) -> int:
    """The most questions one request may hold with a queue of `max_queue`: half of it. A request of n questions is
    admitted while at most max_queue - n are queued ahead of it, so one near the queue's size was refused whenever a
    few small requests were queued (told to retry, again and again, while they were served); at half the queue it is
    refused only when the queue is over half full, when every request near its size is."""
    return max(1, max_queue // 2)


DEFAULT_MAX_OPTIONS = 32_768  # per request, summed over questions (a noul counts 2)

# --answer-within-s: off. Refusing a request whose estimated answer would come after 5 s, under the SDK's 10-s
# timeout, made a burst of SDK calls fail where waiting served them all (docs/server.md, "A burst of SDK calls"):
# the SDK gives up after three tries, and the server drops a request whose client hung up, so a timed-out call's
# resend does not double the work.
DEFAULT_ANSWER_WITHIN_S = 0.0
