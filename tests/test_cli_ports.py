"""Every command that listens or connects checks its --port before it loads a model or reads data (`jevserve
web` checks its own: tests/web/test_cli.py)."""

from __future__ import annotations

import pytest

from jevserve.cli import main


@pytest.mark.parametrize(
    ("argv", "low"),
    [(["serve"], 1), (["gateway"], 1), (["engine"], 1), (["loadgen"], 1)],
)
@pytest.mark.parametrize("value", ["99999", "-5"])
def test_a_port_out_of_range_exits_2_before_anything_loads(argv, low, value, capsys):
    try:
        code = main([*argv, "--port", value])
    except SystemExit as exc:  # argparse refuses the value before the command runs
        code = int(exc.code)
    assert code == 2
    assert f"--port '{value}': expected a port from {low} to 65535" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--port", "abc"], "jevserve serve: error: --port 'abc': expected a port from 1 to 65535"),
        (["sim", "run", "--rate", "abc"], "jevserve sim run: error: argument --rate: 'abc' is not a number"),
        (["bench", "run", "--tasks"], "jevserve bench run: error: argument --tasks: expected one argument"),
        # an unknown flag is refused by the top parser, whose help lists no sub-command's options
        # with the nearest of the command's own flags, as a misspelt config key gets "did you mean"
        (["bench", "run", "--endpont", "x"], "jevserve bench run: error: unrecognized arguments: --endpont x; "
                                             "--endpont (did you mean --endpoint?)"),
        (["serve", "--prot"], "jevserve serve: error: unrecognized arguments: --prot; --prot (did you mean --port?)"),
        (["serve", "--port=1", "--zzzz"], "jevserve serve: error: unrecognized arguments: --zzzz"),  # none near
        # a long flag with one dash, and another command's flag, were named with no hint (an outside tester's)
        (["loadgen", "-prot", "5"], "jevserve loadgen: error: unrecognized arguments: -prot 5; -prot (did you mean "
                                    "--port?)"),
        (["bench", "run", "-endpoint", "x"], "jevserve bench run: error: unrecognized arguments: -endpoint x; "
                                             "-endpoint (did you mean --endpoint? a long option takes two dashes)"),
        (["sim", "run", "--request-rate", "5"], "jevserve sim run: error: unrecognized arguments: --request-rate 5; "
                                                "--request-rate (an option of `jevserve loadgen`, not of `jevserve "
                                                "sim run`)"),
        # another command's flag before a near one of its own (`--seed`), from a sub-command's own error too, and
        # no hint for a command's own flag after `--` (an outside re-tester's)
        (["sim", "run", "--speedup", "2"], "jevserve sim run: error: unrecognized arguments: --speedup 2; --speedup "
                                           "(an option of `jevserve engine`, `jevserve loadgen`, not of `jevserve sim "
                                           "run`)"),
        (["web", "--num-prompts", "3"], "jevserve web: error: unrecognized arguments: --num-prompts; --num-prompts "
                                        "(an option of `jevserve loadgen`, not of `jevserve web`)"),
        (["web", "-port", "21799"], "jevserve web: error: unrecognized arguments: -port; -port (did you mean --port? "
                                    "a long option takes two dashes)"),
        (["bench", "run", "--", "--endpoint", "x"], "jevserve bench run: error: unrecognized arguments: -- --endpoint "
                                                    "x"),
        (["--bogus"], "jevserve: error: unrecognized arguments: --bogus"),
        # a prefix of a flag was taken as the flag without a word (`--max-queu 5` set --max-queue); refused now, the
        # flags it starts named before another command's (`--seed` is train's, `--seeds` sim cluster's)
        (["serve", "--max-queu", "5"], "jevserve serve: error: unrecognized arguments: --max-queu; --max-queu (did "
                                       "you mean --max-queue? options are not abbreviated)"),
        (["sim", "cluster", "--seed", "1"], "jevserve sim cluster: error: unrecognized arguments: --seed 1; --seed "
                                            "(did you mean --seeds? options are not abbreviated)"),
        (["sim", "cluster", "--rep", "2"], "jevserve sim cluster: error: unrecognized arguments: --rep 2; --rep (did "
                                           "you mean --replicas or --replica-profiles? options are not abbreviated)"),
    ],
)
def test_a_refused_option_gets_two_lines_not_the_usage_block(argv, says, capsys):
    with pytest.raises(SystemExit) as refused:
        main(argv)
    err = capsys.readouterr().err
    assert refused.value.code == 2
    assert err.splitlines() == [says, f"run `{says.split(': error')[0]} --help` to see its options"]
