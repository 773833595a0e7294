"""Forward simulation of one replica from a snapshot, to the first token of one new request.

The replica is stepped the way `jevserve.sim.engine` steps it (vLLM v1's scheduler), with the same rules, called
from `jevserve.serving.scheduling_rules`: running requests first, in admission order (decoding requests come
before prefilling ones, because a request admitted later cannot finish its prompt before an earlier one); then
waiting requests in queue-policy order while the token budget, `max_num_seqs` and free KV blocks allow, with or
without head-of-line blocking; preemption by recompute of the request the queue policy ranks last when a block
is missing (a step that must preempt is scheduled request by request, as the engine does, in `_exact_step`).

Decoding requests are aggregated so a forward pass costs little more than one pass over the snapshot: a global
decode-step counter `g` gives every decoding request's computed tokens as `offset + g`, a heap orders their
(predicted) finishing steps, and counts of `offset mod block_size` give how many cross a KV block boundary at a
step. Identical decode-only steps are summed in closed form, so the work is proportional to the number of
finishes and prefill steps before the new request's first token, not to the number of steps.

Assumptions (the engine has no such limits): every decoding request gets its token each step (it holds as long
as `max_num_seqs <= max_num_batched_tokens`, true of vLLM's defaults); a decoding request holds exactly the KV
blocks its computed tokens fill (true of `admission_reserve_tokens`, which never reserves past a request's
context); the step model must be linear in decode context.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math

import numpy as np

from jevserve.serving import scheduling_rules as rules
from jevserve.serving.engine_config import EngineConfig
from jevserve.serving.types import QueuePolicy, ReplicaState, Request


class _Pending:
    """A waiting or prefilling request in the forward pass."""

    __slots__ = ("num_blocks", "num_computed", "num_generated", "spec", "total")

    def __init__(self, spec: Request, num_computed: int, num_generated: int, total: int, num_blocks: int = 0):
        self.spec = spec
        self.num_computed = num_computed
        self.num_generated = num_generated
        self.total = total  # reply length it is expected to stop at
        self.num_blocks = num_blocks

    @property
    def num_tokens(self) -> int:
        return self.spec.num_prompt_tokens + self.num_generated


def expected_total_tokens(request: Request, num_generated: int, default_output_tokens: float) -> int:
    """The reply length a request is expected to stop at: its prediction rounded up (else the default), and at
    least one token more than it has produced, so a request that outlived its prediction ends with its next
    token."""
    guess = request.predicted_output_tokens
    base = default_output_tokens if guess is None else guess
    return max(math.ceil(base), num_generated + 1, 1)


class ReplicaForward:
    """One forward pass: load a snapshot plus the new request, then step until the new request's first token."""

    def __init__(
        self,
        state: ReplicaState,
        request: Request,
        *,
        step_time,
        policy: QueuePolicy,
        config: EngineConfig,
        default_output_tokens: float,
        enqueue_delay_s: float = 0.0,
    ) -> None:
        self._step = step_time.step_s
        self._ctx_s = step_time.step_s(0, 0, 1, 0) - step_time.step_s(0, 0, 0, 0)  # per decode-context token
        self._policy = policy
        self._mns, self._mbt, self._bs = config.max_num_seqs, config.max_num_batched_tokens, config.block_size
        self._kv_admission = config.kv_admission
        self._hol = config.head_of_line_blocking
        self._default = default_output_tokens
        self.now_s = state.now_s
        self.t = max(state.now_s, state.busy_until_s) if state.busy_until_s is not None else state.now_s
        self._new = _Pending(request, 0, 0, expected_total_tokens(request, 0, default_output_tokens))
        self._seq = itertools.count()
        # Requests not yet queued, by the time they reach the queue: those the snapshot lists as in transit
        # (queued at arrival + decision delay), and the new one.
        self._arrivals = sorted(
            [(max(r.arrival_s + enqueue_delay_s, state.now_s), next(self._seq),
              _Pending(r, 0, 0, expected_total_tokens(r, 0, default_output_tokens))) for r in state.in_transit]
            + [(state.now_s + enqueue_delay_s, next(self._seq), self._new)],
            key=lambda e: (e[0], e[1]),
        )
        self._load(state)

    # ---- state ---------------------------------------------------------------------------------------------

    def _blocks(self, num_tokens: int) -> int:
        return rules.blocks_for(num_tokens, self._bs)

    def _load(self, state: ReplicaState) -> None:
        """Split the running requests into aggregated decoders and prefilling requests, and count KV blocks.

        A decoder is kept as (request, computed tokens); its expected length, finishing step and block counts
        are worked out later, with numpy or only when a pass needs them (it does not when the new request is
        admitted at the next step)."""
        bs, default = self._bs, self._default
        self.g = 0
        split = self._split_columns if state.running_columns is not None else self._split_loop
        specs, computed_now, prefill, used = split(state)
        offs = computed_now.tolist()
        used += int(rules.blocks_for(computed_now, bs).sum())
        self._dec_spec, self._dec_off = specs, offs
        self._dec_total: list[int | None] = [None] * len(specs)  # None: from the prediction, when first needed
        self._dec_finish: list[int | None] = [None] * len(specs)  # g after its last step
        self._dec_alive = [True] * len(specs)
        self._heap: list[tuple[int, int]] | None = None  # (g at which it finishes, decoder index), built lazily
        self._res = np.bincount(computed_now % bs, minlength=bs).tolist()  # live decoders by offset mod bs
        self._num_dec, self._sum_off = len(specs), int(computed_now.sum())
        self._prefill = prefill
        self.free = state.num_total_kv_blocks - used
        # The snapshot lists the queue in policy order at now_s, so one sort of nearly sorted keys (linear) builds
        # what inserting them one by one (`_push_waiting`) would, at a fraction of the cost on a long queue.
        key, t, seq = self._policy.sort_key, self.t, self._seq
        self._waiting: list[tuple[tuple, int, _Pending]] = [
            (key(r.request, t), next(seq), _Pending(r.request, r.num_computed_tokens, r.num_generated_tokens,
                                                   expected_total_tokens(r.request, r.num_generated_tokens, default)))
            for r in state.waiting
        ]
        self._waiting.sort()
        self._resort_at = self._next_key_change()

    def _split_loop(self, state: ReplicaState) -> tuple[list[Request], np.ndarray, list[_Pending], int]:
        """The running requests as (decoder specs, decoder computed tokens, prefilling requests, blocks the
        prefilling ones hold), one request at a time: most of an estimate's cost on a busy replica when the
        snapshot has no columns, so it does the least it can per request."""
        bs, default, kv_admission = self._bs, self._default, self._kv_admission
        specs: list[Request] = []
        offs: list[int] = []  # decoder's computed tokens = offset + g
        prefill: list[_Pending] = []
        used = 0
        add_spec, add_off = specs.append, offs.append
        for r in state.running:
            spec = r.request
            computed = r.num_computed_tokens
            generated = r.num_generated_tokens
            num_tokens = spec.num_prompt_tokens + generated
            scheduled = r.num_scheduled_tokens
            if scheduled:
                computed += scheduled
                if rules.samples_token(computed, num_tokens):  # the step in flight samples a token for it
                    guess = spec.predicted_output_tokens
                    if rules.is_finished(generated + 1, default if guess is None else guess):
                        continue  # it ends with the step in flight; its blocks are free from then on
                    add_spec(spec)
                    add_off(computed)
                    continue
            elif rules.is_decoding(generated, computed, num_tokens):
                add_spec(spec)
                add_off(computed)
                continue
            held = rules.blocks_held(num_tokens, computed, kv_admission, bs)
            prefill.append(_Pending(spec, computed, generated, expected_total_tokens(spec, generated, default), held))
            used += held
        return specs, np.fromiter(offs, dtype=np.int64, count=len(offs)), prefill, used

    def _split_columns(self, state: ReplicaState) -> tuple[list[Request], np.ndarray, list[_Pending], int]:
        """`_split_loop` with numpy on the snapshot's columns: the same rules, row by row, in a few array
        operations (tests check the two agree exactly)."""
        cols = state.running_columns
        assert cols is not None
        bs, default = self._bs, self._default
        generated = cols.num_generated_tokens
        num_tokens = cols.num_prompt_tokens + generated
        computed = cols.num_computed_tokens + cols.num_scheduled_tokens  # after the step in flight
        guess = np.where(np.isnan(cols.predicted_output_tokens), default, cols.predicted_output_tokens)
        # the step in flight samples a token ...
        sampled = (cols.num_scheduled_tokens > 0) & rules.samples_token(computed, num_tokens)
        ends = sampled & rules.is_finished(generated + 1, guess)  # ... its last: its blocks are free from then on
        decoding = (sampled & ~ends) | (
            (cols.num_scheduled_tokens == 0) & rules.is_decoding(generated, computed, num_tokens)
        )
        prefilling = ~(sampled | decoding)
        specs = cols.requests[decoding].tolist()
        prefill: list[_Pending] = []
        used = 0
        rows = np.flatnonzero(prefilling)
        if rows.size:
            held = rules.blocks_held(num_tokens[rows], computed[rows], self._kv_admission, bs)
            used = int(held.sum())
            for spec, c, g, h in zip(cols.requests[rows].tolist(), computed[rows].tolist(),
                                     generated[rows].tolist(), held.tolist(), strict=True):
                prefill.append(_Pending(spec, c, g, expected_total_tokens(spec, g, default), h))
        return specs, computed[decoding], prefill, used

    def _total(self, index: int) -> int:
        """A decoder's expected reply length, fixed when first asked (decoders loaded from the snapshot)."""
        total = self._dec_total[index]
        if total is None:
            spec = self._dec_spec[index]
            generated = self._dec_off[index] + 1 - spec.num_prompt_tokens  # at g = 0
            total = self._dec_total[index] = expected_total_tokens(spec, generated, self._default)
        return total

    def _ensure_heap(self) -> list[tuple[int, int]]:
        if self._heap is None:
            heap = []
            for i, alive in enumerate(self._dec_alive):
                if alive:
                    finish = self._dec_finish[i]
                    if finish is None:  # loaded from the snapshot: finishes after total - generated steps
                        finish = self._total(i) - (self._dec_off[i] + 1 - self._dec_spec[i].num_prompt_tokens)
                        self._dec_finish[i] = finish
                    heap.append((finish, i))
            heapq.heapify(heap)
            self._heap = heap
        return self._heap

    def _add_decoder(self, spec: Request, computed: int, total: int, generated: int) -> None:
        """A request that has just sampled a token and will decode next; indices follow admission order."""
        index = len(self._dec_spec)
        off = computed - self.g
        finish = self.g + total - generated
        self._dec_spec.append(spec)
        self._dec_off.append(off)
        self._dec_total.append(total)
        self._dec_finish.append(finish)  # a decoder added in the pass knows its total
        self._dec_alive.append(True)
        if self._heap is not None:
            heapq.heappush(self._heap, (finish, index))
        self._res[off % self._bs] += 1
        self._num_dec += 1
        self._sum_off += off

    def _drop_decoder(self, index: int) -> int:
        """Remove a live decoder; returns the blocks it held."""
        off = self._dec_off[index]
        self._dec_alive[index] = False
        self._res[off % self._bs] -= 1
        self._num_dec -= 1
        self._sum_off -= off
        return self._blocks(off + self.g)

    def _push_waiting(self, pending: _Pending) -> None:
        key = self._policy.sort_key(pending.spec, self.t)
        bisect.insort(self._waiting, (key, next(self._seq), pending))

    def _next_key_change(self) -> float:
        until = (self._policy.key_valid_until_s(p.spec, self.t) for _, _, p in self._waiting)
        return min(until, default=math.inf)

    def _resort(self) -> None:
        entries = [p for _, _, p in self._waiting]
        self._waiting = []
        for p in entries:
            self._push_waiting(p)
        self._resort_at = self._next_key_change()

    # ---- stepping ------------------------------------------------------------------------------------------

    def run(self, max_iterations: int = 100_000) -> float:
        """Seconds from the snapshot to the new request's first token (inf if it can never be admitted)."""
        arrivals = self._arrivals
        for _ in range(max_iterations):
            while arrivals and arrivals[0][0] <= self.t:
                pending = arrivals.pop(0)[2]
                self._push_waiting(pending)
                self._resort_at = min(self._resort_at, self._policy.key_valid_until_s(pending.spec, self.t))
            if self.t >= self._resort_at:
                self._resort()
            done = self._step_once()
            if done is not None:
                return done - self.now_s
        return math.inf

    def _step_once(self) -> float | None:
        budget = self._mbt - self._num_dec
        crossers = self._res[(-self.g) % self._bs] if self._num_dec else 0
        items: list[tuple[_Pending, int]] = []
        need = crossers
        for p in self._prefill:
            if budget <= 0:
                break
            chunk = rules.chunk_tokens(p.num_tokens, p.num_computed, budget)
            need += rules.new_blocks(p.num_computed, chunk, p.num_blocks, self._bs)
            items.append((p, chunk))
            budget -= chunk
        if need > self.free:
            return self._exact_step()  # some request must be preempted: follow the engine request by request
        self.free -= need
        for p, chunk in items:
            p.num_blocks = max(p.num_blocks, self._blocks(p.num_computed + chunk))
        budget = self._admit(budget, items)
        if not items and not self._num_dec:
            return self._idle()
        if not items:
            return self._decode_run()
        return self._mixed_step(items)

    def _exact_step(self) -> float | None:
        """One step scheduled as the engine does when blocks run short: running requests in admission order,
        preempting the one the queue policy ranks last until each gets its blocks (see `sim/engine.py`)."""
        running = self._materialize()
        budget, index = self._mbt, 0
        scheduled: list[tuple[_Pending, int]] = []
        while index < len(running) and budget > 0:
            p = running[index]
            num_new = rules.chunk_tokens(p.num_tokens, p.num_computed, budget)
            need = rules.new_blocks(p.num_computed, num_new, p.num_blocks, self._bs)
            while need > self.free:
                victim = running.pop(rules.preemption_victim(self._policy, [q.spec for q in running], self.t))
                self.free += rules.preempt_by_recompute(victim)
                self._push_waiting(victim)
                for pos, (q, n) in enumerate(scheduled):
                    if q is victim:  # it was scheduled earlier in this step: give its tokens back
                        del scheduled[pos]
                        budget += n
                        index -= 1
                        break
                if victim is p:
                    break
            else:
                self.free -= need
                p.num_blocks += need
                scheduled.append((p, num_new))
                budget -= num_new
                index += 1
                continue
            break  # the request preempted itself: the engine stops scheduling running requests here
        if not scheduled:
            self._restore(running)
            return None  # everything was preempted: the engine schedules again at once, now admitting
        return self._apply_exact(scheduled, running)

    def _materialize(self) -> list[_Pending]:
        """Every running request as a _Pending in admission order (decoders first), leaving no decoder.

        The decoder lists are emptied rather than marked dead: `_restore` adds the decoders back as new entries,
        so keeping the dead ones made every exact step cost all the decoders the pass had ever seen (quadratic
        in a pass that preempts often)."""
        running = []
        for i, alive in enumerate(self._dec_alive):  # indices follow admission order
            if alive:
                c = self._dec_off[i] + self.g
                spec = self._dec_spec[i]
                running.append(_Pending(spec, c, c + 1 - spec.num_prompt_tokens, self._total(i), self._blocks(c)))
        self._dec_spec, self._dec_off, self._dec_total, self._dec_finish, self._dec_alive = [], [], [], [], []
        self._res = [0] * self._bs
        self._num_dec = self._sum_off = 0
        self._heap = []
        return running + self._prefill

    def _apply_exact(self, scheduled: list[tuple[_Pending, int]], running: list[_Pending]) -> float | None:
        num_prefill = pairs = num_decode = context = 0
        for p, n in scheduled:
            if rules.is_decoding(p.num_generated, p.num_computed, p.num_tokens):
                num_decode += 1
                context += p.num_tokens
            else:
                num_prefill += n
                pairs += rules.prefill_attention_pairs(p.num_computed, n)
        self.t += self._step(num_prefill, num_decode, context, pairs)
        first_token = None
        for p, n in scheduled:
            p.num_computed += n
            if not rules.samples_token(p.num_computed, p.num_tokens):
                continue
            p.num_generated += 1
            if p is self._new:
                first_token = self.t
            if rules.is_finished(p.num_generated, p.total):
                running.remove(p)
                self.free += p.num_blocks
        self._restore(running)
        return first_token

    def _restore(self, running: list[_Pending]) -> None:
        """Hand decoding requests back to the aggregate; the rest keep prefilling, in order."""
        self._prefill = []
        for p in running:
            if rules.is_decoding(p.num_generated, p.num_computed, p.num_tokens):
                self._add_decoder(p.spec, p.num_computed, p.total, p.num_generated)
            else:
                self._prefill.append(p)

    def _admit(self, budget: int, items: list[tuple[_Pending, int]]) -> int:
        index = 0
        bs, kv_admission, hol = self._bs, self._kv_admission, self._hol
        while rules.can_admit(budget, self._num_dec + len(self._prefill), self._mns) and index < len(self._waiting):
            p = self._waiting[index][2]
            num_new = rules.chunk_tokens(p.num_tokens, p.num_computed, budget)
            reserve = rules.admission_reserve_tokens(p.num_tokens, p.num_computed, num_new, kv_admission)
            need = rules.new_blocks(0, reserve, p.num_blocks, bs)
            action = rules.admission_action(need, self.free, hol)
            if action != rules.ADMIT:
                if action == rules.STOP:
                    break
                index += 1  # skip it so a smaller request behind can start
                continue
            del self._waiting[index]
            self.free -= need
            p.num_blocks += need
            self._prefill.append(p)
            items.append((p, num_new))
            budget -= num_new
        return budget

    def _idle(self) -> float | None:
        if self._arrivals:
            self.t = self._arrivals[0][0]  # nothing runs until the next request is queued
            return None
        return math.inf  # nothing runs and the queue head cannot be admitted: it never will be

    def _mixed_step(self, items: list[tuple[_Pending, int]]) -> float | None:
        n = self._num_dec
        num_prefill = sum(c for _, c in items)
        pairs = sum(rules.prefill_attention_pairs(p.num_computed, c) for p, c in items)
        context = self._sum_off + n * self.g + n
        self.t += self._step(num_prefill, n, context, pairs)
        new = self._new
        for p, chunk in items:
            if p is new and rules.samples_token(p.num_computed + chunk, p.num_tokens):
                return self.t  # nothing after this step matters
        if n:
            self.g += 1
            self._finish_decoders()
        for p, chunk in items:
            p.num_computed += chunk
            if not rules.samples_token(p.num_computed, p.num_tokens):
                continue
            p.num_generated += 1
            self._prefill.remove(p)
            if rules.is_finished(p.num_generated, p.total):
                self.free += p.num_blocks
            else:
                self._add_decoder(p.spec, p.num_computed, p.total, p.num_generated)
        return None

    def _finish_decoders(self) -> None:
        heap = self._ensure_heap()
        while heap and heap[0][0] <= self.g:
            _, index = heapq.heappop(heap)
            if self._dec_alive[index]:
                self.free += self._drop_decoder(index)

    def _run_s(self, k: int, n: int, context: int, first_s: float) -> float:
        """Duration of k decode steps of n requests whose context starts at `context` and grows n per step."""
        return k * first_s + self._ctx_s * n * k * (k - 1) / 2

    def _decode_run(self) -> None:
        """Identical decode-only steps, until a decoder finishes, KV runs short, or the queue may change."""
        n, g, bs = self._num_dec, self.g, self._bs
        heap, alive = self._ensure_heap(), self._dec_alive
        while heap and not alive[heap[0][1]]:
            heapq.heappop(heap)
        k_max = max(1, heap[0][0] - g) if heap else 1
        context = self._sum_off + n * g + n
        first_s = self._step(0, n, context, 0)
        horizon = min(self._resort_at, self._arrivals[0][0] if self._arrivals else math.inf)
        if horizon < math.inf and k_max > 1:
            # stop at the first step end at or after the horizon, as the engine cuts a run for a queue change
            lo, hi = 1, k_max
            while lo < hi:
                mid = (lo + hi) // 2
                if self.t + self._run_s(mid, n, context, first_s) >= horizon:
                    hi = mid
                else:
                    lo = mid + 1
            k_max = lo
        # KV: step 0's blocks are allocated; each further block_size steps take n blocks
        cycles = min((k_max - 1) // bs, (self.free // n) if n else 0)
        k, used = 1 + cycles * bs, cycles * n
        while k < k_max:
            c = self._res[(-(g + k)) % bs]
            if used + c > self.free:
                break
            used += c
            k += 1
        self.free -= used
        self.t += self._run_s(k, n, context, first_s)
        self.g += k
        self._finish_decoders()
        return None
