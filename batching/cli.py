"""Command-line analyser: stats, table1, sweep, calibrate and plot on a lengths file.

--hparams is the recipe's: in a checkout, hparams.yaml's defaults and the dataset's preset come
first (batching/recipe.py), so the same string plans the same epoch as `train.py --check` on the
same training filelist. Every command says on stderr which lengths it planned (its --split), where
its defaults came from, and warns of settings that make a strategy degenerate on these lengths.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from .analysis import (
    SWEPT,
    calibrate,
    calibrated_line,
    describe,
    fixed_points,
    resolve_width,
    sweep,
    sweep_grid,
    table1,
)
from .degenerate import degenerate_settings
from .errors import UserError
from .lengths import read_lengths
from .planner import plan_epoch
from .recipe import RECIPE_HPARAMS, recipe_batching
from .split import train_split


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        lengths = read_lengths(args.lengths)
        total = lengths.size
        lengths = lengths[train_split(lengths.size, args.split, args.split_seed)]
        config, defaults = recipe_batching(args.hparams, None if args.defaults == "none" else Path(args.defaults))
        print(_split_line(args, lengths.size, total), file=sys.stderr)
        print(f"defaults: {defaults}, then --hparams", file=sys.stderr)
        config = config if args.seed is None else dataclasses.replace(config, seed=args.seed)
        config, calibration = resolve_width(lengths, config)  # target_zpr / target_pair_repeat: lrf set here
        if calibration:
            print(calibrated_line(calibration), file=sys.stderr)
        for warning in degenerate_settings(lengths.size, config, calibrated=calibration is not None):
            print(f"warning: {warning}", file=sys.stderr)
        result, text = args.run(args, lengths, config)
    except (UserError, OSError) as error:  # a user's mistake, or a file that cannot be read or written
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ImportError as error:  # matplotlib, for sweep and plot only
        print(f"error: {error}; install it: pip install 'tacotron2-batching[plots]'", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else text)
    return 0


def _parser() -> argparse.ArgumentParser:
    command = "python -m batching" if sys.argv[0].endswith("__main__.py") else Path(sys.argv[0]).name
    parser = argparse.ArgumentParser(prog=command, description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    specs = [
        ("stats", _stats, 1.0, "ZPR, ABL, batch count and randomness of one configuration"),
        ("table1", _table1, 0.8, "the paper's Table 1 and DBS rows, next to the paper's figures"),
        (
            "sweep",
            _sweep,
            0.8,
            "ZPR and ABL against LRF, bucket size, bins and bucket interval (Fig. 2), "
            "and ZPR against pair_repeat for every strategy: PNGs and table",
        ),
        (
            "calibrate",
            _calibrate,
            0.8,
            "lrf, bucket size, bins and bucket interval whose ZPR is closest to, not above, a target",
        ),
        ("plot", _plot, 1.0, "the batches of one epoch as bars (Figs. 1 and 3): PNG"),
    ]
    for name, run, split, help_text in specs:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(run=run)
        _common_arguments(sub, split)
        if name in ("sweep", "plot"):
            sub.add_argument("--out", type=Path, default=Path("."), help="output folder (default .)")
    sub = commands.choices["stats"]
    sub.add_argument("--epoch", type=int, default=0)
    sub = commands.choices["calibrate"]
    target = sub.add_mutually_exclusive_group()
    target.add_argument("--target-zpr", type=float, help="target ZPR in percent (default: SSB's at --hparams lrf)")
    target.add_argument(
        "--target-pair-repeat", type=float, help="target pair_repeat (randomness between epochs, 0-1) instead of a ZPR"
    )
    sub = commands.choices["plot"]
    sub.add_argument("--epoch", type=int, default=0)
    sub.add_argument("--strategies", default="rand,sb,ssb", help="one panel each (default rand,sb,ssb)")
    sub.add_argument("--samples", type=int, default=0, help="plot a random subset of this many samples (0 = all)")
    return parser


def _split_line(args, kept: int, total: int) -> str:
    """Which lengths the command plans: all of the file, or the training part of its seeded split."""
    if kept == total:
        return f"lengths: all {total:,} of {args.lengths} (--split {args.split})"
    return (
        f"lengths: {kept:,} of {total:,} in {args.lengths}, the training part of the seeded split "
        f"(--split {args.split}, --split-seed {args.split_seed}; --split 1 plans all)"
    )


def _common_arguments(sub: argparse.ArgumentParser, split: float) -> None:
    """The arguments every command takes: the lengths, the recipe's hparams and defaults, the split and seeds."""
    sub.add_argument(
        "--lengths",
        required=True,
        type=Path,
        help="filelist (path|text|frames), TSV with a 'frames' column, or one length per line",
    )
    sub.add_argument(
        "--hparams",
        default="",
        help="the recipe's hparams, as train.py takes them; the batching ones count (e.g. batching=ssb,lrf=0.1)",
    )
    sub.add_argument(
        "--defaults",
        default=str(RECIPE_HPARAMS) if RECIPE_HPARAMS.is_file() else "none",
        help="the hparams.yaml whose defaults and dataset presets --hparams starts from (default: the "
        "checkout's); none: BatchingConfig's own (the paper's: rand, no dbs, no br)",
    )
    sub.add_argument(
        "--split",
        type=float,
        default=split,
        help=f"train fraction of a seeded random split (default {split}; 1.0 = all)",
    )
    sub.add_argument("--split-seed", type=int, default=0, help="seed of the split (default 0)")
    sub.add_argument("--seed", type=int, default=None, help="planning seed (default: the hparams' seed)")
    sub.add_argument("--json", action="store_true", help="print JSON instead of text")


def _stats(args, lengths, config):
    figures = describe(lengths, config, args.epoch)
    result = dict(config=config.to_dict(), **figures)
    settings = ", ".join(f"{k}={v}" for k, v in config.to_dict().items() if v is not None)
    rows = [dict(figure=key, value=_figure(key, value)) for key, value in figures.items()]
    return result, f"{settings}\n\n" + _markdown(rows, ["figure", "value"])


def _figure(key: str, value):
    """A stats cell: percentages and frame means with 2 decimals, fractions with 4, counts with separators."""
    if isinstance(value, float):
        return f"{value:.4f}" if key.startswith("pair_repeat") or key.endswith("fraction") else f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else value


def _table1(args, lengths, config):
    rows = table1(lengths, config.seed)
    return rows, _markdown(rows, ["name", "n_batches", "zpr", "abl", "paper_n_batches", "paper_zpr", "paper_abl"])


def _sweep(args, lengths, config):
    from .plots import plot_sweep, plot_tradeoff

    curves = sweep(lengths, config, sweep_grid(lengths, config.batch_size), with_randomness=True)
    points = fixed_points(lengths, config)
    args.out.mkdir(parents=True, exist_ok=True)
    png, tradeoff = args.out / "sweep.png", args.out / "tradeoff.png"
    plot_sweep(curves, png, {p: getattr(config, p) for p in SWEPT})
    plot_tradeoff(
        curves,
        points,
        tradeoff,
        f"{lengths.size:,} lengths, B0 = {config.batch_size}{', DBS' if config.dbs else ''} (stream: always a budget)",
    )
    rows = [_sweep_row(p, pt["value"], pt) for p, curve in curves.items() for pt in curve]
    rows += [_sweep_row(name, "-", pt) for name, pt in points.items()]
    text = _markdown(rows, ["param", "value", "zpr", "abl", "pair_repeat"]) + f"\n\nwrote {png}\nwrote {tradeoff}"
    return dict(png=str(png), tradeoff_png=str(tradeoff), curves=curves, points=points), text


def _sweep_row(param: str, value, point: dict) -> dict:
    return dict(
        param=param,
        value=value,
        zpr=round(point["zpr"], 2),
        abl=round(point["abl"], 2),
        pair_repeat=round(point["pair_repeat"], 4),
    )


def _calibrate(args, lengths, config):
    metric, target = (
        ("pair_repeat", args.target_pair_repeat) if args.target_pair_repeat is not None else ("zpr", args.target_zpr)
    )
    if target is None:
        target = describe(lengths, config.with_strategy("ssb"))["zpr"]
    best = calibrate(lengths, config, target, metric)
    columns = ["batching", "param", "value", "zpr", "abl"] + (["pair_repeat"] if metric == "pair_repeat" else [])
    rows = [
        dict(batching=name, param=k, value=v[k], **{c: _rounded(v.get(c), c) for c in columns[3:]})
        for name, v in best.items()
        for k in v
        if k in SWEPT
    ]
    notes = "".join(
        f"\n{name}: {v['note']}: ZPR {v['zpr']:.2f}%, ABL {v['abl']:.1f}" for name, v in best.items() if "note" in v
    )
    table = _markdown(rows, columns)
    words = "ZPR {:.2f}%" if metric == "zpr" else "pair_repeat {:.4f}"
    return {f"target_{metric}": target, **best}, f"target {words.format(target)}\n\n{table}\n{notes}".rstrip("\n")


def _rounded(value, column: str):
    """A table cell: 2 decimals, 4 for pair_repeat (it is small); None as it is."""
    return value if value is None else round(value, 4 if column == "pair_repeat" else 2)


def _plot(args, lengths, config):
    from .plots import plot_batches

    if args.samples:
        lengths = lengths[np.sort(np.random.default_rng(args.seed).permutation(lengths.size)[: args.samples])]
    panels, summary = {}, {}
    for name in args.strategies.split(","):
        panel = config.with_strategy(name.strip())
        if panel.plans_blocks:
            raise UserError(
                f"plot draws padded batches; {panel.batching}'s block plan is not drawn: use `stats` "
                "for its padding and steps, or plot another strategy"
            )
        batches = plan_epoch(lengths, panel, args.epoch)
        summary[name] = describe(lengths, panel, args.epoch)
        panels[
            f"{name.upper()}{'-DBS' if panel.dbs else ''}: {len(batches)} batches, "
            f"ZPR {summary[name]['zpr']:.2f}%, ABL {summary[name]['abl']:.1f}"
        ] = batches
    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "batches.png"
    plot_batches(lengths, panels, png)
    return dict(png=str(png), panels=summary), "\n".join(panels) + f"\n\nwrote {png}"


def _markdown(rows: list[dict], columns: list[str]) -> str:
    cell = lambda v: "-" if v is None else str(v)  # noqa: E731
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)
