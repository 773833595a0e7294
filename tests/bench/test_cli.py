"""`jevserve bench`: argument errors say what to pass."""

from __future__ import annotations

from jevserve.cli import main


def test_run_without_an_endpoint_or_baselines_says_what_to_pass(capsys):
    assert main(["bench", "run"]) == 2
    assert "pass --endpoint URL|embedded" in capsys.readouterr().err


def test_run_with_an_unknown_task_lists_the_known_ones(capsys):
    assert main(["bench", "run", "--baselines", "--tasks", "guard-nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown task(s) 'guard-nope'" in err and "guard-injection" in err


def test_a_run_with_no_data_here_says_to_fetch_it(capsys, tmp_path):
    code = main(["bench", "run", "--baselines", "--tasks", "cache-pairs", "--data-cache", str(tmp_path),
                 "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 1
    assert "jevserve data fetch --source fow-cache-pairs" in err


def test_board_without_results_says_to_run_first(capsys, tmp_path):
    assert main(["bench", "board", "--results", str(tmp_path / "none")]) == 1
    assert "run `jevserve bench run` first" in capsys.readouterr().err


def test_metadata_must_be_key_value(capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "run", "--baselines", "--metadata", "no-equals-sign"])
    assert exit_info.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_embedded_rows_name_their_own_weights():
    """A tuned model's row must not claim the shipped readout on a frozen encoder."""
    import argparse

    from jevserve.bench.cli import _metadata

    args = argparse.Namespace(concurrency=32, metadata=[])
    tuned = _metadata(args, "embedded", "minilm-tuned-reader", object())
    default = _metadata(args, "embedded", "jev-minilm-2", object())
    assert "fine-tuned" in tuned["parameters"] and "fine-tuned" not in default["parameters"]
    assert _metadata(args, "http://host:1", "x", object()) == {"runs": "http://host:1"}
