"""The history check itself."""

from tests.docs.history import history_mentions


def test_issue_numbers_and_before_after_dates_are_found(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text(
        "Targets (issue 3): fast.\n"
        "The default until 2026-12-01, issue-13 and Issues 6.\n"
        "Measured on 2026-12-01 with 13 issues open; see issue tracker.\n"
    )
    assert list(history_mentions(doc)) == [(1, "issue 3"), (2, "until 2026-12-01"), (2, "issue-13"), (2, "Issues 6")]
