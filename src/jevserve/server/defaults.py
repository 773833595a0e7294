"""Default per-request limits, importable without the web framework (the CLI's --help reads them)."""

DEFAULT_MAX_QUESTIONS = 4096  # per request: far above any real decision call, well below what stalls a server
DEFAULT_MAX_OPTIONS = 32_768  # per request, summed over questions (a noul counts 2)
