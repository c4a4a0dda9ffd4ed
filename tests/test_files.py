"""The atomic write and the file locks (memsearch.files), on real files and real processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memsearch.files import atomic_write, lock_file, lock_is_held, try_lock


def test_atomic_write_creates_directories_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state.json"
    atomic_write(target, "one")
    atomic_write(target, b"two")
    assert target.read_text() == "two"
    assert os.listdir(target.parent) == ["state.json"]


def test_atomic_write_modes(tmp_path: Path) -> None:
    private = tmp_path / "config.toml"
    atomic_write(private, "k = 1\n", private=True, keep_mode=True, fsync=True)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    private.chmod(0o640)
    atomic_write(private, "k = 2\n", private=True, keep_mode=True)
    assert stat.S_IMODE(private.stat().st_mode) == 0o640  # an existing file keeps its mode
    umask = os.umask(0o022)
    os.umask(umask)
    plain = tmp_path / "plain.json"
    atomic_write(plain, "{}")
    assert stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask


def test_atomic_write_failure_keeps_the_old_file_and_removes_the_temp(tmp_path: Path) -> None:
    target = tmp_path / "d" / "state"
    target.mkdir(parents=True)  # os.replace of a file over a directory fails
    with pytest.raises(OSError):
        atomic_write(target, "x")
    assert target.is_dir()
    assert os.listdir(target.parent) == ["state"]


HOLDER = textwrap.dedent(
    """
    import sys, time
    from memsearch.files import lock_file
    with lock_file(sys.argv[1]):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


def test_locks_between_processes(tmp_path: Path) -> None:
    lock = tmp_path / "run" / "x.lock"
    assert not lock_is_held(lock)  # no file: not held, nothing created
    assert not lock.exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), "1.0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert lock_is_held(lock)
        assert try_lock(lock) is None
        started = time.monotonic()
        with lock_file(lock):  # waits for the holder to let go
            waited = time.monotonic() - started
            assert waited > 0.3
        fd = try_lock(lock)
        assert fd is not None
        assert lock_is_held(lock)  # a probe from another descriptor sees our lock
        os.close(fd)
        assert not lock_is_held(lock)
    finally:
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()


def test_try_lock_never_follows_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text("")
    link = tmp_path / "link.lock"
    link.symlink_to(real)
    with pytest.raises(OSError):
        try_lock(link)
    with pytest.raises(OSError):
        lock_is_held(link)
