"""Small English helpers for every generated sentence (narration, moments, quiz, glossary): a count with its noun
(``plural(2, "token")``: "2 tokens"), a list of names (``join(["A", "B", "C"])``: "A, B and C") and the article
before a number (``article(8)``: "an", for "an 8-token chunk"; ``article(7)``: "a")."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def join(items: list[str] | tuple[str, ...], most: int | None = None) -> str:
    """``A``, ``A and B``, ``A, B and C`` ("" for none); past ``most`` items the first ``most - 2`` and "N more"
    (a server runs hundreds of requests)."""
    items = list(items)
    if most is not None and len(items) > most:
        items = [*items[: most - 2], f"{len(items) - most + 2} more"]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def article(n: int) -> str:
    """The indefinite article before the number ``n`` read aloud: ``an`` where its spoken form starts with a vowel
    sound (eight, eleven, eighteen: 8, 11, 18, 80-89, 800-899, 8,000, 11,000, 18,000, ...), else ``a``. The number
    is read by its leading group of three digits ("eleven thousand", "one hundred eighteen"); 1,100 is "one
    thousand one hundred"."""
    lead = abs(n)
    while lead >= 1000:
        lead //= 1000
    return "an" if lead in (11, 18) or str(lead)[0] == "8" else "a"
