"""Debian packages a test needs beyond the venv (test helper): installed with apt-get on first use
when missing, as the host CLIs are installed from npm on first use (the tests run as root in CI)."""

from __future__ import annotations

import os
import shutil
import subprocess


def ensure(package: str, program: str) -> str:
    """The path of ``program`` (a name on PATH or an absolute path), installing ``package`` from
    the Debian archive first when it is missing (``apt-get update`` only when the package index
    does not know it yet)."""
    found = shutil.which(program) or (program if os.path.isabs(program) and os.path.exists(program) else None)
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", package]
    if subprocess.run(command, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=True)
        subprocess.run(command, env=env, capture_output=True, check=True)
    found = shutil.which(program) or (program if os.path.exists(program) else None)
    assert found, f"{package} installed, but {program} is not there"
    return found
