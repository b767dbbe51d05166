/* Batchscope player: the dark variant for dim halls (?theme=dark, in the page's URL or the file's).
 *
 * The page turns dark (player.css, body.dark), every figure takes a dark version of the payload's plotly template
 * (backgrounds, type, grid and axis lines), and the colours the Python figures draw are repainted: the requests
 * with BS.DARK_REQUESTS, light colours at least 3:1 against the page, apart from each other in colour and in grey
 * (the first four at least 13 L* apart) and from the dark padding, free, cached and reserved colours, which replace
 * the light ones (free, reserved and cached at L* 20, 32 and 42: apart in grey, as on the light page). A chip's and
 * a block's label take black or white, whichever contrasts more with its colour. */
"use strict";

BS.DARK = { page: "#15181D", text: "#E6E8EB", grid: "#353B45", line: "#59606B" };

BS.DARK_REQUESTS = ["#FA802E", "#2EE5FA", "#8756FB", "#FDFDA5", "#F9064F", "#77FB56", "#EE8BDB", "#FB56DA",
  "#DFDF20", "#A5FDEB", "#7E7EFC", "#20DF93", "#FCBD7E", "#EE8B9F", "#71CF59", "#FB56A8"];

/* The light colours of the pages (batchscope.steplog.view FREE_COLOR, PADDING_COLOR; batchscope.figures.kv CACHED_COLOR,
 * RESERVED_COLOR) and their dark counterparts. */
BS.DARK_BASE = { "#E8E8E8": "#2C3139", "#9E9E9E": "#5D626B", "#7DB0D4": "#2A6A90", "#E2C992": "#5B4A24" };

/* Black or white, whichever has the higher WCAG contrast on the colour (relative luminance above 0.179: black). */
BS.bestText = function (hex) {
  const lin = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
    .map((c) => (c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] > 0.179 ? "#000" : "#fff";
};

/* The payload's plotly template, dark: what every figure of the player inherits. */
BS.darkTemplate = function (layout) {
  const D = BS.DARK;
  const axis = (a) => Object.assign({}, a, { gridcolor: D.grid, linecolor: D.line, zerolinecolor: D.line,
    tickcolor: D.line, tickfont: Object.assign({}, (a || {}).tickfont, { color: D.text }),
    title: Object.assign({}, (a || {}).title, { font: { color: D.text } }) });
  return Object.assign({}, layout, {
    paper_bgcolor: D.page, plot_bgcolor: D.page, font: Object.assign({}, layout.font, { color: D.text }),
    xaxis: axis(layout.xaxis), yaxis: axis(layout.yaxis),
    legend: Object.assign({}, layout.legend, { font: { color: D.text } }),
  });
};

/* Repaint one view for the dark page (its request colours, chip text and slot cells, as BS.contrastPaint does);
 * returns the paint function for the budget bar and the block map. */
BS.darkPaint = function (v) {
  return BS.repaint(v, BS.DARK_REQUESTS, BS.DARK_BASE, BS.bestText);
};

/* A block map trace on the dark page: each label black or white on its cell, its small id line too. */
BS.darkBlocks = function (trace) {
  const colors = trace.marker.color.map(BS.bestText);
  trace.textfont = Object.assign({}, trace.textfont, { color: colors });
  trace.text = trace.text.map((t, i) => t.replace(/color:#444/g, colors[i] === "#000" ? "color:#333" : "color:#BBB"));
};
