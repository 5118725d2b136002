"""The trajectory page in a real browser: Debian's Chromium, headless, loads the page with filters in the URL fragment
and prints the document after the page's script ran. Checked: which questions are shown, that the counts at the top
follow the filters, and that a prediction holding a script stays text.

Without Chromium these tests skip and say why (`make test` installs it where apt-get is available); CI sets
SEARCH_R1_REQUIRE_BROWSER=1, under which a missing browser fails instead. SEARCH_R1_CHROMIUM names another binary."""
import os
import re
import shutil
import subprocess

import pytest

from search_r1_course.view import write_trajectory_page
from test_view import make_run

REQUIRED = os.environ.get("SEARCH_R1_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def chromium():
    exe = os.environ.get("SEARCH_R1_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe: return exe
    why = ("no Chromium on PATH: `make test` installs Debian's `chromium` where apt-get is available "
           "(or set SEARCH_R1_CHROMIUM to a Chromium binary)")
    if REQUIRED: pytest.fail(why + "; SEARCH_R1_REQUIRE_BROWSER=1 makes this a failure")
    pytest.skip(why)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    return write_trajectory_page(make_run(tmp_path_factory.mktemp("runs")/"cpu"))


def dump(chromium, page, fragment, profile):
    "The document of `page#fragment` after its scripts ran."
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
                        "--dump-dom", f"{page.as_uri()}{fragment}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "</html>" in r.stdout, f"chromium exited {r.returncode}:\n{r.stderr[-3000:]}"
    return r.stdout


def shown(dom):
    "Ids of the questions the script left visible."
    return [i for i, hidden in re.findall(r'<div class="q" data-type="[^"]*" data-id="([^"]*)"( hidden)?', dom) if not hidden]


def counts(dom):
    "Per stage: answers, right, wrong, EM and searches per answer, as the counts table at the top shows them."
    rows = re.findall(r'<tr data-stage="([^"]*)"><th>[^<]*</th>((?:<td class="\w+">[^<]*</td>)+)</tr>', dom)
    return {stage: re.findall(r">([^<]*)<", cells)[::2] for stage, cells in rows}


def test_filters_from_the_url_fragment(chromium, page, tmp_path):
    everything = dump(chromium, page, "", tmp_path)
    assert shown(everything) == ["q1", "q2", "q3", "q4"]
    assert re.search(r'id="shown">4<', everything) and '<body data-filters="">' in everything
    assert counts(everything)["base"] == ["4", "1", "3", "0.250", "0.75"]

    # a wrong 2-hop answer with one search, by any stage: q2 (base), q3 (GRPO)
    dom = dump(chromium, page, "#type=world_2hop&verdict=wrong&searches=1", tmp_path)
    assert shown(dom) == ["q2", "q3"]
    assert re.search(r'id="shown">2<', dom)
    assert counts(dom)["base"] == ["2", "0", "2", "0.000", "0.50"]
    assert counts(dom)["warm-start-grpo"] == ["2", "1", "1", "0.500", "1.50"]

    # the same asked of the trained stage only, its name as the page shows it
    dom = dump(chromium, page, "#stage=warm%20start%20%2B%20GRPO&verdict=wrong&searches=1", tmp_path)
    assert shown(dom) == ["q3", "q4"] and re.search(r'id="shown">2<', dom)
    assert 'data-filters="stage=warm-start-grpo&amp;verdict=wrong&amp;searches=1"' in dom

    # a failure category (12b_analysis) and a search bin
    assert shown(dump(chromium, page, "#failure=answer-not-retrieved&searches=0", tmp_path)) == ["q3"]
    assert shown(dump(chromium, page, "#verdict=right&searches=2", tmp_path)) == ["q2"]


def test_a_prediction_holding_a_script_stays_text(chromium, page, tmp_path):
    dom = dump(chromium, page, "#type=world_2hop", tmp_path)
    assert "<title>Trajectories: cpu</title>" in dom                  # the record's script did not run
    assert dom.count("<script") == 1                                  # and made no element: the page's own script only
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
