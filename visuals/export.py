"""One self-contained HTML file that plays one or two traces in the browser: plotly.js, the player (HTML, CSS,
JS from ``visuals/web/``) and the payload (``visuals.playback``) all inlined, so it plays offline, from
``file://``, in a slide deck or a course page, with no network request.

URL parameters of the page: ``?step=K`` (start at step K), ``?speed=S`` (steps per second, 1..120),
``?present=1`` (presenter mode).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from html import escape
from pathlib import Path

from steplog.view import TraceView
from visuals.playback import player_payload

WEB = Path(__file__).resolve().parent / "web"
JS_FILES = ("payload.js", "views.js", "player.js")  # in dependency order


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.min.js as shipped inside the ``plotly`` Python package (the same version the pages use)."""
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    if re.search(r"</script", js, re.IGNORECASE):  # would end the inline <script> early
        raise ValueError("plotly.js contains '</script'; it cannot be inlined")
    return js


def payload_json(payload: dict) -> str:
    """The payload as JSON safe inside ``<script type="application/json">``: every ``<`` is written ``\\u003c``,
    so no ``</script>`` or ``<!--`` in a request's text can end the element."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render(payload: dict) -> str:
    """Fill the template in one pass (inserted text is never scanned again for placeholders)."""
    parts = {
        "TITLE": escape(payload["title"]),
        "CSS": (WEB / "player.css").read_text(encoding="utf-8"),
        "PAYLOAD": payload_json(payload),
        "PLOTLY": plotly_js(),
        "JS": "\n".join((WEB / name).read_text(encoding="utf-8") for name in JS_FILES),
    }
    template = (WEB / "player.html").read_text(encoding="utf-8")
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: parts[m.group(1)], template)


def player_html(views: list[TraceView], title: str, **options) -> str:
    """A self-contained HTML page playing ``views`` (one trace, or two on one step clock). ``options`` are
    ``playback.player_payload``'s: ``initial_step``, ``speed`` (steps per second), ``present`` (presenter mode),
    ``window`` (the slot grid's steps either side of the cursor), ``counters``, ``labels``, ``span``."""
    return render(player_payload(views, title, **options))
