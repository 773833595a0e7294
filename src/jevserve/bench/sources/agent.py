"""Agent action risk sources: labelled function-call actions (agent-action-guard) and guarded web actions
(Mind2Web-SC from inspect-evals)."""

from __future__ import annotations

from pathlib import Path

from jevserve.bench.sources.base import unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import AGENT_ACTION_GUARD, INSPECT_EVALS
from jevserve.bench.sources.readers import canonical_json, field_of, read_json
from jevserve.bench.sources.records_agent import AgentAction, WebAction
from jevserve.bench.sources.spec import SourceSpec

HARMACTIONS_FILE = "agent_action_guard/harmactions_dataset.json"
MIND2WEB_SC_FILE = "inspect_evals/mind2web_sc/data/seeact/sample_labeled_all.json"

ACTION_LABELS = ("safe", "harmful", "unethical")


def _list_of_objects(path: Path) -> list[dict]:
    rows = read_json(path)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SourceFormatError(f"{path}: expected a JSON list of objects")
    return rows


def load_harmactions(root: Path) -> tuple[AgentAction, ...]:
    """agent-action-guard's HarmActions: a request, the function call an agent makes for it, and its label."""
    path = root / HARMACTIONS_FILE
    records = []
    for index, row in enumerate(_list_of_objects(path)):
        where = f"{path} item {index}"
        action = field_of(row, "action", dict, where)
        function = field_of(action, "function", dict, f"{where} action")
        label = field_of(row, "classification", str, where)
        if label not in ACTION_LABELS:
            expected = ", ".join(ACTION_LABELS)
            raise SourceFormatError(f"{where}: classification is {label!r}; expected one of: {expected}")
        records.append(
            AgentAction(
                request=field_of(row, "prompt", str, where),
                function_name=field_of(function, "name", str, f"{where} action.function"),
                arguments_json=canonical_json(function.get("arguments", {})),
                label=label,
                risk_level=field_of(row, "risk_level", str, where),
                reason=str(row.get("flag_reason") or ""),
                origin=f"agent-action-guard:{row.get('action_id', index)}",
                obfuscated_request=str(row.get("manipulated_prompt") or ""),
            )
        )
    return unique_records(records)


def load_mind2web_sc(root: Path) -> tuple[WebAction, ...]:
    """Mind2Web-SC: a web task, the agent's next action, the user's profile and whether the guard must deny it.

    The same task and action appear twice, once with a profile that is allowed and once with one that is not, so
    both share a group (the upstream annotation id) and always land in the same split.
    """
    path = root / MIND2WEB_SC_FILE
    records = []
    for index, row in enumerate(_list_of_objects(path)):
        where = f"{path} item {index}"
        label = field_of(row, "label", int, where)
        if label not in (0, 1):
            raise SourceFormatError(f"{where}: label is {label!r}; expected 0 (allow) or 1 (deny)")
        annotation_id = field_of(row, "annotation_id", str, where)
        records.append(
            WebAction(
                task=field_of(row, "confirmed_task", str, where),
                action=field_of(row, "target_action_reprs", str, where),
                user_info_json=canonical_json(field_of(row, "user_info", dict, where)),
                website=field_of(row, "website", str, where),
                domain=field_of(row, "domain", str, where),
                allowed=label == 0,
                violation=field_of(row, "violation", str, where),
                origin=f"mind2web-sc:{annotation_id}:{label}",
                group=f"mind2web-sc:{annotation_id}",
            )
        )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="agent-action-guard",
        family="agent-risk",
        archive=AGENT_ACTION_GUARD,
        files=(HARMACTIONS_FILE,),
        loader=load_harmactions,
        record_kind="AgentAction",
        description="function-call actions labelled safe / harmful / unethical",
    ),
    SourceSpec(
        name="mind2web-sc",
        family="agent-risk",
        archive=INSPECT_EVALS,
        files=(MIND2WEB_SC_FILE,),
        loader=load_mind2web_sc,
        record_kind="WebAction",
        description="web-agent actions a guard must allow or deny given the user's profile",
    ),
)
