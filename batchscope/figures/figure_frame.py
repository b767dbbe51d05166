"""A page of plotly figures for one of the app's frames, drawn by the plotly.js the players load (the app's static
copy, which the browser keeps compiled), not by Streamlit's own plotly element.

Why (measured with ``scripts/measure_page_load.py`` on the 2-core VM, 2026-12-03): on every visit to the Metrics
page, Streamlit's plotly element loaded and ran its own bundle of plotly.js before its first chart, whose svg
appeared 1.7-2.1 s after the page's first markdown; a frame that loads ``static/plotly-*.min.js`` finds it in the
browser's HTTP and code caches, as the players do. The figures are the same ``go.Figure`` objects, sent as plotly
JSON with the players' theme (``plotly_white``).
"""

from __future__ import annotations

import json
import re
from html import escape

import plotly.graph_objects as go
import plotly.io as pio

from batchscope.figures.packing import figure_json
from batchscope.player.export import payload_json, plotly_script, web_text

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{margin: 0; font-family: "Source Sans Pro", "Source Sans 3", "Helvetica Neue", Arial, sans-serif}}
.bs-row {{display: flex; gap: 8px}} .bs-chart {{flex: 1 1 0; min-width: 0}}
</style></head>
<body>
<div class="bs-charts" id="bs-charts" aria-label="{title}"></div>
<script type="application/json" id="bs-figures">{figures}</script>
{plotly}
<script>{margins}</script>
<script>
"use strict";
(function () {{
  const spec = JSON.parse(document.getElementById("bs-figures").textContent);
  const root = document.getElementById("bs-charts");
  const config = {{ responsive: true, displaylogo: false }};
  const divs = [];
  spec.rows.forEach(function (row) {{
    const line = document.createElement("div");
    line.className = "bs-row";
    root.appendChild(line);
    row.forEach(function (i) {{
      const div = document.createElement("div");
      div.className = "bs-chart";
      div.style.height = (spec.figures[i].layout.height || 450) + "px";  // the frame's height before plotly runs
      line.appendChild(div);
      divs[i] = div;
    }});
  }});
  // one figure per task, the browser painting in between: the first chart shows before the others are drawn
  function draw(i) {{
    if (i === spec.figures.length) {{ document.body.dataset.bsDrawn = String(i); return; }}
    const fig = spec.figures[i];
    const layout = Object.assign({{ template: {{ layout: spec.template }} }}, fig.layout);
    // drawn once, with the margins plotly.js's automargin chose for this figure at this width before (margins.js)
    BS.plot(BS.figureKey(divs[i], fig.data, layout), divs[i], fig.data, layout, config).then(function () {{
      if (i === 0) performance.mark("bs-first-frame");  // scripts/measure_page_load.py: the first chart is drawn
      setTimeout(function () {{ draw(i + 1); }}, 0);
    }});
  }}
  draw(0);
}})();
</script>
</body></html>
"""


def figures_html(rows: list[list[go.Figure]], title: str, plotly_src: str | None = None) -> str:
    """A page drawing the figures of ``rows``, each row's side by side in equal widths, top to bottom; each figure as
    tall as its layout's ``height`` (plotly's 450 px if unset). ``title``: the page's title (and the charts' label
    for a screen reader); ``plotly_src``: the address of plotly.js (the app's static copy,
    ``batchscope.player.export.plotly_file``); default: plotly.js inlined. When every figure is drawn,
    ``document.body.dataset.bsDrawn`` holds their number. Raises ``ValueError`` if there is no row or a row is
    empty, or a figure holds a non-finite number (``payload_json``)."""
    if not rows or not all(rows):
        raise ValueError("rows: at least one row, and at least one figure in every row")
    figures = [f for row in rows for f in row]
    starts = [sum(map(len, rows[:i])) for i in range(len(rows))]
    spec = {
        "template": pio.templates["plotly_white"].to_plotly_json()["layout"],
        "figures": [figure_json(f) for f in figures],
        "rows": [list(range(start, start + len(row))) for start, row in zip(starts, rows)],
    }
    plotly, margins = plotly_script(plotly_src), web_text("margins.js")
    return TEMPLATE.format(title=escape(title), figures=payload_json(spec), plotly=plotly, margins=margins)


def read_figures(html: str) -> list[dict]:
    """The figures (plotly JSON: ``data``, ``layout``) a page of ``figures_html`` draws. Raises ``ValueError`` if
    ``html`` holds none."""
    found = re.search(r'id="bs-figures">(.*?)</script>', html, re.DOTALL)
    if found is None:
        raise ValueError("no figures (#bs-figures) in this page")
    return json.loads(found.group(1))["figures"]
