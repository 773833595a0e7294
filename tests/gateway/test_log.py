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
