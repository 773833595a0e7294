"""Normalised, immutable records of labelled texts, text pairs and conversations (ids: see base.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from jevserve.bench.sources.base import ChatMessage, SplitKeyed, assign_id, message_parts

# Label vocabulary of LabelledText, shared by every source so tasks can pool them.
LABEL_BENIGN = "benign"  # an ordinary request that should be served
LABEL_INJECTION = "injection"  # a prompt injection or instruction override aimed at an assistant or agent
LABEL_JAILBREAK = "jailbreak"  # a jailbreak wrapper (persona, developer mode, ...) collected in the wild
LABEL_HARMFUL = "harmful"  # a request for harmful content that a safe assistant declines
LABELS = (LABEL_BENIGN, LABEL_INJECTION, LABEL_JAILBREAK, LABEL_HARMFUL)


@dataclass(frozen=True, slots=True)
class LabelledText(SplitKeyed):
    """One prompt with a label from LABELS, e.g. an injection attempt or a benign-but-edgy question."""

    text: str  # the prompt as a user or a tool would send it
    label: str  # one of LABELS
    origin: str  # "<source>:<upstream id>", where the row came from
    category: str = ""  # the upstream category or domain, e.g. "indirect_injection", "medical"
    language: str = "en"  # ISO 639-1 code of the text
    group: str = ""  # records with the same group share a split (e.g. both halves of a matched pair)
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "text", self.text)


@dataclass(frozen=True, slots=True)
class TextPair(SplitKeyed):
    """Two single questions and whether one cached answer serves both (semantic-cache reuse)."""

    a: str  # the question whose answer is cached
    b: str  # the new question
    same: bool  # True when the cached answer to `a` is a right answer to `b`
    category: str  # e.g. "paraphrase", "near_repeat", "negation", "entity_swap"
    origin: str  # "<source>:<upstream id>"
    ambiguous: str = ""  # non-empty when the answer depends on the application (the upstream reason)
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "text-pair", self.a, self.b)


@dataclass(frozen=True, slots=True)
class ChatPair(SplitKeyed):
    """Two conversations and whether one cached answer serves the last user message of both."""

    a: tuple[ChatMessage, ...]  # the conversation whose answer is cached
    b: tuple[ChatMessage, ...]  # the new conversation
    same: bool  # True when the cached answer to `a` is a right answer to `b`
    category: str  # e.g. "context_swap", "same_context_reworded"
    origin: str
    note: str = ""  # the upstream explanation of why the answers match or differ
    ambiguous: str = ""
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "chat-pair", message_parts(self.a), message_parts(self.b))


@dataclass(frozen=True, slots=True)
class TimedMessage:
    """One message of a timed conversation between people."""

    text: str
    sent_at_s: float  # seconds since the Unix epoch (UTC)
    sender_id: str  # stable id of the person across all conversations of the source


@dataclass(frozen=True, slots=True)
class Conversation(SplitKeyed):
    """A conversation between people with timestamps and stable sender ids (will someone come back, and when)."""

    messages: tuple[TimedMessage, ...]  # in the order sent
    origin: str
    topic: str = ""  # the opening prompt the participants were given, if any
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "conversation", [[m.sender_id, m.sent_at_s, m.text] for m in self.messages])

    @property
    def sender_ids(self) -> tuple[str, ...]:
        """The distinct senders in order of first message."""
        return tuple(dict.fromkeys(m.sender_id for m in self.messages))
