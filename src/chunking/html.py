"""HTML → Markdown (markdownify, on BeautifulSoup) → the Markdown chunker.

LlamaIndex's HTMLNodeParser emits one node per run of same-named tags (a `<b>` inside a paragraph becomes
a node of its own) and keeps neither heading paths, tables nor `<pre>` blocks, so HTML is turned into
Markdown instead (headings as `#`, tables as pipe tables, `<pre>` as fenced code) and chunked as Markdown.
"""

from __future__ import annotations

from dataclasses import replace

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

from .blocks import ChunkedDocument
from .markdown import chunk_markdown

# Markdown's escapes (snake\_case, 2 \* 3) would only add noise to embedded and quoted text.
_CONVERTER = MarkdownConverter(heading_style="ATX", bullets="-", escape_underscores=False,
                               escape_asterisks=False, escape_misc=False)
_INVISIBLE = ["head", "script", "style", "noscript", "template"]
# A site's chrome around the page: menus, search boxes, sidebars, footers ("Powered by Sphinx"). Inside the page's
# main content a <header> often holds its <h1>, so there only navigation and search go.
_CHROME_IN_MAIN = "nav, search, form, [role=navigation], [role=search]"
_CHROME = (f"{_CHROME_IN_MAIN}, header, footer, aside, [role=banner], [role=contentinfo], [role=complementary], "
           "[role=menu], [role=menubar]")


def html_to_markdown(data: bytes | str) -> tuple[str | None, str]:
    """The page's <title> (None if it has none) and its visible content as Markdown: its main content (<main>, or
    the element marked role="main", as Sphinx's themes mark it) without the site's chrome, and without permalink
    marks ("Install¶": a heading's link to itself, a symbol and no words)."""
    soup = BeautifulSoup(data, "html.parser")   # bytes: the encoding is read from the page's meta tags
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for tag in soup(_INVISIBLE):
        tag.decompose()
    main = soup.select_one("main, [role=main]")
    page = main if main is not None else soup
    for tag in page.select(_CHROME_IN_MAIN if main is not None else _CHROME):
        tag.decompose()
    for link in page.find_all("a", href=True):
        if str(link["href"]).startswith("#") and not any(ch.isalnum() for ch in link.get_text()):
            link.decompose()
    return title or None, _CONVERTER.convert_soup(page)


def chunk_html(data: bytes | str, *, chunk_tokens: int) -> ChunkedDocument:
    """Chunks of the page as Markdown; titled by its first <h1>, else its <title>. Lines are the Markdown's, so
    no chunk carries one."""
    page_title, markdown = html_to_markdown(data)
    document = chunk_markdown(markdown, chunk_tokens=chunk_tokens)
    return ChunkedDocument(title=document.title or page_title,
                           chunks=[replace(chunk, line=None) for chunk in document.chunks])
