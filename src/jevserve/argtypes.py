"""Argument types for every command line: each rejects a bad value with a message that shows it and what is
accepted, so argparse exits with status 2 and names the flag (`argument --rate: ...`) instead of a traceback.

A leaf module (it imports nothing of jevserve), so that every part's command line, the decision server's included,
parses numbers the same way; what only the simulator's commands parse (arrival processes) is in sim/argtypes.py.
`check_writable` is the one check of an output path, made before a command's work rather than after it; `UsageError`
is how a command refuses flags that do not go together, which only it can judge after parsing. `connect_port` is the
one reading of the port in a URL a person gave (the gateway's config and its start-up check, loadgen's --base-url),
so they cannot disagree on what "no port" means."""

from __future__ import annotations

import argparse
import errno
import math
import os
import tempfile
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

DEFAULT_PORTS = {"http": 80, "https": 443}


def connect_port(url: str) -> int | None:
    """The port a connection to `url` goes to: the one it names, else its scheme's default. None when it names a
    port nothing can listen on: 0, out of range or not a number (urlsplit raises for the last two only when asked)."""
    parts = urllib.parse.urlsplit(url)
    try:
        named = parts.port
    except ValueError:
        return None
    if named is None:
        return DEFAULT_PORTS.get(parts.scheme)
    return named if named != 0 else None


def http_url(host: str, port: int) -> str:
    """The URL of a server listening on `host`:`port`, an IPv6 address in brackets (`http://::1:8795` is no URL:
    curl and httpx refuse it)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class UsageError(SystemExit):
    """Flags that do not go together, found by the command after parsing: `jevserve` prints
    `jevserve COMMAND: error: MESSAGE` and exits 2, as argparse does for a bad flag (a plain SystemExit with a
    message exits 1)."""


def flags_given(argv: Sequence[str]) -> set[str]:
    """The long options written on a command line (`--flag VALUE` and `--flag=VALUE` alike)."""
    return {token.split("=", 1)[0] for token in argv if token.startswith("--")}


def flag_value(argv: Sequence[str], flag: str, default: str) -> str:
    """The last value written for `flag` (`--flag VALUE` or `--flag=VALUE`), else `default`."""
    value = default
    for i, token in enumerate(argv):
        if token == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif token.startswith(flag + "="):
            value = token.split("=", 1)[1]
    return value


def refuse_ignored(argv: Sequence[str], rules: Sequence[tuple[str, bool, str]]) -> None:
    """UsageError for the first rule `(flag, applies, why)` whose flag is written in `argv` while it does not apply:
    a flag the command would ignore is refused, not dropped (argparse cannot tell a default from a given value)."""
    given = flags_given(argv)
    for flag, applies, why in rules:
        if flag in given and not applies:
            raise UsageError(f"{flag} would be ignored: {why}")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def positive_float(flag: str) -> Callable[[str], float]:
    """A finite number > 0 (a rate, a latency target, a threshold)."""
    return _finite_float(flag, zero=False)


def nonnegative_float(flag: str) -> Callable[[str], float]:
    """A finite number >= 0 (a delay)."""
    return _finite_float(flag, zero=True)


def _finite_float(flag: str, *, zero: bool) -> Callable[[str], float]:
    expected = f"{flag} {{!r}}: expected a finite number {'>=' if zero else '>'} 0"

    def parse(text: str) -> float:
        value = _number(text)
        if not (math.isfinite(value) and (value > 0 or (zero and value == 0))):
            raise argparse.ArgumentTypeError(expected.format(text))
        return value

    parse.__name__ = "non-negative number" if zero else "positive number"
    return parse


def _integer_at_least(text: str, minimum: int, refusal: str) -> int:
    """`text` as an integer >= `minimum`, or argparse's error with `refusal` (which shows the value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(refusal) from None
    if value < minimum:
        raise argparse.ArgumentTypeError(refusal)
    return value


def positive_int(flag: str) -> Callable[[str], int]:
    """An integer >= 1 (a count of requests or replicas)."""

    def parse(text: str) -> int:
        return _integer_at_least(text, 1, f"{flag} {text!r}: expected an integer >= 1")

    parse.__name__ = "positive integer"
    return parse


def context_length(flag: str) -> Callable[[str], int]:
    """A context length in tokens: >= 2, room for a prompt token and a reply token."""

    def parse(text: str) -> int:
        return _integer_at_least(text, 2, f"{flag} {text!r}: expected an integer >= 2 (a prompt token and a reply "
                                          "token)")

    parse.__name__ = "context length"
    return parse


def nonnegative_int(flag: str) -> Callable[[str], int]:
    """An integer >= 0 (a setting where 0 turns something off)."""

    def parse(text: str) -> int:
        return _integer_at_least(text, 0, f"{flag} {text!r}: expected an integer >= 0")

    parse.__name__ = "non-negative integer"
    return parse


def port(flag: str, *, zero: bool = False) -> Callable[[str], int]:
    """A TCP port, 1 to 65535 (0 too with `zero`: any free port), checked before a model loads."""
    low = 0 if zero else 1

    def parse(text: str) -> int:
        value = _integer_at_least(text, low, f"{flag} {text!r}: expected a port from {low} to 65535")
        if value > 65535:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected a port from {low} to 65535")
        return value

    parse.__name__ = "port"
    return parse


MIN_RESAMPLES = 100  # below it a 95% percentile interval's ends are a draw or two, or none (1 draw: no interval)


def resamples(text: str) -> int:
    """A count of bootstrap draws for 95% intervals: an integer >= MIN_RESAMPLES."""
    return _integer_at_least(text, MIN_RESAMPLES, f"--resamples {text!r}: expected an integer >= {MIN_RESAMPLES} "
                             "(a 95% interval's ends are the 2.5th and 97.5th percentiles of the draws)")


def seed(text: str) -> int:
    """A random seed: an integer >= 0 (numpy's generators take no negative seed)."""
    return _integer_at_least(text, 0, f"{text!r}: a seed is an integer >= 0")


def kendall_tau(text: str) -> float:
    """The Kendall tau of a noisy oracle's predictions: a number in (0, 1], 1 being the true lengths."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a Kendall tau in (0, 1]") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a Kendall tau in (0, 1] (1: the true lengths)")
    return value


def _repeated(values: Sequence[float]) -> list[float]:
    return sorted({v for v in values if values.count(v) > 1})


def float_list(text: str) -> tuple[float, ...]:
    """Comma-separated finite numbers > 0 (a sweep's rates), e.g. `1.05,1.2,1.54`, returned in increasing order
    (a sweep reads its rates in order); a number given twice is refused, as a typo rather than a wish."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated numbers, e.g. 1.05,1.2,1.54") from None
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least one number")
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected finite numbers > 0")
    if repeated := _repeated(values):
        raise argparse.ArgumentTypeError(f"{text!r}: {', '.join(f'{v:g}' for v in repeated)} given twice; "
                                         "give each rate once")
    return tuple(sorted(values))


def int_list(text: str) -> tuple[int, ...]:
    """Comma-separated integers >= 0 (seeds), e.g. `0,1`; a seed given twice is refused (its runs would be counted
    as independent samples, narrowing every interval)."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers, e.g. 0,1") from None
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least one integer")
    if min(values) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seeds are integers >= 0")
    if repeated := _repeated(values):
        raise argparse.ArgumentTypeError(f"{text!r}: seed {', '.join(map(str, repeated))} given twice; "
                                         "give each seed once")
    return values


def percentile_list(flag: str) -> Callable[[str], tuple[float, ...]]:
    """Comma-separated percentiles in [0, 100], e.g. `95,99.9`; empty for none."""

    def parse(text: str) -> tuple[float, ...]:
        expected = f"{flag} {text!r}: expected comma-separated percentiles in [0, 100], e.g. 95,99.9"
        try:
            values = tuple(float(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(expected) from None
        if not all(0 <= v <= 100 for v in values):  # nan fails every comparison, so it is refused too
            raise argparse.ArgumentTypeError(expected)
        return values

    parse.__name__ = "percentiles"
    return parse


def file_path(flag: str) -> Callable[[str], str]:
    """A file's path, not empty: `--config=` read as the current folder ("error: .: cannot read the config: Is a
    directory", for an outside tester), which named nothing the user wrote."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{flag} '': expected a file's path")
        return text

    parse.__name__ = "path"
    return parse


def check_writable(path: Path, flag: str) -> None:
    """Make `path`'s folder and make sure a file can be written there (and `path` overwritten), before the work
    whose result it will hold. Raises OSError with `filename` "FLAG PATH", which the command line prints in one line
    (`error: --json /proc/x.json: cannot write there (Permission denied)`)."""
    where = f"{flag} {path}"
    if path.is_dir():
        raise OSError(errno.EISDIR, "is a folder; name a file in it", where)
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:  # mkdir would say "File exists" of the file in the way
        raise OSError(errno.ENOTDIR, f"cannot write there ({blocker} is a file, not a folder)", where)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write there ({exc.strerror or exc})", where) from None
    if path.exists() and not os.access(path, os.W_OK):
        raise OSError(errno.EACCES, "the file cannot be overwritten (no write permission)", where)
