"""Scores on shared draws (bench v0.4): every row, task cell, average and rank is computed from ONE set of bootstrap
draws, with the numerator paired on each draw and the denominator fixed from the full test side.

    score = 100 × (m − m_default) / (m_oracle − m_chance)

m and m_default are re-measured on every draw (paired: the same items for both); m_oracle − m_chance is measured
once on the whole test side, so a draw can never divide by a small or zero gap (no NaN, no ratio tail). The
share of the default-to-oracle gap, 100 × (m − m_default) / (m_oracle − m_default), is kept as a second number with
the same fixed-denominator rule.

Draws: one cluster bootstrap over every task's test items at once. Items that share a group or a text, in one task
or across tasks, are one cluster (connected components, scipy), drawn together. Draws are made in chunks of
`CHUNK` resamples from one seeded generator, so 10,000 resamples over ~8,000 items never hold more than one chunk
of weights in memory, and every caller gets the same draws for the same items.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from jevserve.bench.metrics import Metric, metric_by_name

CHUNK = 1000
NEAR_ORACLE_SHARE = 2 / 3  # a default closing this much of the chance-to-oracle range on train is reported apart


@dataclass(frozen=True)
class TaskScale:
    """A task's fixed reference points, measured on the whole test side."""

    chance: float  # the metric of decisions that ignore the item
    default: float  # the default rule's metric
    oracle: float  # the oracle's metric

    def score(self, value: np.ndarray | float) -> np.ndarray:
        """100 × (value − default) / (oracle − chance)."""
        return 100.0 * (np.asarray(value, dtype=np.float64) - self.default) / max(self.oracle - self.chance, 1e-12)

    def gap_share(self, value: np.ndarray | float, default: np.ndarray | float | None = None) -> np.ndarray:
        """100 × (value − default) / (oracle − default), the share of the gap the default leaves (NaN: no gap)."""
        gap = self.oracle - self.default
        base = self.default if default is None else np.asarray(default, dtype=np.float64)
        if gap <= 1e-12:
            return np.full(np.shape(value), np.nan)
        return 100.0 * (np.asarray(value, dtype=np.float64) - base) / gap


@dataclass(frozen=True)
class StoredTask:
    """A task's test-side arrays as a results file stores them."""

    name: str
    metric: Metric
    ids: tuple[str, ...]
    labels: np.ndarray
    default: np.ndarray
    oracle: np.ndarray
    cluster_keys: tuple[tuple[str, ...], ...]

    @classmethod
    def from_result(cls, name: str, result: Mapping) -> StoredTask:
        """From one task entry of a results document (its "items")."""
        items = result["items"]
        keys = items.get("cluster_keys") or [[f"c:{c}"] for c in items["clusters"]]
        return cls(name, metric_by_name(result["metric"]), tuple(items["ids"]), np.asarray(items["labels"]),
                   np.asarray(items["default"]), np.asarray(items["oracle"]), tuple(tuple(k) for k in keys))

    def scale(self) -> TaskScale:
        """The fixed reference points on the whole test side."""
        return TaskScale(self.metric.chance(self.labels), self.metric(self.labels, self.default),
                         self.metric(self.labels, self.oracle))


def clusters(keys: Mapping[str, Sequence[Sequence[str]]]) -> tuple[dict[str, np.ndarray], int]:
    """Per task, the cluster number of each item (items sharing any key, across tasks, share a cluster), and the
    number of clusters; clusters are numbered in the order of their smallest key, so the numbering depends only on
    the items, not on the order of the tasks."""
    names = sorted({k for per_task in keys.values() for item in per_task for k in item})
    index = {k: i for i, k in enumerate(names)}
    rows, cols, offsets, total = [], [], {}, 0
    for task, per_task in keys.items():
        offsets[task] = total
        for i, item in enumerate(per_task):
            for k in item:
                rows.append(total + i)
                cols.append(index[k])
        total += len(per_task)
    size = total + len(names)  # a bipartite graph items × keys, as one square graph
    graph = sparse.coo_matrix((np.ones(len(rows)), (rows, np.asarray(cols, dtype=np.int64) + total)), (size, size))
    _, component = connected_components(graph, directed=False)
    first_key: dict[int, str] = {}
    for k, i in index.items():
        c = int(component[total + i])
        first_key[c] = min(first_key.get(c, k), k)
    order = {c: n for n, c in enumerate(sorted(first_key, key=first_key.__getitem__))}
    cluster = np.array([order[int(c)] for c in component[:total]], dtype=np.int64)
    return {t: cluster[offsets[t] : offsets[t] + len(p)] for t, p in keys.items()}, len(order)


def draw_chunks(
    cluster_of: Mapping[str, np.ndarray], num_clusters: int, num_resamples: int, seed: int
) -> Iterator[dict[str, np.ndarray]]:
    """Count weights per task (chunk × items), CHUNK resamples at a time, from one seeded generator."""
    rng = np.random.default_rng(seed)
    p = np.full(num_clusters, 1.0 / num_clusters)
    for start in range(0, num_resamples, CHUNK):
        draws = rng.multinomial(num_clusters, p, size=min(CHUNK, num_resamples - start)).astype(np.int32)
        yield {task: draws[:, c] for task, c in cluster_of.items()}


@dataclass(frozen=True)
class Resampled:
    """Metric values per draw: `rows[row][task]` for each row's predictions, `default[task]`, `oracle[task]`."""

    rows: dict[str, dict[str, np.ndarray]]
    default: dict[str, np.ndarray]
    oracle: dict[str, np.ndarray]
    num_resamples: int


def resample(
    tasks: Mapping[str, StoredTask], rows: Mapping[str, Mapping[str, np.ndarray]], num_resamples: int, seed: int
) -> Resampled:
    """Every row's metric on every draw of one joint bootstrap over `tasks` (rows may cover some tasks only)."""
    cluster_of, num_clusters = clusters({n: t.cluster_keys for n, t in tasks.items()})
    parts: dict[tuple[str, str], list[np.ndarray]] = {}
    for weights in draw_chunks(cluster_of, num_clusters, num_resamples, seed):
        for name, task in tasks.items():
            w = weights[name]
            parts.setdefault(("default", name), []).append(task.metric.weighted(task.labels, task.default, w))
            parts.setdefault(("oracle", name), []).append(task.metric.weighted(task.labels, task.oracle, w))
            for row, values in rows.items():
                if name in values:
                    value = task.metric.weighted(task.labels, values[name], w)
                    parts.setdefault((f"row:{row}", name), []).append(value)
    joined = {key: np.concatenate(chunks) for key, chunks in parts.items()}
    return Resampled(
        rows={row: {n: joined[(f"row:{row}", n)] for n in tasks if (f"row:{row}", n) in joined} for row in rows},
        default={n: joined[("default", n)] for n in tasks},
        oracle={n: joined[("oracle", n)] for n in tasks},
        num_resamples=num_resamples,
    )


def near_oracle(default_train_share: float | None) -> bool:
    """True when the default closes at least NEAR_ORACLE_SHARE of the chance-to-oracle range on the train side."""
    return default_train_share is not None and default_train_share >= NEAR_ORACLE_SHARE
