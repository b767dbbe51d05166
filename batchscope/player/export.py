"""One self-contained HTML file that plays one trace, or 2 to 4 on one step clock, in the browser: plotly.js, the
player (HTML, CSS, JS from ``batchscope/player/web/``) and the payload (``batchscope.player.playback``) all inlined,
so it plays offline, from ``file://``, in a slide deck or a course page, with no network request.

URL parameters of the page: ``?step=K`` (start at step K), ``?speed=S`` (steps per second, 1..120), ``?present=1``
(presenter mode), ``?theme=dark`` (the dark page, for dim halls), ``?tour=`` (key moments). The player reads them as the
app does (``url_number``): out of range clamps, anything that is not a plain decimal number gives the default, and the
page never holds a non-finite number.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
from functools import cache, lru_cache
from html import escape
from pathlib import Path

from batchscope.player.playback import player_payload
from batchscope.steplog.view import TraceView

WEB = Path(__file__).resolve().parent / "web"
# in dependency order
JS_FILES = (
    "payload.js",
    "present.js",
    "theme.js",
    "margins.js",
    "views.js",
    "tour.js",
    "steptable.js",
    "costchart.js",
    "player.js",
)


# plotly.js's "basic" bundle, as npm's ``plotly.js-basic-dist-min`` ships it (MIT license, in ``web/vendor/``): the
# trace types ``bar``, ``pie`` and ``scatter``, all that the player and the Metrics charts draw, in 1.19 MB against
# the full bundle's 4.82 MB (maps, 3D, WebGL). Its version is the plotly.js that the ``plotly`` Python package bundles
# (tests/ui/test_page_assets.py), so the figures plotly.py writes mean the same to it. Measured on this 2-core machine:
# a browser without a compiled copy ran the full bundle in 0.9-1.3 s before the player could draw, the basic one in
# about a quarter of that; with the compiled copy, 0.22-0.25 s against 0.15 s.
PLOTLY_BUNDLE = WEB / "vendor" / "plotly-basic-4.1.1.min.js"
PLOTLY_TRACES = frozenset({"bar", "pie", "scatter"})  # the bundle's trace modules (its README)
PLOTLY_RELEASED = 1_789_415_363  # 2026-09-14 19:49:23 UTC: npm's publication time of plotly.js-basic-dist-min 4.1.1


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js's basic bundle (``PLOTLY_BUNDLE``), the text every page runs, inlined or served. Raises ValueError
    if it holds ``</script`` (it would end an inline ``<script>`` early)."""
    js = PLOTLY_BUNDLE.read_text(encoding="utf-8")
    if re.search(r"</script", js, re.IGNORECASE):
        raise ValueError("plotly.js contains '</script'; it cannot be inlined")
    return js


# A plain decimal number, as a URL parameter may hold one; player.js's BS.urlNumber uses the same pattern.
_URL_NUMBER = re.compile(r"[ \t\n\r]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r]*")


def url_number(text: object, default: float, lo: float, hi: float) -> float:
    """A URL parameter as a number in ``[lo, hi]``: a plain decimal number (``"7"``, ``" 7"``, ``"2.6"``, ``"-1"``,
    ``"1e400"``) clamped to the range; anything else (absent, ``""``, ``"abc"``, ``"nan"``, ``"inf"``, ``"0x10"``,
    ``"2.6x"``) gives ``default``. The player (``BS.urlNumber``) reads the exported file's URL the same way."""
    if not isinstance(text, str) or not _URL_NUMBER.fullmatch(text):
        return default
    return min(max(float(text), lo), hi)


def url_step(text: object, default: int, lo: int, hi: int) -> int:
    """A step from the URL (``url_number``), rounded half up as the player's ``clamp`` does, within ``[lo, hi]``."""
    value = url_number(text, default, lo, hi)
    return min(max(math.floor(value + 0.5), lo), hi)


@cache
def web_text(name: str) -> str:
    """A file of the player (``batchscope/player/web/``: its HTML template, CSS and scripts), read once per process:
    every visit's frame is built from them."""
    return (WEB / name).read_text(encoding="utf-8")


def plotly_script(plotly_src: str | None) -> str:
    """The ``<script>`` of plotly.js: loaded from ``plotly_src`` (the app's static copy), else inlined."""
    return f'<script src="{escape(plotly_src)}"></script>' if plotly_src else f"<script>{plotly_js()}</script>"


def payload_json(payload: dict) -> str:
    """The payload as JSON safe inside ``<script type="application/json">``: every ``<`` is written ``\\u003c``,
    so no ``</script>`` or ``<!--`` in a request's text can end the element. A non-finite number (``NaN`` is not
    JSON: the browser would refuse the whole payload and show a blank player) raises ``ValueError``."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def plotly_file(folder: Path) -> str:
    """``PLOTLY_BUNDLE`` copied into ``folder`` if it is not there yet (atomically, the umask's mode); returns its
    file name. The app serves it as a static file, so that a browser loads it once and its player pages carry only
    their data (``render(..., plotly_src=...)``). Raises ``OSError`` if ``folder`` cannot be written.

    The copy's modification time is the bundle's release (``PLOTLY_RELEASED``), which the server sends as
    ``Last-Modified``. Streamlit's static files carry no ``Cache-Control``, so a browser keeps one fresh for a tenth of
    its age (RFC 9111, section 4.2.2, heuristic freshness). A copy written a minute ago was asked for again on every
    visit, and Chromium then ran it without the compiled code it keeps for scripts it loads often: measured here, the
    full bundle's first run took 1.2 s on a later visit instead of 0.25 s. The file's name holds its version, so an
    old date never serves stale code."""
    from batchscope.steplog.trace import write_text_atomic

    path = folder / PLOTLY_BUNDLE.name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(plotly_js(), path)
    if path.stat().st_mtime != PLOTLY_RELEASED:
        os.utime(path, (PLOTLY_RELEASED, PLOTLY_RELEASED))
    return path.name


def packed_payload(payload: dict) -> str:
    """``payload_json(payload)`` compressed with gzip (mtime 0: the same bytes each time) and written in base64, for
    ``render(..., packed=...)``: the sixteen pair's 2.17 MB of JSON become 0.22 MB, which the app sends to the
    browser and the frame parses on every visit (the frame inflates it with the browser's ``DecompressionStream``)."""
    raw = gzip.compress(payload_json(payload).encode("utf-8"), compresslevel=6, mtime=0)
    return base64.b64encode(raw).decode("ascii")


def read_payload(html: str) -> dict:
    """The payload a page of ``render`` plays, as its player reads it (``BS.readPayload``): the packed part, if any,
    with the plain JSON's fields over it. Raises ``ValueError`` if ``html`` holds no payload."""
    found = re.search(r'id="bs-payload">(.*?)</script>', html, re.DOTALL)
    if found is None:
        raise ValueError("no player payload (#bs-payload) in this page")
    packed = re.search(r'id="bs-payload-gz">(.*?)</script>', html, re.DOTALL)
    bulk = json.loads(gzip.decompress(base64.b64decode(packed.group(1)))) if packed else {}
    return {**bulk, **json.loads(found.group(1))}


def render(payload: dict, plotly_src: str | None = None, packed: str | None = None) -> str:
    """Fill the template in one pass (inserted text is never scanned again for placeholders). ``plotly_src``: the
    address of plotly.js to load (the app's static copy, ``plotly_file``); default: plotly.js inlined, for a file that
    plays alone and offline. ``packed``: the bulk of the payload as ``packed_payload`` wrote it (built once per trace
    by the app), with ``payload`` holding only what this visit changes over it (its ``title``, ``initial_step``...);
    default: the whole payload as plain JSON, which a reader of the file can inspect."""
    parts = {
        "TITLE": escape(payload["title"]),
        "CSS": web_text("player.css"),
        "PAYLOAD": payload_json(payload),
        "PACKED": f'<script type="text/plain" id="bs-payload-gz">{packed}</script>' if packed else "",
        "PLOTLY": plotly_script(plotly_src),
        # the served plotly.js asked for first, while the page and its payload are still being parsed
        "PRELOAD": f'<link rel="preload" href="{escape(plotly_src)}" as="script">\n' if plotly_src else "",
        "READ": web_text("payload_read.js"),
        "JS": "\n".join(web_text(name) for name in JS_FILES),
    }
    template = web_text("player.html")
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: parts[m.group(1)], template)


def player_html(views: list[TraceView], title: str, **options) -> str:
    """A self-contained HTML page playing ``views`` (one trace, or 2 to 4 on one step clock). ``options`` are
    ``playback.player_payload``'s: ``initial_step``, ``speed`` (steps per second), ``present`` (presenter mode),
    ``window`` (the slot grid's steps either side of the cursor), ``counters``, ``labels``, ``span``."""
    return render(player_payload(views, title, **options))
