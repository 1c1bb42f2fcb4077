"""`dev.sh`, the README's set-up: it names a Python older than 3.11 before pip fails deep in a
dependency, rebuilds a venv that is broken or was made by an older Python instead of failing on
it again and again, and installs only the demo's extra for the demo and the CLI (no lint or test
tools). Run on a copy of the script with a stand-in Python, so nothing is downloaded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A stand-in `python`: answers dev.sh's version questions as Python VERSION does, makes a "venv"
# whose python is itself and whose lockguard prints a line, and logs every pip call.
FAKE = """#!/bin/sh
case "$*" in
  *"version_info[:2]"*) echo {version} ;;
  *"sys.exit(sys.version_info"*) [ "{version}" != 3.10 ] ;;
  "-m venv "*) mkdir -p "$3/bin"; cp "$0" "$3/bin/python"
      printf '#!/bin/sh\\necho lockguard-from-the-venv\\n' > "$3/bin/lockguard"
      chmod +x "$3/bin/lockguard" ;;
  *) echo "$*" >> "{log}" ;;
esac
"""


def checkout(tmp_path: Path, version: str) -> tuple[Path, Path]:
    """A copy of dev.sh and pyproject.toml, and a stand-in Python `version`."""
    for name in ("dev.sh", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    python = tmp_path / f"python{version}"
    python.write_text(FAKE.format(version=version, log=tmp_path / "pip.log"))
    python.chmod(0o755)
    return tmp_path, python


def dev(where: Path, python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(where / "dev.sh"), *args],
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(python)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_python_older_than_3_11_is_named_before_anything_is_installed(tmp_path: Path) -> None:
    where, python = checkout(tmp_path, "3.10")
    done = dev(where, python, "demo")
    assert done.returncode == 2
    assert "is Python 3.10; lockguard needs Python 3.11 or newer" in done.stderr
    assert "PYTHON=python3.11 ./dev.sh demo" in done.stderr
    assert not (where / ".venv").exists()
    assert not (where / "pip.log").exists()


def test_a_broken_venv_is_rebuilt_and_the_demo_gets_only_its_extra(tmp_path: Path) -> None:
    where, python = checkout(tmp_path, "3.12")
    broken = where / ".venv" / "bin"
    broken.mkdir(parents=True)
    (broken / "python").write_text("#!/bin/sh\nexit 1\n")  # half-made by a failed install
    (broken / "python").chmod(0o755)
    done = dev(where, python, "lockguard", "--version")
    assert done.returncode == 0, done.stderr
    assert ".venv is broken or from a Python older than 3.11: rebuilding it" in done.stderr
    assert done.stdout.strip() == "lockguard-from-the-venv"
    installs = (where / "pip.log").read_text().splitlines()
    assert installs[-1].endswith("-e .[demo]")
    again = dev(where, python, "lockguard", "--version")  # installed once: not again
    assert "installing" not in again.stderr
    assert (where / "pip.log").read_text().splitlines() == installs
