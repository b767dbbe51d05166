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
  slotRow: 36, // px: one slot of the slot grid, where the screen has room
  minSlotRow: 12, // px: the thinnest slot row when the room is short (names then on hover: BS.presentSlots)
  budget: 40, // px: the token budget's bar (its plot, without the title above it)
  maxCell: 84, // px: a block cell no larger than this
  lineHeight: 23.4, // px: one 18 px line of a block cell's label (plotly.js spaces lines 1.3 em apart)
  charWidth: 11.5, // px: an 18 px character (digits and capitals): room for an owner's name, before any is drawn
  family: '"Open Sans", verdana, arial, sans-serif', // plotly.js's, which draws the labels
};

/* Presenter mode fits the window whole (1, 2, 3 or 4 sides; 960x540 to 1920x1080 and beyond): each side is a column
 * of its heading, the step's headline (the short narration), the callouts' names, the figures and the queues, as
 * tall as the room under the controls; the figures take what the text leaves (BS.presentRoom), so that no sentence
 * is cut and nothing is below the screen. The long narration, the callouts' text, the checklist and the key of
 * every mark are one key away (i: BS.Player.toggleDetails). */

/* The room of one side's figures: ``plots`` px for the three plots (slot grid, token budget, block map; their HTML
 * titles apart) split as {slotRow, budget, blocks}: the slot grid up to BS.PRESENT.slotRow px a slot and no more
 * than 45 % of it (28 px, the names' room, where 60 % allows it: a lockstep side whose budget title wraps to two lines
 * kept 19 px rows and lost its names beside a side that had them), the budget bar its 40 px (none where the room is
 * very short), the block map the rest. */
BS.presentRoom = function (plots, nSlots) {
  const P = BS.PRESENT, n = Math.max(1, nSlots);
  const budget = plots >= 150 ? P.budget : 0, left = Math.max(0, plots - budget);
  const most = n <= 8 ? P.slotRow : Math.max(6, Math.floor(320 / n));
  // rows tall enough for the names in their cells (28 px) where that leaves the map 40 % of the room, else thinner;
  // under 18 px a row has no room for the axes' labels (BS.presentLayout drops them: 10 px of margins, not 40)
  const named = n <= 8 && n * 28 + 40 <= 0.6 * left ? 28 : 0;
  let row = Math.min(most, Math.max(named, Math.floor((0.45 * left - 40) / n)));
  if (row < P.font) row = Math.min(P.font - 1, Math.max(6, Math.floor((0.45 * left - 10) / n)));
  const slots = n * row + (row >= P.font ? 40 : 10);
  return { slotRow: row, budget, blocks: Math.max(20, Math.floor(left - slots)) };
};

/* How many lines `text` takes at `font` (a CSS font) in `width` px, breaking at spaces as the browser does (a
 * canvas measures the words): what a side reserves for its longest headline, so that its figures stay in one place
 * from step to step. */
BS.linesOf = function (text, font, width) {
  const g = BS.textPx.g || (BS.textPx.g = document.createElement("canvas").getContext("2d"));
  g.font = font;
  const space = g.measureText(" ").width;
  let lines = 1, x = 0;
  for (const word of text.split(/ +/)) {
    const w = g.measureText(word).width;
    if (x > 0 && x + space + w > width) { lines += 1; x = w; } else x += (x > 0 ? space : 0) + w;
  }
  return lines;
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
 * says what is drawn), the height its content needs. base: the layout of views.js Side.layout; room: the side's
 * (BS.presentRoom), if measured. */
BS.presentLayout = function (kind, base, room) {
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
    const row = room ? room.slotRow : BS.presentSlotRow(n);
    out.yaxis.showticklabels = row >= F;
    out.yaxis.dtick = 1; // every slot named: in rows under ~24 px plotly.js would name every other one ("slot 1", "slot 3")
    out.xaxis.showticklabels = row >= F; // the side's heading says the step
    out.margin = Object.assign({}, base.margin, { b: row >= F ? 34 : 4 });
    out.height = out.margin.t + out.margin.b + n * row;
    out.uniformtext = { minsize: F, mode: "show" }; // a name is never drawn under 18 px
  } else if (kind === "budget") { // the title says used/budget: no ticks under the bar
    out.xaxis.showticklabels = false;
    out.margin = Object.assign({}, base.margin, { b: 4 });
    out.height = room ? room.budget : BS.PRESENT.budget;
    out.uniformtext = { minsize: F, mode: "hide" }; // a segment too short for its label at 18 px drops it
  } else if (kind === "blocks") {
    out.yaxis.autorange = false; // the range as given (reversed): autorange would pad it and squeeze the rows
  }
  return out;
};

/* A figure's title in presenter mode: without the policy and the step, which the side's heading shows in large
 * type, and without the slot grid's key of patterns, which the page's key shows once (BS.presentKey): "static:
 * slots at step 27 (/ prefill, ...)" -> "slots", so that it takes one line. */
BS.presentTitle = function (label) {
  return label.replace(/^[^:]{1,40}: /, "").replace(/ at step \d+/, "").replace(/^slots \(.*\)$/, "slots");
};

/* The page's key in presenter mode, one line under the sides: the slot grid's patterns (its title's parenthesis)
 * and the block states and marks the sides' maps draw (the payload's blocks.keys, batchscope.figures.kv
 * present_keys), each state in its own colour as the maps paint it (paint: a side's repaint, presenter palette or
 * dark); slotTitle: a slot grid title. */
BS.presentKey = function (box, views, paint, slotTitle) {
  const title = slotTitle || "";
  const patterns = (/\(([^)]*)\)\s*$/.exec(title) || ["", ""])[1];
  const seen = new Map();
  for (const v of views) for (const [color, label] of v.blocks.keys || []) if (!seen.has(label)) seen.set(label, color);
  // one ⟲ item for every side: "freed by preemption / retraction", not one item per engine's word
  const freed = [...seen.keys()].filter((label) => label.startsWith("⟲"));
  if (freed.length > 1) {
    const words = freed.map((label) => label.split(" freed by ")[1]).filter(Boolean);
    const merged = `${freed[0].split(" freed by ")[0]} freed by ${words.join(" / ")}`;
    const rebuilt = new Map();
    for (const [label, color] of seen) {
      if (!label.startsWith("⟲")) rebuilt.set(label, color);
      else if (!rebuilt.has(merged)) rebuilt.set(merged, color);
    }
    seen.clear();
    for (const [label, color] of rebuilt) seen.set(label, color);
  }
  box.replaceChildren();
  if (patterns) {
    const item = document.createElement("span");
    item.className = "bs-key-item";
    item.textContent = `slots: ${patterns}`;
    box.appendChild(item);
  }
  for (const [label, color] of seen) {
    const item = document.createElement("span");
    item.className = "bs-key-item";
    if (color) {
      const sw = document.createElement("span");
      sw.className = "bs-swatch";
      sw.style.background = paint(color);
      item.appendChild(sw);
    }
    item.appendChild(document.createTextNode(label));
    box.appendChild(item);
  }
  box.hidden = !box.childNodes.length;
};

/* One slot's height: 36 px up to 8 slots, then thinner (a server's many slots), never under 6 px. */
BS.presentSlotRow = function (n) {
  return n <= 8 ? BS.PRESENT.slotRow : Math.max(6, Math.floor(320 / n));
};

/* The slot grid's traces in presenter mode (rows of `row` px): names inside cells tall enough for them (20 px, 18
 * px in rows under 32 px), else on hover. */
BS.presentSlots = function (data, row) {
  const big = row >= 26, size = row >= 32 ? BS.PRESENT.cellFont : BS.PRESENT.font;
  return data.map((tr) => Object.assign({}, tr, {
    textfont: Object.assign({}, tr.textfont, { size }),
    textposition: big ? "inside" : "none",
  }));
};

/* The block map in presenter mode: the number of columns that gives the largest cells within the plot's width and
 * `height` px (the side's room), up to P.maxCell a cell and then as many columns as fill the width, and each cell's
 * label cut to the lines that fit at 18 px: block id, owner (and marks), fill, in that order of room; an owner's
 * line goes before its id. A grouped map (a server's pool, batchscope/figures/blockgroups.py) keeps its positions. */
BS.presentBlocks = function (trace, layout, width, height, grouped) {
  const P = BS.PRESENT, m = layout.margin, n = trace.x.length, W = width - m.l - m.r;
  const maxH = Math.max(24, height - m.t - m.b);
  let cols = layout.xaxis.range[1] - layout.xaxis.range[0], rows = layout.yaxis.range[0] - layout.yaxis.range[1];
  let cell = Math.min(W / cols, maxH / rows, P.maxCell);
  if (!grouped) {
    cell = 0;
    // the largest cells; on a tie (cells at P.maxCell), the columns that leave the least room between them (a pool
    // of 27 at 1920x1080 took 6 columns 116 px apart for 82 px cells; 8 columns of 84 px cells fill the width)
    for (let c = 4; c <= 32; c++) {
      const r = Math.ceil(n / c), s = Math.min(W / c, maxH / r, P.maxCell);
      if (s > cell + 0.5 || (s >= cell && W / c - s < W / cols - cell - 0.5)) [cols, rows, cell] = [c, r, s];
    }
    // cells too small for an owner's name: larger, as wide as it takes, where the height allows
    const need = BS.ownerWidth(trace.text), wide = Math.floor(W / need);
    if (cell < need && wide >= 4 && Math.ceil(n / wide) * Math.min(W / wide, P.maxCell) <= maxH) {
      [cols, cell] = [wide, Math.min(W / wide, P.maxCell)];
    }
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
  // cells under 14 px carry no 18 px label (it would cover its neighbours): colours and outlines only, hover names
  if (cell * 0.94 < 14) trace.text = trace.text.map(() => " ");
  else trace.text = trace.text.map((label, i) => BS.presentBlockLabel(label, grouped ? null : i, lines, cell * 0.94));
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
  // a line too wide loses its spaces, then an owner's line its ×N, then its marks (★, ✕: hover keeps them) but ⟲,
  // which is kept without the name of the request it was taken from (the eviction shows on the map at any size)
  const back = (t) => (t.includes("⟲") ? `${t.replace(/[\s×★✕⟲].*$/, "")}⟲` : t.replace(/[\s×★✕].*$/, ""));
  const shorter = (t) =>
    [t, t.replace(/ /g, ""), t.replace(/ |×\d+/g, ""), back(t), "⟲"]
      .find((x) => (x === "⟲" ? t.includes(x) : fits(x)));
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
