"""docs/training.md's generated section: the reading model's rows appear beside the readouts' when their results
exist, each compared with tfidf-lr and with the trained readout's matching row."""

from jevserve.train.report import READER_ROWS, ROWS, report_markdown


def document(model: str, scores: dict[str, float]) -> dict:
    tasks = {t: {"score": s, "score_interval": [s - 5, s + 5], "brier": 0.2, "ece": 0.05} for t, s in scores.items()}
    mean = sum(scores.values()) / len(scores)
    return {"model": model, "command": f"make {model}", "tasks": tasks,
            "average": {"score": mean, "interval": [mean - 9, mean + 9], "num_tasks": len(scores),
                        "tasks": list(scores)}}


def test_reader_rows_are_compared_with_tfidf_and_with_the_trained_readout():
    scores = {
        "zero-shot": {"a": 0.0, "b": 0.0}, "trained (in-task)": {"a": 10.0, "b": 30.0},
        "trained (held-out task)": {"a": -5.0, "b": 0.0}, "reading (in-task)": {"a": 20.0, "b": 35.0},
        "reading (held-out task)": {"a": -9.0, "b": 1.0},
    }
    names = {**ROWS, **READER_ROWS}
    documents = {names[label]: document(names[label], s) for label, s in scores.items()}
    documents["tfidf-lr"] = document("tfidf-lr", {"a": 15.0, "b": 40.0})
    text = report_markdown(documents)
    assert "- reading (in-task): ahead of tfidf-lr on 1 of 2 tasks; ahead of the trained readout's matching row " \
        "on 2 of 2." in text
    assert "- reading (held-out task): ahead of tfidf-lr on 0 of 2 tasks; ahead of the trained readout's " \
        "matching row on 1 of 2." in text
    assert "| reading (in-task) | 27.5 [18.5, 36.5] | 2 | 27.5 | `make jev-minilm-2` |" in text


def test_without_reader_results_the_section_has_no_reader_rows():
    scores = {"zero-shot": {"a": 0.0}, "trained (in-task)": {"a": 10.0}, "trained (held-out task)": {"a": -5.0}}
    text = report_markdown({ROWS[label]: document(ROWS[label], s) for label, s in scores.items()})
    assert "reading" not in text.split("What the frozen embedding carries")[0]


def test_each_average_is_also_shown_without_the_task_whose_rule_stretches_the_scale():
    scores = {"zero-shot": {"a": 0.0, "agent-web-policy": -300.0}, "trained (in-task)": {"a": 10.0,
              "agent-web-policy": -200.0}, "trained (held-out task)": {"a": -5.0, "agent-web-policy": -400.0}}
    text = report_markdown({ROWS[label]: document(ROWS[label], s) for label, s in scores.items()})
    assert "| without agent-web-policy |" in text
    assert "| trained (held-out task) | -202.5 [-211.5, -193.5] | 2 | -5.0 | `make jev-minilm-1-heldout` |" in text


def test_rows_are_read_from_the_newest_bench_version_every_required_row_was_scored_on(tmp_path):
    # an outside tester regenerated the section after two rows had been rescored on a newer bench version: those two
    # came from it and the others from the older one, and the section compared them as equals
    import json

    from jevserve.bench.results import KIND, VERSION
    from jevserve.train.report import comparable_results

    def write(model, date, version, score):
        folder = tmp_path / model
        folder.mkdir(exist_ok=True)
        doc = {**document(model, {"a": score}), "kind": KIND, "version": VERSION, "date": date,
               "bench_version": version}
        (folder / f"{date}.json").write_text(json.dumps(doc))

    for model in ROWS.values():
        write(model, "2026-01-01", "0.2 rebased to 0.3", 1.0)  # a rebased result counts as its new version
    write(READER_ROWS["reading (in-task)"], "2026-01-01", "0.3", 2.0)
    write(READER_ROWS["reading (in-task)"], "2026-02-01", "0.4", 9.0)
    write("tfidf-lr", "2026-02-01", "0.4", 8.0)
    write(READER_ROWS["reading, tuned layers (in-task)"], "2026-02-01", "0.4", 7.0)
    version, chosen, later = comparable_results(tmp_path)
    assert version == "0.3"
    assert chosen[READER_ROWS["reading (in-task)"]]["tasks"]["a"]["score"] == 2.0  # its 0.3 run, not its newest
    assert "tfidf-lr" not in chosen and set(later) == {"tfidf-lr", READER_ROWS["reading, tuned layers (in-task)"]}


def test_the_report_reads_the_same_files_as_the_board(tmp_path):
    # the report walked the results folders on its own and read a result filed in another row's folder, which the
    # board leaves out; both now take the one walk in bench.results
    import json

    from jevserve.bench.results import KIND, VERSION, latest_results
    from jevserve.train.report import comparable_results

    def write(folder_name, model, date, scores):
        folder = tmp_path / folder_name
        folder.mkdir(exist_ok=True)
        doc = {**document(model, scores), "kind": KIND, "version": VERSION, "date": date, "bench_version": "0.4"}
        (folder / f"{date}.json").write_text(json.dumps(doc))

    for model in ROWS.values():
        write(model, model, "2026-01-01", {"a": 1.0})
    trained = ROWS["trained (in-task)"]
    # the trained row's broader, newer result filed in the zero-shot row's folder
    write(ROWS["zero-shot"], trained, "2026-02-01", {"a": 50.0, "b": 50.0})
    _, chosen, _ = comparable_results(tmp_path)
    board = {d["model"]: d for d in latest_results(tmp_path).documents}
    assert chosen[trained]["tasks"]["a"]["score"] == board[trained]["tasks"]["a"]["score"] == 1.0


def test_a_report_run_away_from_the_checkout_names_the_parts_it_left_out(tmp_path, monkeypatch):
    # outside the checkout the study results are not there, and their parts were left out without a word
    from jevserve.train.report import missing_results

    assert missing_results() == []  # the checkout has all three
    monkeypatch.chdir(tmp_path)
    missing = missing_results()
    assert len(missing) == 3 and "length_reference.json (`jevserve train --length-reference` writes it)" in missing[0]
