"""The package stays readable: no module over 450 lines, no class over 120, and every import points back to an earlier
chapter (a chapter's code may use what earlier chapters built, never what later ones will).

The limits are the course's reading targets: a module a learner reads in one sitting, a class that states one idea.
`_modidx.py` is nbdev's index, not code to read. A module or class that is still over its limit is listed in
`OVER_LIMIT` with the size it has now: it may shrink, never grow, and leaves the list once it fits."""
import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT/"search_r1_course"
MODULE_LINES, CLASS_LINES = 450, 120
OVER_LIMIT: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PACKAGE.glob("*.py")) if p.name not in ("_modidx.py", "__init__.py")}


def _chapter(path: Path) -> str:
    "The notebook a module is exported from, as nbdev writes it in the module's header."
    m = re.search(r"File to edit: \.\./nbs/(\S+)\.ipynb", path.read_text(encoding="utf-8"))
    assert m, f"{path.name}: no 'File to edit: ../nbs/....ipynb' header; is it exported by nbdev?"
    return m.group(1)


def _limit(name: str, default: int) -> int: return max(default, OVER_LIMIT.get(name, 0))


def test_modules_fit_in_one_sitting():
    too_long = {}
    for p in _modules().values():
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > _limit(p.name, MODULE_LINES): too_long[p.name] = n
    assert not too_long, f"modules over {MODULE_LINES} lines (or over the size OVER_LIMIT records): {too_long}"


def test_classes_state_one_idea():
    too_long = {}
    for p in _modules().values():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                n, key = node.end_lineno - node.lineno + 1, f"{p.name}:{node.name}"
                if n > _limit(key, CLASS_LINES): too_long[key] = n
    assert not too_long, f"classes over {CLASS_LINES} lines (or over the size OVER_LIMIT records): {too_long}"


def test_over_limit_lists_only_what_is_still_over():
    "An entry of OVER_LIMIT leaves the list once its module or class fits (so that it cannot grow back unnoticed)."
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in _modules().values()}
    for p in _modules().values():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef): sizes[f"{p.name}:{node.name}"] = node.end_lineno - node.lineno + 1
    stale = sorted(k for k in OVER_LIMIT if sizes.get(k, 0) <= (CLASS_LINES if ":" in k else MODULE_LINES))
    assert not stale, f"these fit now: remove them from OVER_LIMIT: {stale}"


def _imported(tree: ast.AST) -> set[str]:
    "The package modules a module imports, anywhere in it (imports inside functions too)."
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1: names |= {mod} if mod else {a.name for a in node.names}
            elif mod == "search_r1_course": names |= {a.name for a in node.names}
            elif mod.startswith("search_r1_course."): names.add(mod.split(".")[1])
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("search_r1_course.")}
    return names


def test_imports_point_to_earlier_chapters():
    modules = _modules()
    chapters = {name: _chapter(p) for name, p in modules.items()}
    forward = [f"{name} ({chapters[name]}) imports {dep} ({chapters[dep]})"
               for name, p in modules.items() for dep in sorted(_imported(ast.parse(p.read_text(encoding="utf-8"))))
               if dep in chapters and dep != name and chapters[dep] > chapters[name]]
    assert not forward, "imports that point forward, to a later chapter:\n" + "\n".join(forward)


CORE_CHAPTERS = ("00_world", "01_formats", "01b_data", "02c_search", "04_actions", "04_protocol", "05_policy", "06_generate",
                 "07_rollout", "08_reward", "09_masking", "11_trainer", "12_eval", "13_experiment")
CORE_WORDS = 3000


def _prose_words(chapter: str) -> int:
    nb = json.loads((ROOT/"nbs"/f"{chapter}.ipynb").read_text(encoding="utf-8"))
    return sum(len("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_core_chapters_read_in_one_sitting():
    "The core chapters (the reading path of Search-R1 itself) each hold under 3,000 words of prose; speed-ups and long records live elsewhere."
    long = {c: n for c in CORE_CHAPTERS if (n := _prose_words(c)) >= CORE_WORDS}
    assert not long, f"core chapters with {CORE_WORDS} words of prose or more (move details to an engine-room chapter or an appendix): {long}"
