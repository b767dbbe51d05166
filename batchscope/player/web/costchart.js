/* Batchscope player: the step-cost chart (batchscope/figures/step_cost.py step_cost_player), each step's time against the
 * tokens it computed, drawn once per side; a ring over the plot marks the current step's point and a line under it
 * says what that step cost, moved each step without redrawing the figure. The payload carries it where a page asks
 * for it (the Walkthrough); without it nothing is drawn. The figure is of the whole trace: drawn after the first
 * frame, as the request timeline is. */
"use strict";

BS.CostChart = class {
  /* side: the BS.Side it belongs to (its template); spec: {figure, points, title}; parent: the side's element. */
  constructor(side, spec, parent) {
    this.side = side;
    this.spec = spec;
    const box = this.box = el("div", "bs-fig bs-fig-cost", parent);
    el("div", "bs-fig-title", box, spec.title);
    this.plot = el("div", "bs-plot bs-cost", box);
    this.line = el("div", "bs-cost-now", box);
    this.at = -1;
  }

  /* The figure, drawn once with the whole trace's other figures, after the first frame (BS.Side.drawWhole). */
  drawFigure() {
    const plot = this.plot, data = this.spec.figure.data;
    const layout = Object.assign({}, this.spec.figure.layout, { template: this.side.template });
    BS.plot(BS.figureKey(plot, data, layout), plot, data, layout);
    this.ring = el("div", "bs-cost-ring", plot);
    plot.on("plotly_afterplot", () => this.redraw());
    this.redraw();
  }

  redraw() { const k = this.at; this.at = -1; this.draw(k); }

  draw(k) {
    if (k === this.at || k < 0) return;
    this.at = k;
    const p = this.spec.points[k], fl = this.plot._fullLayout;
    this.line.textContent = p ? `step ${k}: ${p[0]} token${p[0] === 1 ? "" : "s"} computed in ${p[1].toFixed(1)} ms`
      : `step ${k}: no tokens computed`;
    if (!this.ring) return; // the figure is not drawn yet (drawFigure)
    this.ring.hidden = !p || !fl || !fl.xaxis || !fl.xaxis.l2p;
    if (this.ring.hidden) return;
    const x = fl.xaxis._offset + fl.xaxis.l2p(p[0]), y = fl.yaxis._offset + fl.yaxis.l2p(p[1]);
    Object.assign(this.ring.style, { left: `${x}px`, top: `${y}px` });
    this.ring.dataset.bsStep = String(k);
  }
};
