"""The decision log: rotation by size, and reading a log whose last line was cut by a crash."""

from __future__ import annotations

from jevserve.gateway.log import DecisionLog, read_log


def test_log_rotates_by_size_and_keeps_the_configured_backups(tmp_path):
    path = tmp_path / "d.jsonl"
    log = DecisionLog(path, max_bytes=1024, backups=2)
    for i in range(60):
        log.write({"i": i, "pad": "x" * 40})
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["d.jsonl", "d.jsonl.1", "d.jsonl.2"]
    newest = read_log(path)
    assert newest[-1]["i"] == 59
    assert read_log(tmp_path / "d.jsonl.1")[-1]["i"] == newest[0]["i"] - 1  # nothing lost between files
    assert all(p.stat().st_size <= 1024 for p in tmp_path.iterdir())


def test_read_log_skips_a_truncated_last_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"i": 1}\n{"i": 2}\n{"i": 3, "trunc')
    assert [r["i"] for r in read_log(path)] == [1, 2]


def test_a_gateway_restarted_after_a_crash_mid_line_loses_no_record_of_its_own(tmp_path):
    # the next start appended its first record to the torn line, where no reader could tell the two apart
    path = tmp_path / "d.jsonl"
    path.write_text('{"i": 1}\n{"i": 2, "trunc')
    log = DecisionLog(path)
    log.write({"i": 3})
    log.close()
    assert [r["i"] for r in read_log(path)] == [1, 3]


def test_a_record_the_disk_refuses_is_lost_said_and_counted_and_its_request_still_answered(tmp_path):
    # an outside tester's full disk: every non-streamed request got a 500 after the upstream had answered it (the
    # openai client retried each twice), while /healthz said ok and /metrics counted 200s
    import os

    import pytest
    from fastapi.testclient import TestClient

    from tests.gateway.upstreams import make_app

    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux), whose every write fails with ENOSPC")
    app, _, upstreams = make_app(config={"log": {"path": "/dev/full"}})
    with TestClient(app) as client:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hello there"}]}
        replies = [client.post("/v1/chat/completions", json=body) for _ in range(2)]
        health = client.get("/healthz").json()
        metrics = client.get("/metrics").text
    assert [r.status_code for r in replies] == [200, 200]
    assert len(upstreams["u"].requests) == 2  # one upstream call each: no client retried a 500
    assert health["status"] == "degraded" and "No space left on device" in health["log_problem"]
    assert "jevserve_gateway_log_records_lost 2.0" in metrics


def test_a_log_that_can_be_written_again_recovers_and_leaves_no_torn_line(tmp_path):
    path = tmp_path / "d.jsonl"
    log = DecisionLog(path)
    log.write({"i": 1})

    class Refusing:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def flush(self):
            self.real.write("")  # what reached the buffer goes no further
            raise OSError(28, "No space left on device")

    log._file = Refusing(log._file)
    assert log.write({"i": 2, "pad": "x" * 100}) is False and log.num_failed == 1 and "No space" in log.problem
    assert log.write({"i": 3}) is True and log.problem is None  # reopened: writing works again
    log.close()
    assert [r["i"] for r in read_log(path)] == [1, 3]  # nothing of the lost record, no torn line
    assert path.read_text().count("\n") == 2
