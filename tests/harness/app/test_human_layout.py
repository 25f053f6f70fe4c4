"""The static annotation page in a real headless Chromium: at 1366 x 768 the first view, both clips, the three
answer buttons and Submit are inside the viewport without scrolling (the screenshot is kept in
outputs/test-artifacts/human_static_1366x768.png); a mis-keyed answer is changed before moving on and the export
says it was corrected, with the first answer. Skips without playwright, Chromium or the human extra."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluate.reporting.browser import find_chromium
from tests.support import ROOT

pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")
pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")
pytest.importorskip("uvicorn", reason="the annotation app needs the human extra (pip install -e '.[human]')")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_chromium() is None,
                                                   reason="no Chromium executable (apt-get install chromium)")]

from tests.support.human_sim import StudyServer, login, tokens, wait_media


def _study(tmp_path: Path) -> Path:
    from evaluate.human.design import PlanRequest, plan_study
    from tests.support.human_data import make_runs

    runs = make_runs(tmp_path / "runs")
    return Path(plan_study(PlanRequest(runs, ["static"], seed=0), tmp_path / "s")["dir"])


@pytest.mark.parametrize("size", [(1366, 768), (1280, 720)])
def test_static_page_fits_a_laptop_screen(tmp_path, size):
    from playwright.sync_api import sync_playwright

    d = _study(tmp_path)
    token = next(iter(tokens(d).values()))
    w, h = size
    with StudyServer(d) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": w, "height": h})
            login(page, srv.url, token)
            wait_media(page)
            boxes = page.evaluate("""() => Array.from(document.querySelectorAll(
                '.first-view img, video, button.choice, #submit')).map(e => {const r = e.getBoundingClientRect();
                return {what: e.id || e.dataset.choice || e.tagName, top: r.top, bottom: r.bottom, left: r.left,
                        right: r.right, height: r.height};})""")
            shot = tmp_path / "layout.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    names = [b["what"] for b in boxes]
    assert names.count("IMG") >= 1 and "clipA" in names and "clipB" in names
    assert {"A", "T", "B", "submit"} <= set(names)
    for b in boxes:  # wholly inside the first screen, and not squeezed to nothing
        assert 0 <= b["top"] and b["bottom"] <= h and 0 <= b["left"] and b["right"] <= w, b
        assert b["height"] > 20, b
    clips = [b for b in boxes if b["what"] in ("clipA", "clipB")]
    assert min(c["height"] for c in clips) >= 0.3 * h  # the clips stay large enough to judge
    if size == (1366, 768):
        (ROOT / "outputs" / "test-artifacts").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, ROOT / "outputs" / "test-artifacts" / "human_static_1366x768.png")


def test_a_corrected_vote_is_exported_as_corrected(tmp_path):
    import csv

    from playwright.sync_api import sync_playwright

    from evaluate.human.analysis import export_votes
    from tests.support.human_sim import current_item, wait_next

    d = _study(tmp_path)
    aid, token = next(iter(tokens(d).items()))
    with StudyServer(d) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            login(page, srv.url, token)
            first = current_item(page)
            assert page.query_selector("#last-answer") is None  # nothing answered yet: nothing to change
            page.click("button.choice[data-choice='A']")  # the mis-keyed answer
            page.click("#submit")
            wait_next(page, first)
            second = current_item(page)
            assert "A is better" in page.inner_text("#last-answer")
            page.click("#change-last")  # back to the first item, its answer preselected
            page.wait_for_function("f => document.querySelector('#item').dataset.item === f", arg=first)
            assert page.get_attribute("button.choice[data-choice='A']", "aria-checked") == "true"
            page.keyboard.press("b")
            page.keyboard.press("Enter")
            wait_next(page, first)
            assert current_item(page) == second  # back where the annotator was
            assert "B is better" in page.inner_text("#last-answer")
            bottom = page.evaluate("() => document.querySelector('#submit').getBoundingClientRect().bottom")
            assert bottom <= 768  # the extra line keeps Submit on the first screen
        finally:
            browser.close()
    with open(export_votes(d)["csv"]) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1  # a correction changes the vote, it never adds one
    r = rows[0]
    assert (r["annotator"], r["item"], r["choice"]) == (aid, first, "B")
    assert r["corrected"] == "yes" and r["first_choice"] == "A"


def test_practice_pairs_are_shown_first_and_labelled(tmp_path):
    import json

    from playwright.sync_api import sync_playwright

    from evaluate.human.design import PlanRequest, plan_study
    from tests.support.human_data import make_runs
    from tests.support.human_sim import current_item

    runs = make_runs(tmp_path / "runs")
    d = Path(plan_study(PlanRequest(runs, ["static"], seed=0, practice=1), tmp_path / "s")["dir"])
    practice = [i["id"] for i in json.loads((d / "key.json").read_text())["items"] if i.get("practice")]
    token = next(iter(tokens(d).values()))
    with StudyServer(d) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            login(page, srv.url, token)
            assert current_item(page) == practice[0]
            assert "not counted" in page.inner_text("#practice")
            page.click("button.choice[data-choice='T']")
            page.click("#submit")
            page.wait_for_function("p => document.querySelector('#item').dataset.item !== p", arg=practice[0])
            assert page.query_selector("#practice") is None  # a real pair: no label
        finally:
            browser.close()
