"""What the server says about the same requests: its own TTFT histogram (vLLM's and `jevserve engine`'s
`vllm:time_to_first_token_seconds` on /metrics), read before and after a replay.

A load generator measures TTFT at the client, which adds HTTP, event handling and, on a host too slow for the
engine's `--speedup`, the engine's own lateness (every wall-clock cost is multiplied by the speedup). When the two
disagree by much, the client's figure describes the host more than the engine; the replay says so instead of
reporting it silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TTFT_METRIC = "vllm:time_to_first_token_seconds"
LAG_METRIC = "jevserve:engine_lag_seconds"
# the client's mean TTFT over the server's is called out past both: twice the server's, and 50 ms of engine time
FAR_RATIO, FAR_MS = 2.0, 50.0
HOST_LAG_SHARE = 0.1  # the engine's lag, as a share of the client-server gap, from which the host is named


@dataclass(frozen=True)
class ServerTtft:
    """The server's cumulative TTFT histogram sum and count (seconds, requests) and its lag gauge, if any."""

    sum_s: float
    count: float
    lag_s: float | None


def read_server_ttft(base_url: str, timeout_s: float = 5.0) -> ServerTtft | None:
    """The server's TTFT totals from `base_url`/metrics, or None where it has no such metric (not a vLLM-style
    server, or unreachable): the comparison is a courtesy, never a reason to fail a replay."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    try:
        response = httpx.get(f"{base_url}/metrics", timeout=timeout_s)
        if response.status_code != 200:
            return None
        total_s = count = 0.0
        lag_s, seen = None, False
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                if sample.name == f"{TTFT_METRIC}_sum":
                    total_s, seen = total_s + sample.value, True
                elif sample.name == f"{TTFT_METRIC}_count":
                    count += sample.value
                elif sample.name == LAG_METRIC:
                    lag_s = max(lag_s or 0.0, sample.value)
    except (httpx.HTTPError, ValueError):
        return None
    return ServerTtft(total_s, count, lag_s) if seen else None


def server_mean_ttft_ms(before: ServerTtft | None, after: ServerTtft | None) -> float | None:
    """The server's mean TTFT over the requests it finished between the two readings, in its own clock's ms."""
    if before is None or after is None or after.count <= before.count:
        return None
    return 1000 * (after.sum_s - before.sum_s) / (after.count - before.count)


def speedup_error(speedup: float, server_speedup: float) -> str:
    """How far latencies replayed at `speedup` are off on a server whose clock runs at `server_speedup`: the client
    scales wall time by its own speedup, the server's steps by the server's."""
    ratio = speedup / server_speedup
    return f"{ratio:g} times too large" if ratio > 1 else f"{1 / ratio:g} times too small"


def disagreement(
    client_mean_ms: float, server_mean_ms: float | None, lag_s: float | None, speedup: float,
    *, server_speedup: float | None = None,
) -> str | None:
    """A note when the client's mean TTFT is far from the server's for the same requests, else None; with the
    server's clock at another speedup, the note names that instead of the host."""
    if server_mean_ms is None or math.isnan(client_mean_ms):
        return None
    if server_speedup is not None and server_speedup != speedup:
        return (f"note: the server's /metrics put these requests' mean TTFT at {server_mean_ms:.1f} ms and this "
                f"client measured {client_mean_ms:.1f} ms; with --speedup {speedup:g} on a server whose clock runs "
                f"at {server_speedup:g}, every latency above is {speedup_error(speedup, server_speedup)}: rerun "
                f"with --speedup {server_speedup:g}")
    if client_mean_ms < FAR_RATIO * server_mean_ms or client_mean_ms - server_mean_ms < FAR_MS:
        return None
    gap_ms = client_mean_ms - server_mean_ms
    # the host is named only where the engine says it fell behind by a share of the gap worth naming
    behind = lag_s is not None and 1000 * lag_s >= HOST_LAG_SHARE * gap_ms
    where = (f"HTTP, the client, and, at --speedup {speedup:g}, a host too slow to keep the engine's clock; the "
             f"engine's last step started {lag_s:.2f} s of engine time late" if behind else
             "HTTP and the client; the engine kept its clock")
    return (f"note: the server's /metrics put these requests' mean TTFT at {server_mean_ms:.1f} ms and this client "
            f"measured {client_mean_ms:.1f} ms: the {gap_ms:.0f} ms between them is spent outside the engine's steps "
            f"({where}); lower --speedup or --request-rate to measure the engine")
