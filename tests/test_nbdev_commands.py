"""Both spellings of nbdev's export command work in the course's environment and write the same package.

nbdev 3 installs `nbdev-export`; most nbdev tutorials (and the course's own description) say `nbdev_export`, which
`pyproject.toml` installs as a second console script for the same function."""
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

try: import tomllib
except ModuleNotFoundError: tomllib = pytest.importorskip("tomli")  # Python 3.10

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _script(name: str) -> Path:
    path = BIN/name
    if not path.is_file():
        pytest.fail(f"{path} is missing: reinstall the course (`make dev`, or `pip install -e '.[dev]'`) so that "
                    "pyproject.toml's console scripts are installed")
    return path


def test_both_spellings_name_the_same_function():
    nbdev_scripts = {ep.name: ep.value for ep in distribution("nbdev").entry_points if ep.group == "console_scripts"}
    ours = tomllib.loads((ROOT/"pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert ours["nbdev_export"] == nbdev_scripts["nbdev-export"]
    assert "from nbdev.doclinks import nbdev_export" in _script("nbdev_export").read_text()  # installed as declared


def _export(tmp_path: Path, command: str) -> Path:
    "Run `command` in a copy of the repository's notebooks and settings; the package folder it wrote."
    work = tmp_path/command
    work.mkdir()
    shutil.copy(ROOT/"pyproject.toml", work)
    shutil.copytree(ROOT/"nbs", work/"nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = {k: v for k, v in os.environ.items() if k != "IN_TEST"}  # nbdev_export does nothing while IN_TEST is set
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([str(_script(command))], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return work/"search_r1_course"


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_both_spellings_export_the_same_files(tmp_path):
    hyphen, underscore = _export(tmp_path, "nbdev-export"), _export(tmp_path, "nbdev_export")
    names = _files(hyphen)
    assert {"data.py", "world.py", "_modidx.py"} <= set(names), names
    assert _files(underscore) == names
    _, differ, errors = filecmp.cmpfiles(hyphen, underscore, names, shallow=False)
    assert differ == [] and errors == []
    # what was exported is the notebooks' code: every notebook with a `default_exp` gave its module
    exported = {n for n in names if n.endswith(".py") and not n.startswith("_")}
    expected = {f"{m.group(1)}.py" for nb in (ROOT/"nbs").glob("*.ipynb")
                for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "code"
                for m in re.finditer(r"^#\|\s*default_exp\s+(\S+)", "".join(cell["source"]), re.M)}
    assert expected and expected <= exported, sorted(expected - exported)
