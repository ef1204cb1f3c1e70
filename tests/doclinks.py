"""In-document links of the reports: every `#anchor` a report.md / audit.md / audit.html links to exists in that same
document (a Markdown heading's GitHub slug, an HTML id), and nothing points at docs/ paths only a checkout has."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def md_anchors(md: str) -> set[str]:
    out: set[str] = set()
    for line in _FENCE.sub("", md).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            s = slug(m.group(1))
            n = 0
            while (s if not n else f"{s}-{n}") in out:
                n += 1
            out.add(s if not n else f"{s}-{n}")
    return out


def md_broken_links(md: str) -> list[str]:
    """The `](#x)` targets of `md` with no heading `x` in it."""
    anchors = md_anchors(md)
    return [t for t in re.findall(r"\]\(#([^)\s]+)\)", md) if t not in anchors]


def html_broken_links(html: str) -> list[str]:
    """The `href='#x'` targets of `html` with no element `id='x'` in it."""
    ids = set(re.findall(r"""\bid=['"]([^'"]+)['"]""", html))
    return [t for t in re.findall(r"""href=['"]#([^'"]+)['"]""", html) if t not in ids]


def no_checkout_doc_links(text: str) -> bool:
    """No link to docs/rules.md (relative or file:///...): the docs pages are not in the wheel."""
    return "rules.md" not in text and not re.search(r"file://[^'\"\s]*/docs/", text)
