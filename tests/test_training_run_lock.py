"""One run per output folder: a run holds its folder for its life (an flock the OS releases)."""

import os
import signal
import subprocess
import sys

import train
from tests.kit import REPO, tiny
from training.rundir import LAST, LOCK, RunDirError, hold_run_dir

HOLDER = (
    "import sys, time; from pathlib import Path; from training.rundir import hold_run_dir\n"
    "with hold_run_dir(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(120)\n"
)


def start_holder(run_dir) -> subprocess.Popen:
    """Another process that holds run_dir, as a training run would."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_into_a_held_folder_stops_naming_the_folder_and_the_holder(tmp_path, capsys, demo_corpus):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LAST).write_bytes(b"the first run's checkpoint")
    holder = start_holder(run_dir)
    try:
        for extra in ("epochs=1,overwrite=true", "epochs=1"):
            assert train.main(["--hparams", tiny(tmp_path, extra, demo_corpus)]) == 2
            err = capsys.readouterr().err
            assert err.startswith("error: ") and err.count("\n") == 1
            assert f"output_dir {run_dir} is in use by another run (process {holder.pid}" in err
        assert (run_dir / LAST).read_bytes() == b"the first run's checkpoint"  # the first run is unharmed
        assert sorted(p.name for p in run_dir.iterdir()) == sorted([LAST, LOCK])
    finally:
        holder.kill()
        holder.wait()


def test_kill_9_leaves_nothing_to_clean_up(tmp_path):
    holder = start_holder(tmp_path)
    try:
        try:
            with hold_run_dir(tmp_path):
                raise AssertionError("a held folder was taken twice")
        except RunDirError as err:
            assert str(holder.pid) in str(err)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    with hold_run_dir(tmp_path):  # released by the operating system
        assert (tmp_path / LOCK).read_text().strip() == str(os.getpid())


def test_the_lock_ends_with_its_holder_and_check_takes_none(tmp_path, demo_corpus):
    """A run after the first ended (fresh or --resume, tests/test_training_run.py) takes the folder
    again; --check writes nothing there and runs beside a training run. The lock file goes with
    its holder, a stale one a killed run left included, and so does an empty folder it created."""
    with hold_run_dir(tmp_path / "run"):
        assert train.main(["--check", "--hparams", tiny(tmp_path, "epochs=1", demo_corpus)]) == 0
    assert not (tmp_path / "run").exists()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK).write_text("12345\n")  # a lock file left by a killed run is taken over, and removed
    with hold_run_dir(tmp_path / "run"):
        (tmp_path / "run" / LAST).write_text("a checkpoint")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LAST]
