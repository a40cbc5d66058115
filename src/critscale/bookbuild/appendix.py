"""The theory brief (``docs/theory.md``, the single source) as the book's appendix.

``render(text)`` turns the brief into the body of the appendix page:

- its opening note (addressed to the book's authors) and its title are dropped; the
  appendix page ``book/theory_brief.md`` has its own title and preface;
- every numbered section gets a label, ``brief-<number>`` (``## 5.1 ...`` ->
  ``(brief-5-1)=``; the brief's appendices A and B become sections ``A`` and ``B``,
  ``brief-a`` and ``brief-b``), which the chapters cite as
  ``{ref}`appendix §5.1 <brief-5-1>``` and the brief itself as ``§5.1``;
- every result the brief numbers ("Theorem 6", "Cor. 4–5", "Lemma 0") becomes a link to
  the book's statement of it (``BRIEF_RESULTS``), so book and appendix share one
  numbering: the book's;
- each item of the brief's proposed theorem list (``**T-0.``, ..., ``**P-13.``) links
  to the chapter that carries it out (``ITEM_CHAPTERS``);
- a display formula ``$$...$$`` written on a line inside a paragraph becomes a block of
  its own (MyST typesets it only then);
- a bare web address in a table row becomes a link named by its host
  (``[ai.panvox.news](https://ai.panvox.news/...)``), so that a long address does not
  squeeze the other columns of the table to a word per line, on screen or in print;
- in print (``render(text, print_layout=True)``), a table of long prose cells becomes a long
  table (it may break across pages instead of running off the bottom of one) with column widths
  set from its cells (``{tabularcolumns}`` and ``{.longtable}``, which needs MyST's
  ``attrs_block``; the PDF's staging enables it).

A numbered result without a statement in the book is an error: the appendix would
otherwise show a number from a second numbering.
"""

from __future__ import annotations

import re

# (kind, the brief's number) -> the label of the book's statement
BRIEF_RESULTS = {
    ("lemma", 0): "lem-01-laplace",
    ("lemma", 1): "lem-02-lambda-zero",
    ("theorem", 1): "thm-02-sandwich",
    ("theorem", 2): "thm-03-collapse",
    ("theorem", 3): "thm-03-spreading",
    ("corollary", 4): "cor-04-critical-scale",
    ("corollary", 5): "cor-04-brackets",
    ("theorem", 6): "thm-06-gumbel",
    ("theorem", 7): "thm-07-weibull",
    ("theorem", 8): "thm-08-planted",
    ("proposition", 9): "prop-09-legendre",
}
ITEM_CHAPTERS = {
    "T-0": "ch-definitions", "T-1": "ch-definitions", "T-2": "ch-free-energy",
    "T-3": "ch-collapse-spreading", "T-4": "ch-collapse-spreading",
    "C-5": "ch-critical-temperatures", "T-6": "ch-gumbel-window", "T-7": "ch-weibull-window",
    "T-8": "ch-planted-window", "T-9": "ch-ladder", "P-10": "ch-legendre-entropy",
    "P-11": "ch-rescaling-rules", "P-12": "ch-dimension-crossover", "P-13": "ch-gpt2-attention",
}

RESULT = re.compile(r"\b(Theorems?|Thm\.?|Lemmas?|Corollar(?:y|ies)|Cor\.|Prop(?:osition)?s?\.?)"
                    r"\s+(\d+)(?:\s*[–-]\s*(\d+))?")
SECTION_HEADING = re.compile(r"^(#{2,4}) (?:Appendix )?(\d+(?:\.\d+)*|[A-Z])\.? (.*)$")
SECTION_REF = re.compile(r"(?<!§)§(\d+(?:\.\d+)*)")
ITEM = re.compile(r"^\*\*((?:T|C|P)-\d+)\.(.*?)\*\*")
FENCE = re.compile(r"^(```|~~~)")
DISPLAY_MATH = re.compile(r"^\$\$.*\$\$\s*$")
BARE_URL = re.compile(r"(?<!\]\()(?<![<\[])\bhttps?://([^/\s|;,)]+)[^\s|;,)]*")


class BriefError(ValueError):
    """The brief cites something the book cannot link to."""


def label(number: str) -> str:
    return "brief-" + number.lower().replace(".", "-")


def _kind(word: str) -> str:
    return {"th": "theorem", "le": "lemma", "co": "corollary", "pr": "proposition"}[word[:2].lower()]


def _result_links(match: re.Match) -> str:
    kind = _kind(match.group(1))
    first = int(match.group(2))
    last = int(match.group(3) or first)
    refs = []
    for number in range(first, last + 1):
        target = BRIEF_RESULTS.get((kind, number))
        if target is None:
            raise BriefError(f"docs/theory.md cites {kind} {number}, which has no statement in the "
                             "book (critscale.bookbuild.appendix.BRIEF_RESULTS)")
        refs.append(f"{{prf:ref}}`{target}`")
    return refs[0] if len(refs) == 1 else ", ".join(refs[:-1]) + " and " + refs[-1]


def _link_urls(row: str) -> str:
    """A table row with its bare web addresses as links named by their host (trailing dots stay text)."""
    def link(match: re.Match) -> str:
        url = match.group(0)
        tail = url[len(url.rstrip(".")):]
        url = url.rstrip(".")
        host = re.sub(r"^www\.", "", match.group(1))
        return f"[{host}]({url}){tail}"

    return BARE_URL.sub(link, row)


PROSE_ROW_CHARS = 120  # a table whose rows average more characters is set as a long table in print


def _cells(row: str) -> list[str]:
    """A table row's cells, each link counted by the text it prints (its host)."""
    row = re.sub(r"\]\([^)]*\)", "]", row)
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _print_table_header(rows: list[str]) -> list[str]:
    """The lines that set a table of long prose cells as a long table with widths from its cells, or []."""
    body = [r for r in rows[2:]]
    if not body or sum(len(r) for r in body) / len(body) <= PROSE_ROW_CHARS:
        return []
    columns = len(_cells(rows[0]))
    lengths = [[min(len(c), 400) for c in _cells(r)] for r in body]
    weights = [max(sum(r[i] for r in lengths if i < len(r)) / len(lengths), 1.0) ** 0.5 for i in range(columns)]
    shares = [max(0.1, w / sum(weights)) for w in weights]
    spec = "".join(f"\\Y{{{0.99 * x / sum(shares):.3f}}}" for x in shares)
    return ["```{tabularcolumns} " + spec, "```", "", "{.longtable}"]


def _long_tables(lines: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += _print_table_header(lines[i:j]) + lines[i:j]
            i = j
        else:
            out.append(lines[i])
            i += 1
    return out


def render(text: str, print_layout: bool = False) -> str:
    """The appendix body (see the module docstring)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("# "))
    lines = lines[start + 1:]
    sections = {m.group(2) for line in lines if (m := SECTION_HEADING.match(line))}
    out, in_code = [], False
    for line in lines:
        if FENCE.match(line):
            in_code = not in_code
            out.append(line)
            continue
        if in_code:
            out.append(line)
            continue
        heading = SECTION_HEADING.match(line)
        if heading:
            hashes, number, title = heading.groups()
            title = RESULT.sub(_result_links, title)
            out += [f"({label(number)})=", f"{hashes} {number}{'' if '.' in number else '.'} {title}"]
            continue
        line = RESULT.sub(_result_links, line)
        line = SECTION_REF.sub(
            lambda m: f"{{ref}}`§{m.group(1)} <{label(m.group(1))}>`" if m.group(1) in sections
            else m.group(0), line)
        item = ITEM.match(line)
        if item:
            chapter = ITEM_CHAPTERS[item.group(1)]
            line = line[:item.end()] + f" (chapter: {{ref}}`{chapter}`)" + line[item.end():]
        if line.startswith("|"):
            line = _link_urls(line)
        if DISPLAY_MATH.match(line):  # MyST reads $$...$$ as display math only as its own block
            out += ["", line, ""]
            continue
        out.append(line)
    return "\n".join(_long_tables(out) if print_layout else out)
