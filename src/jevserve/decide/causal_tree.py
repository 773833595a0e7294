"""Pack a state and its questions into one tree-shaped sequence, so one forward pass reads them all.

A row holds one state, then each question's prompt, then each option's answer tokens. Attention follows the tree,
not the sequence: the state attends to itself causally; a question attends to the state and to its own earlier
tokens; an answer attends to the state, its question and its own earlier tokens. Position ids restart where a
branch starts, so every token sits at the position it would have in the plain text `state + question + answer`.
The state's keys and values are therefore computed once and read by every question and option in the row, and each
option's numbers are those of a plain forward pass over its own text (only float rounding differs).

Sequence order inside a row is free (the mask and position ids carry the structure), so tokens whose logits are read
(each prompt's last token and every answer token but the last) go in a readout zone at the end of the row:

    [pad …][state][prompt₁[:-1]][prompt₂[:-1]] | [prompt₁[-1]][answers of q₁][prompt₂[-1]][answers of q₂]
                                                 └──── readout zone: the last `zone_len` positions ────┘

Rows are left-padded, so the zones of a pass line up at the end and the model computes logits only there.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from jevserve.decide.causal_prompt import QuestionPlan

# Segment codes for a token's branch: the state is an ancestor of every branch; padding belongs to nothing.
STATE, PAD = -1, -2
NO_OPTION = -1


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One state and the questions read with it in one row."""

    state_ids: tuple[int, ...]
    plans: tuple[QuestionPlan, ...]

    @property
    def num_tokens(self) -> int:
        """The row's length before padding."""
        return len(self.state_ids) + sum(p.num_input_tokens for p in self.plans)

    @property
    def zone_len(self) -> int:
        """Tokens whose next-token logits are read."""
        return sum(zone_len(p) for p in self.plans)


def zone_len(plan: QuestionPlan) -> int:
    """Readout positions a question needs: its prompt's last token and every answer token but the last."""
    return 1 + sum(len(a) - 1 for a in plan.answer_ids)


@dataclass(frozen=True, slots=True)
class RowLayout:
    """A row laid out as parallel arrays, plus where each answer token's probability is read."""

    ids: np.ndarray  # token id per sequence slot
    positions: np.ndarray  # position id per slot (restarts at each branch)
    branch: np.ndarray  # question index per slot, STATE for the state
    option: np.ndarray  # option index per slot, NO_OPTION for the state and prompts
    read_zone: np.ndarray  # per answer token: the slot whose logits predict it, counted back from the row end (<0)
    read_token: np.ndarray  # per answer token: its id
    read_option: np.ndarray  # per answer token: the row-wide index of its option (options numbered across questions)
    num_options: tuple[int, ...]  # options per question, in plan order
    zone_len: int  # slots at the row's end whose logits are read


def lay_out(row: TreeRow) -> RowLayout:
    """Place a row's tokens in sequence order with their positions, branches and readout targets."""
    num_state = len(row.state_ids)
    body: list[tuple[int, int, int, int]] = [(tok, pos, STATE, NO_OPTION) for pos, tok in enumerate(row.state_ids)]
    zone: list[tuple[int, int, int, int]] = []
    read_zone: list[int] = []
    read_token: list[int] = []
    read_option: list[int] = []
    option_base = 0
    for q, plan in enumerate(row.plans):
        prompt = plan.prompt_ids
        body += [(tok, num_state + i, q, NO_OPTION) for i, tok in enumerate(prompt[:-1])]
        last_slot = len(zone)
        answer_pos = num_state + len(prompt)  # the position of every answer's first token
        zone.append((prompt[-1], answer_pos - 1, q, NO_OPTION))
        for o, answer in enumerate(plan.answer_ids):
            predictor = last_slot
            for k, tok in enumerate(answer):
                read_zone.append(predictor)
                read_token.append(tok)
                read_option.append(option_base + o)
                if k < len(answer) - 1:  # the last answer token is only predicted, never fed
                    predictor = len(zone)
                    zone.append((tok, answer_pos + k, q, o))
        option_base += len(plan.answer_ids)
    ids, positions, branch, option = (np.array(col, dtype=np.int64) for col in zip(*(body + zone), strict=True))
    return RowLayout(
        ids=ids,
        positions=positions,
        branch=branch,
        option=option,
        read_zone=np.array(read_zone, dtype=np.int64) - len(zone),  # negative: counted from the row's end
        read_token=np.array(read_token, dtype=np.int64),
        read_option=np.array(read_option, dtype=np.int64),
        num_options=tuple(len(p.answer_ids) for p in row.plans),
        zone_len=len(zone),
    )


@dataclass(frozen=True, slots=True)
class PassInputs:
    """The tensors of one forward pass over left-padded rows."""

    input_ids: torch.Tensor  # (rows, length)
    position_ids: torch.Tensor  # (rows, length)
    attention_mask: torch.Tensor  # (rows, 1, length, length), additive: 0 where attended, dtype's min elsewhere
    zone_len: int  # logits are needed for the last zone_len slots of every row


def build_pass(layouts: Sequence[RowLayout], *, pad_id: int, dtype: torch.dtype, device: torch.device) -> PassInputs:
    """Left-pad rows to one length and build their tree attention mask."""
    length = max(len(lay.ids) for lay in layouts)
    shape = (len(layouts), length)
    ids = np.full(shape, pad_id, dtype=np.int64)
    positions = np.zeros(shape, dtype=np.int64)
    branch = np.full(shape, PAD, dtype=np.int64)
    option = np.full(shape, NO_OPTION, dtype=np.int64)
    for r, lay in enumerate(layouts):
        start = length - len(lay.ids)
        ids[r, start:], positions[r, start:] = lay.ids, lay.positions
        branch[r, start:], option[r, start:] = lay.branch, lay.option
    pos, br, opt = (torch.from_numpy(a).to(device) for a in (positions, branch, option))
    # Index [row, t, u]: may token t (query) attend to token u (key)?
    q_pos, k_pos = pos[:, :, None], pos[:, None, :]
    q_br, k_br = br[:, :, None], br[:, None, :]
    q_opt, k_opt = opt[:, :, None], opt[:, None, :]
    ancestor = (k_br == STATE) | ((k_br == q_br) & ((k_opt == NO_OPTION) | (k_opt == q_opt)))
    real = (q_br != PAD) & (k_br != PAD)
    # Padding attends to itself only: a row of the mask with nothing allowed would give NaN that then spreads.
    allowed = (real & ancestor & (k_pos <= q_pos)) | torch.eye(length, dtype=torch.bool, device=device)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed, torch.finfo(dtype).min)
    return PassInputs(
        input_ids=torch.from_numpy(ids).to(device),
        position_ids=pos,
        attention_mask=mask[:, None],
        zone_len=max(lay.zone_len for lay in layouts),
    )


def read_log_likelihoods(zone_logits: torch.Tensor, layouts: Sequence[RowLayout]) -> list[list[np.ndarray]]:
    """Per row, per question: each option's answer log-likelihood, from the zone's logits (rows, zone, vocab)."""
    zone_len = zone_logits.shape[1]
    rows = np.concatenate([np.full(lay.read_zone.size, r) for r, lay in enumerate(layouts)])
    slots = np.concatenate([zone_len + lay.read_zone for lay in layouts])
    tokens = np.concatenate([lay.read_token for lay in layouts])
    # log-softmax only where a token is read, not over every padded zone slot.
    where, inverse = np.unique(np.stack([rows, slots]), axis=1, return_inverse=True)
    device = zone_logits.device
    picked = zone_logits[torch.from_numpy(where[0]).to(device), torch.from_numpy(where[1]).to(device)]
    picked = picked.float().log_softmax(-1)
    index = torch.from_numpy(inverse.reshape(-1)).to(device)
    token_logprobs = picked[index, torch.from_numpy(tokens).to(device)].double().cpu().numpy()
    if not np.all(np.isfinite(token_logprobs)):
        raise FloatingPointError("the model produced non-finite logits; load it in float32 or bfloat16")
    results: list[list[np.ndarray]] = []
    start = 0
    for lay in layouts:
        weights = token_logprobs[start : start + lay.read_zone.size]
        start += lay.read_zone.size
        per_option = np.bincount(lay.read_option, weights=weights, minlength=sum(lay.num_options))
        bounds = np.cumsum((0, *lay.num_options))
        results.append([per_option[a:b] for a, b in itertools.pairwise(bounds)])
    return results
