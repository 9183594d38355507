"""The app in a browser: textual-serve runs one app process per page (see
`stackrace.commands.web` for the command each page runs and how its stacks stop).

**Nothing from the internet.** A meetup venue is often offline, and a page that waits
for a font server shows nothing useful. textual-serve's page asks Google Fonts for its
one web font (Roboto Mono), though the package ships that font's files among its own
static files; everything else (its script, its style sheet) it serves itself. The page
served here is textual-serve's own template with that one link replaced by an
`@font-face` for the shipped file, written to a private temporary directory for the
server's lifetime. Should a later textual-serve add another outside URL, `serve` says
so in one line rather than hide it (`tests/e2e/test_web.py` opens the page in Chromium
with every outside host unreachable and checks that no request leaves the machine).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

# the font textual-serve ships (static/fonts), declared where the page asked Google
_FONT_FACE = (
    "<style>@font-face { font-family: 'Roboto Mono'; font-weight: 100 700; "
    "src: url('{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf') "
    "format('truetype'); }</style>"
)
_GOOGLE_FONTS = re.compile(r"<link\b[^>]*https?://fonts\.googleapis\.com[^>]*>", re.S)
# a URL the page would fetch from elsewhere (an href or src off this server)
_OUTSIDE = re.compile(r"""(?:href|src)\s*=\s*["'](https?://[^"']+)""")


def offline_page(template: str) -> tuple[str, list[str]]:
    """textual-serve's page template with its web font served locally, and any URL
    outside this server it still loads."""
    text = _GOOGLE_FONTS.sub(_FONT_FACE, template)
    return text, _OUTSIDE.findall(text)


def _offline_templates() -> tuple[Path, list[str]]:
    import textual_serve

    shipped = Path(textual_serve.__file__).parent / "templates" / "app_index.html"
    text, outside = offline_page(shipped.read_text(encoding="utf-8"))
    directory = Path(tempfile.mkdtemp(prefix="stackrace-web-"))  # 0700, ours alone
    (directory / "app_index.html").write_text(text, encoding="utf-8")
    return directory, outside


def serve(command: str, host: str, port: int, public_url: str | None) -> int:
    """Serve `command` (a shell command running the app) until Ctrl-C; an exit code."""
    try:
        from textual_serve.server import Server
    except ImportError:
        print(
            "stackrace web: textual-serve is not installed (pip install textual-serve)",
            file=sys.stderr,
        )
        return 2
    templates, outside = _offline_templates()
    for url in outside:
        print(f"stackrace web: the page still loads {url} from the internet", file=sys.stderr)
    try:
        Server(
            command,
            host=host,
            port=port,
            title="stackrace",
            public_url=public_url,
            templates_path=templates,
        ).serve()
    except OSError as exc:  # the address cannot be bound (taken since the check, not ours)
        print(
            f"stackrace web: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr
        )
        return 2
    finally:
        shutil.rmtree(templates, ignore_errors=True)
    return 0
