"""`jevserve train`'s studies of the embedded models: leave-one-task-out rows, encoder probes, open questions."""

from __future__ import annotations

import argparse
import sys


def run_heldout(args: argparse.Namespace, tasks: list, config) -> int:
    """Leave-one-task-out: one model per task without its sources, each scored on its task; a results row."""
    from jevserve.bench.answers_cache import default_answers_dir
    from jevserve.bench.data import BenchData
    from jevserve.bench.results import write_result
    from jevserve.decide.embedder import Embedder
    from jevserve.decide.onnx_build import cache_dir
    from jevserve.train.heldout import READER_HELDOUT_ROW, head_backends, score_heldout, train_heldout_heads

    embedder = Embedder("int8")
    data = BenchData(embed=embedder.embed)
    if args.reader:
        from jevserve.decide.token_embedder import TokenEmbedder
        from jevserve.train.heldout import train_heldout_readers

        models = train_heldout_readers(
            tasks,
            data=data,
            embedder=TokenEmbedder("int8"),
            config=config,
            weights_dir=cache_dir() / "heldout-readers",
            progress=not args.no_progress,
        )
        row = {"row": READER_HELDOUT_ROW, "command": "jevserve train --heldout --reader && jevserve bench board"}
    else:
        heads = train_heldout_heads(
            tasks,
            data=data,
            embedder=embedder,
            config=config,
            weights_dir=cache_dir() / "heldout-heads",
            progress=not args.no_progress,
        )
        models, row = head_backends(tasks, heads, embedder), {}
    document = score_heldout(
        tasks,
        models,
        data=data,
        answers_dir=default_answers_dir(),
        serve_backends=args.serve_backends,
        progress=not args.no_progress,
        **row,
    )
    path = write_result(args.results, document)
    print(
        f"held-out average {document['average']['score']:.1f} over {document['average']['num_tasks']} tasks -> {path}"
    )
    return 0


def run_probe(tasks: list, encoder: str = "minilm") -> int:
    """Per-task logistic probes on a frozen encoder next to the readouts' test AUROC."""
    from jevserve.bench.answers_cache import AnswersCache, default_answers_dir
    from jevserve.bench.data import BenchData
    from jevserve.decide.e5 import E5Embedder, EncoderMissingError
    from jevserve.decide.embedded import embedded_fingerprint
    from jevserve.decide.embedder import Embedder
    from jevserve.decide.encoder import TRAINED_NAME, ZERO_SHOT_NAME, row_name
    from jevserve.train.probe import embedding_probe, probe_result_path, write_embedding_probe

    answers_dir, version = default_answers_dir(), embedded_fingerprint()
    readouts = {
        row: (name, AnswersCache(answers_dir, name, version))
        for row, name in (("zero_shot", row_name(ZERO_SHOT_NAME)), ("trained", row_name(TRAINED_NAME)))
    }
    try:
        other = None if encoder == "minilm" else E5Embedder()
    except EncoderMissingError as exc:
        print(f"jevserve train: {exc}", file=sys.stderr)
        return 2
    minilm = Embedder("int8")  # the cosine default rules read MiniLM whichever encoder is probed
    embedder = other or minilm
    command = "jevserve train --probe" + ("" if encoder == "minilm" else f" --probe-encoder {encoder}")
    result = embedding_probe(tasks, BenchData(embed=minilm.embed), embedder, readouts, command=command)
    result_path = probe_result_path(encoder)
    write_embedding_probe(result, result_path)
    missing = sorted(
        {
            f"{name} on {task}"
            for task, row in result["tasks"].items()
            for name in readouts
            if row[f"{name}_auroc_test"] is None
        }
    )
    if missing:
        print(
            f"no AUROC for {', '.join(missing)} (answers not cached, or one class only): run the bench "
            "commands in docs/training.md, then this again"
        )
    print(f"wrote {result_path}")
    return 0


def run_open_questions() -> int:
    """Ask the embedded readouts the hand-written open yes/no questions."""
    from jevserve.decide.embedded import embedded_backends
    from jevserve.train.open_questions import RESULT, open_questions_result, write_open_questions

    backends = embedded_backends()
    try:
        result = open_questions_result(backends)
    finally:
        for backend in backends:
            backend.close()
    write_open_questions(result)
    for name, row in result["models"].items():
        print(
            f"{name}: pairs ordered right {row['pairs_ordered_right']:.2f}, AUROC {row['auroc']:.2f}, "
            f"mean P(yes) {row['mean_p_yes_when_yes']:.2f} (yes) vs {row['mean_p_yes_when_no']:.2f} (no)"
        )
    print(f"wrote {RESULT}")
    return 0
