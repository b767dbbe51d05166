/* Batchscope player: one step clock for one trace or 2 to 4 (sides A, B, C, D), the controls, the keyboard and the URL.
 * Every side is drawn at the same step of the clock in the same frame; a side whose run has ended holds its last step.
 *
 * Playing: target step = start step + elapsed seconds x speed, evaluated on every animation frame
 * (requestAnimationFrame), so the rate is the chosen one whatever a frame costs, and the step never goes backwards
 * (the start is re-based, fractional, when the speed changes). Every view is redrawn in the same frame. */
"use strict";

/* A number of the page URL, read as the app reads it (batchscope/player/export.py url_number): a plain decimal number
 * ("7", " 7", "2.6", "-1", "1e9") clamped to [lo, hi]; anything else ("", "abc", "nan", "Infinity", "0x10", "2.6x")
 * gives dflt. Never NaN or a 32-bit wrap: 4294967297 is far past the last step, not step 1. */
BS.urlNumber = (text, dflt, lo, hi) =>
  (typeof text === "string" && /^[ \t\n\r]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r]*$/.test(text)
    ? Math.min(Math.max(Number(text), lo), hi) : dflt);

/* What is wrong with a ?step= of the URL (text: the parameter, null when absent) for a run of steps lo..hi, in one
 * line naming the parameter, the range and the step that plays instead ("" when nothing is). */
BS.stepProblem = (text, lo, hi, plays) => {
  if (text === null || text === undefined) return "";
  const number = BS.urlNumber(text, NaN, -Infinity, Infinity);
  if (number >= lo && number <= hi) return "";
  const what = Number.isNaN(number) ? `"${text}" is not a number` : `step ${text} is out of range`;
  return `?step=: ${what}: a step is a whole number from ${lo} to ${hi}; step ${plays} plays.`;
};

/* The query of the page around the player's frame (the app's URL), or an empty one (no frame, or cross-origin). */
BS.parentQuery = () => {
  try { return new URLSearchParams(window.parent === window ? "" : window.parent.location.search); } catch (err) {
    return new URLSearchParams("");
  }
};

BS.Player = class {
  constructor(payload) {
    const P = this.P = new BS.Payload(payload);
    const q = new URLSearchParams(window.location.search);
    this.n = payload.num_steps;
    [this.lo, this.hi] = payload.span || [0, this.n - 1]; // the steps packed: the clock stays within them
    this.events = payload.events;
    this.present = payload.present || q.get("present") === "1";
    this.hideFuture = [q, BS.parentQuery()].some((x) => x.get("future") === "hide");
    this.dark = [q, BS.parentQuery()].some((x) => x.get("theme") === "dark"); // dim halls: theme.js
    const step = BS.urlNumber(q.get("step"), payload.initial_step, this.lo, this.hi);
    const speed = BS.urlNumber(q.get("speed"), payload.speed, 1, 120);
    this.state = { step: this.clamp(step), playing: false, speed: Math.min(120, Math.max(1, speed)) || 8,
      base: 0, t0: 0, raf: 0, drawn: -1, complete: false };
    this.stats = { frames: 0, lastDrawMs: 0 };
    document.body.classList.toggle("present", this.present);
    document.body.classList.toggle("dark", this.dark);
    document.body.classList.toggle("embedded", window.parent !== window); // in a page that has its own title
    // room the host page keeps over the frame's top right corner (the app's presenter toggle): no button under it
    if (payload.host_corner) document.querySelector(".bs-controls").style.paddingRight = `${payload.host_corner}px`;
    this.$ = (id) => document.getElementById(id);
    this.$("bs-title").textContent = payload.title;
    this.buildCounters(payload.counters);
    const root = this.$("bs-views");
    root.classList.add(`n${P.views.length}`); // player.css lays out 1, 2, 3 or 4 sides
    root.classList.toggle("multi", P.views.length > 1);
    this.$("bs-counters").classList.toggle("multi", P.views.length > 2); // cards with a value per side
    this.details = false; // presenter mode: the long texts instead of the figures (i)
    this.brief = false; // presenter mode: the headlines' events alone (reserve: where the headlines crowd the sides)
    document.body.classList.add(`sides-${P.views.length}`);
    const opts = { present: this.present, compact: P.views.length > 1, beats: P.views.length === 1 || this.present,
      hideFuture: () => this.hideFuture, contrast: this.present && q.get("palette") !== "standard", dark: this.dark,
      details: () => this.details, brief: () => this.brief };
    this.sides = P.views.map((v) => new BS.Side(P, v, root, opts));
    if (this.present) {
      BS.presentKey(this.$("bs-key"), P.views, this.sides[0].paint, P.t(P.views[0].slots.titles[this.lo]));
      this.$("bs-details").hidden = false;
    }
    const tour = BS.readTour([q, BS.parentQuery()], payload.tour, this.lo, this.hi);
    this.tour = new BS.Tour(tour, root, (k) => this.seek(k));
    const stepText = q.get("step") !== null ? q.get("step") : BS.parentQuery().get("step");
    const stepProblem = BS.stepProblem(stepText, this.lo, this.hi, this.state.step);
    if (stepProblem) this.tour.report(stepProblem, "bs-step-error");
    this.table = new BS.StepTable(P, payload.table, (k) => this.seek(k));
    this.bindControls();
    this.frame = this.frame.bind(this);
    this.request();
  }

  /* The nearest step in [lo, hi] (half up, as url_step rounds; NaN: the first step); no bitwise truncation, which
   * wraps at 2**31 (4294967297 was step 1). */
  clamp(k) {
    const r = Math.floor(k + 0.5);
    return Number.isNaN(r) ? this.lo : Math.min(Math.max(r, this.lo), this.hi);
  }

  buildCounters(counters) {
    const box = this.$("bs-counters");
    this.counters = counters.map((c) => {
      const card = document.createElement("div");
      card.className = "bs-counter";
      card.title = c.help;
      card.innerHTML = "<div class='bs-counter-label'></div><div class='bs-counter-value'></div>";
      card.firstChild.textContent = c.label;
      box.appendChild(card);
      return { values: c.values, el: card.lastChild };
    });
  }

  bindControls() {
    const on = (id, fn) => this.$(id).addEventListener("click", (e) => { e.currentTarget.blur(); fn(); });
    on("bs-play", () => this.toggle());
    on("bs-back", () => this.seek(this.state.step - 1));
    on("bs-fwd", () => this.seek(this.state.step + 1));
    on("bs-prev-event", () => this.seekEvent(-1));
    on("bs-next-event", () => this.seekEvent(1));
    on("bs-future", () => this.toggleFuture());
    on("bs-stills", () => this.downloadStills());
    on("bs-details", () => this.toggleDetails());
    this.$("bs-future").setAttribute("aria-pressed", String(this.hideFuture));
    const scrub = this.$("bs-scrub");
    scrub.min = String(this.lo);
    scrub.max = String(this.hi);
    scrub.addEventListener("input", () => this.seek(parseInt(scrub.value, 10)));
    const speed = this.$("bs-speed");
    speed.value = String(this.state.speed);
    speed.addEventListener("input", () => this.setSpeed(parseFloat(speed.value)));
    document.addEventListener("keydown", (e) => this.key(e));
    document.addEventListener("keyup", (e) => { if (e.key === " ") e.preventDefault(); });
    this.listenOnParent();
    // Redraw when the frame gets wider or narrower (the plots fill its width); not when only its height changes, as
    // when the app sizes its frame to the content just drawn (that redrew every view once more on each page load),
    // except in presenter mode, whose charts share the screen's height.
    this.size = [window.innerWidth, window.innerHeight];
    window.addEventListener("resize", () => {
      const size = [window.innerWidth, window.innerHeight], was = this.size;
      this.size = size;
      if (size[0] === was[0] && (size[1] === was[1] || !this.present)) return;
      this.state.drawn = -1;
      this.reserved = null; // presenter mode: the headlines' room, measured again at the new width
      this.request();
    });
  }

  /* In the app the player is a frame: keys pressed on the page around it (a presentation clicker's PageDown, the
   * arrows) step it without a click into the frame first, when the page is of the same origin (Streamlit's
   * srcdoc frame is). Keys typed into the page's own fields stay theirs; a frame the page has dropped lets go. */
  listenOnParent() {
    if (window.parent === window) return;
    let doc;
    try { doc = window.parent.document; } catch (err) { return; } // cross-origin: the frame's own keys only
    const onKey = (e) => {
      const frame = window.frameElement;
      if (!frame || !frame.isConnected) { doc.removeEventListener("keydown", onKey); return; }
      const t = e.target, typing = "input:not([type='checkbox']), textarea, select, [contenteditable], [role='combobox'], "
        + "[role='slider']";
      if (t && t.closest && t.closest(typing)) return;
      this.key(e);
      // a switch just clicked (the page's presenter switch) keeps the keys: a key the player took leaves it, so
      // Space plays instead of switching presenter mode off and the arrows step at once
      if (e.defaultPrevented && t && t.matches && t.matches("input[type='checkbox']")) t.blur();
    };
    doc.addEventListener("keydown", onKey);
  }

  /* Space plays or pauses; the arrows step; PageDown / PageUp (what a presentation clicker sends) and n / p go to the
   * next / previous moment of the tour (PageDown / PageUp step where the tour has none that way); Home / End. */
  key(e) {
    const fwd = () => this.seek(this.state.step + 1), back = () => this.seek(this.state.step - 1);
    const moment = (dir) => () => this.tour.jump(this.state.step, dir);
    const act = { " ": () => this.toggle(), ArrowRight: fwd, ArrowLeft: back, n: moment(1), p: moment(-1),
      PageDown: () => moment(1)() || fwd(), PageUp: () => moment(-1)() || back(),
      Home: () => this.seek(this.lo), End: () => this.seek(this.hi),
      i: () => this.present && this.toggleDetails() }[e.key];
    if (!act || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    act();
  }

  /* Presenter mode's details (i, or the button): the long narration of every side, the callouts' text, the
   * checklist, the key of the block maps and the counters, in the room of the figures; again: the figures. */
  toggleDetails() {
    this.details = !this.details;
    document.body.classList.toggle("details", this.details);
    this.$("bs-details").setAttribute("aria-pressed", String(this.details));
    for (const side of this.sides) side.drawn = -1;
    this.state.drawn = -1;
    this.request();
    return true;
  }

  /* Presenter mode: every side's headline and callouts get the room of their longest ones over the steps (equal on
   * every side, so that the figures stay level and in one place from step to step), and the figures the room the
   * text leaves (BS.presentRoom): measured after the text is drawn; a side whose room changed is drawn again. */
  fit(k) {
    if (!this.present || this.details) return;
    if (!this.reserved) {
      const was = this.brief;
      this.reserve();
      if (this.brief !== was) for (const side of this.sides) { side.drawn = -1; side.last = {}; side.textPhase(k); }
    }
    // twice at most again: a redraw can show a figure (the budget bar) whose title the first measure did not see
    for (const side of this.sides) for (let pass = 0; pass < 3 && this.fitSide(side, k); pass++);
  }

  /* One side of fit: its room measured, its figures drawn again where the room changed; whether they were. */
  fitSide(side, k) {
    const s = side.dom, tightNow = () => s.root.classList.contains("bs-tight");
    let { plots, titles } = this.plotRoom(s);
    // too short for the figures' titles as well (three or four runs on a 960x540 screen), or titles that would take
    // 40 % of the room (a narrow column wraps them): the plots alone; the titles measured as they wrap, not guessed
    const bare = plots + (tightNow() ? 0 : titles);
    if (bare >= 150 && tightNow()) {
      s.root.classList.remove("bs-tight");
      ({ plots, titles } = this.plotRoom(s));
    }
    if (bare < 150 || titles > 0.4 * bare) {
      s.root.classList.add("bs-tight");
      plots = bare;
    }
    const nSlots = side.v.slots.layout.yaxis.categoryarray.length;
    let room = BS.presentRoom(plots, nSlots);
    // a budget bar not drawn yet brings its title (two lines in a narrow column): only where the room has both, so
    // that the bar does not come and go from one measure to the next
    if (room.budget && s.budget.parentNode.hidden && !tightNow()) room = BS.presentRoom(plots - 50, nSlots);
    const was = side.room;
    if (was && Math.abs(was.blocks - room.blocks) < 3 && was.slotRow === room.slotRow && was.budget === room.budget) {
      return false;
    }
    side.room = room;
    side.plotted = -1;
    side.slotWindow = undefined;
    side.plotPhase(k);
    side.drawn = -1;
    side.textPhase(k);
    return true;
  }

  /* A side's room for its three plots (px; the side's height less its text and the figures' titles) and the titles'
   * height, measured on the page as drawn. */
  plotRoom(s) {
    const figs = ["slots", "budget", "blocks"].map((kind) => s[kind].parentNode);
    const top = s.root.getBoundingClientRect().top;
    let bottom = 0, figH = 0, titles = 0;
    for (const c of s.root.children) {
      if (!c.offsetParent && c !== s.grid) continue;
      const kids = c === s.grid ? [...c.children] : [c];
      for (const e of kids) {
        if (!e.offsetParent) continue;
        const r = e.getBoundingClientRect(), m = parseFloat(getComputedStyle(e).marginBottom), mb = Number.isFinite(m) ? m : 0;
        bottom = Math.max(bottom, r.bottom + mb - top);
      }
    }
    for (const f of figs) {
      if (!f.offsetParent) continue;
      figH += f.offsetHeight;
      titles += f.offsetHeight - f.lastChild.offsetHeight;
    }
    return { plots: Math.floor(s.root.clientHeight - (bottom - figH) - titles - 2), titles };
  }

  /* The room (min-height) of the headline and of the callouts of every side: the most lines any step of any side
   * takes at its width (BS.linesOf), the same on every side. Where the headlines would take more than 30 % of a side
   * (four runs on a 960x540 screen), every side says the headline's events alone (the payload's headline_short,
   * batchscope.explain.headline short=True: "Step 53: B and A decode. C is retracted. D waits."); the why stays
   * one key away (i), with the long narration. */
  reserve() {
    const T = this.P.T, lh = (e) => parseFloat(getComputedStyle(e).lineHeight) || 30;
    // a side's height without the tour's moment above it (as long as the step the page opens at has it): the same
    // room whichever step is drawn first
    const bar = this.$("bs-moment"), room = (side) => side.dom.root.clientHeight + (bar.offsetParent ? bar.offsetHeight : 0);
    const most = Math.min(...this.sides.map((side) => Math.max(2, Math.floor((0.3 * room(side)) /
      lh(side.dom.narration)))));
    const linesOf = (col) => {
      let lines = 1;
      for (const side of this.sides) {
        const box = side.dom.narration, cs = getComputedStyle(box);
        const font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`, width = box.clientWidth - 2;
        for (const i of new Set(side.v.steps[col])) lines = Math.max(lines, BS.linesOf(T[i], font, width));
      }
      return lines;
    };
    let lines = linesOf("headline");
    this.brief = lines > most && this.sides.every((side) => side.v.steps.headline_short);
    document.body.classList.toggle("brief", this.brief);
    if (this.brief) lines = linesOf("headline_short");
    let beats = 0;
    for (const side of this.sides) {
      const cols = side.v.steps;
      if (this.brief) { // the callouts' bulbs in one line (views.js mark)
        if (cols.beat_names.some((i) => T[i].length)) beats = Math.max(beats, 1.25 * BS.PRESENT.font + 4);
        continue;
      }
      const probe = side.dom.beats.appendChild(side.beat("x")), bcs = getComputedStyle(probe);
      const bfont = `${bcs.fontWeight} ${bcs.fontSize} ${bcs.fontFamily}`, bwidth = side.dom.beats.clientWidth - 40;
      const blh = parseFloat(bcs.lineHeight) || 1.45 * parseFloat(bcs.fontSize), pad = 16; // padding and margins
      probe.remove();
      for (const i of new Set(cols.beat_names)) {
        beats = Math.max(beats, T[i].reduce((a, j) => a + BS.linesOf(T[j], bfont, bwidth) * blh + pad, 0));
      }
    }
    // at most 30 % of a side for the headline and 15 % for the callouts: a step that needs more takes it from the
    // figures for that step
    for (const side of this.sides) {
      const H = room(side), line = lh(side.dom.narration);
      side.dom.narration.style.minHeight = `${Math.ceil(Math.min(lines, most) * line)}px`;
      side.dom.beats.style.minHeight = beats ? `${Math.ceil(Math.min(beats, 0.15 * H))}px` : "";
    }
    this.reserved = { lines, beats };
  }

  /* "Hide the future": the slot grid draws no cell after the current step (asking "what happens next?"). */
  toggleFuture() {
    this.hideFuture = !this.hideFuture;
    this.$("bs-future").setAttribute("aria-pressed", String(this.hideFuture));
    for (const side of this.sides) side.redrawSlots();
    this.writeUrl();
  }

  /* "Download stills": the charts of this step (slot grid, token budget, KV blocks; one column per side) drawn by
   * plotly's own export at twice their size on the screen into one PNG under a heading of the page's title and the
   * step (and each side's label), on the page's background (dark with ?theme=dark), named by the title and the
   * step, for a slide (one file: browsers hold back several downloads at once). Resolves to the file name. */
  async downloadStills() {
    const k = this.state.step, scale = 2, kinds = ["slots", "budget", "blocks"];
    const cols = await Promise.all(this.sides.map((side) => Promise.all(kinds.map(async (kind) => {
      const el = side.dom[kind], w = el.clientWidth, h = el.clientHeight;
      const img = new Image();
      img.src = await Plotly.toImage(el, { format: "png", width: w, height: h, scale });
      await img.decode();
      return img;
    }))));
    const width = cols.reduce((a, c) => a + Math.max(...c.map((i) => i.width)), 0);
    // a heading band: the page's title and the step (as the control bar says it), then each side's label
    const line = 30 * scale, band = line * (this.sides.length > 1 ? 2 : 1) + 8 * scale;
    const height = band + Math.max(...cols.map((c) => c.reduce((a, i) => a + i.height, 0)));
    const canvas = Object.assign(document.createElement("canvas"), { width, height });
    const g = canvas.getContext("2d"), dark = document.body.classList.contains("dark");
    g.fillStyle = dark ? "#15181D" : "#fff";
    g.fillRect(0, 0, width, height);
    g.fillStyle = dark ? "#E6E8EB" : "#1f2430";
    g.textBaseline = "middle";
    g.font = `600 ${22 * scale}px sans-serif`;
    g.fillText(`${this.P.p.title || "Batchscope"} · step ${k} / ${this.n - 1}`, 8 * scale, 4 * scale + line / 2);
    g.font = `600 ${18 * scale}px sans-serif`;
    let x = 0;
    for (const [i, c] of cols.entries()) {
      const label = this.sides[i].v.label || "", y0 = 4 * scale + line * 1.5;
      if (this.sides.length > 1) g.fillText(label.charAt(0).toUpperCase() + label.slice(1), x + 8 * scale, y0);
      let y = band;
      for (const img of c) { g.drawImage(img, x, y); y += img.height; }
      x += Math.max(...c.map((i) => i.width));
    }
    const name = `${(this.P.p.title || "batchscope").replace(/[^A-Za-z0-9._-]+/g, "-")}-step-${k}.png`;
    const a = Object.assign(document.createElement("a"), { href: canvas.toDataURL("image/png"), download: name });
    document.body.appendChild(a);
    a.click();
    a.remove();
    return name;
  }

  toggle() { if (this.state.playing) this.pause(); else this.play(); }

  play() {
    const S = this.state;
    if (S.step >= this.hi) S.step = this.lo;
    Object.assign(S, { playing: true, base: S.step, t0: performance.now() });
    this.request();
  }

  pause() {
    this.state.playing = false;
    this.writeUrl();
    this.request();
  }

  /* Jump to step k; while playing, the clock continues from there. */
  seek(k) {
    const S = this.state;
    S.step = this.clamp(k);
    if (S.playing) Object.assign(S, { base: S.step, t0: performance.now() });
    else this.writeUrl();
    this.request();
  }

  seekEvent(dir) {
    const k = this.state.step;
    const e = dir > 0 ? this.events.find((x) => x > k) : [...this.events].reverse().find((x) => x < k);
    if (e !== undefined) this.seek(e);
  }

  setSpeed(v) {
    const S = this.state, now = performance.now();
    if (Number.isNaN(v)) return;
    if (S.playing) Object.assign(S, { base: S.base + ((now - S.t0) * S.speed) / 1000, t0: now });
    S.speed = Math.min(120, Math.max(1, v));
    this.$("bs-speed-out").textContent = String(S.speed);
  }

  request() { if (!this.state.raf) this.state.raf = requestAnimationFrame(this.frame); }

  frame(now) {
    const S = this.state;
    S.raf = 0;
    if (S.playing) {
      const target = Math.min(this.hi, Math.floor(S.base + ((now - S.t0) * S.speed) / 1000));
      if (target > S.step) S.step = target;
      if (S.step >= this.hi) { S.playing = false; this.writeUrl(); }
    }
    if (S.step !== S.drawn) this.draw(S.step);
    this.drawControls();
    if (S.playing) this.request();
  }

  draw(k) {
    const t = performance.now();
    BS.measure(this.sides.flatMap((side) => [side.dom.slots, side.dom.budget, side.dom.blocks]));
    try {
      for (const side of this.sides) side.plotPhase(k);
    } finally {
      BS.measured = null;
    }
    for (const side of this.sides) side.textPhase(k);
    for (const c of this.counters) c.el.textContent = this.P.t(c.values[k]);
    this.tour.draw(k);
    this.table.draw(k);
    this.fit(k); // after every text of the page is written: the room the figures have left
    if (this.state.drawn < 0) {
      if (!performance.getEntriesByName("bs-first-frame").length) {
        performance.mark("bs-first-frame"); // when the first frame was drawn (scripts/measure_page_load.py reads it)
      }
      // once it is painted: the figures of the whole trace under the views and the steps table; then
      // state.complete (what a test or a still waits for before reading every figure)
      requestAnimationFrame(() => setTimeout(() => {
        for (const side of this.sides) side.drawWhole();
        this.table.build();
        this.state.complete = true;
      }, 0));
    }
    this.state.drawn = k;
    const stepEl = this.$("bs-step");
    const part = this.lo > 0 || this.hi < this.n - 1 ? ` (steps ${this.lo}–${this.hi} loaded)` : "";
    stepEl.textContent = `step ${k} / ${this.n - 1}${part}`;
    stepEl.dataset.bsStep = String(k);
    this.stats.frames += 1;
    this.stats.lastDrawMs = performance.now() - t;
  }

  drawControls() {
    const S = this.state, k = S.step;
    const play = this.$("bs-play");
    play.textContent = S.playing ? "❚❚ Pause" : "▶ Play"; // ❚ is in common fonts; ⏸ often is not
    play.setAttribute("aria-pressed", String(S.playing));
    this.$("bs-scrub").value = String(k);
    this.$("bs-back").disabled = k <= this.lo;
    this.$("bs-fwd").disabled = k >= this.hi;
    this.$("bs-prev-event").disabled = !this.events.some((x) => x < k);
    this.$("bs-next-event").disabled = !this.events.some((x) => x > k);
    this.$("bs-speed-out").textContent = String(S.speed);
  }

  /* Paused: put the step in the address of the top page (the app around the player's frame, or this file), so
   * the view can be shared. A frame that may not reach its parent (the exported file in another site's slide)
   * writes its own address; a srcdoc frame has none to write. */
  writeUrl() {
    clearTimeout(this.urlTimer);
    this.urlTimer = setTimeout(() => {
      for (const w of window.parent !== window ? [window.parent, window] : [window]) {
        try {
          const u = new URL(w.location.href);
          if (u.protocol === "about:") continue;
          u.searchParams.set("step", String(this.state.step));
          if (this.hideFuture) u.searchParams.set("future", "hide"); else u.searchParams.delete("future");
          w.history.replaceState(w.history.state, "", u.toString());
          return;
        } catch (err) { /* cross-origin parent, or a page that may not rewrite its address: the next one */ }
      }
    }, 150);
  }
};

window.addEventListener("DOMContentLoaded", async () => {
  Plotly.setPlotConfig({ logging: 0 }); // the slot grid's patterned bars make plotly.js warn on every redraw
  window.bsPlayer = new BS.Player(await BS.payloadRead);
});
