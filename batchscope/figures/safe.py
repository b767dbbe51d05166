"""Text from a trace, made safe to show in a plotly figure.

Plotly draws titles, legends, tick labels, bar text and hover labels from a small subset of HTML (``<b>``, ``<br>``,
``<a href>``, ``<span style>``, entities). A request id, a policy name or a token's text comes from a file that
anyone may have written (an uploaded trace, a workload), so it is escaped before it joins a label: an id such as
``<a href="https://example.com">x</a>`` then reads as those characters instead of becoming a link. ``%{`` is escaped
too, so that data never becomes a hover-template field.
"""

from __future__ import annotations

import html


def esc(text: object) -> str:
    """``text`` as literal characters in a plotly label."""
    return html.escape(str(text), quote=False).replace("%{", "%&#123;")
