"""Ordinary tool calls as the tool gate's negatives: the calls that answer ordinary requests, read as the gateway reads
them, each answered "allow".

The gateway sets the tool gate's threshold on ordinary calls (BFCL's train side and scoped composed calls, the
packaged calibration file: bench/tool_call_export.py), so a head that never saw an ordinary call puts its threshold
wherever such calls happen to score (docs/training.md, "The tool gate read by a lexical head alone"). The calls here
are the ones that file leaves out on purpose: the bfcl-relevance cases agent-tool-fit's train side holds (about 300;
every readout is trained on them, asked another question), so the calibration requests stay unseen by whatever is
fitted on these. BFCL repeats a request under several ids, so the calls are screened against the calibration calls
as well as against every held-out call the tool gate is measured on (BFCL's test-side calls and the tool-gate test
states).
"""

from __future__ import annotations

from collections.abc import Sequence

from jevserve.bench.data import BenchData
from jevserve.bench.tool_call_export import held_out_records_from, tool_call_records, trained_tool_fit_ids
from jevserve.train.examples import Example
from jevserve.train.goal_cases import call_units, tool_calibration_units, tool_units
from jevserve.train.rules import unsafe_action
from jevserve.train.tool_calls_composed import screen

FAMILY = "bfcl:ordinary-calls"


def ordinary_call_states(data: BenchData) -> list[str]:
    """Each call of agent-tool-fit's train-side BFCL cases as the gateway's tool gate reads it (distinct, sorted)."""
    trained = trained_tool_fit_ids(data)
    cases = [c for c in data.source("bfcl-relevance") if c.record_id in trained and c.relevant and c.expected_calls]
    return sorted({unit.texts[0] for unit in call_units(tool_call_records(cases), "ordinary")})


def held_out_call_references(data: BenchData) -> list[str]:
    """What no ordinary-call example may be near: BFCL's held-out calls and the tool-gate test states, and the
    packaged calibration calls the gateway's threshold is set on."""
    held_out = [u.texts[0] for u in call_units(held_out_records_from(data), "held-out")]
    calibration = [u.texts[0] for u in tool_calibration_units()]
    return held_out + [u.texts[0] for u in tool_units(data)] + calibration


def ordinary_call_examples(data: BenchData, extra_references: Sequence[str] = ()) -> list[Example]:
    """The ordinary calls asked the tool gate's question, answer 1 (allow), less any near a held-out call (or near one
    of `extra_references`, a caller's own measured calls)."""
    question = unsafe_action()
    examples = [Example(s, question, 1, FAMILY, ("bfcl-relevance",)) for s in ordinary_call_states(data)]
    return screen(examples, [*held_out_call_references(data), *extra_references])
