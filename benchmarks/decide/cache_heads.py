"""The cache questions read by what the two texts do not share: a pair head (decide/lexical_head.py, a pair
analyzer) for the gateway's reuse question (cache-pairs' wording) and for cache-chats' own question, against the tuned
reader's readout and the words heads.

A cache state holds two texts, and whether one answer serves both turns on the words that differ ("open" against
"closed", "10" against "20", "from Paris to Rome" against "from Rome to Paris"), which the readout's pooled token
states and a bag of the state's words both blur. `--analyzer` names the pair terms, in the order they were built:
`pair`, `pair+order` (a term for the shared words in another order), `pair+order+same` (and one for the same words in
another order: what is served), `pair+order+same+cos` (and the two texts' cosine by the shipped encoder, one term per
cut it reaches), `pair+order+same+cos:differ` (the cosine terms only where the two texts' words differ) and
`pair+order+same+block+cos:differ` (and a term for one run of words moved); with a cosine analyzer cache-chats' head
keeps the served terms (its cosine reads the other way round on its train side).

1. Selection, on the train side only: 5 folds by cached text over the recipe's fit rows that ask each question
   (cache-pairs' train side and the rule-made pairs of train-side templates; cache-chats' train side), out-of-fold
   AUROC of a words head (the bench baseline's recipe) and of pair heads at C = 1 and C = 10.
2. How the chosen head joins the readout (its mean or alone), per question, by AUROC on the recipe's validation rows
   that ask it (held out from the readout's fit and the head's; ties go to the mean).
3. The test side: cache-pairs' and cache-chats' test pairs and the rule-made pairs of held-out templates, for the
   served tuned reader (the committed one when the script runs), its readout alone, the pair head alone and the
   mean; AUROC, and at the hand-set cache threshold (0.75) the different- and same-answer rule pairs served.

With `--blind [FILE]` the same rows (less the chosen one) are read on blind-written pairs instead: `cache_pairs_blind
.jsonl` and `cache_pairs_blind2.jsonl` to `cache_pairs_blind8.jsonl` beside this script (220 pairs, then 240 each,
half of them pairs one answer serves), each written by a helper that opened none of the project's files or data, each
for the next candidate after the last had been measured; a pair whose state or either question is near a train state of
the reuse question is dropped and counted.

With `--write PATH` a candidate is written to PATH's directory (the committed readout, layers and manifest copied,
the lexical heads refitted with the pair heads in place; with `--blind`, both joined by the mean) so the goals table,
the gateway's cache section and the bench can read it as `tuned:PATH`.

Writes benchmarks/results/cache_heads[_blindN][_order|_same].json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/cache_heads.py [--analyzer A] [--blind [FILE]] [--write PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
from dataclasses import replace
from functools import cache, partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from decision_heads import readout_only
from reader_goals import HAND_SET_CACHE_THRESHOLD as CACHE_THRESHOLD
from reader_goals import answerer, load_model, pct
from tool_gate_head import recipe_rows

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.bench.neardup import ReferenceIndex
from jevserve.bench.supervised import TfidfClassifier
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.lexical_head import (
    PAIR_ANALYZERS,
    LexicalHead,
    load_heads,
    needs_cosine,
    pair_texts,
    save_heads,
)
from jevserve.decide.trained import question_key
from jevserve.decide.tuned import TUNED_WEIGHTS, lexical_file, tuned_files
from jevserve.train.goal_cases import Unit, cache_units
from jevserve.train.goals import auroc, rate_at, scores_of
from jevserve.train.lexical_head import PAIR_ANALYZER, PAIR_C, examples_asking, fit_head, pair_cosines, pair_vectorizer
from jevserve.train.rules import question, reuse

BLIND = Path(__file__).resolve().parent / "cache_pairs_blind.jsonl"
FOLDS = 5

QUESTIONS = {"cache-pairs": reuse, "cache-chats": lambda: question("cache-chats", "reuse")}
BLIND2 = BLIND.with_name("cache_pairs_blind2.jsonl")  # a second blind set, for the head with the order term
BLIND3 = BLIND.with_name("cache_pairs_blind3.jsonl")  # a third, for the head with the same-words term
BLIND4 = BLIND.with_name("cache_pairs_blind4.jsonl")  # a fourth, for the head with the cosine terms
BLIND5 = BLIND.with_name("cache_pairs_blind5.jsonl")  # a fifth, for the cosine terms where the words differ
BLIND6 = BLIND.with_name("cache_pairs_blind6.jsonl")  # a sixth, for those with the moved-block term
BLIND7 = BLIND.with_name("cache_pairs_blind7.jsonl")  # a seventh: the pair head alone (cache_rate_point.py)
# an eighth: the moved-block head at the gateway's own rate-set point (cache_rate_point.py --calibration packaged)
BLIND8 = BLIND.with_name("cache_pairs_blind8.jsonl")


def candidates(analyzer: str, cosines: dict[str, float] | None = None) -> dict:
    """The selection's candidates: the words head and the pair head of `analyzer` at C = 1 and C = 10 (a "+cos"
    analyzer reads each state's cosine from `cosines`)."""
    vectorizer = partial(pair_vectorizer, analyzer, cosines)
    return {
        "words (C = 1)": lambda: TfidfClassifier(),
        f"{analyzer} (C = 1)": lambda: TfidfClassifier(vectorizer=vectorizer),
        f"{analyzer} (C = 10)": lambda: TfidfClassifier(c=PAIR_C, vectorizer=vectorizer),
    }


def fold_of(state: str) -> int:
    """A state's fold, by its cached text (lower case, punctuation dropped): a question and its rewrites share one."""
    cached = re.sub(r"\W+", " ", pair_texts(state)[0].lower()).strip()
    return int(hashlib.sha256(cached.encode()).hexdigest(), 16) % FOLDS


def selection(fit_rows: list, analyzer: str) -> dict:
    """Out-of-fold AUROC of each candidate on the fit rows that ask each cache question (and, for the reuse
    question, on the bench's rows and the rule-made ones apart)."""
    out = {}
    for name, make_question in QUESTIONS.items():
        q = make_question()
        picked = [ex for ex in fit_rows if question_key(ex.question) == question_key(q)]
        texts, labels = examples_asking(q, picked)
        folds = np.array([fold_of(t) for t in texts])
        bench = np.array([ex.family == name for ex in picked])
        row = {"rows": len(texts), "yes": int(labels.sum()), "bench rows": int(bench.sum())}
        cosines = pair_cosines(texts) if needs_cosine(analyzer) else None
        for label, make in candidates(analyzer, cosines).items():
            scores = np.zeros(len(texts))
            for fold in range(FOLDS):
                held = folds == fold
                model = make().fit([t for t, h in zip(texts, held, strict=True) if not h], labels[~held])
                scores[held] = model.predict_proba([t for t, h in zip(texts, held, strict=True) if h])
            row[label] = {"all": auroc(labels, scores), "bench": auroc(labels[bench], scores[bench])}
            if (~bench).any():
                row[label]["rule-made"] = auroc(labels[~bench], scores[~bench])
        out[name] = row
    return out


def analyzer_for(name: str, analyzer: str) -> str:
    """The analyzer a task's head is fitted with: `analyzer`, but for a "+cos" one cache-chats keeps the served
    terms (the cosine of two conversations reads the other way round on its train side: AUROC 0.302 alone)."""
    return PAIR_ANALYZER if needs_cosine(analyzer) and name == "cache-chats" else analyzer


def pair_heads(fit_rows: list, analyzer: str) -> dict[str, LexicalHead]:
    """task → the pair head of its cache question, fitted as a served head is (the recipe's fit rows asking it)."""
    return {
        name: fit_head(make_question(), fit_rows, analyzer=analyzer_for(name, analyzer), c=PAIR_C)
        for name, make_question in QUESTIONS.items()
    }


def with_heads(backend, heads: dict[str, LexicalHead], label: str):
    """The tuned reader with `heads` (question key → head) in place of its own for those questions, under a name of
    its own (answers are cached per model name)."""
    digest = hashlib.sha256(b"".join(h.coef.tobytes() + h.combine.encode() for h in heads.values())).hexdigest()[:8]
    backend.heads = {**backend.heads, **heads}
    backend.card = replace(backend.card, name=f"{backend.card.name}-{label}-{digest}")
    return backend


def variants(heads: dict[str, LexicalHead]) -> dict[str, dict[str, LexicalHead]]:
    """The rows measured: the pair heads alone and as the readout's mean (keyed by question)."""
    return {combine: {h.question: replace(h, combine=combine) for h in heads.values()} for combine in ("alone", "mean")}


def rows_of(label: str, heads: dict[str, LexicalHead] | None):
    """The backend of one row: the served tuned reader, its readout alone, or the readout with `heads`."""
    backend = load_model("tuned")
    if label == "readout":
        return readout_only(backend)
    if heads is None:
        return backend
    return with_heads(readout_only(backend), {**served_other_heads(), **heads}, f"cache-{label}")


@cache
def served_other_heads() -> dict[str, LexicalHead]:
    """The committed heads of the questions that are not cache questions (they stay as served)."""
    committed = load_heads(lexical_file(TUNED_WEIGHTS))
    cache_keys = {question_key(q()) for q in QUESTIONS.values()}
    return {k: h for k, h in committed.items() if k not in cache_keys}


def measured_rows(heads: dict[str, LexicalHead], *, served: bool = True) -> dict[str, dict[str, LexicalHead] | None]:
    """The rows a table reads (label → the heads set in place, None for the model as it is): the served tuned reader
    (unless `served` is False), its readout alone, and the pair heads alone and as the readout's mean."""
    rows: dict[str, dict[str, LexicalHead] | None] = {"served": None} if served else {}
    return rows | {"readout": None, **{f"pair head, {c}": v for c, v in variants(heads).items()}}


def scores_by_row(rows: dict[str, dict[str, LexicalHead] | None], units: list[Unit]) -> dict[str, tuple]:
    """label → (the row's model name, its P(yes) on `units`), one backend at a time."""
    out = {}
    for label, heads in rows.items():
        backend = rows_of(label, heads)
        try:
            out[label] = (backend.card.name, np.asarray(scores_of(units, answerer(backend))))
        finally:
            backend.close()
    return out


def validation_choice(validation: list, heads: dict[str, LexicalHead]) -> dict:
    """Per cache question, AUROC on the recipe's validation rows asking it: readout, head alone, mean; the choice."""
    out = {}
    units = []
    for name, make_question in QUESTIONS.items():
        q = make_question()
        texts, labels = examples_asking(q, validation)
        units += [Unit((t,), q, bool(y), name) for t, y in zip(texts, labels, strict=True)]
    rows = measured_rows(heads, served=False)
    scores = {label: found for label, (_, found) in scores_by_row(rows, units).items()}
    for name in QUESTIONS:
        asked = np.array([u.group == name for u in units])
        labels = np.array([u.label for u in units])[asked]
        figures = {label: auroc(labels, scores[label][asked]) for label in rows}
        mean, alone = figures["pair head, mean"], figures["pair head, alone"]
        out[name] = {"rows": len(labels), "yes": int(labels.sum()), "auroc": figures,
                     "combine": "alone" if alone > mean else "mean"}  # fmt: skip
    return out


def test_figures(data: BenchData, heads: dict[str, LexicalHead], choice: dict) -> dict:
    """The cache goal's figures on the test side for each row."""
    units = cache_units(data)
    chosen = {heads[n].question: replace(heads[n], combine=choice[n]["combine"]) for n in QUESTIONS}
    out = {}
    for label, (name, scores) in scores_by_row(measured_rows(heads) | {"chosen": chosen}, units).items():
        figures: dict = {"model": name}
        for group in ("cache-pairs", "cache-chats", "rule"):
            picked = [(u.label, s) for u, s in zip(units, scores, strict=True) if u.group.split(":")[0] == group]
            figures[f"auroc {group}"] = auroc([p[0] for p in picked], [p[1] for p in picked])
        for same, key in ((False, "different-answer served"), (True, "same-answer served")):
            served = [s for u, s in zip(units, scores, strict=True) if u.group.startswith("rule:") and u.label == same]
            figures[key] = rate_at(np.array(served), CACHE_THRESHOLD).to_dict()
        out[label] = figures
    return out


def blind_units(fit_rows: list, path: Path | list[dict]) -> tuple[list[Unit], int]:
    """The blind-written pairs (a file, or its rows) as the gateway asks about them, less any near a train state of
    the reuse question (the pair's state or either of its questions); and how many were dropped."""
    from jevserve.gateway.questions import cache_pair_state

    key = question_key(reuse())
    train = [ex.state for ex in fit_rows if question_key(ex.question) == key]
    index = ReferenceIndex(train + sorted({t.strip() for s in train for t in pair_texts(s)}))
    if isinstance(path, Path):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        rows = path
    units = [Unit((cache_pair_state(r["cached"], r["new"]),), reuse(), bool(r["same_answer"]), r["kind"]) for r in rows]
    near = np.array(index.overlaps([u.texts[0] for u in units]))
    for part in (0, 1):
        near |= np.array(index.overlaps([pair_texts(u.texts[0])[part].strip() for u in units]))
    return [u for u, dropped in zip(units, near, strict=True) if not dropped], int(near.sum())


def blind_figures(fit_rows: list, heads: dict[str, LexicalHead], path: Path) -> dict:
    """Per row, on the blind pairs: AUROC, and the pairs served at the hand-set cache threshold by kind."""
    units, dropped = blind_units(fit_rows, path)
    kinds = sorted({u.group for u in units})
    out = {"pairs": len(units), "same answer": int(sum(u.label for u in units)), "dropped": dropped, "rows": {}}
    labels = np.array([u.label for u in units])
    for label, (name, scores) in scores_by_row(measured_rows(heads), units).items():
        figures: dict = {"model": name, "auroc": auroc(labels, scores)}
        for same, key in ((False, "different-answer served"), (True, "same-answer served")):
            figures[key] = rate_at(scores[labels == same], CACHE_THRESHOLD).to_dict()
        figures["by kind"] = {
            kind: rate_at(np.array([s for u, s in zip(units, scores, strict=True) if u.group == kind]),
                          CACHE_THRESHOLD).to_dict()
            for kind in kinds
        }  # fmt: skip
        out["rows"][label] = figures
    out["kinds"] = {kind: bool(next(u.label for u in units if u.group == kind)) for kind in kinds}
    return out


def copy_committed_reader(out: Path) -> None:
    """The committed tuned reader's readout, layers and manifest copied to `out` (its lexical heads are the
    caller's to write)."""
    readout, layers, _ = tuned_files(TUNED_WEIGHTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(readout, out)
    shutil.copyfile(layers, tuned_files(out)[1])
    if readout.with_suffix(".json").exists():
        shutil.copyfile(readout.with_suffix(".json"), out.with_suffix(".json"))


def write_candidate(out: Path, heads: dict[str, LexicalHead], choice: dict) -> Path:
    """The committed tuned reader with the pair heads (each joined as `choice` says: {task: {"combine": ...}}) in
    `out`'s directory."""
    copy_committed_reader(out)
    chosen = [replace(heads[n], combine=choice[n]["combine"]) for n in QUESTIONS]
    save_heads(lexical_file(out), [*served_other_heads().values(), *chosen])
    return lexical_file(out)


def measure_blind(write: Path | None, analyzer: str, path: Path) -> dict:
    data = BenchData(embed=embed_texts_fp32)
    fit_rows, _ = recipe_rows(data)
    heads = pair_heads(fit_rows, analyzer)
    result = {"machine": machine(), "cache threshold": CACHE_THRESHOLD, "analyzer": analyzer, "file": path.name,
              **blind_figures(fit_rows, heads, path)}  # fmt: skip
    if write is not None:  # the candidate judged on the blind pairs: both heads joined by the mean
        result["written"] = str(write_candidate(write, heads, {key: {"combine": "mean"} for key in QUESTIONS}))
    return result


def blind_markdown(result: dict) -> str:
    rows = result["rows"]
    kinds = list(result["kinds"])
    lines = [
        f"`{result['command']}`, {result['machine']['when']}. {result['pairs']} blind-written pairs "
        f"({result['same answer']} one answer serves; {result['dropped']} dropped as near a train state), asked as "
        f"the gateway asks; served at the hand-set cache threshold ({result['cache threshold']:.2f}).",
        "",
        "| row | model | AUROC | different-answer served | same-answer served | "
        + " | ".join(f"{k} ({'same' if result['kinds'][k] else 'differs'})" for k in kinds)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(kinds),
    ]
    for label, row in rows.items():
        cells = [pct(row["by kind"][k]) for k in kinds]
        lines.append(f"| {label} | {row['model']} | {row['auroc']:.3f} | {pct(row['different-answer served'])} | "
                     f"{pct(row['same-answer served'])} | " + " | ".join(cells) + " |")  # fmt: skip
    return "\n".join(lines)


def measure(write: Path | None, analyzer: str) -> dict:
    data = BenchData(embed=embed_texts_fp32)
    fit_rows, validation = recipe_rows(data)
    heads = pair_heads(fit_rows, analyzer)
    choice = validation_choice(validation, heads)
    result = {
        "machine": machine(),
        "analyzer": analyzer,
        "selection": selection(fit_rows, analyzer),
        "validation": choice,
        "test": test_figures(data, heads, choice),
        "cache threshold": CACHE_THRESHOLD,
    }
    if write is not None:
        result["written"] = str(write_candidate(write, heads, choice))
    return result


def markdown(result: dict) -> str:
    lines = [
        f"`{result['command']}`, {result['machine']['when']}. Selection, on the train side only: out-of-fold AUROC "
        f"of {FOLDS} folds by cached text over the recipe's fit rows asking each question (bench: the task's own "
        "train pairs; rule-made: pairs of train-side templates).",
        "",
        "| question | rows (yes) | candidate | AUROC, all rows | bench rows | rule-made rows |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["selection"].items():
        for label in candidates(result["analyzer"]):
            cell = row[label]
            rule = f"{cell['rule-made']:.3f}" if "rule-made" in cell else "–"
            lines.append(f"| {name} | {row['rows']} ({row['yes']}) | {label} | {cell['all']:.3f} | "
                         f"{cell['bench']:.3f} | {rule} |")  # fmt: skip
    lines += [
        "",
        "How the pair head joins the readout, by AUROC on the recipe's validation rows asking each question (held out "
        "from both fits):",
        "",
        "| question | rows (yes) | readout | pair head alone | mean | chosen |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["validation"].items():
        a = row["auroc"]
        lines.append(f"| {name} | {row['rows']} ({row['yes']}) | {a['readout']:.3f} | {a['pair head, alone']:.3f} | "
                     f"{a['pair head, mean']:.3f} | {row['combine']} |")  # fmt: skip
    lines += [
        "",
        "The test side: cache-pairs' and cache-chats' test pairs and the rule-made pairs of held-out templates; "
        f"served at the hand-set cache threshold ({result['cache threshold']:.2f}).",
        "",
        "| row | model | AUROC cache-pairs | AUROC cache-chats | AUROC rule-made | different-answer served | "
        "same-answer served |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, row in result["test"].items():
        lines.append(f"| {label} | {row['model']} | {row['auroc cache-pairs']:.3f} | {row['auroc cache-chats']:.3f} | "
                     f"{row['auroc rule']:.3f} | {pct(row['different-answer served'])} | "
                     f"{pct(row['same-answer served'])} |")  # fmt: skip
    return "\n".join(lines)


TERMS = {"pair": "", "pair+order": " with the order term", "pair+order+same": " with the same-words term",
         "pair+order+same+cos": " with the cosine terms",
         "pair+order+same+cos:differ": " with the cosine terms where the words differ",
         "pair+order+same+block+cos:differ":
             " with the moved-block term and the cosine terms where the words differ"}  # fmt: skip
BLIND_NAMES = {BLIND.name: "first", BLIND2.name: "second", BLIND3.name: "third", BLIND4.name: "fourth",
               BLIND5.name: "fifth", BLIND6.name: "sixth", BLIND7.name: "seventh", BLIND8.name: "eighth"}  # fmt: skip


def title(analyzer: str, blind: Path | None) -> str:
    """The section's heading."""
    if blind is None:
        against = " against the readout and a words head" if analyzer == "pair" else ""
        return f"### The pair head{TERMS[analyzer]}{against} (generated)"
    which = BLIND_NAMES.get(blind.name, blind.stem)
    return f"### The pair head{TERMS[analyzer]} on the {which} blind-written pairs (generated)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the candidate here (a readout path, e.g. "
                        ".cache/pair/minilm-tuned.npz)")  # fmt: skip
    parser.add_argument("--analyzer", choices=PAIR_ANALYZERS, default="pair", help="the pair terms (default: pair)")
    parser.add_argument("--blind", type=Path, nargs="?", const=BLIND, help="read the rows on blind-written pairs "
                        f"only (default file: {BLIND.name}; with --write: write the candidate they judge, both pair "
                        "heads joined by the mean)")  # fmt: skip
    args = parser.parse_args()
    command = "python benchmarks/decide/cache_heads.py" + (
        f" --analyzer {args.analyzer}" if args.analyzer != "pair" else "")  # fmt: skip
    suffix = {"pair": "", "pair+order": "_order", "pair+order+same": "_same", "pair+order+same+cos": "_cos",
              "pair+order+same+cos:differ": "_cosdiffer", "pair+order+same+block+cos:differ": "_block"}[
        args.analyzer
    ]  # fmt: skip
    if args.blind:
        result = measure_blind(args.write, args.analyzer, args.blind)
        named = "" if args.blind == BLIND else f" benchmarks/decide/{args.blind.name}"
        result["command"] = command + f" --blind{named}" + (f" --write {args.write}" if args.write else "")
        numbers = {BLIND.name: "", BLIND2.name: "2", BLIND3.name: "3", BLIND4.name: "4", BLIND5.name: "5",
                   BLIND6.name: "6", BLIND7.name: "7", BLIND8.name: "8"}  # fmt: skip
        number = numbers.get(args.blind.name, "_" + args.blind.stem)
        name = "cache_heads_blind" + number + suffix
        publish(name, result, title(args.analyzer, args.blind) + "\n\n" + blind_markdown(result), path=TRAINING_DOC)
        return
    result = measure(args.write, args.analyzer)
    result["command"] = command + (f" --write {args.write}" if args.write else "")
    publish("cache_heads" + suffix, result, title(args.analyzer, None) + "\n\n" + markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
