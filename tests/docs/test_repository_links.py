"""Every link in README.md, CHANGELOG.md and docs/ that points inside the repository resolves (file and heading)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.links import check_link, links_in

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_inside_the_repository_resolves(doc):
    broken = [f"{doc.name}:{link.line}: {problem}" for link in links_in(doc) if (problem := check_link(link, ROOT))]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_docs_link_at_all():
    assert sum(1 for doc in DOCS for _ in links_in(doc)) > 50  # the reader still finds links
