/* Batchscope player: the tour, a few key moments of the run with one sentence each (batchscope/explain/moments.py).
 *
 * The payload's tour is the scenario's (its moments resolved against these traces) or the moments found in them.
 * A teacher's own replaces it from the URL: ?tour=3:A's first chunk;7:D takes C's row (step:note, separated by ";";
 * an entry that is not a step of the run and a note is left out, and the page says so in one line; ?tour=off shows
 * none). PageDown / PageUp (a clicker) and n / p jump between the moments; the bar above the views shows the note of
 * the moment at the step. */
"use strict";

BS.MAX_NOTE = 300;

/* The tour the page shows: the URL's (this page's, else the page around the frame), else the payload's; entries
 * [{step, note}] within [lo, hi], one per step (notes of a step joined), in step order. A URL entry whose step is not
 * a whole number in [lo, hi], or that is not "step:note", is left out and named in the tour's `problem`: one line
 * the page shows (BS.Tour), never a silent drop; when no entry is good the payload's tour plays. */
BS.readTour = (queries, fallback, lo, hi) => {
  const text = queries.map((q) => q.get("tour")).find((t) => t !== null && t !== undefined);
  if (text === undefined) return BS.tidyTour(fallback || [], lo, hi);
  if (text.trim() === "off") return [];
  const bad = [];
  const own = text.split(";").filter((part) => part.trim()).map((part) => {
    const at = part.indexOf(":");
    const head = at > 0 ? part.slice(0, at).trim() : part.trim();
    const note = at > 0 ? part.slice(at + 1).trim().slice(0, BS.MAX_NOTE) : "";
    const step = /^[+-]?[0-9]+$/.test(head) ? Number(head) : NaN;
    if (at <= 0 || !note) bad.push(`"${part.trim().slice(0, 24)}" is not step:note`);
    else if (Number.isNaN(step)) bad.push(`step "${head.slice(0, 24)}" is not a whole number`);
    else if (step < lo || step > hi) bad.push(`step ${step} is out of range`);
    else return { step, note };
    return null;
  }).filter((m) => m !== null);
  const tour = own.length ? BS.tidyTour(own, lo, hi) : BS.tidyTour(fallback || [], lo, hi);
  if (bad.length) {
    const more = bad.length > 1 ? ` (and ${bad.length - 1} more)` : "";
    tour.problem = `?tour=: ${bad[0]}${more}: each entry is step:note, the step a whole number from ${lo} to ${hi}` +
      (own.length ? "; the other entries play." : "; the run's own tour plays instead.");
  }
  return tour;
};

BS.tidyTour = (items, lo, hi) => {
  const by = new Map();
  for (const m of items) {
    const k = Math.min(Math.max(Math.floor(m.step + 0.5), lo), hi);
    by.set(k, by.has(k) ? `${by.get(k)} ${m.note}` : m.note);
  }
  return [...by.entries()].sort((a, b) => a[0] - b[0]).map(([step, note]) => ({ step, note }));
};

BS.Tour = class {
  constructor(tour, root, seek) {
    this.tour = tour;
    this.seek = seek;
    this.bar = document.getElementById("bs-moment");
    this.prev = document.getElementById("bs-prev-moment");
    this.next = document.getElementById("bs-next-moment");
    const on = (el, dir) => el.addEventListener("click", (e) => { e.currentTarget.blur(); this.jump(this.at, dir); });
    on(this.prev, -1);
    on(this.next, 1);
    this.at = 0;
    for (const el of [this.bar, this.prev, this.next]) el.hidden = !tour.length;
    if (tour.problem) this.report(tour.problem);
  }

  /* A bad ?tour= (or ?step=: id) in one visible line above the tour's bar (role alert), with the parameter and the
   * allowed range. */
  report(text, id = "bs-tour-error") {
    const line = document.createElement("div");
    line.id = id;
    line.className = "bs-tour-error";
    line.setAttribute("role", "alert");
    line.textContent = text;
    line.style.cssText = "color:#B3261E;font-weight:600;margin:0 0 6px;padding:3px 8px;border-left:4px solid #B3261E;";
    this.bar.parentNode.insertBefore(line, this.bar);
  }

  /* Go to the next (dir 1) or previous (dir -1) moment from step k; false when there is none that way. */
  jump(k, dir) {
    const m = dir > 0 ? this.tour.find((x) => x.step > k) : [...this.tour].reverse().find((x) => x.step < k);
    if (m === undefined) return false;
    this.seek(m.step);
    return true;
  }

  draw(k) {
    this.at = k;
    if (!this.tour.length) return;
    const i = this.tour.findIndex((m) => m.step === k);
    const n = this.tour.length;
    this.bar.classList.toggle("bs-moment-here", i >= 0);
    if (i >= 0) this.bar.textContent = `★ Moment ${i + 1} of ${n}: ${this.tour[i].note}`;
    else {
      const nxt = this.tour.find((m) => m.step > k);
      this.bar.textContent = nxt ? `Next moment at step ${nxt.step} (PageDown)` : `End of the tour (${n} moments).`;
    }
    this.prev.disabled = !this.tour.some((m) => m.step < k);
    this.next.disabled = !this.tour.some((m) => m.step > k);
  }
};
