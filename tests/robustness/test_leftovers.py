"""A tuning run killed with SIGKILL leaves its measurement folder; the next run removes the
folders whose owner process is gone (issue 17, class 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tilecraft.tuning.measure import SCRATCH_PREFIX, LocalRunner, remove_orphaned_scratch


def test_folders_of_dead_owners_are_removed_and_live_ones_kept(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    dead = tmp_path / f"{SCRATCH_PREFIX}{child.pid}-abc"
    alive = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    foreign = tmp_path / f"{SCRATCH_PREFIX}nopid"
    for folder in (dead, alive, foreign):
        folder.mkdir()
        (folder / "ref.npy").write_bytes(b"x")
    assert remove_orphaned_scratch(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and foreign.exists()


def test_a_runner_names_its_folder_with_its_pid():
    with LocalRunner() as runner:
        assert runner.scratch.name.startswith(f"{SCRATCH_PREFIX}{os.getpid()}-")
        assert runner.scratch.is_dir()
    assert not runner.scratch.exists()
