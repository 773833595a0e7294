"""The paged KV memory of one replica: a count of free blocks and, with prefix caching, which free blocks still
hold a preempted request's prefix and in what order they are evicted.

Prefix caching follows vLLM v1's automatic prefix caching (`vllm/v1/core/block_pool.py`, `kv_cache_manager.py`,
design notes at https://docs.vllm.ai/en/latest/design/prefix_caching/):

- a full block (16 computed tokens) keeps its hash after its request frees it, and stays reusable until the
  block is handed out again; "free" counts these cached blocks too (`get_num_free_blocks`);
- freed blocks join the tail of one free queue and new blocks are taken from its head, so the least recently
  freed go first (LRU); a request frees its blocks last block first, so its tail is evicted before its prefix;
- a request that is admitted again takes back the longest prefix of its blocks still cached (at most
  `num_tokens - 1` tokens, so the last token is computed for its logits), removing them from the free queue
  before any new block is taken; only the rest is recomputed.

Only a request's own blocks can hit: the simulator knows token counts, not token ids, so two requests never
share a prefix (ShareGPT's conversations open differently). A finished request's blocks are therefore free
blocks like any other, and so are the blocks of a preempted request that were reserved but not yet computed.

The queue holds runs `[owner, count]` rather than single blocks: a run of a preempted request lists its cached
blocks last block first, so evicting from the head of a run shortens that request's cached prefix from its end.

    head (evicted first)                                                     tail (freed last)
    [None, 12] [req A, 40: blocks 39..0] [None, 3] [req B, 7: blocks 6..0]
"""

from __future__ import annotations

from collections import deque

from jevserve.serving.engine_request import EngineRequest


class BlockPool:
    """Free KV blocks of one replica and, with prefix caching, the cached prefixes of preempted requests."""

    def __init__(self, num_blocks: int, *, prefix_caching: bool = False) -> None:
        self.num_total = num_blocks
        self.num_free = num_blocks  # includes cached blocks nobody holds: they are evictable
        self.prefix_caching = prefix_caching
        self._queue: deque[list] = deque([[None, num_blocks]])  # runs [owner or None, count], head first out
        self._runs: dict[EngineRequest, list] = {}  # a preempted request -> its run of cached blocks in the queue

    def allocate(self, num_blocks: int) -> None:
        """Take `num_blocks` free blocks from the head of the queue, evicting cached blocks they held."""
        assert 0 <= num_blocks <= self.num_free, f"allocating {num_blocks} of {self.num_free} free KV blocks"
        self.num_free -= num_blocks
        if not self.prefix_caching:
            return
        queue = self._queue
        while num_blocks:
            run = queue[0]
            if run[1] > num_blocks:
                run[1] -= num_blocks  # a cached run loses its last blocks: its owner's prefix gets shorter
                return
            num_blocks -= run[1]
            queue.popleft()
            if run[0] is not None:
                del self._runs[run[0]]  # every cached block of that request is gone

    def free(self, num_blocks: int, owner: EngineRequest | None = None, num_cached: int = 0) -> None:
        """Return `num_blocks` blocks; with prefix caching, the first `num_cached` of them (full blocks of
        computed tokens) stay cached for `owner` until evicted."""
        self.num_free += num_blocks
        if not self.prefix_caching:
            return
        assert 0 <= num_cached <= num_blocks and owner not in self._runs
        if owner is None:
            num_cached = 0
        plain = num_blocks - num_cached
        # The request's tail (reserved or partly filled blocks) is freed first, so it is evicted first.
        if plain:
            tail = self._queue[-1] if self._queue else None
            if tail is not None and tail[0] is None:
                tail[1] += plain
            else:
                self._queue.append([None, plain])
        if num_cached:
            run = [owner, num_cached]
            self._queue.append(run)
            self._runs[owner] = run

    def cached_blocks(self, owner: EngineRequest) -> int:
        """How many blocks of `owner`'s prefix are still cached (0 without prefix caching)."""
        run = self._runs.get(owner)
        return 0 if run is None else run[1]

    def touch(self, owner: EngineRequest, num_hits: int) -> None:
        """Give `owner` back the first `num_hits` blocks of its cached prefix (they leave the free queue); any
        cached blocks past them stay in the queue as ordinary free blocks."""
        run = self._runs.pop(owner, None)
        if run is None:
            assert num_hits == 0, f"{num_hits} cache hits for a request with no cached blocks"
            return
        assert 0 <= num_hits <= run[1]
        run[0] = None  # what is left of the run is no longer anyone's prefix; a run of 0 is dropped when reached
        run[1] -= num_hits
        self.num_free -= num_hits

    @property
    def num_cached(self) -> int:
        """Blocks that are free but still hold a preempted request's prefix."""
        return sum(run[1] for run in self._runs.values())
