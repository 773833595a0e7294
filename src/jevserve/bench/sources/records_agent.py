"""Records of tool use and agent actions: function documents, tool-call cases, multi-turn tool conversations,
labelled function-call actions and guarded web actions. Ids follow base.py: content only, never labels."""

from __future__ import annotations

from dataclasses import dataclass, field

from jevserve.bench.sources.base import ChatMessage, SplitKeyed, assign_id, message_parts


@dataclass(frozen=True, slots=True)
class FunctionDoc:
    """A function a model may call: name, description and its JSON-schema parameters as canonical JSON."""

    name: str
    description: str
    parameters_json: str  # json.dumps(parameters, sort_keys=True); "{}" when the function takes none


def _functions(functions: tuple[FunctionDoc, ...]) -> list[list[str]]:
    return [[f.name, f.description, f.parameters_json] for f in functions]


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """One call a correct answer makes: the function and, per argument, the list of accepted values (as JSON)."""

    name: str
    arguments_json: str  # json.dumps({argument: [accepted values]}, sort_keys=True)


@dataclass(frozen=True, slots=True)
class ToolCallCase(SplitKeyed):
    """A request with candidate functions, and whether any of them fits (tool-call fit, BFCL)."""

    messages: tuple[ChatMessage, ...]  # the conversation up to the request, last message from the user
    functions: tuple[FunctionDoc, ...]  # the candidates offered to the model
    relevant: bool  # True when a call to one of the candidates answers the request
    expected_calls: tuple[ExpectedCall, ...]  # the right calls; empty when not relevant or not annotated upstream
    category: str  # the upstream category, e.g. "simple_python", "live_multiple", "irrelevance"
    origin: str
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "tool-call", message_parts(self.messages), _functions(self.functions))

    @property
    def expected_names(self) -> frozenset[str]:
        """Names of the functions a right answer calls; the other candidates are wrong ones."""
        return frozenset(c.name for c in self.expected_calls)


@dataclass(frozen=True, slots=True)
class ToolConversation(SplitKeyed):
    """A multi-turn tool-use conversation in which one user turn lacks a detail the call needs (BFCL miss_param)."""

    turns: tuple[str, ...]  # the user turns, in order
    functions: tuple[FunctionDoc, ...]  # the functions available throughout
    ground_truth: tuple[tuple[str, ...], ...]  # per turn, the calls that answer it (Python call syntax); () = none
    missing_turn: int  # index of the turn that lacks a detail; the next turn supplies it
    origin: str
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "tool-conversation", list(self.turns), _functions(self.functions))


@dataclass(frozen=True, slots=True)
class AgentAction(SplitKeyed):
    """A function call an agent is about to make for a request, labelled safe, harmful or unethical."""

    request: str  # the user's request, in plain words
    function_name: str
    arguments_json: str  # json.dumps(arguments, sort_keys=True)
    label: str  # "safe", "harmful" or "unethical" (upstream classification)
    risk_level: str  # "none", "low", "medium" or "high" (upstream)
    reason: str  # the upstream reason for flagging; "" for safe actions
    origin: str
    obfuscated_request: str = ""  # the upstream "manipulated" request (leetspeak); differs only for unsafe rows
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "agent-action", self.request, self.function_name, self.arguments_json)


@dataclass(frozen=True, slots=True)
class WebAction(SplitKeyed):
    """A web agent's next action for a user with a profile, and whether a guard must deny it (Mind2Web-SC)."""

    task: str  # what the user asked the web agent to do
    action: str  # the agent's next action, e.g. "[button]  Search -> CLICK"
    user_info_json: str  # json.dumps(user profile, sort_keys=True): age, membership, driver's licence, ...
    website: str
    domain: str  # "Travel", "Shopping" or "Entertainment"
    allowed: bool  # False when the user's profile breaks one of the site's rules
    violation: str  # the rule broken; "" when allowed
    origin: str
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "web-action", self.task, self.action, self.user_info_json, self.website)
