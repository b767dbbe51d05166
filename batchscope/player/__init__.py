"""The browser player: the payload a trace becomes and the self-contained page that plays it (``web/``)."""
