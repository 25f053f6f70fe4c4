"""Simulated annotators for the human-study web app: a server subprocess (``python -m harness human serve``) and
playwright pages driving Debian's Chromium through the real pages with clicks and key presses.

A simulated annotator's opinion comes from the study's hidden key (only the simulation reads it; the page never
sees it): on a static pair it perceives a metric difference larger than ``perceive`` as a preference and anything
smaller as a tie, and errs (picks another answer) with probability ``p_err``; on a dynamic instance it starts from
the judge's verdict and flips the gate and each answer with probability ``p_flip``. Every choice is seeded by the
annotator and item, so a run is reproducible.

``python -m tests.support.human_sim study=DIR [study=DIR ...] [screenshots=DIR]`` runs three simulated annotators
through each study (starting and stopping its own server) and prints what they clicked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from tests.support import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StudyServer:
    """``python -m harness human serve study=<dir> port=<p>`` as a subprocess; :meth:`kill9` and :meth:`start`
    again on the same port."""

    def __init__(self, study: Path, port: Optional[int] = None, cwd: Optional[Path] = None):
        self.study, self.port, self.cwd = Path(study).resolve(), port or free_port(), cwd or ROOT
        self.proc: Optional[subprocess.Popen] = None
        self.log = b""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "StudyServer":
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "harness", "human", "serve", f"study={self.study}",
                                      f"port={self.port}"], cwd=self.cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        deadline = time.time() + timeout
        line = b""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            self.log += line
            if b"serving study" in line:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.decode(errors='replace')}")
        else:
            raise RuntimeError(f"server did not start: {self.log.decode(errors='replace')}")
        for _ in range(200):  # the socket listens before uvicorn serves: wait for a real answer
            try:
                import urllib.request

                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.read() == b"ok":
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("server never answered /healthz")

    def kill9(self) -> None:
        """SIGKILL: no shutdown handler runs, nothing is flushed by the server."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        if self.proc.stdout:
            self.log += self.proc.stdout.read()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)

    def __enter__(self) -> "StudyServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def tokens(study: Path) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in (Path(study) / "tokens.txt").read_text().splitlines() if line)


def _rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:16], 16))


@dataclass
class Opinion:
    """How a simulated annotator decides (see the module docstring)."""

    perceive: float = 0.02
    p_err: float = 0.2
    p_flip: float = 0.1

    def static(self, annotator: str, it: dict) -> str:
        d = it["A"]["value"] - it["B"]["value"]
        if not it["higher_is_better"]:
            d = -d
        truth = "T" if abs(d) <= self.perceive else ("A" if d > 0 else "B")
        r = _rng("static", annotator, it["id"])
        if r.random() < self.p_err:
            return str(r.choice([c for c in "ATB" if c != truth]))
        return truth

    def dynamic(self, annotator: str, it: dict) -> tuple[bool, Optional[list[str]]]:
        r = _rng("dynamic", annotator, it["id"])
        vlm = it["vlm"]
        started = bool(vlm["started"]) != (r.random() < self.p_flip)
        if not started:
            return False, None
        base = vlm["answers"] if vlm["started"] else it["references"]
        flip = {"yes": "no", "no": "yes"}
        return True, [flip[a] if r.random() < self.p_flip else a for a in base]


@dataclass
class Session:
    """What one annotator's page did: every vote as clicked (``method``: keys or clicks), every request URL and
    every text body the browser received (for the leak check)."""

    annotator: str
    clicked: list[dict] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)


def watch(page, sess: Session) -> None:
    def on_response(resp):
        sess.urls.append(resp.url)
        ctype = resp.headers.get("content-type", "")
        if any(t in ctype for t in ("html", "javascript", "css", "json", "text")):
            try:
                sess.bodies.append(resp.text())
            except Exception:  # a body the browser dropped (navigation): nothing to scan
                pass

    page.on("response", on_response)


def login(page, base: str, token: str) -> None:
    page.goto(base + "/")
    page.fill("#token", token)
    page.keyboard.press("Enter")
    page.wait_for_url(base + "/annotate", timeout=30000)
    page.wait_for_selector("#item, #finished", timeout=30000)


def current_item(page) -> Optional[str]:
    page.wait_for_selector("#item, #finished", timeout=30000)
    if page.query_selector("#finished"):
        return None
    return page.get_attribute("#item", "data-item")


def wait_next(page, prev: str) -> None:
    page.wait_for_function("prev => document.querySelector('#finished') || (document.querySelector('#item') && "
                           "document.querySelector('#item').dataset.item !== prev)", arg=prev, timeout=30000)


def wait_media(page) -> None:
    """Every video has decoded its first frame (readyState >= 2) and every image has loaded."""
    page.wait_for_function("() => Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 2) && "
                           "Array.from(document.querySelectorAll('img')).every(i => i.complete && i.naturalWidth > 0)",
                           timeout=30000)


def answer_item(page, kind: str, decision, use_keys: bool) -> None:
    """Answer the shown item with key presses or clicks, then submit (Enter or the button)."""
    if kind == "static":
        if use_keys:
            page.keyboard.press({"A": "a", "T": "t", "B": "b"}[decision])
            page.keyboard.press("Enter")
        else:
            page.click(f"button.choice[data-choice='{decision}']")
            page.click("#submit")
        return
    started, answers = decision
    if use_keys:
        page.keyboard.press("y" if started else "n")
        for a in answers or []:
            page.keyboard.press("y" if a == "yes" else "n")
        page.keyboard.press("Enter")
    else:
        page.click(f"button.gate[data-gate='{'yes' if started else 'no'}']")
        for i, a in enumerate(answers or []):
            page.click(f"li.q[data-q='{i}'] button.ans[data-a='{a}']")
        page.click("#submit")


def decide(opinion: Opinion, key_items: dict, annotator: str, item: str):
    it = key_items[item]
    return opinion.static(annotator, it) if "A" in it else opinion.dynamic(annotator, it)


def record(sess: Session, item: str, decision, method: str) -> None:
    if isinstance(decision, str):
        sess.clicked.append({"annotator": sess.annotator, "item": item, "choice": decision, "method": method})
    else:
        sess.clicked.append({"annotator": sess.annotator, "item": item, "started": decision[0],
                             "answers": decision[1], "method": method})


def run_annotator(page, base: str, token: str, sess: Session, key: dict, opinion: Opinion,
                  limit: Optional[int] = None, screenshot: Optional[Path] = None) -> int:
    """Answer up to ``limit`` items (all when None); alternates keys and clicks. Returns how many were answered."""
    key_items = {i["id"]: i for i in key["items"]}
    n = 0
    while limit is None or n < limit:
        item = current_item(page)
        if item is None:
            break
        kind = page.get_attribute("#item", "data-kind")
        use_keys = len(sess.clicked) % 2 == 0
        if screenshot is not None and n == 0:
            wait_media(page)
            if kind == "static":  # as an annotator would: jump to the end of the first return (timeline click)
                page.evaluate("() => { const v = document.querySelector('#clipA'); v.pause(); v.currentTime = "
                              "Math.max(0, parseFloat(document.querySelectorAll('.seg')[1]?.dataset.start || "
                              "v.duration) - 0.15); }")
            else:  # show the questions: open the gate with a click (this item is then answered by clicks)
                page.click("button.gate[data-gate='yes']")
                use_keys = False
            page.wait_for_timeout(600)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        d = decide(opinion, key_items, sess.annotator, item)
        answer_item(page, kind, d, use_keys)
        record(sess, item, d, "keys" if use_keys else "clicks")
        wait_next(page, item)
        sess.statuses.append(page.text_content("#status") or "")
        n += 1
    return n


def simulate(study: Path, server: StudyServer, opinion: Opinion = Opinion(),
             screenshot: Optional[Path] = None) -> list[Session]:
    """Three (or however many the study has) annotators complete the study, one after the other."""
    from playwright.sync_api import sync_playwright

    from evaluate.reporting.browser import find_chromium

    key = json.loads((Path(study) / "key.json").read_text())
    sessions = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=[
            "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required"])
        try:
            for i, (aid, tok) in enumerate(tokens(study).items()):
                ctx = browser.new_context(viewport={"width": 1360, "height": 1000})
                page = ctx.new_page()
                sess = Session(aid)
                watch(page, sess)
                login(page, server.url, tok)
                run_annotator(page, server.url, tok, sess, key, opinion, screenshot=screenshot if i == 0 else None)
                sessions.append(sess)
                ctx.close()
        finally:
            browser.close()
    return sessions


def forbidden_names(key: dict) -> list[str]:
    """Strings that would identify an arm: model and context names, arm ids, run names and item paths."""
    out = set()
    for it in key["items"]:
        arms = [it["A"], it["B"]] if "A" in it else [it["arm"]]
        for a in arms:
            out |= {a["model"], a["context"], a["arm"], a["run"], a["item_dir"], Path(a["item_dir"]).name}
    return sorted(out)


def leaks(texts: list[str], names: list[str]) -> list[str]:
    """Each name found in the texts as a word (``reference`` inside ``references`` would not count, nor would a
    case id that is also an English word unless it is one of the names)."""
    found = []
    for n in names:
        pat = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", re.IGNORECASE)
        hits = [t[max(0, m.start() - 30): m.end() + 30] for t in texts for m in pat.finditer(t)]
        if hits:
            found.append(f"{n!r}: {hits[:3]}")
    return found


def main(argv: list[str]) -> int:
    studies = [Path(a.split("=", 1)[1]) for a in argv if a.startswith("study=")]
    shots = next((Path(a.split("=", 1)[1]) for a in argv if a.startswith("screenshots=")), None)
    for st in studies:
        kind = json.loads((st / "study.json").read_text())["kind"]
        with StudyServer(st) as srv:
            sessions = simulate(st, srv, screenshot=shots / f"human_{kind}.png" if shots else None)
        for s in sessions:
            print(f"{st.name}: {s.annotator} answered {len(s.clicked)} item(s) "
                  f"({sum(c['method'] == 'keys' for c in s.clicked)} by keys, "
                  f"{sum(c['method'] == 'clicks' for c in s.clicked)} by clicks)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def evaluate_with_truth_judge(run_dirs: list[Path], cwd: Path, extra: tuple[str, ...] = (),
                              judge: Optional[dict] = None, timeout: float = 900) -> None:
    """Evaluate reference-model runs with the tests' fake judge server answering each dynamic video from the
    model's ground truth (``adapters.reference.events.ground_truth``): a stand-in for a real VLM judge."""
    from adapters.reference.events import ground_truth
    from evaluate.judge import JudgeSettings, build_request, images_digest, load_item_input
    from tests.support import run_cli
    from tests.support.fake_judge import FakeJudgeServer

    table = {}
    for run in run_dirs:
        for d in sorted(p.parent for p in Path(run).glob("reference/*/seed-*/*/*/meta.json")):
            meta = json.loads((d / "meta.json").read_text())
            if (meta.get("case") or {}).get("family") != "dynamic":
                continue
            inp = load_item_input(d, 8)
            body, _ = build_request(inp, JudgeSettings.from_dict({"base_url": "http://x/v1", **(judge or {})}))
            table[images_digest(body)] = ground_truth(meta["generation"]["dynamic_event"], meta["camera"]["phases"],
                                                      inp.frame_indices, meta["case"]["event"]["questions"])
    with FakeJudgeServer(lambda b: (table[images_digest(b)]["started"], table[images_digest(b)]["answers"]),
                         lifetime_s=timeout) as srv:
        for run in run_dirs:
            r = run_cli(["stage=evaluate", f"run={Path(run).resolve()}", f"evaluate.judge.base_url={srv.base_url}",
                         "progress=false", *[f"evaluate.judge.{k}={v}" for k, v in (judge or {}).items()], *extra],
                        cwd, timeout=timeout)
            if r.returncode != 0:
                raise RuntimeError(f"evaluation of {run} failed:\n{r.stderr[-3000:]}")
