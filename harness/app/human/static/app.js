// The annotation pages of a human study (harness/app/human/server.py). No framework, no network resources.
// Static items: the first view, then clips A and B side by side playing in sync; answer A / Tie / B.
// Dynamic items: the clip with its phase timeline and the event; the start gate first, then eight yes/no questions.
// Every page kind fits a 1366 x 657 window (a 768-pixel laptop screen less the browser) with its answers and Submit
// on screen (tests/harness/app/test_human_layout.py measures every item); each item opens at the top.
"use strict";

const $ = (sel, el = document) => el.querySelector(sel);
const $$ = (sel, el = document) => Array.from(el.querySelectorAll(sel));
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") e.textContent = v; else if (k === "dataset") Object.assign(e.dataset, v); else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
};

let current = null;   // the item shown
let answer = null;    // static: "A" | "T" | "B"; dynamic: {gate: "yes"|"no"|null, answers: [8 x "yes"|"no"|null], focus}
                      // focus: the question a Y / N key answers, -1 when none (every question answered: a key then
                      // changes nothing until the annotator picks a question with the arrows or a click)
let shownAt = 0;
let clientId = "";
let busy = false;
let syncTimer = null;
let correcting = false;  // the item shown is the last answered one, being changed (POST /api/correct)

function randomId() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, x => x.toString(16).padStart(2, "0")).join("");
}

async function api(path, body) {
  const opt = body === undefined ? {} : {method: "POST", headers: {"Content-Type": "application/json"},
                                         body: JSON.stringify(body)};
  const r = await fetch(path, {credentials: "same-origin", cache: "no-store", ...opt});
  let data = {};
  try { data = await r.json(); } catch (e) { /* not JSON */ }
  if (r.status === 401 && path !== "/api/login") { location.href = "/"; throw new Error("log in first"); }
  if (!r.ok) { const e = new Error(data.error || ("HTTP " + r.status)); e.status = r.status; throw e; }
  return data;
}

function status(text, cls = "") {
  const s = $("#status");
  s.textContent = text;
  s.className = cls;
}

// ------------------------------------------------------------------------------------------------------ login
function initLogin() {
  const f = $("#login");
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    $("#login-error").textContent = "";
    try {
      await api("/api/login", {token: $("#token").value.trim()});
      location.href = "/annotate";
    } catch (e) {
      $("#login-error").textContent = e.message === "unknown token" ? "This token is not valid." : e.message;
    }
  });
}

// -------------------------------------------------------------------------------------------------- annotate
async function loadNext() {
  stopSync();
  const s = await api("/api/next");
  const main = $("#main");
  main.replaceChildren();
  const prog = el("div", {id: "progress", "aria-live": "polite"},
                  el("progress", {id: "progressbar", max: String(s.total), value: String(s.done)}),
                  el("span", {id: "progress-text", text: `${s.done} / ${s.total} done`}));
  const who = el("div", {id: "who"}, el("span", {text: `Annotator ${s.annotator}`}), " ",
                 el("button", {id: "logout", type: "button", text: "Log out"}));
  // one line: progress, how to answer (folded), the last answer, who; the item gets the rest of the screen
  const keys = s.kind === "static" ? "keys: A / T / B choose, Enter submits, Space plays" :
    "keys: Y / N answer, ↑ / ↓ pick a question, Enter submits, Space plays";
  const help = el("details", {id: "help"}, el("summary", {text: `How to answer (${keys})`}),
                  el("p", {id: "instructions", text: s.instructions}));
  const bar = el("div", {id: "bar"}, prog, help);
  if (s.last) bar.append(lastAnswerBar(s.last));
  bar.append(who);
  main.append(bar);
  $("#logout").addEventListener("click", async () => { await api("/api/logout", {}); location.href = "/"; });
  correcting = false;
  if (!s.item) {
    current = null;
    main.append(s.closed ?
      el("section", {id: "closed"}, el("h2", {text: "This study is closed. Thank you!"}),
         el("p", {text: "The organiser no longer takes answers; you can close this page."})) :
      el("section", {id: "finished"}, el("h2", {text: "All done. Thank you!"}),
         el("p", {text: "Every item is answered; you can close this page."})));
    window.scrollTo(0, 0);
    return;
  }
  current = s.item;
  shownAt = performance.now();
  clientId = randomId();
  if (current.kind === "static") renderStatic(current, main); else renderDynamic(current, main);
  window.scrollTo(0, 0);  // every item opens at the top, its status line and question in view
}

// The last answer can be changed until the next item is answered (the server keeps the audit trail).
function describe(last) {
  if (last.choice) return {A: "A is better", T: "Tie", B: "B is better"}[last.choice];
  if (!last.started) return "the event did not start";
  return "event started; " + last.answers.filter(a => a === "yes").length + " of 8 questions answered yes";
}

function lastAnswerBar(last) {
  const b = el("button", {id: "change-last", type: "button", text: "Change it (U)"});
  b.addEventListener("click", () => showForCorrection(last));
  return el("span", {id: "last-answer", class: "last"}, `Your last answer: ${describe(last)}. `, b);
}

function showForCorrection(last) {
  stopSync();
  const main = $("#main");
  const shown = $("#item") || $("#finished");
  if (shown) shown.remove();
  const bar = $("#last-answer");
  bar.replaceChildren(`Changing your last answer (was: ${describe(last)}). `,
                      el("button", {id: "cancel-change", type: "button", text: "Keep it"}));
  $("#cancel-change").addEventListener("click", () => loadNext());
  correcting = true;
  current = last.item;
  shownAt = performance.now();
  if (current.kind === "static") {
    renderStatic(current, main);
    chooseStatic(last.choice);
  } else {
    renderDynamic(current, main);
    setGate(last.started ? "yes" : "no");
    (last.answers || []).forEach((a, i) => answerQuestion(i, a));
  }
  window.scrollTo(0, 0);
}

function submitButton() {
  const b = el("button", {id: "submit", type: "button", disabled: "", text: "Submit (Enter)"});
  b.addEventListener("click", submit);
  return b;
}

// ------------------------------------------------------------------------------------------------------ static
function practiceLabel(it) {
  return it.practice ? el("span", {id: "practice", class: "practice",
                                   text: "Practice item: get to know the page; this answer is not counted."}) : "";
}

// The first view(s) and the two clips in one row sized to the window's height: one shared first view beside A and
// B, or (departure pairs: each clip's own first view) each side's first view beside its clip.
function staticMedia(it) {
  const fig = (src, cap) => el("figure", {class: "first-view"}, el("img", {src: src, alt: cap}),
                                el("figcaption", {text: cap}));
  const clip = side => {
    const v = el("video", {id: "clip" + side, src: it.clips[side], muted: "", playsinline: "", loop: "",
                           preload: "auto", autoplay: ""});
    v.muted = true;
    return el("figure", {class: "clip"}, v, el("figcaption", {class: "side", text: side}));
  };
  if (it.first_view_per_side) {
    return el("div", {class: "media per-side"},
              el("div", {class: "side-group"}, fig(it.first_view[0], "First view of A"), clip("A")),
              el("div", {class: "side-group"}, clip("B"), fig(it.first_view[1], "First view of B")));
  }
  return el("div", {class: "media"}, fig(it.first_view[0], "First view"),
            el("div", {class: "clips"}, clip("A"), clip("B")));
}

function renderStatic(it, main) {
  answer = null;
  const sec = el("section", {id: "item", dataset: {item: it.id, kind: "static"}});
  sec.append(el("p", {class: "question", id: "question"}, practiceLabel(it), it.question));
  sec.append(staticMedia(it));
  const segs = el("div", {id: "segments", class: "timeline"});
  const total = it.segments.length ? it.segments[it.segments.length - 1].end : 1;
  for (const s of it.segments) {
    const d = el("div", {class: "seg", title: `${s.label}: ${s.start.toFixed(2)}-${s.end.toFixed(2)} s`,
                         dataset: {start: String(s.start)}, text: s.label});
    d.style.flexGrow = String((s.end - s.start) / total);  // shares summing to 1: the segments fill the bar
    d.addEventListener("click", () => seekBoth(s.start + 0.001));
    segs.append(d);
  }
  segs.append(el("div", {id: "playhead", class: "playhead"}));
  sec.append(segs);
  // one row: the player's controls, the three answers, Submit
  const ans = el("div", {class: "answers", role: "radiogroup", "aria-label": "answer"});
  for (const [c, label] of [["A", "A is better (A)"], ["T", "Tie (T)"], ["B", "B is better (B)"]]) {
    const b = el("button", {type: "button", class: "choice", role: "radio", "aria-checked": "false",
                            dataset: {choice: c}, text: label});
    b.addEventListener("click", () => chooseStatic(c));
    ans.append(b);
  }
  sec.append(el("div", {class: "actions"},
                el("div", {class: "controls"}, el("button", {id: "play", type: "button", text: "Play / pause (Space)"}),
                   el("button", {id: "restart", type: "button", text: "Restart (R)"})),
                ans, submitButton()));
  main.append(sec);
  $("#play").addEventListener("click", togglePlay);
  $("#restart").addEventListener("click", () => seekBoth(0));
  startSync(total);
}

function chooseStatic(c) {
  answer = c;
  $$(".choice").forEach(b => {
    const on = b.dataset.choice === c;
    b.classList.toggle("selected", on);
    b.setAttribute("aria-checked", String(on));
  });
  $("#submit").disabled = false;
}

function seekBoth(t) {
  const a = $("#clipA"), b = $("#clipB");
  if (!a || !b) return;
  a.currentTime = t;
  b.currentTime = t;
}

function togglePlay() {
  const vids = $$("video");
  const a = vids[0];
  if (!a) return;
  if (a.paused) vids.forEach(v => v.play().catch(() => {})); else vids.forEach(v => v.pause());
}

// Keep B on A's clock (one frame of tolerance) and move the playhead; A is the master.
function startSync(total) {
  const a = $("#clipA"), b = $("#clipB"), head = $("#playhead");
  const tol = 1 / Math.max(1, current.fps || 16);
  a.addEventListener("play", () => { b.currentTime = a.currentTime; b.play().catch(() => {}); });
  a.addEventListener("pause", () => b.pause());
  a.addEventListener("seeked", () => { b.currentTime = a.currentTime; });
  syncTimer = setInterval(() => {
    if (!a.paused && Math.abs(b.currentTime - a.currentTime) > tol) b.currentTime = a.currentTime;
    if (!a.paused && b.paused) b.play().catch(() => {});
    head.style.left = `${Math.min(100, 100 * a.currentTime / total)}%`;
  }, 50);
}

function stopSync() {
  if (syncTimer) clearInterval(syncTimer);
  syncTimer = null;
}

// ----------------------------------------------------------------------------------------------------- dynamic
function renderDynamic(it, main) {
  answer = {gate: null, answers: Array(it.questions.length).fill(null), focus: 0};
  const sec = el("section", {id: "item", class: "dynamic", dataset: {item: it.id, kind: "dynamic"}});
  // two columns on a laptop screen: the event and the clip on the left, the gate, the questions and Submit on the
  // right, so the answers never sit below the fold
  const ev = el("dl", {class: "event"},
                el("dt", {text: "Initial state"}), el("dd", {text: it.event.initial_state}),
                el("dt", {text: "Action"}), el("dd", {text: it.event.action}),
                el("dt", {text: "Expected next state"}), el("dd", {text: it.event.expected_next_state}));
  const v = el("video", {id: "clip", src: it.clip, muted: "", playsinline: "", controls: "", preload: "auto",
                         autoplay: ""});
  v.muted = true;
  const tl = el("div", {id: "timeline", class: "timeline"});
  const names = {V: "initial hold", D: "departure", R: "revisit", H: "final hold"};
  for (const p of it.phases) {
    const d = el("div", {class: "seg phase-" + p.name[0], dataset: {phase: p.name},
                         title: `${p.name} (${names[p.name[0]] || p.name}): frames ${p.start}-${p.end - 1}`,
                         text: p.name});
    d.style.flexGrow = String(p.end - p.start);
    d.addEventListener("click", () => { v.currentTime = p.start / it.fps + 0.001; });
    tl.append(d);
  }
  tl.append(el("div", {id: "playhead", class: "playhead"}));
  const left = el("div", {class: "watch"}, practiceLabel(it), ev, el("div", {class: "player"}, v), tl,
                  el("p", {class: "legend", text: "V initial hold · D departure (camera turned away) · R revisit · H final hold"}));
  const gate = el("fieldset", {id: "gate"}, el("legend", {text: "1. Does the event visibly start during the initial hold (V)?"}));
  for (const [g, label] of [["yes", "Yes, it starts in V (Y)"], ["no", "No (N)"]]) {
    const b = el("button", {type: "button", class: "gate", dataset: {gate: g}, text: label});
    b.addEventListener("click", () => setGate(g));
    gate.append(b);
  }
  const qs = el("fieldset", {id: "questions", hidden: ""}, el("legend", {text: "2. Answer each question from the video."}));
  const ol = el("ol", {class: "questions"});
  it.questions.forEach((q, i) => {
    const li = el("li", {class: "q", dataset: {q: String(i)}}, el("span", {class: "qnum", text: `${i + 1}.`}),
                  el("span", {class: "qtext", text: q.text}));
    for (const a of ["yes", "no"]) {
      const b = el("button", {type: "button", class: "ans", dataset: {a: a}, text: a === "yes" ? "Yes" : "No"});
      b.addEventListener("click", () => answerQuestion(i, a));
      li.append(b);
    }
    // a click on the question (not on its buttons) picks it for the keys; a click on Yes / No answers it and
    // moves on, so a key typed next answers the next question instead of overwriting this one
    li.addEventListener("click", ev => { if (!ev.target.closest("button")) focusQuestion(i); });
    ol.append(li);
  });
  qs.append(ol);
  sec.append(left, el("div", {class: "answer-col"}, gate, qs, submitButton()));
  main.append(sec);
  const total = it.frames / it.fps;
  syncTimer = setInterval(() => { $("#playhead").style.left = `${Math.min(100, 100 * v.currentTime / total)}%`; }, 50);
}

function setGate(g) {
  answer.gate = g;
  $$(".gate").forEach(b => b.classList.toggle("selected", b.dataset.gate === g));
  $("#questions").hidden = g !== "yes";
  if (g === "yes") focusQuestion(answer.answers.findIndex(a => a === null));  // -1: all answered (a correction)
  updateDynamicSubmit();
}

function focusQuestion(i) {
  answer.focus = i;
  $$(".q").forEach(li => li.classList.toggle("focus", Number(li.dataset.q) === i));
  const li = i >= 0 ? $(`.q[data-q="${i}"]`) : null;
  if (li) li.scrollIntoView({block: "nearest"});  // the question the keys answer is always on screen
}

function answerQuestion(i, a) {
  answer.answers[i] = a;
  const li = $(`.q[data-q="${i}"]`);
  $$(".ans", li).forEach(b => b.classList.toggle("selected", b.dataset.a === a));
  li.classList.add("answered");
  // on to the next unanswered question (after this one, else from the top); none left: no question has the keys,
  // so a stray Y / N never overwrites an answer (the arrows or a click pick one to change)
  const next = answer.answers.findIndex((x, j) => x === null && j > i);
  focusQuestion(next >= 0 ? next : answer.answers.findIndex(x => x === null));
  updateDynamicSubmit();
}

function updateDynamicSubmit() {
  const ok = answer.gate === "no" || (answer.gate === "yes" && answer.answers.every(a => a !== null));
  $("#submit").disabled = !ok;
}

// ------------------------------------------------------------------------------------------------------ submit
async function submit() {
  if (busy || !current || $("#submit").disabled) return;
  busy = true;
  const body = {item: current.id, client_id: clientId, elapsed_ms: Math.round(performance.now() - shownAt)};
  if (current.kind === "static") body.choice = answer;
  else { body.started = answer.gate === "yes"; body.answers = body.started ? answer.answers : null; }
  try {
    const r = await api(correcting ? "/api/correct" : "/api/vote", body);
    status(r.status === "duplicate" ? "Already answered (in another tab?): kept the first answer." :
           r.status === "corrected" ? "Changed." : "Saved.", r.status === "duplicate" ? "warn" : "ok");
    await loadNext();
  } catch (e) {
    if (e.status === 409 && /closed/.test(e.message)) {  // the organiser closed the study: nothing more to answer
      status("Not saved: " + e.message + ".", "error");
      await loadNext().catch(() => {});
    } else {
      status("Not saved: " + e.message + ". Press Enter to try again.", "error");  // same client_id: a retry is safe
    }
  } finally {
    busy = false;
  }
}

document.addEventListener("keydown", ev => {
  if (document.body.dataset.page !== "annotate" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const k = ev.key.toLowerCase();
  if (k === "u" && $("#change-last")) { ev.preventDefault(); $("#change-last").click(); return; }
  if (!current) return;
  if (k === "enter") { ev.preventDefault(); submit(); return; }
  if (k === " ") { ev.preventDefault(); togglePlay(); return; }
  if (current.kind === "static") {
    const map = {a: "A", "1": "A", arrowleft: "A", t: "T", "2": "T", arrowdown: "T", b: "B", "3": "B", arrowright: "B"};
    if (k in map) { ev.preventDefault(); chooseStatic(map[k]); }
    else if (k === "r") { ev.preventDefault(); seekBoth(0); }
    return;
  }
  const last = answer.answers.length - 1;
  if (k === "y" || k === "n") {
    ev.preventDefault();
    const a = k === "y" ? "yes" : "no";
    if (answer.gate !== "yes") setGate(a);
    else if (answer.focus >= 0) answerQuestion(answer.focus, a);
    else status("Every question is answered: Enter submits; ↑ / ↓ or a click picks a question to change.", "warn");
  } else if (k === "arrowup" && answer.gate === "yes") {
    ev.preventDefault(); focusQuestion(answer.focus < 0 ? last : Math.max(0, answer.focus - 1));
  } else if (k === "arrowdown" && answer.gate === "yes") {
    ev.preventDefault(); focusQuestion(answer.focus < 0 ? 0 : Math.min(last, answer.focus + 1));
  }
});

if (document.body.dataset.page === "login") initLogin();
else loadNext().catch(e => status("Could not load: " + e.message, "error"));
