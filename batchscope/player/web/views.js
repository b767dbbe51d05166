/* Batchscope player: one trace's per-step views (narration, slot grid, token budget, KV block map, queues, text
 * so far, request timeline), drawn at a step from the payload. The figures are the Python figures' own traces and
 * layouts; only the step-dependent parts are swapped in. */
"use strict";

const PLOT_CONFIG = { displayModeBar: false, responsive: true, logging: 0 };
const TOP_MARGIN = 6; // a figure's title is an HTML line above its plot: it wraps, and a new title costs no redraw
const MAX_CHIPS = 40; // a server's queues hold hundreds of requests: the first ones, then a count (batchscope/app/common.py)
const PRESENT_CHIPS = 5; // presenter mode: the first chips of a queue, then "+N" (the details list them all)
const MAX_TEXT_ROWS = 200; // more requests than this: the text table lists those in play (batchscope/app/panels.py)
const CELL_NAME_MIN = 7; // px: a slot-grid cell's name plotly.js would shrink below this to fit its cell is not drawn
const CELL_PAD = 3; // px: plotly.js's room around a bar's inside text on each side (its bar TEXTPAD)
const fontPx = (layout) => (layout.font || {}).size || 12; // a layout's font size: plotly.js's 12 px unless set

/* Bar traces without the inside labels plotly.js would draw under CELL_NAME_MIN px: it shrinks a label to fit its
 * bar, and on the Trace page's 41-step slot grid (9 px cells at 1280x720) the names came out 2-3 px tall, marks
 * nobody can read that cost the first frame about 50 ms of measuring text; a token budget's 1-token segments did the
 * same. cellPx(trace, i): the width (px) of bar i; size: the labels' font size where a trace sets none. A label that
 * fits, or shrinks no further than CELL_NAME_MIN, is kept as it was; hover still names every bar. */
BS.legibleNames = function (data, cellPx, size) {
  // the size plotly.js would draw label at, px by default, in room px
  const drawnPx = (label, px, room) => Math.min(px, (px * (room - 2 * CELL_PAD)) / BS.textPx(plain(label), px));
  return data.map((tr) => {
    if (!Array.isArray(tr.text) || tr.textposition === "none") return tr;
    const px = (tr.textfont && tr.textfont.size) || size;
    const keep = tr.text.map((t, i) => !t || drawnPx(t, px, cellPx(tr, i)) >= CELL_NAME_MIN);
    if (keep.every(Boolean)) return tr;
    const out = Object.assign({}, tr);
    if (keep.some(Boolean)) out.text = tr.text.map((t, i) => (keep[i] ? t : " ")); // " ": see BS.blockTraces
    else { out.textposition = "none"; delete out.text; }
    return out;
  });
};

/* Where the slot grid's cells are too narrow for a name each (BS.legibleNames dropped them): one name per run of a
 * request's consecutive cells in a slot (its padding rows a run of their own), at the run's middle, if the run is
 * wide enough for it at the cells' size; a text trace over the cells (hover stays theirs). data: the traces as
 * sliced, every name in; shown: the same after BS.legibleNames; cellPx: one cell's width. null: no run to name. */
BS.runNames = function (data, shown, cellPx) {
  const cells = [];
  let size = 10;
  data.forEach((tr, t) => {
    if (!Array.isArray(tr.text) || shown[t] === tr) return; // every name of this trace is drawn in its cell
    size = (tr.textfont && tr.textfont.size) || size;
    const kept = Array.isArray(shown[t].text) ? shown[t].text : [];
    tr.text.forEach((label, i) => {
      if (!label || kept[i] === label) return;
      const color = Array.isArray(tr.marker.color) ? tr.marker.color[i] : tr.marker.color;
      cells.push({ y: tr.y[i], step: tr.base[i] + 0.5, label, run: `${label}|${tr.name === "padding"}`, color });
    });
  });
  cells.sort((a, b) => (a.y < b.y ? -1 : a.y > b.y ? 1 : a.step - b.step));
  const out = { x: [], y: [], text: [], color: [] };
  for (let i = 0, j; i < cells.length; i = j + 1) {
    const c = cells[i];
    for (j = i; j + 1 < cells.length; j++) {
      const d = cells[j + 1];
      if (d.y !== c.y || d.run !== c.run || d.step !== cells[j].step + 1) break;
    }
    if ((j - i + 1) * cellPx - 2 * CELL_PAD < BS.textPx(plain(c.label), size)) continue;
    const under = cells[i + Math.floor((j - i) / 2)].color; // the middle cell's colour, under the name
    out.x.push((c.step + cells[j].step) / 2);
    out.y.push(c.y);
    out.text.push(c.label);
    out.color.push(/^#[0-9a-f]{6}$/i.test(under) ? BS.textColor(under) : "#000");
  }
  if (!out.x.length) return null;
  return { type: "scatter", mode: "text", x: out.x, y: out.y, text: out.text, name: "names",
    textfont: { size, color: out.color }, hoverinfo: "skip", showlegend: false };
};

/* The block map's one trace (markers+text, a label per block, "" where a block has none) as two: its cells
 * (markers) and the labels of the blocks that have one (text), keyed by block number (ids). A pool's map used to
 * keep a blank label on every empty block, 128 text nodes that cost each draw of the sixteen pair's maps about 25
 * ms, because plotly.js pairs a trace's text nodes with its points by position: once a label was dropped, the
 * remaining ones moved to the wrong blocks. Keyed by block, a label stays with its block from step to step. */
BS.blockTraces = function (trace) {
  const keep = [];
  trace.text.forEach((label, i) => { if (label && label.trim()) keep.push(i); });
  const pick = (a) => (Array.isArray(a) ? keep.map((i) => a[i]) : a);
  const cells = Object.assign({}, trace, { mode: "markers" });
  delete cells.text;
  delete cells.textfont;
  const labels = {
    type: "scatter", mode: "text", x: pick(trace.x), y: pick(trace.y), ids: keep.map(String), text: pick(trace.text),
    textfont: Object.assign({}, trace.textfont, { color: pick((trace.textfont || {}).color) }),
    hoverinfo: "skip", showlegend: false,
  };
  return [cells, labels];
};

/* Plotly label text (HTML entities, as batchscope/figures/safe.py esc writes it) as plain characters. A textarea parses its
 * content as text, so nothing in it can become markup or run. */
function plain(label) {
  const t = document.createElement("textarea");
  t.innerHTML = label;
  return t.value;
}

function el(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

BS.Side = class {
  /* P: BS.Payload; v: one view of it; opts: {present, compact (text table closed), beats (show teaching beats),
   * hideFuture (a function: whether the slot grid hides the steps after the current one), contrast (presenter
   * mode's palette), dark (the dark page, theme.js), details (a function: whether presenter mode shows the long
   * texts)}. this.room: presenter mode's room for the figures (BS.presentRoom), set by the player's fit. */
  constructor(P, v, root, opts) {
    this.P = P; this.v = v; this.opts = opts; this.drawn = -1; this.plotted = -1; this.last = {};
    // the dark page's colours (theme.js), else presenter mode's palette (present.js)
    this.paint = opts.dark ? BS.darkPaint(v) : opts.contrast ? BS.contrastPaint(v) : (c) => c;
    this.template = { layout: opts.dark ? BS.darkTemplate(P.p.template) : P.p.template };
    const s = this.dom = { titles: {} };
    this.titles = {};
    s.root = el("section", "bs-side", root);
    s.root.dataset.policy = v.policy;
    s.head = el("h2", "bs-side-head", s.root);
    s.caption = el("div", "bs-caption", s.root, v.caption);
    s.note = el("div", "bs-note", s.root, v.finished_note);
    s.note.hidden = true;
    s.narration = el("p", "bs-narration", s.root);
    s.beats = el("div", "bs-beats", s.root);
    s.grid = el("div", "bs-grid", s.root);
    s.slots = this.figure("slots", s.grid);
    const hl = v.slots.highlight;
    s.highlight = el("div", "bs-highlight", s.slots);
    Object.assign(s.highlight.style, { background: hl.fillcolor, border: `${hl.line.width}px solid ${hl.line.color}` });
    s.budget = this.figure("budget", s.grid);
    s.blocks = this.figure("blocks", s.grid);
    s.legend = el("div", "bs-legend", s.grid, v.legend); // batchscope/figures/kv.py legend_text: in the pool's unit
    s.queues = el("div", "bs-queues", s.grid);
    s.checklist = el("div", "bs-checklist", s.grid);
    s.details = el("details", "bs-texts", s.root);
    s.details.open = !opts.compact;
    el("summary", "", s.details, "Generated so far (each request's text, token by token; ␣ = a space at the start, at the end or repeated, " +
      "⏎ = newline, ⇥ = tab)");
    s.table = el("table", "", s.details);
    s.rows = v.request_ids.map((rid, i) => {
      const tr = el("tr", "", s.table);
      el("td", "", tr).appendChild(this.chip(i));
      return { tr, status: el("td", "bs-status", tr), text: el("td", "bs-text", tr), len: -1 };
    });
    s.details.addEventListener("toggle", () => this.drawTexts(this.drawn));
    s.timeline = el("div", "bs-plot bs-timeline", s.root);
    if (v.gauges) s.gauges = el("div", "bs-plot bs-gauges", s.root);
    if (v.cost) this.cost = new BS.CostChart(this, v.cost, s.root);
  }

  /* The figures under the step's views that are drawn once for the whole trace (the request timeline, the Trace
   * page's gauges, the Walkthrough's step-cost chart): drawn after the first frame is on the screen
   * (BS.Player.draw), so the step's own views do not wait for them (measured on the sixteen traces: 120-170 ms of a
   * 0.35-0.56 s first draw); each with the margins remembered for it (margins.js BS.figureKey). */
  drawWhole() {
    if (this.wholeDrawn) return;
    this.wholeDrawn = true;
    if (this.v.timeline) this.drawTimeline();
    if (this.v.gauges) this.drawGauges();
    if (this.cost) this.cost.drawFigure();
  }

  /* The request timeline and vLLM's metrics (the Trace page's gauges) are drawn once each; the cursor of each (the
   * Python figure's last shape: a dotted vline at step 0) becomes an HTML line over the plot, moved along the x axis
   * each step without redrawing the figure. */
  drawTimeline() { this.dom.cursor = this.drawWithCursor(this.v.timeline, this.dom.timeline); }

  drawGauges() { this.dom.gaugeCursor = this.drawWithCursor(this.v.gauges, this.dom.gauges); }

  drawWithCursor(fig, box) {
    const cursor = fig.layout.shapes[fig.layout.shapes.length - 1];
    const layout = Object.assign({}, fig.layout, { template: this.template, shapes: fig.layout.shapes.slice(0, -1) });
    BS.plot(BS.figureKey(box, fig.data, layout), box, fig.data, layout);
    const line = el("div", "bs-cursor", box);
    line.style.borderLeft = `${cursor.line.width}px dotted ${cursor.line.color}`;
    box.on("plotly_afterplot", () => this.moveCursor(this.drawn));
    return line;
  }

  moveCursor(step) {
    if (step < 0) return;
    if (this.dom.cursor) this.place(this.dom.cursor, this.dom.timeline, step, step);
    if (this.dom.gaugeCursor) this.place(this.dom.gaugeCursor, this.dom.gauges, step, step);
  }

  moveHighlight(step) {
    if (step >= 0) this.place(this.dom.highlight, this.dom.slots, step - 0.5, step + 0.5);
  }

  chip(i) {
    const c = el("span", "bs-chip", null, this.v.request_ids[i]);
    c.style.background = this.v.colors[i];
    c.style.color = this.v.chip_text[i];
    return c;
  }

  /* Chips for requests (indices), the first MAX_CHIPS of them (presenter mode: PRESENT_CHIPS, a queue in one line)
   * and a count of the rest. */
  chips(idx) {
    const many = this.P.views.length > 2 ? 3 : PRESENT_CHIPS; // three or four narrow columns: three chips
    const f = document.createDocumentFragment(), most = this.opts.present ? many : MAX_CHIPS;
    if (!idx.length) el("span", "bs-none", f, "none");
    for (const i of idx.slice(0, most)) f.appendChild(this.chip(i));
    const rest = idx.length - most;
    if (rest > 0) el("span", "bs-more", f, this.opts.present ? ` +${rest}` : ` and ${rest} more`);
    return f;
  }

  /* A per-step figure: its title (an HTML line that wraps) over its plot. */
  figure(kind, parent) {
    const box = el("div", `bs-fig bs-fig-${kind}`, parent);
    this.dom.titles[kind] = el("div", "bs-fig-title", box);
    return el("div", `bs-plot bs-${kind}`, box);
  }

  /* The Python figure's layout with its title moved out of the plot (same text, above it) and the plot area kept;
   * in presenter mode, sized and lettered for a projector (present.js). */
  layout(base, kind) {
    const top = base.margin.t - TOP_MARGIN;
    const out = Object.assign({}, base, {
      template: this.template, title: { text: "" }, height: base.height - top,
      margin: Object.assign({}, base.margin, { t: TOP_MARGIN }),
    });
    return this.opts.present ? BS.presentLayout(kind, out, this.room) : out;
  }

  /* A figure's title at this step: kept here, written in the text phase (after every plot is drawn). */
  title(kind, label) { this.titles[kind] = label; }

  /* Draw at global step k (the trace's last step once it has finished) in two phases, so that the browser lays
   * the page out once: first every figure of every side (plotPhase), then the text and the overlays (textPhase). */
  plotPhase(k) {
    const s = this.P.shown(this.v, k);
    if (s === this.plotted) return;
    this.drawSlots(s);
    this.drawBudget(s);
    this.drawBlocks(s);
    this.plotted = s;
  }

  textPhase(k) {
    const v = this.v, s = this.P.shown(v, k);
    const ended = this.opts.present && k > s ? " (ended)" : ""; // presenter mode: its note with the details
    // presenter mode's brief (four runs on a small screen): the label in one line; the headline starts with the step
    const step = this.opts.present && this.opts.brief() ? "" : ` · step ${s}`;
    this.dom.head.textContent = `${v.label[0].toUpperCase()}${v.label.slice(1)}${step}${ended}`;
    this.dom.note.hidden = k <= s;
    if (s === this.drawn) return;
    for (const [kind, label] of Object.entries(this.titles)) {
      const box = this.dom.titles[kind];
      const text = this.opts.present ? BS.presentTitle(plain(label)) : plain(label);
      if (box.dataset.label !== label) { box.dataset.label = label; box.textContent = text; }
    }
    this.drawText(s);
    this.drawn = s;
    this.moveHighlight(s);
    this.moveCursor(s);
    if (this.cost) this.cost.draw(s);
  }

  /* The slot grid: its cells are redrawn only when the window turns a page (slots.grid_range); within a page
   * only the title changes and the highlighted column (an HTML box over the plot) moves. Presenter mode: the
   * narrower windows. "Hide the future" (opts.hideFuture): no cell after step s, so the grid is redrawn each step. */
  drawSlots(s) {
    const v = this.v, L = v.slots.layout, windows = this.opts.present ? v.slots.present_windows : v.slots.windows;
    const win = this.P.t(windows[s]), hide = this.opts.hideFuture(), key = `${windows[s]}:${hide ? s : ""}`;
    this.title("slots", this.P.t(v.slots.titles[s]));
    if (this.slotWindow === key) return;
    let data = v.slots.data.map((tr) => BS.sliceTrace(tr, win.lo, hide ? Math.min(win.hi, s) : win.hi));
    data = data.filter((tr) => tr);
    const layout = this.layout(L, "slots");
    layout.xaxis = Object.assign({}, layout.xaxis, win.xaxis, { title: Object.assign({}, layout.xaxis.title) });
    const mkey = BS.marginKey("slots", this.dom.slots, layout);
    if (this.opts.present) {
      data = BS.presentSlots(data, (layout.height - layout.margin.t - layout.margin.b) / L.yaxis.categoryarray.length);
    }
    else {
      const cell = this.plotPx(this.dom.slots, mkey, layout, 26) / (win.hi - win.lo + 1); // 26 px: "slot 0"
      const shown = BS.legibleNames(data, () => cell, fontPx(layout));
      const runs = BS.runNames(data, shown, cell);
      data = runs ? shown.concat([runs]) : shown;
    }
    BS.plot(mkey, this.dom.slots, data, layout);
    if (this.slotWindow === undefined) this.dom.slots.on("plotly_afterplot", () => this.moveHighlight(this.drawn));
    this.slotWindow = key;
  }

  /* The width (px) of the plot area of gd drawn with layout: gd's width less the margins remembered for key
   * (margins.js), or on a first draw less the layout's margins and guess px more on the left (its axis labels). */
  plotPx(gd, key, layout, guess) {
    const known = BS.margins()[key], m = known || { l: layout.margin.l + guess, r: layout.margin.r };
    return Math.max(0, BS.width(gd) - m.l - m.r);
  }

  /* Redraw the slot grid at the step shown (after "hide the future" is switched). */
  redrawSlots() {
    this.slotWindow = null;
    if (this.plotted >= 0) this.drawSlots(this.plotted);
  }

  /* Put an HTML box (a line for the timeline) over data x0..x1 of a plot's x axis, spanning the plot area. */
  place(box, plot, x0, x1) {
    const fl = plot._fullLayout;
    if (!fl || !fl.xaxis || !fl.xaxis.l2p) return;
    const ax = fl.xaxis, size = fl._size, a = ax._offset + ax.l2p(x0), b = ax._offset + ax.l2p(x1);
    Object.assign(box.style, { left: `${a}px`, width: `${b - a}px`, top: `${size.t}px`, height: `${size.h}px` });
  }

  /* The token budget bar: redrawn only when its segments differ from the step drawn last. */
  drawBudget(s) {
    const b = this.v.budget;
    this.title("budget", this.P.t(b.titles[s]));
    this.dom.budget.parentNode.hidden = this.opts.present && this.room && !this.room.budget;
    if (this.plotted >= 0 && b.bars[s] === b.bars[this.plotted]) return;
    const bars = this.P.budgetTraces(this.v, s)
      .map((t) => Object.assign(t, { marker: Object.assign({}, t.marker, { color: this.paint(t.marker.color) }) }));
    const layout = this.layout(b.layout, "budget"), mkey = BS.marginKey("budget", this.dom.budget, layout);
    const r = layout.xaxis.range, perToken = this.plotPx(this.dom.budget, mkey, layout, 0) / (r[1] - r[0]);
    const shown = this.opts.present ? bars : BS.legibleNames(bars, (tr, i) => tr.x[i] * perToken, fontPx(layout));
    BS.plot(mkey, this.dom.budget, shown, layout);
  }

  drawBlocks(s) {
    const b = this.v.blocks;
    this.title("blocks", this.P.t(b.titles[s]));
    if (this.plotted >= 0 && this.P.sameLooks(this.v, s, this.plotted)) return;
    const looks = this.P.blockLooks(this.v, s);
    looks.color = looks.color.map(this.paint);
    const trace = Object.assign({}, b.trace, {
      x: b.x, y: b.y, text: looks.text, hovertext: looks.hover,
      marker: Object.assign({}, b.trace.marker,
        { color: looks.color, line: { width: looks.width, color: looks.line } }),
    });
    const layout = this.layout(b.layout, "blocks");
    if (this.opts.present) {
      const height = this.room ? this.room.blocks : 0.3 * window.innerHeight;
      BS.presentBlocks(trace, layout, this.plotWidth(), height, b.grouped);
    }
    else BS.fitBlocks(trace, layout, this.plotWidth());
    if (this.opts.dark) BS.darkBlocks(trace);
    BS.plot(BS.marginKey("blocks", this.dom.blocks, layout), this.dom.blocks, BS.blockTraces(trace), layout);
  }

  /* The block map's width, measured once (and again after a resize): reading it between redraws would force a
   * layout. */
  plotWidth() {
    if (!this.blocksWidth) {
      this.blocksWidth = BS.width(this.dom.blocks) || 640;
      window.addEventListener("resize", () => { this.blocksWidth = 0; this.plotted = -1; }, { once: true });
    }
    return this.blocksWidth;
  }

  /* Narration, teaching beats, queues and the text table: DOM updates only where the step changed them. */
  drawText(s) {
    const v = this.v, cols = v.steps, T = this.P.T;
    // presenter mode: the headline (its events alone where the screen is crowded: the player's brief) and the
    // callouts' names (batchscope.explain.headline, beats.BEAT_NAME); the long narration and the callouts' text with
    // the details (i)
    const short = this.opts.present && !this.opts.details() && cols.headline;
    const form = !short ? "narration" : this.opts.brief() && cols.headline_short ? "headline_short" : "headline";
    const said = cols[form], beats = short ? cols.beat_names : cols.beats;
    if (this.last.narration !== said[s] || this.last.form !== form) {
      this.dom.narration.textContent = T[said[s]];
    }
    if (cols.checklist && this.last.checklist !== cols.checklist[s]) {
      this.dom.checklist.textContent = T[cols.checklist[s]];
      this.last.checklist = cols.checklist[s];
    }
    if (this.opts.beats && (this.last.beats !== beats[s] || this.last.form !== form)) {
      const brief = form === "headline_short"; // a bulb per callout, its name on hover and with the details (i)
      this.dom.beats.replaceChildren(...T[beats[s]].map((i) => (brief ? this.mark(T[i]) : this.beat(T[i]))));
    }
    const key = ["waiting", "running", "preempted"].map((q) => cols[q][s]).join(",") + "," +
      BS.lowerBound(v._finishSteps, s + 1);
    if (this.last.queues !== key) this.drawQueues(s);
    this.last = Object.assign(this.last, { narration: said[s], beats: beats[s], queues: key, form });
    this.drawTexts(s);
  }

  /* A teaching callout: the bulb (an SVG, present.js: no emoji font needed) and its sentence. */
  beat(text) {
    const div = el("div", "bs-beat");
    div.append(BS.bulb(), " " + text);
    return div;
  }

  /* A callout as its bulb alone (presenter mode's brief): its name on hover; with the details (i), its sentence. */
  mark(name) {
    const span = el("span", "bs-beat bs-beat-mark");
    span.title = name;
    span.setAttribute("aria-label", name);
    span.append(BS.bulb());
    return span;
  }

  drawQueues(s) {
    const cols = this.v.steps, T = this.P.T;
    // stepinfo.queues and app/panels.queue_rows: the engine's word for an eviction, aborts apart from finishes
    const by = this.opts.present ? "" : " (by the end of this step)"; // presenter mode: the words alone
    const rows = [["Waiting", "waiting"], ["Running", "running"], [this.v.words.evicted_now, "preempted"],
      [`Finished${by}`, "finished"], [`Aborted${by}`, "aborted"]];
    const ended = this.P.finishedBy(this.v, s), how = this.v.requests.end_word;
    const f = document.createDocumentFragment();
    for (const [name, q] of rows) {
      const idx = q === "finished" || q === "aborted" ? ended.filter((i) => how[i] === q) : T[cols[q][s]];
      if (!idx.length && (q === "preempted" || q === "aborted" || (q === "finished" && this.opts.present))) continue;
      if (q === "finished" && this.opts.present && this.opts.brief()) continue; // the headline says who finishes
      const div = el("div", "bs-queue", f);
      el("b", "", div, name + ": ");
      div.appendChild(this.chips(idx));
    }
    this.dom.queues.replaceChildren(f);
  }

  drawTexts(s) {
    if (s < 0 || !this.dom.details.open || this.opts.present) return;
    const v = this.v, status = this.P.statuses(v, s), many = v.request_ids.length > MAX_TEXT_ROWS;
    const now = many ? new Set([...this.P.T[v.steps.preempted[s]]]) : null;
    this.dom.rows.forEach((row, i) => {
      if (many) { // in play: waiting, running, preempted or finishing in this step
        const show = status[i] === "waiting" || status[i] === "running" || now.has(i) ||
          v.requests.finish_step[i] === s;
        row.tr.hidden = !show;
        if (!show) return;
      }
      if (row.status.textContent !== status[i]) row.status.textContent = status[i];
      const text = this.P.textAt(this.v, i, s);
      if (text.length !== row.len) { row.text.textContent = BS.visibleWhitespace(text); row.len = text.length; }
    });
  }
};
