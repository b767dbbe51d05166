/* Batchscope player: the steps table (batchscope/figures/steps_table.py), one row per step of the span, that follows the
 * step clock: the current step's row is marked and kept in the middle of the table's own scroll box (the page
 * around the frame does not scroll), and a click on a row goes to that step. The payload carries it only where a
 * page asks for it (the Trace page); without it nothing is drawn. Its rows are built after the first frame
 * (BS.Player.draw calls build): laying out a long trace's table (1,222 rows of 11 cells on the sixteen static
 * trace) took 180-200 ms before the step's views could be drawn. */
"use strict";

BS.StepTable = class {
  constructor(P, spec, seek) {
    Object.assign(this, { P, spec, seek, current: null, rows: [], built: false, step: null });
    this.box = document.getElementById("bs-table");
  }

  /* The table's rows, then the row of the step drawn last marked. */
  build() {
    const { P, spec, seek, box } = this;
    if (this.built || !spec || !box) return;
    this.built = true;
    box.hidden = false;
    const scroll = this.scroll = document.createElement("div");
    scroll.className = "bs-table-scroll";
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    for (const name of spec.columns) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = name;
      head.appendChild(th);
    }
    const body = table.createTBody();
    this.rows = spec.rows.map((cells, i) => {
      const tr = body.insertRow();
      tr.dataset.bsStep = String(spec.first + i);
      cells.forEach((c, j) => {
        const td = tr.insertCell();
        td.textContent = String(P.t(c));
        if (spec.words.includes(j)) td.className = "bs-words";
      });
      return tr;
    });
    body.addEventListener("click", (e) => {
      const tr = e.target.closest("tr");
      if (tr) seek(parseInt(tr.dataset.bsStep, 10));
    });
    const caption = document.createElement("div");
    caption.className = "bs-caption";
    caption.textContent = spec.caption;
    scroll.appendChild(table);
    box.append(scroll, caption);
    if (this.step !== null) this.draw(this.step);
  }

  draw(k) {
    this.step = k;
    if (!this.built) return;
    const tr = this.spec ? this.rows[k - this.spec.first] || null : null;
    if (tr === this.current) return;
    if (this.current) { this.current.classList.remove("bs-current"); this.current.removeAttribute("aria-current"); }
    this.current = tr;
    if (!tr) return;
    tr.classList.add("bs-current");
    tr.setAttribute("aria-current", "step");
    const s = this.scroll; // the row in the middle of the box: the steps before and after it in sight
    s.scrollTop = Math.max(0, tr.offsetTop - (s.clientHeight - tr.offsetHeight) / 2);
  }
};
