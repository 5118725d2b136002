"""Make `pytest --nbval` and `nbdev-test` agree on which notebook cells run.

* nbdev directives rule both runners: a cell that nbdev-test would skip (``#| eval: false``,
  a cell carrying a test flag from ``tst_flags`` such as ``#| slow`` or ``#| cuda``, a
  notebook with ``skip_exec``) is skipped by nbval too. Force flagged cells to run with
  ``pytest --nb-flags slow`` (or ``NB_FLAGS=slow``).
* ``nbdev-clean`` sets every ``execution_count`` to null but keeps outputs. Such cells
  are treated as run, so their stored outputs are compared instead of being rejected as
  "Unrun reference cell has outputs".
* stderr (warnings, progress bars) and widget outputs (notebook progress bars such as transformers'
  "Loading weights") are never compared: they depend on library versions and terminal width, not on
  what the notebook computes, and they are not stored (the notebooks keep neither).
"""
import os
from pathlib import Path

import pytest

os.environ.setdefault("IN_TEST", "1")  # inherited by the nbval kernel, as nbdev-test sets it


def pytest_addoption(parser):
    parser.addoption("--nb-flags", default=os.environ.get("NB_FLAGS", ""),
                     help="space-separated nbdev test flags whose cells should run (e.g. 'slow')")


def _nbdev_runs(path: Path, forced):
    "Absolute indices of the cells nbdev-test would execute in the notebook at `path`."
    from nbdev.config import get_config
    from nbdev.test import nb_test_cells
    flags = get_config(path.parent).tst_flags.split()
    return {c.idx_ for c in nb_test_cells(path, skip_flags=flags, force_flags=forced)}


WIDGET = "application/vnd.jupyter.widget-view+json"


def _compared(outputs):
    "The outputs nbval compares: neither stderr nor widgets (progress bars, whose stored text is a frozen first frame)."
    return [o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
            and WIDGET not in o.get("data", {})]


def _patch_nbval():
    from nbval.plugin import IPyNbCell
    if getattr(IPyNbCell, "_course_patched", False): return
    orig = IPyNbCell.compare_outputs
    def compare_outputs(self, test, ref, skip_compare=None):
        return orig(self, _compared(test), _compared(ref), skip_compare)
    IPyNbCell.compare_outputs = compare_outputs
    IPyNbCell._course_patched = True


def pytest_collection_modifyitems(config, items):
    try: from nbval.plugin import IPyNbCell
    except ImportError: return
    _patch_nbval()
    forced = config.getoption("--nb-flags").split()
    runs, code_idx = {}, {}
    for item in items:
        if not isinstance(item, IPyNbCell): continue
        path = Path(str(item.parent.fspath))
        if path not in runs:
            runs[path] = _nbdev_runs(path, forced)
            code_idx[path] = [i for i, c in enumerate(item.parent.nb.cells) if c.cell_type == "code"]
        absolute = code_idx[path][item.cell_num]
        if absolute not in runs[path]:
            item.add_marker(pytest.mark.skip(reason="nbdev would not run this cell (eval: false or a test flag)"))
            item.options["skip"] = True
        elif item.cell.execution_count is None and item.cell.outputs:
            item.cell.execution_count = item.cell_num + 1  # cleaned by nbdev-clean: compare, don't reject
