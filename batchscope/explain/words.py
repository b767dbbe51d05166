"""Small English helpers for the generated sentences: a count with its noun (``plural(2, "token")``: "2 tokens")
and the article before a number (``article(8)``: "an", for "an 8-token chunk"; ``article(7)``: "a")."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def article(n: int) -> str:
    """The indefinite article before the number ``n`` read aloud: ``an`` where its spoken form starts with a vowel
    sound (eight, eleven, eighteen: 8, 11, 18, 80-89, 800-899, 8,000, 11,000, 18,000, ...), else ``a``. The number
    is read by its leading group of three digits ("eleven thousand", "one hundred eighteen"); 1,100 is "one
    thousand one hundred"."""
    lead = abs(n)
    while lead >= 1000:
        lead //= 1000
    return "an" if lead in (11, 18) or str(lead)[0] == "8" else "a"
