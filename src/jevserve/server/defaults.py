"""Default per-request limits, importable without the web framework (the CLI's --help reads them)."""

# per request: far above any real decision call, well below what stalls a server, and no more than the default
# --max-queue (a request larger than the queue is admitted only when nothing else is queued)
DEFAULT_MAX_QUESTIONS = 2048
DEFAULT_MAX_OPTIONS = 32_768  # per request, summed over questions (a noul counts 2)
