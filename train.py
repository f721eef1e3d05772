"""Train Tacotron2 with length-aware batching (Ge et al., Interspeech 2021).

    python train.py                                        # the embedded demo corpus, CPU-sized
    python train.py --hparams batching=ssb,dbs=true,br=true,dataset=ljspeech
    python train.py --resume runs/demo                     # continue the last checkpoint
    python train.py --hparams dataset=filelist,...,init_checkpoint=runs/demo   # fine-tune: a new run
    torchrun --nproc_per_node=4 train.py --hparams dataset=ljspeech

Read top to bottom: resolve the config, build the run, then one epoch = plan -> train ->
(validate) -> log -> checkpoint. All settings and their defaults are in hparams.yaml; the parts
live in training/ (config, run, step, loop, checkpoint, rundir).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from batching.errors import UserError
from data.corpora import corpus_filelists
from training import distributed as dist_utils
from training.checkpoint import EpochPosition, ResumePoint, RunState, remove_stale_temporaries, resume_point
from training.config import RunConfig, resolve_config
from training.datacheck import check_data, plan_summary
from training.hparams import HParamsError, load_hparams, resume_hparams
from training.loop import StopRequested, TrainingDiverged, finish_epoch, prepare_run_dir, train_epoch, validate
from training.run import Run, build_run, describe, pick_device
from training.rundir import check_writable, has_checkpoint, hold_run_dir, write_metrics
from training.warm_start import WarmStart, warm_start


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hparams", default="", help="comma-separated key=value overrides of hparams.yaml")
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its last checkpoint "
        "(from its beginning if it was killed before the first one)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the data (headers only) and print what an epoch will do; no training",
    )
    return parser.parse_args(argv)


def resolve(args: argparse.Namespace) -> tuple[dict[str, Any], RunConfig, ResumePoint | None, WarmStart | None]:
    """Fresh run: hparams.yaml + overrides. Resume: the run's own hparams + the few allowed changes.
    Returns the flat hparams, the typed config, where the last checkpoint left the run (or None)
    and the weights init_checkpoint starts it from (None without one, or when a checkpoint of the
    run itself is there to resume). Every key and value is validated before the run directory is
    judged, so a typo is reported as such whatever output_dir holds."""
    ckpt = None
    if args.resume:
        ckpt, stored = resume_point(Path(args.resume))
        hp = resume_hparams(stored, args.hparams) | {"output_dir": str(args.resume)}
    else:
        hp = load_hparams(args.hparams)
    cfg = resolve_config(hp)
    check_writable(Path(cfg.train.output_dir))
    init = warm_start(hp, cfg.model, cfg.mel) if ckpt is None else None
    return hp, cfg, None if ckpt is None else ResumePoint.from_checkpoint(ckpt), init


def hold_output_dir(output_dir: str):
    """The main process (torchrun's rank 0; the others share its folder) holds the output folder
    for its whole life, before anything in it is written, so that two runs never write one folder."""
    return hold_run_dir(Path(output_dir)) if dist_utils.launch_rank() == 0 else nullcontext()


def refuse_overwrite(args: argparse.Namespace, hp: dict[str, Any]) -> None:
    """A fresh run into a folder that holds an ended run's checkpoint needs overwrite=true."""
    if not args.resume and has_checkpoint(Path(hp["output_dir"])) and not hp["overwrite"]:
        raise HParamsError(
            f"{hp['output_dir']} already holds a run. Continue it with --resume "
            f"{hp['output_dir']}, or start over with --hparams overwrite=true (or another output_dir)"
        )


def train(run: Run, state: RunState, position: EpochPosition | None) -> None:
    """The epochs still to run: plan -> train -> validate -> log -> checkpoint. A rank that dies
    or stalls makes the others raise dist_utils.RankFailure (after collective_timeout_s at most)."""
    train_cfg = run.train
    with dist_utils.rank_failures(run.info, run.run_dir, state):
        for epoch in range(state.epoch, train_cfg.epochs):
            record = train_epoch(run, state, epoch, position)
            if (epoch + 1) % train_cfg.validate_every == 0 or epoch + 1 == train_cfg.epochs:
                record.update(validate(run, epoch))
            finish_epoch(run, state, record)
        if run.info.enabled:
            digest = dist_utils.check_same_parameters(run.parts.core, run.info)
            run.log(f"parameters identical on all {run.info.world_size} ranks (sha1 {digest[:12]})")


def check_only(cfg: RunConfig, init: WarmStart | None) -> None:
    """`--check`: the data check, the warm start's plan and the epoch plan's figures, without
    training or writing a run (batch_size=auto plans at the paper's B0: the probe needs the run's GPU)."""
    pick_device(cfg.train.device, local_rank=0)  # device=cuda where no GPU is seen: an error now
    paths = corpus_filelists(cfg.data, cfg.mel)
    report = check_data(paths, cfg.mel, cfg.batching, cfg.data, progress=cfg.train.progress)
    print(f"data check passed{' (cached)' if report.from_cache else ''}")
    if cfg.auto_batch_size:
        print(
            f"batch_size=auto: B0 = {cfg.batching.batch_size} here, the paper's (a GPU run probes for its own "
            "when it starts)"
        )
    for line in report.text.lines():
        print(line)
    if init is not None:
        print(init.line)
    print(plan_summary(cfg.batching, cfg.model.n_frames_per_step, paths[0], cfg.mel, report))


def finished(state: RunState, epochs: int, run_dir: str) -> bool:
    """Whether a resumed run has trained all its epochs already: then it says so, with nothing to train,
    and heals what a kill after its last checkpoint left (metrics.jsonl an epoch short, a temporary)."""
    if state.epoch < epochs:
        return False
    if dist_utils.launch_rank() == 0:
        remove_stale_temporaries(Path(run_dir))
        write_metrics(Path(run_dir), state.records)
        print(
            f"{run_dir} has finished all {epochs} epochs: nothing left to do. To train it further: "
            f"python train.py --resume {run_dir} --hparams epochs=N (N > {epochs})"
        )
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        hp, cfg, resume, init = resolve(args)
        if args.check:
            check_only(cfg, init)
            return 0
        with hold_output_dir(cfg.train.output_dir):
            if resume is not None and finished(resume.state, cfg.train.epochs, args.resume):
                return 0
            refuse_overwrite(args, hp)
            if init is not None and dist_utils.launch_rank() == 0:
                print(init.line)
            run = build_run(cfg, hp, resume, init)
            state, position = (resume.state, resume.position) if resume else (RunState(), None)
            del resume, init  # the weights are in the model now: no frame keeps the checkpoint's copy alive
            return run_training(args, cfg, run, state, position)
    except UserError as err:  # a user's mistake: one line, no traceback (programming errors keep theirs)
        print(f"error: {err}", file=sys.stderr)
        dist_utils.shutdown()
        return 2
    except dist_utils.RankFailure as err:  # another rank died or stalled: one line, its own output says why
        print(f"error: {err}", file=sys.stderr)
        return 1


def run_training(
    args: argparse.Namespace, cfg: RunConfig, run: Run, state: RunState, position: EpochPosition | None
) -> int:
    """Train the built run from `state` (mid-epoch at `position`); the exit status."""
    prepare_run_dir(run, state, fresh=position is None)
    describe(run, state, resumed=args.resume is not None)
    run.stop.install()
    try:
        train(run, state, position)
    except StopRequested:
        run.log(
            f"stopped at epoch {state.epoch} step {state.step_in_epoch}; "
            f"continue with: python train.py --resume {run.run_dir}"
        )
        return 0 if cfg.train.stop_after_steps else 130
    except UserError as err:  # bad data met only now (e.g. a clip's mel computed on the fly); the checkpoint stays
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (TrainingDiverged, dist_utils.RankFailure) as err:  # each message names the last good checkpoint
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        run.logger.close()
        dist_utils.shutdown()
        run.stop.restore()
    return 0


if __name__ == "__main__":
    sys.exit(main())
