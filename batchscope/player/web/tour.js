/* Batchscope player: the tour, a few key moments of the run with one sentence each (batchscope/explain/moments.py).
 *
 * The payload's tour is the scenario's (its moments resolved against these traces) or the moments found in them.
 * A teacher's own replaces it from the URL: ?tour=3:A's first chunk;7:D takes C's row (step:note, separated by ";";
 * an entry that is not a step and a note is left out; ?tour=off shows none). PageDown / PageUp (a clicker) and
 * n / p jump between the moments; the bar above the views shows the note of the moment at the step. */
"use strict";

BS.MAX_NOTE = 300;

/* The tour the page shows: the URL's (this page's, else the page around the frame), else the payload's; entries
 * [{step, note}] within [lo, hi], one per step (notes of a step joined), in step order. */
BS.readTour = (queries, fallback, lo, hi) => {
  const text = queries.map((q) => q.get("tour")).find((t) => t !== null && t !== undefined);
  if (text === undefined) return BS.tidyTour(fallback || [], lo, hi);
  if (text.trim() === "off") return [];
  const own = text.split(";").map((part) => {
    const at = part.indexOf(":");
    const step = at > 0 ? BS.urlNumber(part.slice(0, at), NaN, lo, hi) : NaN;
    return { step, note: part.slice(at + 1).trim().slice(0, BS.MAX_NOTE) };
  });
  const tour = BS.tidyTour(own.filter((m) => !Number.isNaN(m.step) && m.note), lo, hi);
  return tour.length ? tour : BS.tidyTour(fallback || [], lo, hi);
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
