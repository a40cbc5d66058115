"""Chapter summary boxes, and the landing page's "Key results" built from them.

Every chapter opens, right under its title, with one box of this form (MyST)::

    :::{admonition} In short
    :class: chapter-summary

    Claim
    : One sentence: what the chapter shows.

    Status
    : proved

    Key number
    : {glue:text}`key:.3f` [{glue:text}`key_lo:.3f`, {glue:text}`key_hi:.3f`] ...

    Figure
    : {numref}`fig-05-ladder`
    :::

``Status`` uses the words of ``STATUS_WORDS`` only (e.g. ``proved; reconstructed``);
``Key number`` glues at least one number of the chapter; ``Figure`` references a figure
of the chapter.  ``key_results`` copies the boxes to the landing page, with each glue
key rewritten to its cross-page form ``generated/<notebook>.ipynb::key``, so the
numbers there stay live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FIELDS = ("Claim", "Status", "Key number", "Figure")
STATUS_WORDS = ("proved", "classical", "reconstructed", "heuristic")
BOX = re.compile(r"^:::\{admonition\}[^\n]*\n:class: chapter-summary\n(.*?)\n:::\s*$", re.S | re.M)
CHAPTER_LABEL = re.compile(r"^\((ch-[\w-]+)\)=\s*$", re.M)
GLUE_ROLE = re.compile(r"\{(glue(?::text|:md|:any)?:?)\}`([^`]+)`")
FIGURE_REF = re.compile(r"\{(?:numref|ref)\}`(?:[^`<]*<)?(fig-[\w-]+)>?`")


class SummaryError(ValueError):
    """A chapter summary box that breaks the convention; names the chapter and the field."""


@dataclass(frozen=True)
class Summary:
    notebook: str
    chapter_label: str
    fields: dict[str, str]


def boxes(text: str) -> list[str]:
    """The bodies of all chapter-summary boxes in a notebook's MyST source."""
    return BOX.findall(text)


def parse_fields(body: str) -> dict[str, str]:
    """The definition list of a box: term -> definition (continuation lines joined)."""
    fields: dict[str, str] = {}
    term = None
    for line in body.split("\n"):
        if line.startswith(":class:") or not line.strip():
            continue
        if line.startswith(": ") and term is not None:
            fields[term] = line[2:].strip()
        elif line.startswith("  ") and term in fields:
            fields[term] += " " + line.strip()
        else:
            term = line.strip()
    return fields


def problems(text: str, notebook: str) -> list[str]:
    """Everything wrong with the chapter's summary box (empty when it follows the convention)."""
    found = boxes(text)
    if len(found) != 1:
        return [f"{notebook}: {len(found)} chapter-summary boxes (exactly one is needed)"]
    fields = parse_fields(found[0])
    issues = [f"{notebook}: summary field '{f}' missing" for f in FIELDS if not fields.get(f)]
    issues += [f"{notebook}: unknown summary field '{f}'" for f in fields if f not in FIELDS]
    if issues:
        return issues
    words = re.findall(r"[a-z]+", fields["Status"].lower())
    if not words or any(w not in STATUS_WORDS + ("and",) for w in words):
        issues.append(f"{notebook}: status '{fields['Status']}' uses words outside {STATUS_WORDS}")
    prose = re.sub(r"\$[^$]*\$|\{[^}]*\}`[^`]*`", "x", fields["Claim"])
    if len(re.findall(r"[.!?](?:\s|$)", prose)) != 1 or not prose.rstrip().endswith((".", "!", "?")):
        issues.append(f"{notebook}: the claim must be one sentence")
    if not GLUE_ROLE.search(fields["Key number"]):
        issues.append(f"{notebook}: the key number glues no value ({{glue:text}}`key`)")
    figure = FIGURE_REF.search(fields["Figure"])
    if not figure or not re.search(rf":name: {re.escape(figure.group(1))}\s*$", text, re.M):
        issues.append(f"{notebook}: the figure field references no figure of this chapter")
    first_section = text.find("\n## ")
    if first_section != -1 and text.find(":class: chapter-summary") > first_section:
        issues.append(f"{notebook}: the summary box must come before the first section")
    return issues


def read(path: Path) -> Summary | None:
    """The chapter's summary, or ``None`` when its box is missing or breaks the convention."""
    text = path.read_text()
    if problems(text, path.stem):
        return None
    label = CHAPTER_LABEL.search(text)
    return Summary(path.stem, label.group(1) if label else path.stem, parse_fields(boxes(text)[0]))


MARKDOWN_RECORD = "application/papermill.record/text/markdown"


class MarkdownRecords:
    """The markdown values a chapter glued, read from its executed notebook.

    myst-nb resolves ``{glue:text}`` across pages but not ``{glue:md}``, so the landing page
    pastes those values itself, from the notebook the book shows.
    """

    def __init__(self, executed: Path | None):
        self.executed, self._cache = executed, {}

    def value(self, notebook: str, key: str) -> str:
        if notebook not in self._cache:
            import json

            path = None if self.executed is None else self.executed / f"{notebook}.ipynb"
            if path is None or not path.is_file():
                raise SummaryError(f"{notebook}: its summary box pastes markdown ({key}) but no executed notebook")
            values = {}
            for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
                for output in cell.get("outputs", []):
                    name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                    if name and MARKDOWN_RECORD in output.get("data", {}):
                        values[name] = output["data"][MARKDOWN_RECORD]
            self._cache[notebook] = values
        if key not in self._cache[notebook]:
            raise SummaryError(f"{notebook}: its summary box pastes {key}, which the notebook glued no markdown for")
        return self._cache[notebook][key]


def cross_page(markdown: str, notebook: str, records: MarkdownRecords | None = None) -> str:
    """Glue roles of ``notebook`` rewritten to the cross-page form the landing page needs.

    ``{glue:md}`` roles are replaced by the value itself (``records``), since myst-nb does not paste
    markdown across pages.
    """
    def rewrite(match: re.Match) -> str:
        role, target = match.groups()
        if role == "glue:md" and "::" not in target:
            return (records or MarkdownRecords(None)).value(notebook, target.rsplit(":", 1)[0])
        if "::" not in target:
            # myst-nb splits the format at the last colon: a key without one gets an empty format
            suffix = ":" if role == "glue:text" and ":" not in target else ""
            target = f"generated/{notebook}.ipynb::{target}{suffix}"
        return f"{{{role}}}`{target}`"

    return GLUE_ROLE.sub(rewrite, markdown)


def key_results(sources: list[Path], executed: Path | None = None) -> str:
    """The landing page's "Key results": one paragraph per chapter that has a valid box.

    ``executed`` is the folder of the executed notebooks, which the markdown a box pastes is read from.
    """
    paragraphs = []
    records = MarkdownRecords(executed)
    for path in sources:
        summary = read(path)
        if summary is None:
            continue
        f = {k: cross_page(v, summary.notebook, records) for k, v in summary.fields.items()}
        paragraphs.append(
            f"**{{ref}}`{summary.chapter_label}`.** {f['Claim']} "
            f"*Status: {f['Status']}.* Key number: {f['Key number']} ({f['Figure']}).")
    return "\n\n".join(paragraphs) + "\n"
