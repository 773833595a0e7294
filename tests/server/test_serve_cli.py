"""`jevserve serve` startup: bad specs and taken ports fail with exit 2 and a message, before any banner."""

import socket

import pytest

from jevserve.cli import main


def test_a_taken_port_exits_2_without_printing_the_serving_banner(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        status = main(["serve", "remote:http://127.0.0.1:9", "--port", str(port)])
    err = capsys.readouterr()
    assert status == 2
    assert f"--port {port}" in err.err and "serving" not in err.err + err.out and "curl" not in err.out


@pytest.mark.parametrize("spec", ["remote:not-a-url", "remote:"])
def test_a_remote_spec_without_a_usable_url_exits_2_at_startup(spec, capsys):
    assert main(["serve", spec]) == 2
    assert "remote" in capsys.readouterr().err


def test_help_lists_every_model_spec_and_the_new_limits(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    for spec in ("embedded", "encoder[:PRECISION]", "encoder-zs", "causal:", "remote:URL"):
        assert spec in out
    for flag in ("--max-questions", "--max-options", "--remote-timeout-s", "--remote-max-in-flight"):
        assert flag in out


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--max-wait-ms", "nan", "finite number >= 0"),  # NaN compares false everywhere: a wait never ends or starts
        ("--max-chunk-ms", "-1", "finite number >= 0"),
        ("--body-timeout-s", "inf", "finite number > 0"),
        ("--body-timeout-s", "0", "finite number > 0"),
        ("--remote-timeout-s", "nan", "finite number > 0"),
        ("--max-batch", "0", "integer >= 1"),
        ("--max-queue", "many", "integer >= 1"),
        ("--max-body-bytes", "-5", "integer >= 1"),
    ],
)
def test_a_bound_that_is_no_number_is_refused_before_anything_loads(flag, value, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "remote:http://127.0.0.1:9", flag, value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"{flag} {value!r}" in err and said in err and "loading model" not in err
