"""What a LaTeX run left behind: its overfull boxes (``book.log``) and its PDF outline (``book.out``).

``overfull_boxes(log_text)`` lists every ``Overfull \\hbox``/``\\vbox`` with its excess in points and the
input lines it names; ``outline(out_text)`` reads hyperref's bookmark file, from which the PDF's
outline is written, as ``(kind, number, title)`` like ``latexstructure.expected_outline``: kind
``part``, ``chapter`` or ``section``, number the chapter's number (None when it has none).
"""

from __future__ import annotations

import re

OVERFULL = re.compile(r"^Overfull \\([hv])box \(([0-9.]+)pt too (?:wide|high)\)(.*)$", re.M)
BOOKMARK = re.compile(r"^\\BOOKMARK \[(-?\d+)\]\[[^]]*\]\{([^}]*)\}\{(.*)\}\{[^}]*\}%", re.M)
KINDS = {-1: "part", 0: "chapter", 1: "section"}


def overfull_boxes(log_text: str) -> list[tuple[float, str]]:
    """``(excess in pt, the log's line)`` for every overfull box of a LaTeX log."""
    return [(float(m.group(2)), m.group(0).strip()) for m in OVERFULL.finditer(log_text)]


def _pdf_string(text: str) -> str:
    """A bookmark title as hyperref writes it: ``\\376\\377`` and UTF-16BE bytes in octal escapes, or plain."""
    if not text.startswith("\\376\\377"):
        return re.sub(r"\\(.)", r"\1", text)
    data = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "\\" and re.match(r"[0-7]{3}", text[i + 1:i + 4]):
            data.append(int(text[i + 1:i + 4], 8))
            i += 4
        elif text[i] == "\\":
            data.append(ord(text[i + 1]))
            i += 2
        else:
            data.append(ord(text[i]))
            i += 1
    return data[2:].decode("utf-16-be")


def outline(out_text: str) -> list[tuple[str, int | None, str]]:
    """The PDF's outline down to sections: ``(kind, number, title)`` in order."""
    entries = []
    for level, anchor, title in BOOKMARK.findall(out_text):
        kind = KINDS.get(int(level))
        if kind is None:
            continue
        numbered = re.fullmatch(r"chapter\.(\d+)", anchor)
        text = _pdf_string(title)
        if kind == "part":  # hyperref puts the part's roman number before its title
            text = re.sub(r"^[IVXLC]+\s+", "", text)
        entries.append((kind, int(numbered.group(1)) if numbered and kind == "chapter" else None, text))
    return entries
