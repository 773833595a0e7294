import pytest

from jevserve.serving import Request
from jevserve.serving.block_pool import BlockPool
from jevserve.serving.engine_request import EngineRequest


def owner(name: str) -> EngineRequest:
    return EngineRequest(Request(name, 0.0, 16, 16))


def test_without_prefix_caching_the_pool_only_counts_blocks():
    pool, a = BlockPool(10), owner("a")
    pool.allocate(7)
    pool.free(5, a, 4)
    assert pool.num_free == 8
    assert pool.cached_blocks(a) == 0 and pool.num_cached == 0


def test_a_freed_request_keeps_its_full_blocks_cached_and_counted_as_free():
    pool, a = BlockPool(10, prefix_caching=True), owner("a")
    pool.allocate(10)
    pool.free(6, a, 4)  # 4 full blocks of computed tokens, 2 reserved or partly filled
    assert pool.num_free == 6
    assert pool.cached_blocks(a) == 4 and pool.num_cached == 4


def test_eviction_takes_never_used_blocks_first_then_a_requests_tail_before_its_prefix():
    pool, a = BlockPool(30, prefix_caching=True), owner("a")
    pool.allocate(10)
    pool.free(10, a, 8)  # queue: 20 never used, a's 2 unfilled blocks, a's blocks 7..0
    pool.allocate(22)
    assert pool.cached_blocks(a) == 8
    pool.allocate(3)  # a's blocks 7, 6, 5
    assert pool.cached_blocks(a) == 5
    pool.allocate(5)
    assert pool.cached_blocks(a) == 0 and pool.num_free == 0


def test_eviction_is_least_recently_freed_first_across_requests():
    pool, a, b = BlockPool(20, prefix_caching=True), owner("a"), owner("b")
    pool.allocate(20)
    pool.free(5, a, 5)
    pool.free(5, b, 5)
    pool.allocate(6)
    assert (pool.cached_blocks(a), pool.cached_blocks(b)) == (0, 4)


def test_touch_takes_the_hits_out_of_the_free_blocks_and_leaves_the_rest_uncached():
    pool, a, b = BlockPool(20, prefix_caching=True), owner("a"), owner("b")
    pool.allocate(20)
    pool.free(6, a, 6)
    pool.free(2, b, 2)
    pool.touch(a, 4)
    assert pool.num_free == 4 and pool.cached_blocks(a) == 0 and pool.num_cached == 2
    # a's last 2 blocks are ordinary free blocks now; they are evicted before b's, which were freed later
    pool.allocate(2)
    assert pool.cached_blocks(b) == 2


def test_a_finished_request_frees_uncached_blocks():
    pool = BlockPool(8, prefix_caching=True)
    pool.allocate(8)
    pool.free(8)
    assert pool.num_free == 8 and pool.num_cached == 0


def test_allocating_more_than_is_free_is_an_error():
    pool = BlockPool(4, prefix_caching=True)
    with pytest.raises(AssertionError, match="allocating 5 of 4 free KV blocks"):
        pool.allocate(5)


def test_touching_a_request_with_no_cached_blocks_for_hits_is_an_error():
    with pytest.raises(AssertionError, match="no cached blocks"):
        BlockPool(4, prefix_caching=True).touch(owner("a"), 1)
