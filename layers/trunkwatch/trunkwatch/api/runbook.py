"""`GET /runbook`: the runbook as an HTML page, with an anchor per alert.

The markdown's one source ships in the package (static/runbook.md; the documentation links
to it) and is rendered by the small subset of markdown it uses: headings, paragraphs, lists,
fenced code, `code`, **bold** and [links](http...). Everything is HTML-escaped before any
markup is added, and only http(s) and in-page links become links, so the page is inert
under the status page's strict Content-Security-Policy. Section ids are the heading in
lower case with dashes (`## TrunkBroken` -> `#trunkbroken`), which alerts' default
`runbook_url` points at.
"""

from __future__ import annotations

import functools
import html
import re

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from trunkwatch.api.page import HTML, SECURITY_HEADERS, asset

router = Router()

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_LINK = re.compile(r"\[([^\]]+)\]\(((?:https?://|#)[^)\s]+)\)")
_ORDERED = re.compile(r"^\d+\.\s+")


def anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def _inline(text: str) -> str:
    """Escape, then mark up; code spans are set aside first so nothing inside them changes."""
    spans: list[str] = []

    def keep(found: re.Match[str]) -> str:
        spans.append(f"<code>{html.escape(found.group(1))}</code>")
        return f"\x00{len(spans) - 1}\x00"

    text = html.escape(_CODE.sub(keep, text), quote=True)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _LINK.sub(r'<a href="\2">\1</a>', text)
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)


def render(markdown: str) -> str:
    """The markdown's body as HTML."""
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    kind = ""  # "ul" or "ol" while a list is open
    code: list[str] | None = None

    def flush() -> None:
        nonlocal kind
        if paragraph:
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            out.append(f"<{kind}>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + f"</{kind}>")
            items.clear()
            kind = ""

    for line in markdown.splitlines():
        if code is not None:
            if line.startswith("```"):
                out.append(f"<pre><code>{html.escape(chr(10).join(code))}</code></pre>")
                code = None
            else:
                code.append(line)
            continue
        stripped = line.strip()
        heading = re.match(r"^(#{1,3})\s+(.*)$", line)
        if line.startswith("```"):
            flush()
            code = []
        elif heading:
            flush()
            level, title = len(heading.group(1)), heading.group(2).strip()
            out.append(f'<h{level} id="{anchor(title)}">{_inline(title)}</h{level}>')
        elif not stripped:
            flush()
        elif stripped.startswith("- ") or _ORDERED.match(stripped):
            wanted = "ul" if stripped.startswith("- ") else "ol"
            if paragraph or (kind and kind != wanted):
                flush()
            kind = wanted
            items.append(stripped[2:] if wanted == "ul" else _ORDERED.sub("", stripped))
        elif items and line.startswith("  "):
            items[-1] += " " + stripped  # a list item's continuation line
        else:
            if items:
                flush()
            paragraph.append(stripped)
    flush()
    return "\n".join(out)


@functools.cache
def page() -> str:
    body = render(asset("runbook.md"))
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n<title>trunkwatch runbook</title>\n'
        '<link rel="icon" href="data:,">\n<link rel="stylesheet" href="static/app.css">\n'
        f'</head>\n<body>\n<main class="runbook">\n{body}\n</main>\n</body>\n</html>\n'
    )


@router.get("/runbook", include_in_schema=False)
def runbook() -> Response[str]:
    return Response(status_code=200, content_type=HTML, body=page(), headers=SECURITY_HEADERS)
