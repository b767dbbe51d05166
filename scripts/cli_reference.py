"""The command-line reference of the docs site, generated from ``batchscope``'s own argument parsers
(``batchscope.cli.main._parser``, with the tools' commands added through the ``batchscope.commands`` entry points),
so the page cannot drift from the flags.

Two ways in:

    python scripts/cli_reference.py            # print the reference as Markdown
    hooks: [scripts/cli_reference.py]          # in mkdocs.yml: `make docs` renders it into docs/cli-reference.md

As an MkDocs hook, ``on_page_markdown`` replaces the line ``<!-- cli-reference -->`` of ``cli-reference.md`` with
one section per command: its purpose, its usage, a table of its arguments (values, default, what each does) and its
examples, all read from the parser (``help``, ``choices``, ``default``, ``epilog``)."""

from __future__ import annotations

import argparse

MARKER = "<!-- cli-reference -->"
PAGE = "cli-reference.md"


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _values(action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action.choices, dict):
        return ", ".join(f"`{c}`" for c in action.choices)
    if action.nargs == 0:
        return "flag"
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    many = {"+": " ...", "*": " ..."}.get(str(action.nargs), "")
    return f"`{metavar}{many}`"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    default = " ".join(map(str, action.default)) if isinstance(action.default, list | tuple) else action.default
    return f"`{default}`"


def _help(action: argparse.Action, exclusive: dict[int, str]) -> str:
    text = action.help or ""
    if "%(" in text:  # argparse's own expansion, as --help prints it
        text = text % {**vars(action), "prog": "", "default": action.default}
    if action.required and action.option_strings:
        text += " (required)"
    if id(action) in exclusive:
        text += f" (one of {exclusive[id(action)]})"
    return _cell(text)


def command_section(name: str, parser: argparse.ArgumentParser, summary: str) -> str:
    """One command's section: heading, summary, usage, the arguments' table, the epilog (examples) as written."""
    exclusive = {}
    for group in parser._mutually_exclusive_groups:
        names = " / ".join(f"`{a.option_strings[0]}`" for a in group._group_actions if a.option_strings)
        for action in group._group_actions:
            exclusive[id(action)] = names + (", required" if group.required else "")
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        flag = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
        rows.append(f"| {flag} | {_values(action)} | {_default(action)} | {_help(action, exclusive)} |")
    formatter = argparse.HelpFormatter(parser.prog, width=100)  # the same width on every machine
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    usage = formatter.format_help().strip("\n")
    out = [f"## `{name}`", "", _cell(summary or parser.description or ""), "", "```text", usage, "```", ""]
    if rows:
        out += ["| argument | values | default | what it does |", "|---|---|---|---|", *rows, ""]
    if parser.epilog:
        out += ["```text", parser.epilog.strip("\n"), "```", ""]
    return "\n".join(out)


def reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole reference: the top-level options, then every sub-command in the parser's order."""
    if parser is None:
        from batchscope.cli.main import _parser

        parser = _parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    summaries = {choice.dest: choice.help for choice in sub._choices_actions}
    parts = [command_section("batchscope", _top_level(parser), parser.description or "")]
    parts += [command_section(f"batchscope {name}", p, summaries.get(name, "")) for name, p in sub.choices.items()]
    return "\n".join(parts)


def _top_level(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The top-level parser without its sub-command argument (each sub-command has a section of its own)."""
    top = argparse.ArgumentParser(prog=parser.prog, description=parser.description, epilog=parser.epilog)
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            top._add_action(action)
    return top


def on_page_markdown(markdown: str, page, **_) -> str:
    """MkDocs hook: the generated reference in place of ``MARKER`` on ``cli-reference.md``."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE}: the line {MARKER} (where the generated reference goes) is missing")
    return markdown.replace(MARKER, reference())


if __name__ == "__main__":
    print(reference())
