"""The `causal` decision backend: any Hugging Face causal LM, read out without generating anything.

Each unique state in a batch is packed with all its questions (and their options' answer tokens) into one tree-shaped
row (`causal_tree`): the state's keys and values are computed once and read by every question and option, and all
rows of a batch go through the model together, usually in one forward pass. The prompt and the readout rule live in
`causal_prompt`; docs/server.md describes both. Answers do not depend on companions, their order or the batch
size: masked padding, explicit position ids and per-item readout leave only float rounding (well under 1e-4).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from scipy.special import softmax

from jevserve.decide.base import DecisionBackend, DecisionItem, InputTooLongError, ModelCard
from jevserve.decide.causal_load import context_window, load_model, parse_spec
from jevserve.decide.causal_prompt import QuestionPlan, plan_question, state_text
from jevserve.decide.causal_tree import TreeRow, build_pass, lay_out, read_log_likelihoods, zone_len
from jevserve.protocol import DecisionQuestion


@dataclass(frozen=True, slots=True)
class ItemPlan:
    """The token ids the model reads for one item."""

    state_ids: tuple[int, ...]  # BOS (when the tokenizer adds one) and the state segment
    question: QuestionPlan


class CausalLMBackend(DecisionBackend):
    """Answers questions from a causal LM's label or answer-name likelihoods, read in tree passes (usually one)."""

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        allow_network: bool = False,
        attn_implementation: str | None = None,
        max_context_tokens: int | None = None,
        max_pass_tokens: int = 8192,
        max_pass_readout: int = 1024,
        name: str | None = None,
    ) -> None:
        if max_pass_tokens < 1 or max_pass_readout < 1:
            raise ValueError(
                f"max_pass_tokens={max_pass_tokens} and max_pass_readout={max_pass_readout}: both must be >= 1"
            )
        loaded = load_model(
            model, device=device, dtype=dtype, allow_network=allow_network, attn_implementation=attn_implementation
        )
        self._loaded = loaded
        self._tokenizer = loaded.tokenizer
        self._model = loaded.model
        self.context_window = context_window(loaded.model.config, max_context_tokens)
        self.max_pass_tokens = max_pass_tokens  # rows x padded length of one forward pass
        self.max_pass_readout = max_pass_readout  # rows x readout-zone length: logit vectors one pass returns
        self._bos = _bos_prefix(self._tokenizer)
        self._pad_id = next(
            (i for i in (self._tokenizer.pad_token_id, self._tokenizer.eos_token_id) if i is not None), 0
        )
        self._keeps_logits = "logits_to_keep" in inspect.signature(self._model.forward).parameters
        self._lock = threading.Lock()  # one forward pass at a time; tokenizing may run alongside
        # Fast tokenizers raise "Already borrowed" when two threads encode at once; check() runs on request threads.
        self._tokenize_lock = threading.Lock()
        # The most characters one token spells (added tokens included): a state longer than the window can hold at
        # that rate is refused without tokenizing it, as a state of megabytes took seconds and hundreds of MB to
        # tokenize only to be refused.
        self._longest_token_chars = max(map(len, self._tokenizer.get_vocab()), default=1)
        self._state_ids = lru_cache(maxsize=256)(self._encode_state)
        self._question_plan = lru_cache(maxsize=4096)(self._plan_question)
        self.card = ModelCard(
            name=name or loaded.name,
            description=f"{loaded.description}; read by label next-token or answer likelihood (jevserve causal)",
            release_date=loaded.release_date,
        )
        self._verify_tree_attention()

    @classmethod
    def from_spec(cls, spec: str) -> CausalLMBackend:
        """Build from `causal:PATH_OR_HUB_ID[?device=cuda&dtype=bfloat16&network=1&...]` (see `parse_spec`)."""
        model, options = parse_spec(spec)
        return cls(model, **options)

    # ---- what the model reads ----

    def _encode(self, text: str) -> list[int]:
        with self._tokenize_lock:
            return self._tokenizer.encode(text, add_special_tokens=False)

    def _encode_state(self, state: str) -> tuple[int, ...]:
        return (*self._bos, *self._encode(state_text(state)))

    def _plan_question(self, question: DecisionQuestion) -> QuestionPlan:
        return plan_question(question, self._encode)

    def plan(self, item: DecisionItem) -> ItemPlan:
        """The token ids the model reads for an item (cached per state and per question)."""
        return ItemPlan(self._state_ids(item.state), self._question_plan(item.question))

    def count_tokens(self, items: Sequence[DecisionItem]) -> int:
        """Tokens fed to the model: each distinct state once, then each distinct question about it."""
        states = {item.state for item in items}
        pairs = {(item.state, item.question) for item in items}
        state_tokens = sum(len(self._state_ids(s)) for s in states)
        return state_tokens + sum(self._question_plan(q).num_input_tokens for _, q in pairs)

    def check(self, items: Sequence[DecisionItem]) -> None:
        """Raise `InputTooLongError` when a state and question need more positions than the model's window."""
        most_chars = self.context_window * self._longest_token_chars
        for state in {item.state for item in items}:
            if len(state) > most_chars:
                raise InputTooLongError(
                    f"state: {len(state)} characters, more than model {self.card.name!r} can read in its "
                    f"{self.context_window} positions (none of its tokens spells more than "
                    f"{self._longest_token_chars} characters); shorten the state (nothing is cut silently)"
                )
        for state, question in dict.fromkeys((item.state, item.question) for item in items):
            plan = self.plan(DecisionItem(state, question))
            needed = len(plan.state_ids) + plan.question.num_positions
            if needed > self.context_window:
                raise InputTooLongError(
                    f"state: {len(plan.state_ids)} tokens, and with its {question.kind} question "
                    f"({plan.question.num_positions} more positions) it needs {needed} positions, but model "
                    f"{self.card.name!r} reads at most {self.context_window}; shorten the state or the question "
                    "(nothing is cut silently)"
                )

    # ---- deciding ----

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """One probability vector per item; duplicate items are computed once."""
        if not items:
            return []
        self.check(items)
        keys = [(item.state, item.question) for item in items]
        by_state: dict[str, list[DecisionQuestion]] = {}
        for state, question in dict.fromkeys(keys):
            by_state.setdefault(state, []).append(question)
        rows, owners = self._pack_rows(by_state)
        answers: dict[tuple[str, DecisionQuestion], np.ndarray] = {}
        for group in self._group_passes(rows):
            log_likelihoods = self._forward([rows[i] for i in group])
            for i, per_question in zip(group, log_likelihoods, strict=True):
                for key, scores in zip(owners[i], per_question, strict=True):
                    answers[key] = softmax(scores)
        return [answers[key].copy() for key in keys]

    def _pack_rows(
        self, by_state: dict[str, list[DecisionQuestion]]
    ) -> tuple[list[TreeRow], list[list[tuple[str, DecisionQuestion]]]]:
        """One row per state; a state whose questions overflow the pass budget is split over rows (and re-read)."""
        rows: list[TreeRow] = []
        owners: list[list[tuple[str, DecisionQuestion]]] = []
        for state, questions in by_state.items():
            state_ids = self._state_ids(state)
            plans: list[QuestionPlan] = []
            keys: list[tuple[str, DecisionQuestion]] = []
            num_tokens, num_readout = len(state_ids), 0
            for question in questions:
                plan = self._question_plan(question)
                over = (
                    num_tokens + plan.num_input_tokens > self.max_pass_tokens
                    or num_readout + zone_len(plan) > self.max_pass_readout
                )
                if plans and over:
                    rows.append(TreeRow(state_ids, tuple(plans)))
                    owners.append(keys)
                    plans, keys, num_tokens, num_readout = [], [], len(state_ids), 0
                plans.append(plan)
                keys.append((state, question))
                num_tokens += plan.num_input_tokens
                num_readout += zone_len(plan)
            rows.append(TreeRow(state_ids, tuple(plans)))
            owners.append(keys)
        return rows, owners

    def _group_passes(self, rows: Sequence[TreeRow]) -> list[list[int]]:
        """Group rows into forward passes within the token and readout budgets, longest rows first."""
        order = sorted(range(len(rows)), key=lambda i: -rows[i].num_tokens)
        groups: list[list[int]] = []
        length = zone = 0
        for i in order:
            row = rows[i]
            new_length, new_zone = max(length, row.num_tokens), max(zone, row.zone_len)
            if groups:
                size = len(groups[-1]) + 1
                if size * new_length <= self.max_pass_tokens and size * new_zone <= self.max_pass_readout:
                    groups[-1].append(i)
                    length, zone = new_length, new_zone
                    continue
            groups.append([i])
            length, zone = row.num_tokens, row.zone_len
        return groups

    def _forward(self, rows: Sequence[TreeRow]) -> list[list[np.ndarray]]:
        """Run one tree pass; per row, per question: summed answer log-likelihoods per option."""
        layouts = [lay_out(row) for row in rows]
        inputs = build_pass(layouts, pad_id=self._pad_id, dtype=self._loaded.dtype, device=self._loaded.device)
        extra = {"logits_to_keep": inputs.zone_len} if self._keeps_logits else {}
        with self._lock, torch.inference_mode():
            out = self._model(
                input_ids=inputs.input_ids,
                attention_mask=inputs.attention_mask,
                position_ids=inputs.position_ids,
                use_cache=False,
                **extra,
            )
            return read_log_likelihoods(out.logits[:, -inputs.zone_len :], layouts)

    def _verify_tree_attention(self) -> None:
        """Fail at load time if the model ignores the tree mask or position ids (some attention kernels do)."""
        state_ids = self._encode_state("The probe checks that answers read in one tree match plain reads.")

        def probe(prompt: str, *answers: str) -> QuestionPlan:
            return QuestionPlan("name", tuple(self._encode(prompt)), tuple(tuple(self._encode(a)) for a in answers))

        plans = (
            probe("Question: which colour?\nAnswer:", " deep red\n", " blue\n"),
            probe("Question: how many?\nAnswer:", " two or three\n", " none\n"),
        )
        tree = np.concatenate(self._forward([TreeRow(state_ids, plans)])[0])
        plain = np.array([self._plain_log_likelihood(state_ids + p.prompt_ids, a) for p in plans for a in p.answer_ids])
        # A mask the model ignores moves these sums by nats; 16-bit rounding moves them by well under half a nat.
        tolerance = 1e-3 if self._loaded.dtype == torch.float32 else 0.5
        if np.max(np.abs(tree - plain)) > tolerance:
            raise RuntimeError(
                f"model {self.card.name!r}: answers read in a tree pass differ from plain reads by "
                f"{np.max(np.abs(tree - plain)):.3g} (allowed {tolerance}); its attention ignores custom 4D masks or "
                "position ids. Try attn_implementation='eager' (spec option attn=eager)."
            )

    def _plain_log_likelihood(self, prefix: Sequence[int], answer: Sequence[int]) -> float:
        """log P(answer | prefix) from an ordinary causal forward pass over the whole text."""
        ids = torch.tensor([[*prefix, *answer[:-1]]], device=self._loaded.device)
        with self._lock, torch.inference_mode():
            logits = self._model(input_ids=ids, use_cache=False).logits[0, len(prefix) - 1 :].float()
        targets = torch.tensor(answer, device=logits.device)
        picked = logits.log_softmax(-1)[torch.arange(len(answer), device=logits.device), targets]
        return float(picked.double().sum())


def _bos_prefix(tokenizer: object) -> tuple[int, ...]:
    """The BOS token when the tokenizer adds one to a text on its own; the state segment starts with it."""
    bos = getattr(tokenizer, "bos_token_id", None)
    ids = tokenizer("a")["input_ids"]  # type: ignore[operator]
    return (bos,) if bos is not None and ids and ids[0] == bos else ()
