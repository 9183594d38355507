"""Text from outside made safe for where it is shown: one function per sink.

A server's log line, an app's import error, a header a server sent, a stack name in a
run file, a recording or a journal: none of it is ours, and each sink reads some bytes
as commands. A terminal runs escape sequences (`ESC ]0;PWNED BEL` sets its title,
`ESC [2J` clears it); Rich and Textual read `[red]` and `[$var]` as markup; Markdown
renders `|` as a cell's end and HTML as HTML; an SVG or XML file with an ESC or BEL in
it is not XML at all (XML 1.0 forbids most control characters), and a browser shows
`<script>` in an HTML page as a script. So every piece of outside text passes through
the function of its sink, here, and nowhere else escapes by hand:

    terminal(text)   a terminal line: control characters shown as `\\x1b`, `\\x07`, …
    markup(text)     Rich markup (the terminal's tables and lines): the same, every `[`
                     escaped
    textual_markup(text)  Textual's markup (the app's labels and titles): the same,
                     by Textual's rule for a backslash
    markdown(text)   a Markdown table cell or line: the same, HTML escaped, `|`, `[`
                     and backticks escaped
    markdown_code(text)  a Markdown code span (a path): fenced by more backticks than it
                     holds, so nothing in it is syntax
    html(text)       an HTML page: the same, and `& < > " '` escaped
    xml(text)        SVG and XML written by hand, text or attribute: always valid XML 1.0
    xml_chars(text)  XML an XML library writes (JUnit's ElementTree, which escapes
                     `& < >` itself but writes an ESC raw): only the characters
                     XML 1.0 forbids made visible

Why made visible and not dropped: a log line with an escape sequence in it is evidence
(a server that colours its log, or one that attacks the terminal), and `\\x1b[2J` says
which. Every function starts from `terminal`, so one rule decides what a control
character is: whatever `str.isprintable` refuses (C0 and C1 controls, DEL, bidi
overrides and other format characters, line and paragraph separators, surrogates and
unassigned code points), which also covers every character XML 1.0 forbids. Newlines
are kept only where a sink can hold them (`newlines=True`): a log tail in a terminal or
an HTML `<pre>`; a table cell or an SVG label gets a space.
"""

from __future__ import annotations

import html as _html
import re

# a run of backslashes before "[": doubled, so that the "[" escaped after them is
# still escaped (Rich and Textual halve a run of backslashes before a "[")
_BRACKET = re.compile(r"(\\*)\[")
_TRAILING_BACKSLASHES = re.compile(r"(\\+)$")
# what Markdown reads as syntax that changes what a cell or a line is: the cell's end,
# code spans (which would hide a `|`), links and images (`[x](javascript:…)`) and the
# escape itself; HTML is escaped before these. Emphasis (`*`, `_`, `~`) changes only
# how a word looks, and stays as written: `~2 ms` and `db_script` read as they are
_MARKDOWN = re.compile(r"([\\`|\[\]])")


def _shown(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def terminal(text: str, *, newlines: bool = False) -> str:
    """`text` with every control character shown as its escape (`\\x1b`), so nothing
    reaches a terminal that it would run; a tab is a space; newlines (CRLF included)
    are kept when `newlines`, else each is a space."""
    if text.isprintable():
        return text
    text = text.replace("\r\n", "\n").replace("\t", " ")
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch == "\n":
            out.append("\n" if newlines else " ")
        else:
            out.append(_shown(ch))
    return "".join(out)


def markup(text: str, *, newlines: bool = False) -> str:
    """`text` for Rich markup: `terminal`'s, and every `[` escaped (Rich reads `\\[` as a
    plain `[`, and halves a run of backslashes before a `[`)."""
    safe = _BRACKET.sub(lambda m: m.group(1) * 2 + "\\[", terminal(text, newlines=newlines))
    # a trailing backslash would escape the "[" of the markup that follows it
    return _TRAILING_BACKSLASHES.sub(lambda m: m.group(1) * 2, safe)


def textual_markup(text: str, *, newlines: bool = False) -> str:
    """`text` for Textual's markup: `terminal`'s, and every `[` escaped. Textual reads
    `[$x]`, `[Red]` and `[ red]` as markup (its own `escape` lets those through) and,
    unlike Rich, takes a backslash before `\\[` literally: no doubling here."""
    return terminal(text, newlines=newlines).replace("[", "\\[")


def markdown(text: str) -> str:
    """`text` as one Markdown table cell or one line: no newline, HTML escaped (Markdown
    renders HTML), and `|`, backticks and link brackets taken literally."""
    # `&` and `<` are all that start HTML (a tag, an entity, an autolink); a `>` inside
    # a line is text (the claims' "a > b" read as written)
    shown = terminal(text).replace("&", "&amp;").replace("<", "&lt;")
    return _MARKDOWN.sub(r"\\\1", shown)


def markdown_code(text: str) -> str:
    """`text` as one Markdown code span, outside a table (a path, a command): fenced by
    one backtick more than its longest run of them, so nothing in it is syntax (a code
    span renders no HTML and no emphasis); `terminal`'s, on one line."""
    shown = terminal(text)
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def html(text: str, *, newlines: bool = False) -> str:
    """`text` for an HTML page, element text or a quoted attribute."""
    return _html.escape(terminal(text, newlines=newlines), quote=True)


def xml(text: str) -> str:
    """`text` for XML 1.0 (SVG, JUnit), element text or a quoted attribute: no character
    XML forbids (shown as its escape instead), `& < > " '` escaped; always well formed."""
    return _html.escape(terminal(text), quote=True)


def xml_chars(text: str, *, newlines: bool = True) -> str:
    """`text` for an XML library that escapes `& < > "` itself (xml.etree writes control
    characters raw, and the file is then not XML): `terminal`'s, newlines kept."""
    return terminal(text, newlines=newlines)
