/* Batchscope player: figures drawn once, with the margins plotly.js's automargin chose for the same layout before.
 *
 * The layouts ask for thin margins (batchscope/figures/slots.py: 10 px on the left) and let automargin (the template's) widen
 * them to fit the axes' labels. plotly.js does that by drawing the figure, measuring its labels and drawing the
 * whole figure again with the wider margins: measured on the sixteen pair's first frame
 * (scripts/measure_page_load.py, 2026-12-04), about 100 ms of 0.43 s. BS.plot draws a layout the first time as
 * plotly.js does and keeps the margins it settled on (its _fullLayout._size), in this page and for later visits
 * (localStorage, where the browser allows it); a layout seen before is drawn once, with those margins as they are
 * (autoexpand off: automargin's result fed back in as a base is not a fixed point where plotly.js shrinks margins to
 * keep a minimum plot height, the token budget's). Only whole-pixel margins are kept: plotly.js rounds a margin it
 * is given. Two keys: BS.marginKey for a step's views (slot grid, token budget, block map), whose data changes every
 * step but whose labels do not; BS.figureKey for a figure drawn whole (the request timeline, the gauges, the
 * step-cost chart, the Metrics charts), a hash of all of it. Either holds everything the labels' room depends on, so
 * the figure is the one plotly.js alone draws (tests/ui/test_browser_margins.py). */
"use strict";
window.BS = window.BS || {};

const MARGIN_STORE = "bs-margins"; // localStorage: {layout key: {l, r, t, b}}, oldest first
const MARGIN_KEYS = 300; // a page draws a few layouts per side and size; every page of the app stays under this

BS.marginMemo = null;

/* The remembered margins, read once per page; {} where the browser keeps no storage (a sandboxed frame). */
BS.margins = function () {
  if (BS.marginMemo === null) {
    try {
      BS.marginMemo = JSON.parse(window.localStorage.getItem(MARGIN_STORE) || "{}") || {};
    } catch (e) {
      BS.marginMemo = {};
    }
  }
  return BS.marginMemo;
};

/* The width (px) of each plot of a frame's views, read all at once before they are drawn (BS.measure), so that
 * drawing them forces one layout of the page, not one per figure (each read after a figure was drawn laid the page
 * out again: about 18 ms of the four-way Compare page's first frame, 12 figures, on a 2-core machine); a plot not
 * measured so (or outside a draw: BS.measured is null) is read as it is. */
BS.measured = null;
BS.measure = function (plots) {
  BS.measured = new Map(plots.map((gd) => [gd, gd.clientWidth]));
};
BS.width = function (gd) {
  const known = BS.measured && BS.measured.get(gd);
  return known === undefined || known === null ? gd.clientWidth : known;
};

/* What automargin's result depends on, for a per-step figure whose data changes every step but whose labels do
 * not. An axis's labels: its categories, or its range (for the slot grid's paged x axis, the digits of the range's
 * ends: its labels at the edges are as wide on every page), its tick spacing and angle, its title and its fonts. */
BS.marginKey = function (kind, gd, layout) {
  const digits = (r) => r && r.map((x) => String(Math.round(x)).length);
  const axis = (a) => a && [a.visible, a.showticklabels, a.tickfont, a.title, a.categoryarray, a.tickangle, a.dtick,
    kind === "slots" ? digits(a.range) : a.range, a.autorange, a.type];
  return JSON.stringify([Plotly.version, kind, BS.width(gd), layout.height, layout.margin, layout.font,
    layout.uniformtext, axis(layout.xaxis), axis(layout.yaxis)]);
};

/* The key of a figure drawn whole, once (a chart of the Metrics page): its width and two 32-bit hashes of all of it
 * (FNV-1a and djb2), so labels that come from its data are covered too. */
BS.figureKey = function (gd, data, layout) {
  const text = JSON.stringify([data, layout]);
  let fnv = 0x811c9dc5, djb = 5381;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    fnv = Math.imul(fnv ^ c, 0x01000193) >>> 0;
    djb = (Math.imul(djb, 33) + c) >>> 0;
  }
  return JSON.stringify([Plotly.version, "figure", gd.clientWidth, text.length, fnv, djb]);
};

/* Plotly.react(gd, data, layout, config) with the margins remembered under key (BS.marginKey, BS.figureKey), or
 * else remembering the margins plotly.js settles on; returns plotly.js's promise. config: PLOT_CONFIG by default. */
BS.plot = function (key, gd, data, layout, config) {
  const memo = BS.margins(), known = memo[key], cfg = config || PLOT_CONFIG;
  if (known) {
    const margin = Object.assign({}, layout.margin, known, { autoexpand: false });
    return Plotly.react(gd, data, Object.assign({}, layout, { margin }), cfg);
  }
  const out = Plotly.react(gd, data, layout, cfg);
  const size = gd._fullLayout && gd._fullLayout._size;
  // only whole pixels: plotly.js rounds a margin it is given (a legend's reserved room can leave 79.8 px), so a
  // fractional one would not come back as it was; such a figure keeps automargin's second draw
  if (size && ["l", "r", "t", "b"].every((m) => Number.isInteger(size[m]))) {
    memo[key] = { l: size.l, r: size.r, t: size.t, b: size.b };
    const keys = Object.keys(memo);
    for (const old of keys.slice(0, Math.max(0, keys.length - MARGIN_KEYS))) delete memo[old];
    try {
      window.localStorage.setItem(MARGIN_STORE, JSON.stringify(memo));
    } catch (e) {
      // no storage here (a sandboxed frame, a full quota): remembered for this page only
    }
  }
  return out;
};
