"""`jevserve engine` on a port that is taken: one line and exit 2, before anything is built or printed as served."""

from __future__ import annotations

import socket

import pytest

from jevserve.cli import main


def test_a_port_in_use_is_one_line_and_exit_2(capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        assert main(["engine", "--port", str(port), "--no-sharegpt-lengths"]) == 2
    finally:
        taken.close()
    captured = capsys.readouterr()
    assert f"cannot listen on 127.0.0.1:{port}" in captured.err and "Traceback" not in captured.err
    assert "/v1" not in captured.out  # never announced as serving


def test_a_kv_cache_smaller_than_one_request_of_the_context_is_refused_at_start_as_vllm_refuses_it(capsys):
    # an outside tester's `--num-kv-blocks 20` (320 tokens) beside the 40,960-token context started, then refused a
    # request that sent no max_tokens for the reply length the engine drew, blaming max_tokens
    assert main(["engine", "--num-kv-blocks", "20", "--no-sharegpt-lengths"]) == 2  # refused before it binds
    captured = capsys.readouterr()
    assert "the KV cache holds 320 tokens (20 blocks of 16), fewer than one request of --max-model-len 40,960" in (
        captured.err) and "/v1" not in captured.out
    assert "give --max-model-len 320 or less" in captured.err


def test_a_speedup_that_would_stop_the_clock_is_refused(capsys):
    # an outside tester's `--speedup 1e-9` started an engine whose every step would sleep for weeks
    with pytest.raises(SystemExit) as exc:
        main(["engine", "--speedup", "1e-9", "--no-sharegpt-lengths"])
    assert exc.value.code == 2
    assert "--speedup '1e-9': expected at least 0.01 (a step of 4 ms would take 4e+06 s" in capsys.readouterr().err


def test_the_end_of_the_shutdown_grace_is_one_note_not_uvicorns_error(capsys):
    import logging

    from jevserve.engine.cli import _ShutdownCancelNote

    note = _ShutdownCancelNote()
    cancel = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1,
                               "Cancel %s running task(s), timeout graceful shutdown exceeded", (2,), None)
    other = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "something else", (), None)
    assert note.filter(cancel) is False and note.filter(other) is True
    assert capsys.readouterr().err == (
        "jevserve engine: shutting down: 2 open request(s) ended with a 503 after the 1 s grace\n")


def test_the_start_line_says_the_scheduler_settings_a_plan_depends_on():
    from jevserve.engine.cli import settings_said
    from jevserve.serving.engine_config import EngineConfig

    said = settings_said(50562, EngineConfig(max_num_seqs=4))
    assert said == "50562 KV blocks, max_num_seqs 4, max_num_batched_tokens 8192"
