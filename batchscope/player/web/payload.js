/* Batchscope player: reading the payload built by batchscope/player/playback.py.
 *
 * Everything the player draws at step k comes from here: strings and repeated values are looked up in the
 * table T, block looks are expanded once from delta rows, the slot grid is sliced out of the whole-trace figure,
 * and each request's text so far is a prefix of its final text. No scheduling rule is re-derived in JS. */
"use strict";
window.BS = window.BS || {};

BS.Payload = class {
  constructor(p) {
    this.p = p;
    this.T = p.T;
    this.views = p.views.map((v) => this.prepare(v));
  }

  /* Per-view caches: the dense block-look matrix and the per-trace step index of the slot grid. */
  prepare(v) {
    const looks = v.blocks.looks;
    const width = looks.first.length;
    const dense = new Int32Array(Math.max(1, v.num_steps * width));
    dense.set(looks.first, 0);
    for (let k = 1; k < v.num_steps; k++) {
      dense.copyWithin(k * width, (k - 1) * width, k * width);
      const ch = looks.changes[k];
      for (let i = 0; i < ch.length; i += 2) dense[k * width + ch[i]] = ch[i + 1];
    }
    v._looks = dense;
    v._width = width;
    const r = v.requests;
    v._finishSteps = r.finish_order.map((i) => r.finish_step[i]); // non-decreasing: finishing order
    return v;
  }

  /* Requests (indices) finished by the end of step k, in finishing order (stepinfo.queues "finished"). */
  finishedBy(v, k) {
    return v.requests.finish_order.slice(0, BS.lowerBound(v._finishSteps, k + 1));
  }

  /* Each request's state at step k (stepinfo.request_status, the facts' Facts.state): finished or aborted (its
   * end_word), else preempted in this step (retracted under SGLang: the view's words), else running, else
   * waiting, else not arrived (first seen in a queue after k, or never), else "" (an idle step). */
  statuses(v, k) {
    const r = v.requests, cols = v.steps;
    const running = new Set(this.T[cols.running[k]]), waiting = new Set(this.T[cols.waiting[k]]);
    const evicted = new Set(this.T[cols.preempted[k]]);
    return v.request_ids.map((_, i) => {
      const fin = r.finish_step[i], seen = r.first_seen[i];
      if (fin !== null && fin <= k) return r.end_word[i];
      if (evicted.has(i)) return v.words.evicted;
      if (running.has(i)) return "running";
      if (waiting.has(i)) return "waiting";
      if (seen === null || seen > k) return "not arrived";
      return "";
    });
  }

  t(i) { return this.T[i]; }

  /* The step a trace shows on the shared clock: its own last step once it has finished. */
  shown(v, k) { return Math.min(k, v.num_steps - 1); }

  /* Block looks at step k: arrays of colour, text, hover, outline width and outline colour. */
  blockLooks(v, k) {
    const out = { color: [], text: [], hover: [], width: [], line: [] };
    const base = k * v._width;
    for (let i = 0; i < v._width; i++) {
      const look = this.T[v._looks[base + i]];
      out.color.push(look[0]); out.text.push(look[1]); out.hover.push(look[2]);
      out.width.push(look[3]); out.line.push(look[4]);
    }
    return out;
  }

  /* Whether every block looks the same at steps a and b. */
  sameLooks(v, a, b) {
    const w = v._width, L = v._looks;
    for (let i = 0; i < w; i++) if (L[a * w + i] !== L[b * w + i]) return false;
    return true;
  }

  /* Budget bar traces at step k (copies: plotly may add properties to the objects it draws). */
  budgetTraces(v, k) {
    return this.T[v.budget.bars[k]].map((i) => Object.assign({}, this.T[i]));
  }

  /* Request i's generated text after step k. */
  textAt(v, i, k) {
    const grew = v.text.grew[i];
    let lo = 0, hi = grew.length; // first index whose step > k
    while (lo < hi) { const m = (lo + hi) >> 1; if (grew[m][0] <= k) lo = m + 1; else hi = m; }
    return lo === 0 ? "" : v.text.final[i].slice(0, grew[lo - 1][1]);
  }

  list(i) { return this.T[i]; }
};

/* Whitespace a reader would miss, made visible (the rule of batchscope/explain/stepinfo.py visible_whitespace): newline ->
 * ⏎, tab -> ⇥, spaces at the start, at the end or two and more in a row -> ␣ each; one space between words stays. */
BS.visibleWhitespace = function (text) {
  const t = text.replace(/\r\n/g, "\n").replace(/[\r\n]/g, "⏎").replace(/\t/g, "⇥");
  return t.replace(/ +/g, (run, at) =>
    run.length > 1 || at === 0 || at + run.length === t.length ? "␣".repeat(run.length) : run);
};

/* First index in a sorted numeric array whose value is >= x. */
BS.lowerBound = function (arr, x) {
  let lo = 0, hi = arr.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
  return lo;
};

/* Keep the points of a whole-trace slot-grid bar trace whose step lies in [lo, hi] (bases are step - 0.5 and
 * sorted). Returns null when none is left: slot_grid draws no trace for a kind absent from its window. */
BS.sliceTrace = function (tr, lo, hi) {
  const a = BS.lowerBound(tr.base, lo - 0.5), b = BS.lowerBound(tr.base, hi + 0.5);
  if (a >= b) return null;
  const out = Object.assign({}, tr);
  for (const key of ["x", "base", "y", "text", "customdata"]) {
    if (Array.isArray(tr[key])) out[key] = tr[key].slice(a, b);
  }
  out.marker = Object.assign({}, tr.marker);
  if (Array.isArray(tr.marker.color)) out.marker.color = tr.marker.color.slice(a, b);
  return out;
};
