"""The playground's SQLite store: rounds, the items they drew, people's answers and the served model's answers.

Every write is one short transaction in WAL mode, so a killed server loses at most the request it was answering and
never leaves half a round. Answers are keyed by (round, position): a double submit or a reload inserts nothing new,
and the first answer stands. Sessions are a random cookie value the site signs; nothing personal is stored.

    schema_version(version)                       one row: the number of migrations applied
    rounds(round_id, session_id, seed, model, created_at)
    round_items(round_id, position, decision, item_id, shown_at)     shown_at: first time the item page was served
    answers(round_id, position, choice, truth, correct, time_ms, answered_at)
    model_answers(round_id, position, model, choice, probabilities, decision_ms)
    keys(name, value)                             the session cookie's signing key, made on first use
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# Each entry moves the schema one version up; never edit an applied one, append a new one (PLAYGROUND_TABLES
# reads the tables they make).
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE rounds (
        round_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        seed INTEGER NOT NULL,
        model TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE round_items (
        round_id TEXT NOT NULL REFERENCES rounds(round_id),
        position INTEGER NOT NULL,
        decision TEXT NOT NULL,
        item_id TEXT NOT NULL,
        shown_at REAL,
        PRIMARY KEY (round_id, position)
    );
    CREATE TABLE answers (
        round_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        choice TEXT NOT NULL,
        truth TEXT NOT NULL,
        correct INTEGER NOT NULL,
        time_ms REAL NOT NULL,
        answered_at REAL NOT NULL,
        PRIMARY KEY (round_id, position),
        FOREIGN KEY (round_id, position) REFERENCES round_items(round_id, position)
    );
    CREATE TABLE model_answers (
        round_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        model TEXT NOT NULL,
        choice TEXT,
        probabilities TEXT NOT NULL,
        decision_ms REAL NOT NULL,
        PRIMARY KEY (round_id, position, model),
        FOREIGN KEY (round_id, position) REFERENCES round_items(round_id, position)
    );
    CREATE INDEX rounds_by_session ON rounds(session_id);
    """,
    # the site's own keys (the session cookie's signing key), kept with the rounds so a restart keeps sessions
    """
    CREATE TABLE keys (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
)


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


@dataclass(frozen=True)
class RoundItem:
    """One position of a round, with the person's answer once given."""

    position: int  # 0-based
    decision: str  # a playground decision key (web.decisions)
    item_id: str  # the bench item id on its task's test side
    shown_at: float | None  # epoch seconds the item page was first served; None until then
    choice: str | None  # the person's answer; None until answered
    truth: str | None
    correct: bool | None
    time_ms: float | None  # from first showing to the answer, measured on the server


@dataclass(frozen=True)
class Round:
    """A round and its items in position order."""

    round_id: str
    session_id: str
    seed: int
    model: str  # the served model the round compares with
    created_at: float
    items: tuple[RoundItem, ...]

    @property
    def next_position(self) -> int | None:
        """The first unanswered position, or None when the round is complete."""
        return next((i.position for i in self.items if i.choice is None), None)


@dataclass(frozen=True)
class ModelAnswer:
    """A model's stored answer to one round item."""

    model: str
    choice: str | None  # the option the model's rule picks; None when it has no rule for this decision
    probabilities: dict[str, float]  # option or level → probability, as the model answered
    decision_ms: float  # wall time of the decision call, measured by the web process


def pseudonym(session_id: str) -> str:
    """A one-way name for a session: the first 16 hex digits of SHA-256 of its id. Exports carry this, never the
    id itself, which is the session's cookie and would let whoever holds an export act as that browser."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]


# what a playground database holds: any other table is another program's (sqlite_sequence is SQLite's own)
PLAYGROUND_TABLES = frozenset(
    {"schema_version", "sqlite_sequence"}
    | set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", "".join(MIGRATIONS)))
)


class StoreError(Exception):
    """The file given as the database is not one (the command line reports it in one line)."""


def _owner_only(*paths: Path) -> None:
    """Take the group's and others' access away from the files of a database made readable to them (by an older
    jevserve, or a copy): it holds the session cookies and their signing key."""
    for path in paths:
        try:
            mode = path.stat().st_mode & 0o777
            if mode & 0o077:
                path.chmod(mode & 0o700)
        except FileNotFoundError:
            continue
        except PermissionError:
            logger.warning("--db %s is readable by others and cannot be changed here: chmod 600 it", path)


class Store:
    """Open (and migrate) the database at `path`; every method is one transaction on its own connection."""

    def __init__(self, path: Path | str, *, reading_only: bool = False) -> None:
        """`reading_only` (an export): the file's permissions are left as they are, and an empty file, which holds no
        rounds, is refused rather than made a database."""
        self.path = Path(path)
        if reading_only and not self.path.exists():  # nothing to read: none is made
            raise StoreError(f"--db {self.path}: no such file; pass the file `jevserve web` created")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                # the file holds the session cookies and the key that signs them: readable by its owner only (the
                # WAL files SQLite makes beside it take the same mode)
                self.path.touch(mode=0o600)
        except OSError as exc:  # said as every other bad --db is, naming the flag (it was "PATH: Permission denied")
            raise StoreError(f"--db {self.path}: cannot create it ({exc.strerror or exc}); pass a path this user can "
                             "write") from None
        # before anything changes the file: a mistyped --db naming some other file (or another program's SQLite
        # database) had its permissions changed, and a database its tables added
        self._check_playground_file(reading_only)
        if not reading_only:
            _owner_only(self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
        try:
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"--db {self.path}: not a playground database (SQLite: {exc}); pass the file `jevserve web` created, "
                "or a new path"
            ) from None

    def _check_playground_file(self, reading_only: bool) -> None:
        """StoreError unless the file is empty (a new database; not for reading only) or a SQLite database holding no
        tables or only the playground's, of a schema this jevserve knows: read without writing anything (immutable:
        no lock, no -wal or -shm file left beside another program's database)."""
        if not self.path.is_file():
            raise StoreError(f"--db {self.path}: not a file; pass a playground SQLite file or a new path")
        if self.path.stat().st_size == 0:
            if reading_only:
                raise StoreError(f"--db {self.path}: an empty file, which holds no rounds; pass the file `jevserve "
                                 "web` created")
            return
        with self.path.open("rb") as file:  # SQLite reads a file shorter than its header as an empty database
            if file.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                raise StoreError(f"--db {self.path}: not a playground database (not an SQLite file); pass the file "
                                 "`jevserve web` created, or a new path")
        try:
            # immutable unless a -wal file is there already: then part of the database is in it, and reading it
            # leaves nothing new beside the file
            live = Path(f"{self.path}-wal").exists()
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro{'' if live else '&immutable=1'}", uri=True)
            try:
                tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                row = conn.execute("SELECT version FROM schema_version").fetchone() if (
                    "schema_version" in tables) else None
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"--db {self.path}: not a playground database (SQLite: {exc}); pass the file `jevserve web` created, "
                "or a new path"
            ) from None
        version = row[0] if row else 0
        if isinstance(version, int) and version > len(MIGRATIONS):
            raise StoreError(f"--db {self.path}: a playground database of a newer jevserve (schema version {version}, "
                             f"this one knows {len(MIGRATIONS)}); upgrade jevserve or pass another --db")
        others = sorted(tables - PLAYGROUND_TABLES)
        if others or (tables and "schema_version" not in tables):
            named = ", ".join((others or sorted(tables))[:5])
            raise StoreError(f"--db {self.path}: a SQLite database of something else (tables: {named}); pass the "
                             "file `jevserve web` created, or a new path")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        try:
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed answer survives a process kill
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            version = row[0] if row else 0
            if version > len(MIGRATIONS):
                raise RuntimeError(f"database schema version {version} is newer than this jevserve "
                                   f"({len(MIGRATIONS)}); upgrade jevserve or use another --db")
            for script in MIGRATIONS[version:]:
                for statement in filter(str.strip, script.split(";")):
                    conn.execute(statement)
            if row is None:
                conn.execute("INSERT INTO schema_version VALUES (?)", (len(MIGRATIONS),))
            else:
                conn.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS),))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def schema_version(self) -> int:
        """The number of migrations applied."""
        with self._connect() as conn:
            return int(conn.execute("SELECT version FROM schema_version").fetchone()[0])

    def key(self, name: str) -> bytes:
        """The site's key `name`: 32 random bytes made on first use and kept in the database, so every process
        serving this file, and every restart, signs with the same one."""
        with self._transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO keys VALUES (?, ?)", (name, secrets.token_hex(32)))
            return bytes.fromhex(conn.execute("SELECT value FROM keys WHERE name = ?", (name,)).fetchone()[0])

    def create_round(
        self, round_id: str, session_id: str, seed: int, model: str, items: Sequence[tuple[str, str]]
    ) -> None:
        """Insert a round and its (decision, item id) positions in one transaction."""
        with self._transaction() as conn:
            conn.execute("INSERT INTO rounds VALUES (?, ?, ?, ?, ?)", (round_id, session_id, seed, model, time.time()))
            conn.executemany(
                "INSERT INTO round_items VALUES (?, ?, ?, ?, NULL)",
                [(round_id, position, decision, item_id) for position, (decision, item_id) in enumerate(items)],
            )

    def get_round(self, round_id: str) -> Round | None:
        """The round with its items and answers, or None for an unknown id."""
        with self._connect() as conn:
            head = conn.execute("SELECT * FROM rounds WHERE round_id = ?", (round_id,)).fetchone()
            if head is None:
                return None
            rows = conn.execute(
                "SELECT i.position, i.decision, i.item_id, i.shown_at, a.choice, a.truth, a.correct, a.time_ms "
                "FROM round_items i LEFT JOIN answers a USING (round_id, position) WHERE i.round_id = ? "
                "ORDER BY i.position",
                (round_id,),
            ).fetchall()
        items = tuple(
            RoundItem(p, d, i, s, c, t, None if ok is None else bool(ok), ms) for p, d, i, s, c, t, ok, ms in rows
        )
        return Round(head[0], head[1], int(head[2]), head[3], float(head[4]), items)

    def mark_shown(self, round_id: str, position: int, now: float | None = None) -> None:
        """Set the item's first-shown time unless it is already set (a reload keeps the first)."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE round_items SET shown_at = ? WHERE round_id = ? AND position = ? AND shown_at IS NULL",
                (time.time() if now is None else now, round_id, position),
            )

    def record_answer(
        self, round_id: str, position: int, choice: str, truth: str, correct: bool, time_ms: float
    ) -> bool:
        """Store a person's answer; False (and nothing changed) when that position was already answered."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?)",
                (round_id, position, choice, truth, int(correct), time_ms, time.time()),
            )
            return cursor.rowcount == 1

    def record_model_answer(self, round_id: str, position: int, answer: ModelAnswer) -> None:
        """Store a model's answer to a round item (the first one stored stands)."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO model_answers VALUES (?, ?, ?, ?, ?, ?)",
                (round_id, position, answer.model, answer.choice, json.dumps(answer.probabilities),
                 answer.decision_ms),
            )

    def model_answer(self, round_id: str, position: int, model: str) -> ModelAnswer | None:
        """A stored model answer, or None."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT model, choice, probabilities, decision_ms FROM model_answers "
                "WHERE round_id = ? AND position = ? AND model = ?",
                (round_id, position, model),
            ).fetchone()
        return None if row is None else ModelAnswer(row[0], row[1], json.loads(row[2]), float(row[3]))

    def answer_rows(self) -> list[dict[str, Any]]:
        """Every person's answer with its round, decision, item and the served model's answer (if stored)."""
        with self._connect() as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT a.round_id, r.session_id, r.seed, r.model, r.created_at, a.position, i.decision, i.item_id, "
                "a.choice, a.truth, a.correct, a.time_ms, a.answered_at, m.choice AS model_choice, "
                "m.probabilities AS model_probabilities, m.decision_ms AS model_decision_ms "
                "FROM answers a JOIN round_items i USING (round_id, position) JOIN rounds r USING (round_id) "
                "LEFT JOIN model_answers m ON m.round_id = a.round_id AND m.position = a.position "
                "AND m.model = r.model ORDER BY r.created_at, a.round_id, a.position"
            ).fetchall()
        out = []
        for row in rows:
            record = dict(row)
            record["correct"] = bool(record["correct"])
            probabilities = record.pop("model_probabilities")
            record["model_probabilities"] = None if probabilities is None else json.loads(probabilities)
            out.append(record)
        return out

    def answers_version(self) -> int:
        """A number that grows with every stored answer (for caching what is computed from them)."""
        with self._connect() as conn:
            return int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM answers").fetchone()[0])

    def counts(self) -> dict[str, int]:
        """Row counts per table (rounds, round_items, answers, model_answers)."""
        with self._connect() as conn:
            return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                    for t in ("rounds", "round_items", "answers", "model_answers")}
