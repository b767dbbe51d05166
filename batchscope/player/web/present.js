/* Batchscope player: figures fitted to their room, and presenter mode (body.present, ?present=1), sized to be read
 * from the back row of a hall with a 1280x720 projector (it also resizes to 960x540 and 1920x1080): narration at
 * 24 px that grows instead of being cut (player.css), every label that carries meaning at 18 px or more (request
 * names in the cells, block ids and owners, step numbers, titles, queues), the slot grid's window narrower (the
 * payload's present_windows: 9 steps) with larger cells, the block map's columns chosen for its pool so that its
 * cells are as large as the room allows, and a high-contrast request palette. The figures stay the Python figures;
 * only sizes, fonts and request colours change here. Also the callouts' bulb, drawn without an emoji font. */
"use strict";

BS.PRESENT = {
  font: 18, // px: the least size of any label
  cellFont: 20, // px: request names in the slot grid's cells
  slotRow: 36, // px: one slot of the slot grid
  // the block map's plot at most this share of the window's height (1, 2, 3 or 4 sides: 3 and 4 in one row, as 2)
  blocksShare: { 1: 0.46, 2: 0.3, 3: 0.3, 4: 0.3 },
  maxCell: 84, // px: a block cell no larger than this
  lineHeight: 23.4, // px: one 18 px line of a block cell's label (plotly.js spaces lines 1.3 em apart)
  charWidth: 11.5, // px: an 18 px character (digits and capitals): room for an owner's name, before any is drawn
  family: '"Open Sans", verdana, arial, sans-serif', // plotly.js's, which draws the labels
};

/* The width (px) of a label (plain text of plotly's HTML subset) at size px (18 by default) in plotly's font,
 * measured on a canvas once per label and size. */
BS.textPx = function (label, size) {
  const px = size || BS.PRESENT.font, key = `${px}|${label}`, memo = BS.textPx.memo || (BS.textPx.memo = new Map());
  if (!memo.has(key)) {
    const g = BS.textPx.g || (BS.textPx.g = document.createElement("canvas").getContext("2d"));
    g.font = `${px}px ${BS.PRESENT.family}`;
    memo.set(key, g.measureText(label.replace(/<[^>]+>/g, "")).width);
  }
  return memo.get(key);
};

/* A figure's layout in presenter mode: 18 px type everywhere (ticks included), no axis title (the HTML title above
 * says what is drawn), the height its content needs. base: the layout of views.js Side.layout. */
BS.presentLayout = function (kind, base) {
  const F = BS.PRESENT.font, out = Object.assign({}, base, { font: Object.assign({}, base.font, { size: F }) });
  // no axis title (the figure's title above says what the axes are); dropped, not blanked: plotly.js reserves a
  // blank title's room (36 px left and under the slot grid at 18 px, its rows 30 px instead of BS.PRESENT.slotRow)
  const axis = (a) => {
    if (!a) return a;
    const out = Object.assign({}, a, { tickfont: { size: F } });
    delete out.title;
    return out;
  };
  out.xaxis = axis(base.xaxis);
  out.yaxis = axis(base.yaxis);
  if (kind === "slots") {
    const n = (base.yaxis.categoryarray || []).length || 1;
    const row = BS.presentSlotRow(n);
    out.yaxis.showticklabels = row >= F;
    out.margin = Object.assign({}, base.margin, { b: 34 });
    out.height = out.margin.t + out.margin.b + n * row;
    out.uniformtext = { minsize: F, mode: "show" }; // a name is never drawn under 18 px
  } else if (kind === "budget") { // the title says used/budget: no ticks under the bar
    out.xaxis.showticklabels = false;
    out.margin = Object.assign({}, base.margin, { b: 4 });
    out.height = out.margin.t + out.margin.b + 40;
    out.uniformtext = { minsize: F, mode: "hide" }; // a segment too short for its label at 18 px drops it
  } else if (kind === "blocks") {
    out.yaxis.autorange = false; // the range as given (reversed): autorange would pad it and squeeze the rows
  }
  return out;
};

/* A figure's title in presenter mode: without the policy and the step, which the side's heading shows in large
 * type ("static: slots at step 27 (...)" -> "slots (...)"), so that it takes one line. */
BS.presentTitle = function (label) {
  return label.replace(/^[^:]{1,40}: /, "").replace(/ at step \d+/, "");
};

/* One slot's height: 36 px up to 8 slots, then thinner (a server's many slots), never under 6 px. */
BS.presentSlotRow = function (n) {
  return n <= 8 ? BS.PRESENT.slotRow : Math.max(6, Math.floor(320 / n));
};

/* The slot grid's traces in presenter mode: names at 20 px inside cells tall enough for them, else on hover. */
BS.presentSlots = function (data, nSlots) {
  const big = BS.presentSlotRow(nSlots) >= 28;
  return data.map((tr) => Object.assign({}, tr, {
    textfont: Object.assign({}, tr.textfont, { size: BS.PRESENT.cellFont }),
    textposition: big ? "inside" : "none",
  }));
};

/* The block map in presenter mode: the number of columns that gives the largest cells within the plot's width and
 * BS.PRESENT.blocksMaxHeight (a pool of 24 blocks: 8 columns of 3 rows; 128 blocks: 16 of 8), and each cell's
 * label cut to the lines that fit at 18 px: block id, owner (and marks), fill, in that order of room; an owner's
 * line goes before its id. A grouped map (a server's pool, batchscope/figures/blockgroups.py) keeps its positions. */
BS.presentBlocks = function (trace, layout, width, sides, grouped) {
  const P = BS.PRESENT, m = layout.margin, n = trace.x.length, W = width - m.l - m.r;
  const maxH = Math.max(120, P.blocksShare[sides] * window.innerHeight) - m.t - m.b;
  let cols = layout.xaxis.range[1] - layout.xaxis.range[0], rows = layout.yaxis.range[0] - layout.yaxis.range[1];
  let cell = Math.min(W / cols, maxH / rows, P.maxCell);
  if (!grouped) {
    cell = 0;
    for (let c = 4; c <= 32; c++) { // the largest cells; on a tie, fewer columns
      const r = Math.ceil(n / c), s = Math.min(W / c, maxH / r, P.maxCell);
      if (s > cell + 0.5) [cols, rows, cell] = [c, r, s];
    }
    const need = BS.ownerWidth(trace.text); // cells too small for an owner's name: taller, as wide as it takes
    if (cell < need && W / need >= 4) [cols, cell] = [Math.floor(W / need), W / Math.floor(W / need)];
    rows = Math.ceil(n / cols);
    trace.x = trace.x.map((_, i) => i % cols);
    trace.y = trace.y.map((_, i) => Math.floor(i / cols));
    layout.xaxis = Object.assign({}, layout.xaxis, { range: [-0.6, cols - 0.4] });
    layout.yaxis = Object.assign({}, layout.yaxis, { range: [rows - 0.4, -0.6] });
  }
  layout.height = m.t + m.b + Math.ceil(rows * cell);
  trace.marker = Object.assign({}, trace.marker, { size: Math.floor(cell * 0.94) });
  trace.textfont = Object.assign({}, trace.textfont, { size: P.font, color: trace.marker.color.map(BS.textColor) });
  const lines = Math.floor((cell * 0.94) / P.lineHeight);
  trace.text = trace.text.map((label, i) => BS.presentBlockLabel(label, grouped ? null : i, lines, cell * 0.94));
};

/* The width (px, at 18 px) of the longest owner name in the block labels (a held block's: owner, then fill such
 * as 7/8), and a little room. */
BS.ownerWidth = function (texts) {
  let most = 1;
  for (const t of texts) {
    const body = t.split("<br>").filter((p) => p.trim() && !p.startsWith("<span"));
    if (body.length < 2 || !/^\d+\/\d+$/.test(body[body.length - 1])) continue;
    most = Math.max(most, (/^[^\s×✕⟲<]*/.exec(body[0]) || [""])[0].length);
  }
  return most * BS.PRESENT.charWidth + 6;
};

/* A block cell's label with the lines that fit: `lines` lines of at most `room` px at 18 px. An id line
 * (batchscope/figures/kv.py cell_text's small first line) is written at 18 px; a free cell shows its id (`block`). */
BS.presentBlockLabel = function (label, block, lines, room) {
  const parts = label.split("<br>");
  const idPart = /^<span[^>]*>(\d+)<\/span>$/.exec(parts[0]);
  const id = idPart ? idPart[1] : block === null ? "" : String(block);
  const body = (idPart ? parts.slice(1) : parts).filter((p) => p.trim());
  const fits = (t) => BS.textPx(t) <= room - 4;
  // a line too wide loses its spaces, then an owner's line its ×N, then its marks (★, ✕: hover keeps them)
  const shorter = (t) =>
    [t, t.replace(/ /g, ""), t.replace(/ |×\d+/g, ""), t.replace(/[\s×★✕].*$/, "")].find(fits);
  const keep = body.map(shorter).filter((t) => t);
  const idText = id, idLine = id && fits(id) ? [idText] : [];
  if (lines > keep.length) return [...idLine, ...keep].join("<br>") || " ";
  if (!keep.length) return idLine.join("") || " ";
  if (id && fits(`${id} ${keep[0]}`)) keep[0] = `${idText} ${keep[0]}`; // no room for its own line: beside the owner
  return keep.slice(0, Math.max(1, lines)).join("<br>");
};

const ID_LINE = /^<span[^>]*>\d+<\/span>(<br>)?/; // a block cell's id line (batchscope/figures/kv.py cell_text)
const MIN_ID_CELL = 30; // px: smaller cells with an owner drop the id line (it stays on hover)
const MIN_ID_ALONE = 16; // px: an empty cell shows its id down to this size

/* Outside presenter mode: blocks and their labels shrink to the grid cell the plot (`width` px) has room for (half
 * a page on the Compare page); the grid's shape (16 columns) stays the one of every page. A map narrower than it is
 * tall loses its empty row gaps; cells too small for the block id and their label drop the id (it stays on hover;
 * the ids run row by row, 16 to a row, so an empty neighbour's id places them). */
BS.fitBlocks = function (trace, layout, width) {
  const m = layout.margin, cols = layout.xaxis.range[1] - layout.xaxis.range[0];
  const rows = layout.yaxis.range[0] - layout.yaxis.range[1];
  const cellW = (width - m.l - m.r) / cols;
  const cellH = (layout.height - m.t - m.b) / rows;
  const size = Math.max(8, Math.min(trace.marker.size, Math.floor(Math.min(cellW, cellH) * 0.92)));
  if (size < trace.marker.size) {
    trace.marker.size = size;
    trace.textfont = Object.assign({}, trace.textfont, { size: Math.max(5, Math.min(9, Math.round(size * 0.3))) });
  }
  if (cellW < cellH) layout.height = m.t + m.b + Math.ceil(rows * cellW);
  // an empty cell keeps its id down to MIN_ID_ALONE px; a cell with an owner (or a mark) needs MIN_ID_CELL px
  if (size < MIN_ID_CELL) {
    const keepsId = (label) => size >= MIN_ID_ALONE && !label.includes("<br>");
    trace.text = trace.text.map((label) => (keepsId(label) ? label : label.replace(ID_LINE, "")));
  }
};

/* A light bulb drawn in SVG, for the teaching callouts: the emoji needs a colour emoji font that a plain machine
 * (or a lecture hall's PC) may lack, and then shows as an empty box. */
BS.bulb = function () {
  const NS = "http://www.w3.org/2000/svg", svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", "bs-icon");
  svg.setAttribute("aria-hidden", "true");
  svg.innerHTML = "<path d='M8 1.2a4.8 4.8 0 0 0-2.9 8.6c.6.5.9 1.2.9 1.9h4c0-.7.3-1.4.9-1.9A4.8 4.8 0 0 0 8 1.2z' " +
    "fill='#F5C242' stroke='#8a6400' stroke-width='.9'/><rect x='6' y='12.3' width='4' height='1.3' rx='.5' " +
    "fill='#6b6b6b'/><rect x='6.5' y='14' width='3' height='1.3' rx='.5' fill='#6b6b6b'/>";
  return svg;
};

/* The high-contrast request palette of presenter mode (?palette=standard keeps the pages' Okabe-Ito colours): every
 * colour at least 3:1 against the white page (Okabe-Ito's yellow is 1.3:1), far from the padding, free, cached and
 * reserved colours (grey, light grey, light blue, sand) in colour and in grey, and the first four (the demos of
 * three and four slots) at least 12 L* apart, so that they stay four greys on a washed-out projector or a
 * grayscale print. Requests past 16 reuse it, as the pages' palette does; the names in the cells tell them apart. */
BS.CONTRAST = ["#A05413", "#1F38C2", "#409D50", "#51005C", "#C24C8C", "#554DA7", "#770709", "#D75470",
  "#592394", "#9A1652", "#2D6C11", "#AC47B8", "#27297D", "#AD3E30", "#D8161C", "#6F912C"];

/* Black or white, whichever reads better on a colour (batchscope.steplog.view.text_color's rule). */
BS.textColor = function (hex) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return 0.299 * r + 0.587 * g + 0.114 * b > 140 ? "#000" : "#fff";
};

/* Repaint one view's requests with BS.CONTRAST: its colours and chip text, and its slot grid's cells (the budget
 * bar and the block map are repainted as they are drawn, with the returned function). */
BS.contrastPaint = function (v) {
  return BS.repaint(v, BS.CONTRAST, {}, BS.textColor);
};

/* Repaint one view: its request colours (by position) with `palette`, the other colours of `base` (light ->
 * replacement), chip text by `text` (a colour -> black or white), and its slot grid's cells; returns the paint
 * function (colour -> colour) for the figures drawn later (the budget bar, the block map). */
BS.repaint = function (v, palette, base, text) {
  const map = new Map(v.colors.map((c, i) => [c.toUpperCase(), palette[i % palette.length]]));
  for (const [from, to] of Object.entries(base)) map.set(from.toUpperCase(), to);
  const paint = (c) => (typeof c === "string" && map.has(c.toUpperCase()) ? map.get(c.toUpperCase()) : c);
  v.colors = v.colors.map(paint);
  v.chip_text = v.colors.map(text);
  for (const tr of v.slots.data) {
    const m = tr.marker;
    tr.marker = Object.assign({}, m, { color: Array.isArray(m.color) ? m.color.map(paint) : paint(m.color) });
  }
  return paint;
};
