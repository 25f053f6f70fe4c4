"""The annotation pages in a real headless Chromium, on a laptop screen: 1366 x 657 (a 768-pixel screen less the
browser's bars). Every item of a static study with departure pairs (each clip with its own first view), practice
and attention checks, and the dynamic page with its questions open: the media, every answer button and Submit
inside the window without scrolling (screenshots kept in outputs/test-artifacts/human_*_1366x657.png). Each item
opens at the top with its status line in view; a key typed after a click answers the next question and never
overwrites the clicked one; a mis-keyed answer is changed before moving on; a closed study takes no more answers.
One browser for the module; the studies are planned once. Skips without playwright, Chromium or the human extra."""

from __future__ import annotations

import json
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

from tests.support.human_sim import StudyServer, current_item, login, tokens, wait_media, wait_next  # noqa: E402

W, H = 1366, 657
ARTIFACTS = ROOT / "outputs" / "test-artifacts"
#: what a static page must show at once: the first view(s), both clips, the three answers, the player and Submit
STATIC_BOXES = ".first-view img, video, button.choice, #play, #restart, #submit, #question"
#: the dynamic page once its gate says yes: the event, the clip, both gate buttons, every Yes / No, Submit
DYNAMIC_BOXES = ".event, video, #timeline, button.gate, button.ans, #submit"
_BOXES = """sel => Array.from(document.querySelectorAll(sel)).map(e => {const r = e.getBoundingClientRect();
  return {what: e.id || e.dataset.choice || e.dataset.gate || e.dataset.a || e.className || e.tagName,
          top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height};})"""


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, Path]:
    """A static study with departure pairs, practice and checks; a dynamic one with practice and checks."""
    from evaluate.human.design import PlanRequest, plan_study
    from tests.support.human_data import make_runs

    root = tmp_path_factory.mktemp("layout")
    runs = make_runs(root / "runs", departure=True)
    static = plan_study(PlanRequest(runs, ["static", "departure.visible"], seed=0, checks=1, practice=1),
                        root / "static")
    dynamic = plan_study(PlanRequest(runs, ["dynamic"], seed=0, checks=1, practice=1), root / "dynamic")
    return {"static": Path(static["dir"]), "dynamic": Path(dynamic["dir"])}


@pytest.fixture(scope="module")
def browser():
    from evaluate.reporting.browser import chromium

    with chromium() as b:
        yield b


def _fresh(study: Path, tmp_path: Path) -> Path:
    """A copy of a planned study without votes or sessions."""
    d = tmp_path / study.name
    shutil.copytree(study, d, ignore=shutil.ignore_patterns("votes.sqlite*"))
    return d


def _page(browser, width: int = W, height: int = H):
    """A fresh page that collects page and console errors. Close its context inside the server's ``with``: a
    clip still loading when the server stops logs ERR_CONNECTION_RESET, which is not the page's fault."""
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return ctx, page, errors


def _on_screen(page, selector: str) -> list[dict]:
    """Every element of ``selector``, asserted wholly inside the window and not squeezed to nothing."""
    boxes = page.evaluate(_BOXES, selector)
    for b in boxes:
        assert 0 <= b["top"] and b["bottom"] <= H and 0 <= b["left"] and b["right"] <= W, b
        assert b["height"] > 12, b
    return boxes


def _keep(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))


def test_every_static_item_fits_the_window_and_opens_at_the_top(studies, browser, tmp_path):
    d = _fresh(studies["static"], tmp_path)
    public = {i["id"]: i for i in json.loads((d / "study.json").read_text())["items"]}
    per_side = {i for i, it in public.items() if it.get("first_view_per_side")}
    assert len(per_side) >= 4  # the departure pairs: two first views each
    ctx, page, errors = _page(browser)
    seen = []
    with StudyServer(d) as srv:
        login(page, srv.url, tokens(d)["a1"])
        while (item := current_item(page)) is not None:
            wait_media(page)
            assert page.evaluate("() => window.scrollY") == 0  # opens at the top ...
            status = page.evaluate("() => document.querySelector('#status').getBoundingClientRect().bottom")
            assert 0 < status <= H  # ... with its status line in view
            boxes = _on_screen(page, STATIC_BOXES)
            names = [b["what"] for b in boxes]
            assert names.count("IMG") == (2 if item in per_side else 1) and {"clipA", "clipB"} <= set(names)
            assert {"A", "T", "B", "submit", "play"} <= set(names)
            clips = [b for b in boxes if b["what"] in ("clipA", "clipB")]
            assert min(c["height"] for c in clips) >= 0.3 * H  # the clips stay large enough to judge
            if item in per_side and "human_departure_1366x657.png" not in str(seen):
                _keep(page, "human_departure_1366x657.png")
                seen.append("human_departure_1366x657.png")
            seen.append(item)
            if len(seen) % 2:
                page.click("button.choice[data-choice='T']")
                page.click("#submit")
            else:
                page.keyboard.press("t")
                page.keyboard.press("Enter")
            wait_next(page, item)
        ctx.close()
    assert set(seen) >= set(public) and errors == []


def test_an_item_opens_at_the_top_after_a_scrolled_one(studies, browser, tmp_path):
    """On a window too short for the page, the annotator scrolls down to Submit; the next item opens at the top,
    its status line ("Saved.") and question in view."""
    d = _fresh(studies["static"], tmp_path)
    ctx, page, errors = _page(browser, W, 320)
    with StudyServer(d) as srv:
        login(page, srv.url, tokens(d)["a1"])
        item = current_item(page)
        page.click("button.choice[data-choice='A']")
        page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
        assert page.evaluate("() => window.scrollY") > 0  # the page is taller than this window
        page.click("#submit")
        wait_next(page, item)
        page.wait_for_function("() => window.scrollY === 0")
        top = page.evaluate("() => document.querySelector('#question').getBoundingClientRect().top")
        assert 0 <= top < 320 and page.text_content("#status") == "Saved."
        ctx.close()
    assert errors == []


def _answers(page) -> list:
    return page.evaluate("() => Array.from(document.querySelectorAll('li.q')).map(li => "
                         "(li.querySelector('button.ans.selected') || {dataset: {}}).dataset.a || null)")


def _focus(page):
    return page.evaluate("() => { const f = document.querySelector('li.q.focus'); return f ? +f.dataset.q : -1; }")


def test_the_dynamic_page_fits_and_keys_never_overwrite_a_click(studies, browser, tmp_path):
    """Every Yes / No and Submit on screen once the gate is open; a click answers its question and hands the keys
    to the next unanswered one, so a key typed next answers that one; once every question is answered a stray key
    changes nothing; the vote stored is what the page showed."""
    from evaluate.human.store import read_votes

    d = _fresh(studies["dynamic"], tmp_path)
    ctx, page, errors = _page(browser)
    with StudyServer(d) as srv:
        login(page, srv.url, tokens(d)["a1"])
        item = current_item(page)
        wait_media(page)
        assert page.evaluate("() => window.scrollY") == 0
        _on_screen(page, ".event, video, button.gate, #submit")
        page.click("button.gate[data-gate='yes']")
        assert len(_on_screen(page, DYNAMIC_BOXES)) >= 8 * 2 + 2 + 3
        _keep(page, "human_dynamic_1366x657.png")
        assert _focus(page) == 0
        page.click("li.q[data-q='0'] button.ans[data-a='yes']")  # a click on question 1 ...
        assert _focus(page) == 1  # ... hands the keys to question 2 (the old page kept them on 1)
        page.keyboard.press("n")  # ... so this key answers question 2, not question 1 again
        assert _answers(page)[:2] == ["yes", "no"] and _focus(page) == 2
        page.click("li.q[data-q='5'] button.ans[data-a='no']")  # out of order: the keys go to question 7
        assert _focus(page) == 6
        for q in (6, 7, 2, 3):  # keys take 7, 8, then wrap to the first unanswered (3, 4)
            assert _focus(page) == q
            page.keyboard.press("y")
        page.click("li.q[data-q='4'] button.ans[data-a='no']")  # the last open question, by a click
        want = ["yes", "no", "yes", "yes", "no", "no", "yes", "yes"]
        assert _answers(page) == want and _focus(page) == -1  # all answered: no question has the keys
        page.keyboard.press("n")  # a stray key overwrites nothing ...
        assert _answers(page) == want and "Every question is answered" in page.text_content("#status")
        page.keyboard.press("ArrowUp")  # ... until a question is picked on purpose
        page.keyboard.press("n")
        want[7] = "no"
        assert _answers(page) == want
        page.keyboard.press("Enter")
        wait_next(page, item)
        ctx.close()
    assert errors == []
    (vote,) = read_votes(d)
    assert (vote["item"], vote["started"], vote["answers"]) == (item, True, want)


def test_a_corrected_vote_is_exported_as_corrected(studies, browser, tmp_path):
    import csv

    from evaluate.human.analysis import export_votes

    d = _fresh(studies["static"], tmp_path)
    ctx, page, errors = _page(browser)
    with StudyServer(d) as srv:
        login(page, srv.url, tokens(d)["a1"])
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
        _on_screen(page, "#submit, button.choice, #cancel-change")  # the extra line keeps Submit on screen
        page.keyboard.press("b")
        page.keyboard.press("Enter")
        wait_next(page, first)
        assert current_item(page) == second  # back where the annotator was
        assert "B is better" in page.inner_text("#last-answer")
        ctx.close()
    assert errors == []
    with open(export_votes(d)["csv"]) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1  # a correction changes the vote, it never adds one
    r = rows[0]
    assert (r["annotator"], r["item"], r["choice"]) == ("a1", first, "B")
    assert r["corrected"] == "yes" and r["first_choice"] == "A" and r["role"] == "practice"


def test_practice_first_labelled_and_a_closed_study_takes_no_more(studies, browser, tmp_path):
    """The practice pair comes first, labelled; after the organiser closes the study (``human close``, the server
    still running) the next Submit is refused and the page says the study is closed."""
    from evaluate.human.store import close_study, read_votes

    d = _fresh(studies["static"], tmp_path)
    practice = [i["id"] for i in json.loads((d / "key.json").read_text())["items"] if i.get("practice")]
    ctx, page, errors = _page(browser)
    with StudyServer(d) as srv:
        login(page, srv.url, tokens(d)["a1"])
        assert current_item(page) == practice[0]
        assert "not counted" in page.inner_text("#practice")
        page.click("button.choice[data-choice='T']")
        page.click("#submit")
        wait_next(page, practice[0])
        assert page.query_selector("#practice") is None  # a real pair: no label
        close_study(d)
        page.click("button.choice[data-choice='A']")
        page.click("#submit")
        page.wait_for_selector("#closed")
        assert "closed" in page.inner_text("#closed") and page.query_selector("#submit") is None
        ctx.close()
    assert [v["item"] for v in read_votes(d)] == [practice[0]]  # the refused vote was not stored
    assert [e for e in errors if "409" not in e] == []  # the browser logs the refused request; nothing else
