"""A tuned reader over the mean of several runs' fine-tuned layers (a "layer soup"), for the seed study.

Retrains of the tuned recipe with another seed move its goals by as much as recipe changes did (docs/training.md,
"Seed spread"). Averaging the weights of runs fine-tuned from one start (Wortsman et al., 2022, "Model soups") is one
way to take the spread out without serving several models: this script writes the mean of the given runs' layers and
trains the reader phase over it (`jevserve train --tuned`'s second phase, same examples and settings); measure it
with `python benchmarks/decide/reader_goals.py --model tuned:OUT.npz`.

Given one layer file, it trains the reader phase alone over those layers, which is how a change to the reader phase
is studied apart from the layer phase: `--family-scale agent-action-risk=8,rules:tool-calls=8` weights the tool
gate's families eight times more in the reader's loss (`ReaderConfig.family_scale`; docs/training.md, "Weighting
the tool gate in the reader phase").

Run: .venv/bin/python benchmarks/decide/layer_soup.py --layers A.layers.npz,B.layers.npz \
         --out .cache/soup/minilm-tuned.npz [--seed N] [--family-scale PREFIX=FACTOR,...] [--composed-tool-calls] \
         [--composed-injections] [--pasted-lists] [--composed-personas] [--composed-harm] [--prefixed-harm]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from jevserve.bench.data import BenchData
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.train.reader import ReaderConfig
from jevserve.train.tuned import TunedConfig
from jevserve.train.tuned_data import tuned_examples
from jevserve.train.tuned_run import train_tuned_model


def family_scale(text: str) -> tuple[tuple[str, float], ...]:
    """"a=8,b:c=2" -> (("a", 8.0), ("b:c", 2.0))."""
    pairs = []
    for part in text.split(","):
        prefix, sep, factor = part.rpartition("=")
        if not sep or not prefix:
            raise argparse.ArgumentTypeError(f"expected PREFIX=FACTOR, got {part!r}")
        pairs.append((prefix, float(factor)))
    return tuple(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", required=True, help="comma-separated .layers.npz files of tuned runs")
    parser.add_argument("--out", type=Path, required=True, help="the readout to write (its layers go beside it)")
    parser.add_argument("--seed", type=int, default=0, help="the reader phase's seed (default: %(default)s)")
    parser.add_argument("--family-scale", type=family_scale, default=(), metavar="PREFIX=FACTOR,...",
                        help="weight the examples of families starting with PREFIX FACTOR times more in the reader "
                        "phase (default: none)")
    parser.add_argument("--composed-tool-calls", action="store_true",
                        help="add the tool calls composed from templates (train/tool_calls_composed.py)")
    parser.add_argument("--composed-injections", action="store_true",
                        help="add the injections composed from parts (train/injections_composed.py)")
    parser.add_argument("--pasted-lists", action="store_true",
                        help="add the later train-side turns that paste a list (train/everyday_negatives.py)")
    parser.add_argument("--composed-personas", action="store_true",
                        help="add the persona prompts composed from parts (train/personas_composed.py)")
    parser.add_argument("--composed-harm", action="store_true",
                        help="add the harmful and harmless technical requests composed from parts "
                        "(train/harm_composed.py)")
    parser.add_argument("--prefixed-harm", action="store_true",
                        help="add the harm tasks' examples behind a persona or override line (train/perturb.py)")
    args = parser.parse_args()
    layers = [Path(p) for p in args.layers.split(",")]
    missing = [str(p) for p in layers if not p.is_file()]
    if missing:
        raise SystemExit(f"no layer file at {', '.join(missing)}: train them with `jevserve train --tuned --out ...`")
    data = BenchData(embed=embed_texts_fp32)
    config = TunedConfig(reader=replace(ReaderConfig(), seed=args.seed, family_scale=args.family_scale))
    extra = tuned_examples(data, composed_calls=args.composed_tool_calls,
                           composed_injections=args.composed_injections, pasted_lists=args.pasted_lists,
                           composed_personas=args.composed_personas, composed_harm=args.composed_harm,
                           prefixed_harm=args.prefixed_harm)
    _, manifest = train_tuned_model(
        list(TASKS.values()), out=args.out, config=config, data=data, extra=extra,
        average_layers=layers,
    )  # fmt: skip
    print(f"wrote {args.out} ({manifest['num_examples']} examples, {manifest['train_seconds']} s)")


if __name__ == "__main__":
    main()
