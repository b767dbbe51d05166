"""``python -m batchscope frames TRACE [TRACE2 ...] --steps 0-13 --out DIR``: stills and animations for slides (1 to 4
traces of one workload on one step clock, as ``html`` plays them).

PowerPoint, Keynote and Google Slides cannot embed an HTML player; this writes what they can: one PNG per step
(``step-0007.png``), optionally each chart of the step as SVG (``--svg``: ``step-0007-slots.svg``, ``-budget``,
``-blocks``, vector, from plotly's own SVG export), and ``--gif`` / ``--mp4`` an animation of the steps at ``--fps``
frames per second. Every image is a screenshot of the exported player itself (``html``), opened from ``file://`` in
Debian's headless Chromium (``batchscope.tools.app_server.launch_chromium``), so it looks exactly like the app;
``--present`` takes presenter mode, the tour's note of a key moment included; ``--crop`` leaves the control bar out
(its buttons, step slider and keys line: the views take the whole image); ``--theme dark`` takes the player's dark
page (``?theme=dark``, for dim halls). GIF and MP4 are written with imageio (MP4 with its bundled ffmpeg, H.264).
"""

from __future__ import annotations

import base64
import re
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np

MAX_SIZE = (3840, 2160)
MAX_FRAMES = 2000
CHARTS = ("slots", "budget", "blocks")
THEMES = ("light", "dark")
# --crop: the player's control bar and its keys line are not drawn (batchscope/player/web/player.html), so the views
# lay out in the whole image
CROP_CSS = "<style>.bs-controls, .bs-keys {display: none !important}</style>"


def add_frames(sub) -> None:
    """Entry point: the ``frames`` command."""
    f = sub.add_parser(
        "frames",
        help="write PNG stills (and SVG charts, a GIF or an MP4) of chosen steps, for slides",
        epilog="example:\n  python -m batchscope frames batchscope/assets/traces/seed-abcd-static.jsonl "
        "batchscope/assets/traces/seed-abcd-continuous.jsonl --steps 0-13 --out stills --present --gif",
    )
    f.add_argument(
        "traces", nargs="+", metavar="TRACE", help="1 to 4 trace files of one workload (sides A, B, C, D in order)"
    )
    f.add_argument("--steps", default="0-", help="steps: '3', '0-13', '0-' (to the end) or '2,5,9' (default: all)")
    f.add_argument("--out", required=True, help="the folder to write into (created; refused if it holds stills)")
    f.add_argument("--size", default="1280x720", help="viewport WIDTHxHEIGHT in CSS pixels (default 1280x720)")
    f.add_argument("--present", action="store_true", help="presenter mode (large type, the tour's notes)")
    f.add_argument("--crop", action="store_true", help="leave the control bar out: the views fill the image")
    f.add_argument("--theme", default="light", help="light (default) or dark: the player's dark page, for dim halls")
    f.add_argument("--svg", action="store_true", help="also each chart of each step as SVG")
    f.add_argument("--gif", action="store_true", help="also an animation of the steps, frames.gif")
    f.add_argument("--mp4", action="store_true", help="also an animation of the steps, frames.mp4 (H.264)")
    f.add_argument("--fps", type=float, default=2.0, help="animation frames (steps) per second, in [0.2, 30]")
    f.add_argument("--tour", metavar="FILE", help="your own key moments (as html --tour)")
    f.add_argument("--force", action="store_true", help="overwrite stills already in --out")
    f.set_defaults(handler=_frames)


def parse_steps(text: str, num_steps: int) -> list[int]:
    """``--steps``: ``K``, ``A-B``, ``A-`` or a comma-separated list of them, every step in [0, num_steps - 1].
    Raises ``ValueError`` naming the part and the range."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?", part)
        if not m:
            raise ValueError(f"--steps={text!r}: {part!r} is not a step K, a range A-B or A- (to the end)")
        a = int(m.group(1))
        b = (int(m.group(3)) if m.group(3) else num_steps - 1) if m.group(2) else a
        if not 0 <= a <= b < num_steps:
            raise ValueError(f"--steps={text!r}: {part.strip()!r} is out of range: steps in [0, {num_steps - 1}]")
        out += [k for k in range(a, b + 1) if k not in out]
    if len(out) > MAX_FRAMES:
        raise ValueError(f"--steps={text!r}: {len(out)} steps; at most {MAX_FRAMES} per call")
    return out


def parse_size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text.strip())
    if not m or not (320 <= int(m.group(1)) <= MAX_SIZE[0] and 240 <= int(m.group(2)) <= MAX_SIZE[1]):
        raise ValueError(
            f"--size={text!r}: WIDTHxHEIGHT with width in [320, {MAX_SIZE[0]}], height in [240, {MAX_SIZE[1]}]"
        )
    return int(m.group(1)), int(m.group(2))


def _check(args) -> tuple[Path, tuple[int, int]]:
    size = parse_size(args.size)
    if args.theme not in THEMES:
        raise ValueError(f"--theme={args.theme!r}: must be one of {', '.join(THEMES)}")
    if not 0.2 <= args.fps <= 30:
        raise ValueError(f"--fps={args.fps} is out of range: a number in [0.2, 30] frames per second")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and any(out.glob("step-*")) and not args.force:
        raise ValueError(f"--out {out}: already holds stills; add --force to overwrite them")
    from batchscope.tools.app_server import CHROMIUM

    if not Path(CHROMIUM).exists():
        raise ValueError(f"frames needs Debian's Chromium at {CHROMIUM}: apt-get install chromium")
    return out, size


def _frames(args) -> int:
    from batchscope.tools.html_export import player_page

    out, size = _check(args)
    html, num_steps, span = player_page(args.traces, 0, tour_file=args.tour)
    steps = parse_steps(args.steps, num_steps)
    if span != (0, num_steps - 1) and any(not span[0] <= k <= span[1] for k in steps):
        html, _, span = player_page(args.traces, steps[0], tour_file=args.tour)
        if any(not span[0] <= k <= span[1] for k in steps):
            raise ValueError(
                f"--steps={args.steps!r}: a long trace is drawn a span at a time; give steps within {span[0]}-{span[1]}"
            )
    out.mkdir(parents=True, exist_ok=True)
    pngs = render_stills(html, steps, out, size, args.present, args.svg, crop=args.crop, theme=args.theme)
    if args.gif or args.mp4:
        write_animations(pngs, out, args.fps, gif=args.gif, mp4=args.mp4)
    made = " + ".join(
        x for x, on in (("SVG charts", args.svg), ("frames.gif", args.gif), ("frames.mp4", args.mp4)) if on
    )
    print(f"wrote {len(pngs)} stills to {out}{' + ' + made if made else ''} ({size[0]}x{size[1]})", file=sys.stderr)
    return 0


def render_stills(
    html: str,
    steps: list[int],
    out: Path,
    size: tuple[int, int],
    present: bool = False,
    svg: bool = False,
    crop: bool = False,
    theme: str = "light",
) -> list[Path]:
    """Open the player page ``html`` in headless Chromium at ``size`` and screenshot each step of ``steps`` once it
    is drawn (the player's own ``bsPlayer.state.drawn``); with ``svg`` also each chart through plotly's
    ``toImage``; ``crop``: without the control bar (``CROP_CSS``); ``theme``: ``light`` or ``dark`` (the player's
    ``?theme=``). Returns the PNG paths in step order."""
    from playwright.sync_api import sync_playwright

    from batchscope.tools.app_server import launch_chromium

    if crop:
        html = html.replace("</head>", CROP_CSS + "</head>", 1)
    params = {"step": steps[0], **({"present": 1} if present else {}), **({"theme": "dark"} if theme == "dark" else {})}
    query = urllib.parse.urlencode(params)
    pngs = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        page_file = Path(tmp) / "player.html"
        page_file.write_text(html, encoding="utf-8")
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": size[0], "height": size[1]})
            page.set_default_timeout(120_000)
            page.goto(f"{page_file.as_uri()}?{query}")
            page.wait_for_function("window.bsPlayer && bsPlayer.state.complete && document.fonts.status === 'loaded'")
            for k in steps:
                page.evaluate("(k) => bsPlayer.seek(k)", k)
                page.wait_for_function(f"bsPlayer.state.drawn === {k}")
                pngs.append(out / f"step-{k:04d}.png")
                page.screenshot(path=str(pngs[-1]))
                if svg:
                    _write_svgs(page, out, k)
        finally:
            browser.close()
    return pngs


def _write_svgs(page, out: Path, k: int) -> None:
    urls = page.evaluate(
        """async (names) => { const out = [];
          for (const side of document.querySelectorAll('.bs-side')) for (const n of names) {
            const el = side.querySelector('.bs-plot.bs-' + n);
            out.push(el && el.data ? await Plotly.toImage(el, {format: 'svg', width: el.clientWidth,
              height: el.clientHeight}) : null); }
          return out; }""",
        list(CHARTS),
    )
    sides = len(urls) // len(CHARTS)
    for i, url in enumerate(urls):
        if url is None:
            continue
        side = f"-{'abcd'[i // len(CHARTS)]}" if sides > 1 else ""
        head, _, body = url.partition(",")
        data = base64.b64decode(body) if ";base64" in head else urllib.parse.unquote(body).encode()
        (out / f"step-{k:04d}{side}-{CHARTS[i % len(CHARTS)]}.svg").write_bytes(data)


def write_animations(pngs: list[Path], out: Path, fps: float, gif: bool, mp4: bool) -> None:
    """``frames.gif`` (looping, ``1000 / fps`` ms a frame) and/or ``frames.mp4`` (H.264 at ``fps``) of ``pngs``."""
    import imageio.v3 as iio

    frames = np.stack([iio.imread(p)[..., :3] for p in pngs])  # (frames, height, width, 3) uint8
    if gif:
        iio.imwrite(out / "frames.gif", frames, extension=".gif", duration=1000 / fps, loop=0)
    if mp4:
        import imageio.v2 as iio2

        ims: list[Any] = list(frames)
        iio2.mimwrite(
            out / "frames.mp4",
            ims,
            fps=fps,
            codec="libx264",
            macro_block_size=1,
            quality=8,
            ffmpeg_log_level="error",
        )
