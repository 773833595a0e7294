from jevserve.docsections import replace_block, write_block

START, END = "<!-- gen: start -->", "<!-- gen: end -->"


def test_the_block_is_replaced_and_hand_written_text_kept():
    text = f"# Title\n\nmine\n\n{START}\nold\n{END}\n\nmine too\n"
    expected = f"# Title\n\nmine\n\n{START}\nnew\n{END}\n\nmine too\n"
    assert replace_block(text, START, END, f"{START}\nnew\n{END}") == expected
    assert replace_block("no markers", START, END, "x") is None
    assert replace_block(f"{START} but no end", START, END, "x") is None


def test_write_block_appends_to_a_doc_without_markers_and_creates_a_new_one(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Mine\n\nkept\n")
    write_block(doc, START, END, f"{START}\n1\n{END}", "# Unused")
    write_block(doc, START, END, f"{START}\n2\n{END}", "# Unused")
    assert doc.read_text() == f"# Mine\n\nkept\n\n{START}\n2\n{END}\n"
    new = tmp_path / "sub" / "b.md"
    write_block(new, START, END, f"{START}\n1\n{END}", "# New")
    assert new.read_text() == f"# New\n\n{START}\n1\n{END}\n"
