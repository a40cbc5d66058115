"""Reader text of the book's sources: the prose a reader sees, without code, labels or directive options.

``reader_lines(text)`` takes a jupytext (MyST) notebook or a book page and yields ``(line number, text)`` for every
line a reader sees: outside code cells and code blocks, without the front matter, label lines ``(x)=``,
directive options ``:label: x``, inline code and roles (``{prf:ref}`x```, ``{glue:text}`k```).
``labels(root)`` is every target a ``{ref}``/``{prf:ref}``/``{numref}``/``{eq}`` can point to.
"""

from __future__ import annotations

import re
from pathlib import Path

FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(\{[^}]*\})?(.*)$")
TEXT_DIRECTIVES = re.compile(r"^\{(prf:(?!proof)\w+|prf:proof|admonition|dropdown|note|tip|warning|important|"
                             r"exercise|solution|only|figure|glue:figure|epigraph|margin|sidebar|topic)\}$")
OPTION = re.compile(r"^\s*:[\w-]+:(\s|$)")
LABEL_LINE = re.compile(r"^\s*\([\w:.-]+\)=\s*$")
EQ_LABEL = re.compile(r"(\$\$)\s*\([\w:.-]+\)\s*$")  # the closing "$$ (eq-x)" of a numbered equation
ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+\1")
COMMENT = re.compile(r"<!--.*?-->")
LABEL_DEF = re.compile(r"^\s*\(([\w:.-]+)\)=\s*$|^\s*:(?:label|name):\s*(\S+)|^\s*\$\$\s*\(([\w:.-]+)\)\s*$")
REFERENCE = re.compile(r"\{(?:ref|prf:ref|numref|eq)\}`(?:[^`<]*<)?([^`<>]+)>?`")
BUILT_IN_TARGETS = {"prf-prf", "genindex"}


def reader_lines(text: str, keep_inline_code: bool = False):
    """``(line number, reader text)`` for every line of ``text`` a reader sees (see the module docstring).

    With ``keep_inline_code`` the inline code spans stay in the line, without their backticks: a reader sees
    them too, set in a code font (roles are dropped either way)."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        start = next(i for i in range(1, len(lines)) if lines[i].strip() == "---") + 1
    stack = []  # (fence, is_text)
    for number in range(start, len(lines)):
        line = lines[number]
        fence = FENCE.match(line)
        if fence:
            mark, directive, rest = fence.group(1), fence.group(2), fence.group(3).strip()
            if stack and mark[0] == stack[-1][0][0] and len(mark) >= len(stack[-1][0]) and not directive and not rest:
                stack.pop()
                continue
            if not stack or stack[-1][1]:
                is_text = bool(directive and TEXT_DIRECTIVES.match(directive))
                stack.append((mark, is_text))
                if is_text and rest:
                    yield number + 1, _strip(rest, keep_inline_code)  # a directive's argument (a title) is reader text
                continue
        if stack and not stack[-1][1]:
            continue
        if stack and OPTION.match(line):
            continue
        if LABEL_LINE.match(line) or line.strip() == "+++":
            continue
        stripped = _strip(line, keep_inline_code)
        if stripped.strip():
            yield number + 1, stripped


def _strip(line: str, keep_inline_code: bool = False) -> str:
    line = ROLE.sub(" ", COMMENT.sub(" ", EQ_LABEL.sub(r"\1", line)))
    return CODE_SPAN.sub(lambda m: f" {m.group(0).strip('`')} " if keep_inline_code else " ", line)


def reader_text(text: str) -> str:
    return "\n".join(line for _, line in reader_lines(text))


def references(text: str) -> list[str]:
    return REFERENCE.findall(text)


def labels(root: Path) -> set[str]:
    """Every label defined in the notebooks and the book's pages, and the targets Sphinx makes itself."""
    found = set(BUILT_IN_TARGETS)
    for path in [*sorted((root / "notebooks").glob("*.md")), *sorted((root / "book").glob("*.md"))]:
        for line in path.read_text().split("\n"):
            match = LABEL_DEF.match(line)
            if match:
                found.add(next(group for group in match.groups() if group))
            eq = re.search(r"\$\$\s*\(([\w.-]+)\)\s*$", line)
            if eq:
                found.add(eq.group(1))
    return found
