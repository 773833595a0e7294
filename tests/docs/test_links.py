"""The link check itself, on files written here."""

from tests.docs.links import Link, anchors, check_link, github_anchor, links_in


def test_github_anchors():
    assert github_anchor(" Quick start in front of vLLM") == "quick-start-in-front-of-vllm"
    assert github_anchor("The decision gateway (`jevserve gateway`)") == "the-decision-gateway-jevserve-gateway"
    assert github_anchor("Everyday traffic: what the default config acts on, and what it catches") == (
        "everyday-traffic-what-the-default-config-acts-on-and-what-it-catches"
    )
    assert github_anchor("Measured: overhead") == "measured-overhead"


def test_repeated_headings_are_numbered(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# A\n## Results\ntext\n## Results\n```\n## not a heading\n```\n<a id=\"custom\"></a>\n")
    assert anchors(doc) == {"a", "results", "results-1", "custom"}


def test_links_outside_code_are_read(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("See [b](b.md#top) and ![img](img/x.png \"title\").\n`[not](a link)`\n```\n[no](c.md)\n```\n"
                   "[ref]: docs/r.md\n")
    assert [(link.line, link.target) for link in links_in(doc)] == [(1, "b.md#top"), (1, "img/x.png"),
                                                                     (6, "docs/r.md")]


def test_broken_files_and_anchors_are_named(tmp_path):
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "README.md"
    (tmp_path / "docs" / "g.md").write_text("# Gateway\n## Quick start\n")
    doc.write_text("")
    assert check_link(Link(doc, 1, "docs/g.md#quick-start"), tmp_path) is None
    assert check_link(Link(doc, 1, "https://example.com/x"), tmp_path) is None
    assert check_link(Link(doc, 1, "docs/h.md"), tmp_path) == "docs/h.md: no such file"
    assert check_link(Link(doc, 1, "docs/g.md#quickstart"), tmp_path) == (
        "docs/g.md#quickstart: g.md has no heading with anchor #quickstart"
    )
    assert check_link(Link(doc, 1, "../elsewhere.md"), tmp_path) == "../elsewhere.md points outside the repository"
