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


def test_a_taken_port_is_found_before_the_model_loads(monkeypatch, capsys):
    import jevserve.decide.registry as registry

    loaded = []
    monkeypatch.setattr(registry, "load_backends", lambda *a, **k: loaded.append(a) or [])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        assert main(["serve", "--port", str(taken.getsockname()[1])]) == 2
    assert loaded == [] and "loading model" not in capsys.readouterr().err


def test_more_questions_per_request_than_half_the_queue_are_capped_at_half(monkeypatch, capsys):
    import uvicorn

    limits = []
    monkeypatch.setattr(uvicorn.Server, "run",
                        lambda self, sockets: limits.append(self.config.app.state.jevserve.settings.max_questions))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["serve", "remote:http://127.0.0.1:9", "--port", str(port), "--max-questions", "5000",
                 "--max-queue", "3000"]) == 0
    assert limits == [1500] and "requests are limited to 1500 questions" in capsys.readouterr().err


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


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--device", "cuda"], "--device would be ignored: it applies to causal:PATH models only, not 'embedded'"),
        (["tuned", "--allow-network"], "--allow-network would be ignored"),
        (["causal:/nowhere", "--remote-model", "m"], "--remote-model would be ignored: it applies to remote:URL"),
        (["--allow-network", "remote:http://127.0.0.1:9", "--remote-timeout-s", "3", "--device", "cpu"],
         "--device would be ignored: it applies to causal:PATH models only, not 'remote:http://127.0.0.1:9'"),
    ],
)
def test_an_option_of_another_kind_of_backend_is_refused_not_ignored(argv, says, capsys):
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "loading model" not in err


def test_a_key_the_sdk_cannot_send_is_refused_at_startup(monkeypatch, capsys):
    monkeypatch.setenv("JEV_TEST_KEY", "my key")
    assert main(["serve", "remote:http://127.0.0.1:9", "--api-key-env", "JEV_TEST_KEY"]) == 2
    assert "typesafe-sdk refuses to send" in capsys.readouterr().err


def test_every_listed_log_level_starts_the_server_and_others_are_refused(monkeypatch, capsys):
    import logging

    import uvicorn

    started = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: started.append(self.config.log_level))
    monkeypatch.setattr(logging.root, "handlers", [])  # so that basicConfig sets the level again
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["serve", "remote:http://127.0.0.1:9", "--port", str(port), "--log-level", "trace"]) == 0
    assert started == ["trace"] and logging.root.level == 5
    with pytest.raises(SystemExit) as refused:
        main(["serve", "--log-level", "chatty"])
    assert refused.value.code == 2 and "invalid choice: 'chatty'" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "within"), [([], None), (["--answer-within-s", "2.5"], 2.5),
                                              (["--answer-within-s", "0"], None)])
def test_the_answer_time_limit_is_off_by_default_and_reaches_the_batcher(monkeypatch, argv, within):
    import uvicorn

    seen = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: seen.append(
        (self.config.app.state.jevserve.settings.answer_within_s,
         next(iter(self.config.app.state.jevserve.models.values())).batcher.answer_within_s)))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["serve", "remote:http://127.0.0.1:9", "--port", str(port), *argv]) == 0
    assert seen == [(within, within)]


def test_the_try_line_for_an_ipv6_host_and_a_key_works_where_it_is_pasted(monkeypatch, capsys):
    # an outside tester's `--host ::1` printed http://::1:PORT, which curl (rc 3) and the SDK (InvalidURL) refuse,
    # and a key set for the server alone (`MY_KEY=… jevserve serve`) went out empty from the shell the line was
    # pasted into, as a 401 "malformed"
    import httpx
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: None)
    monkeypatch.setenv("JEV_TRY_KEY", "s3cret")
    with socket.socket(socket.AF_INET6) as free:
        free.bind(("::1", 0))
        port = free.getsockname()[1]
    assert main(["serve", "remote:http://127.0.0.1:9", "--host", "::1", "--port", str(port),
                 "--api-key-env", "JEV_TRY_KEY"]) == 0
    out = capsys.readouterr()
    assert f"on http://[::1]:{port} " in out.err
    said, curl = out.out.splitlines()[:2]
    assert said == "try (with JEV_TRY_KEY set in that shell):"
    url = httpx.URL(curl.split()[2])
    assert (url.host, url.port, url.path) == ("::1", port, "/v1/systemone")
