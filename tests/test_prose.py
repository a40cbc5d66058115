"""The reader's text: reader names for families, no raw labels, one number format, an appendix of the book's own statements.

The reader text of a page is what ``prose.reader_lines`` keeps: everything outside code cells, code blocks, inline
code, roles and directive options.  The generated sentences (strings a notebook records and a page pastes with
``{glue:md}`` or ``{glue:text}``) are read from the ci results when the ci book has been built.
Chapter 12's prose, inline code, pasted tables and figure text are held to reader names too, and a chapter's
sentences and summary box to its own recorded numbers (``CLAIMS``, ``BOX_VERDICTS``); those tests skip when the ci
results are older than the chapter's source, since they would judge the text by numbers of an earlier build.
"""

import json
import re
from pathlib import Path

import pytest

import prose
from critscale.page import reader_names
from critscale.families import STANDARD

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("*.md") if re.match(r"(0\d|1[01])_", p.name))
PAGES = sorted((ROOT / "book").glob("*.md"))
APPENDIX = ROOT / "book" / "theory_brief.md"
REPRO = ROOT / "notebooks" / "99_reproducibility.md"
CI_RESULTS = ROOT / "build" / "results" / "ci"

CODE_NAME = re.compile(r"(?<![\w.`/-])(gauss|ptail\d+(?:\.\d+)?|logexp|(?<!left )(?<!right )edge|unif|sphere\d+|planted_shrink|pareto\d+)"
                       r"(?![\w`(-])")
RAW_LABEL = re.compile(r"(?<![\w`<])((?:def|lem|thm|prop|cor|rem|eq|sec|fig|tab|ch|brief)-\d{2}-[\w-]+|brief-\d[\w-]*)")
E_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][-+]?\d+(?![\w])")
E_FORMAT = re.compile(r"\{glue:text\}`[^`]*:[^`]*\.?\d*e`")
HISTORY = re.compile(r"theory brief|corrects the brief|an earlier version|was fixed|we changed", re.I)
GLUED = re.compile(r"\{glue:(?:md|text)\}`([\w.-]+)(?::[^`]*)?`")


def _hits(pattern, paths):
    found = []
    for path in paths:
        for number, line in prose.reader_lines(path.read_text()):
            found += [f"{path.relative_to(ROOT)}:{number}: {m.group(0)!r}" for m in pattern.finditer(line)]
    return found


def _glued_strings():
    """(page, key, text) of every string a chapter pastes, from the ci results; skips when they are not built."""
    if not CI_RESULTS.exists():
        pytest.skip("build/results/ci missing: the generated sentences are checked after `make test` built the ci book")
    out = []
    for path in CHAPTERS:
        results = CI_RESULTS / f"{path.stem}.json"
        if not results.exists():
            continue
        values = json.loads(results.read_text()).get("values", {})
        for key in set(GLUED.findall(path.read_text())):
            if isinstance(values.get(key), str):
                out.append((path.stem, key, values[key]))
    return out


# ---------------------------------------------------------------- the extractor itself
def test_reader_text_drops_code_labels_and_options():
    page = ("---\njupytext: x\n---\n(sec-x)=\n# Title\n\nThe `gauss` rows and {prf:ref}`thm-06-gumbel`.\n"
            "```{code-cell} ipython3\nfamily = 'gauss'\n```\n"
            "```{prf:theorem} A title\n:label: thm-x\n\nA line.\n```\n:::{admonition} In short\n:class: s\n\n"
            "Claim\n: ptail1 rows\n:::\n")
    lines = [text for _, text in prose.reader_lines(page)]
    joined = "\n".join(lines)
    assert "family =" not in joined and "thm-06-gumbel" not in joined and ":label:" not in joined
    assert "`gauss`" not in joined and "sec-x" not in joined and ":class:" not in joined
    assert "A title" in joined and "A line." in joined and ": ptail1 rows" in joined
    assert CODE_NAME.search(joined).group(0) == "ptail1"  # a name in a definition line is reader text


# ---------------------------------------------------------------- (a) reader names, no raw labels
def test_no_code_name_of_a_family_in_reader_text():
    """Families are called by their reader names (critscale.page.reader_names) in prose; `gauss` is for code only.
    On the text before this test the chapters wrote 'ptail1', 'sphere3', 'planted_shrink', 'unif' as words."""
    assert _hits(CODE_NAME, CHAPTERS + [REPRO] + PAGES) == []


def test_no_raw_label_in_reader_text():
    """No '(Proposition prop-12-bracket)' or 'brief-4-2' as text: labels are link targets, not words."""
    assert _hits(RAW_LABEL, CHAPTERS + [REPRO] + PAGES) == []


def test_no_project_history_in_reader_text():
    """'This corrects the theory brief ...' is the project's history, not the reader's business (chapters 09 and 10
    wrote it before this test)."""
    assert _hits(HISTORY, CHAPTERS + [p for p in PAGES if p != APPENDIX]) == []


def test_generated_sentences_use_reader_names_and_one_number_format():
    """The strings the chapters record and paste are reader text too."""
    bad = []
    for page, key, text in _glued_strings():
        clean = prose.CODE_SPAN.sub(" ", text)
        for pattern in (CODE_NAME, RAW_LABEL, E_NUMBER):
            bad += [f"{page}::{key}: {m.group(0)!r}" for m in pattern.finditer(clean)]
    assert bad == []


def test_every_standard_family_has_a_reader_name_and_one_row_in_the_mapping_table():
    table = reader_names.mapping_table()
    for name in STANDARD:
        assert table.count(f"`{name}`") == 1, name
        assert f"| {reader_names.reader_name(name)} |" in table
    assert len(set(reader_names.READER_NAMES.values())) == len(reader_names.READER_NAMES)
    assert reader_names.reader_name("ptail0.5") == "exp(−√x) tail"
    assert reader_names.reader_name("sphere17") == "sphere S¹⁶"
    assert not any("," in name or " and " in name for name in reader_names.READER_NAMES.values())
    with pytest.raises(ValueError, match="unknown family 'gaus'"):
        reader_names.reader_name("gaus")


def test_the_mapping_table_is_shown_once_in_the_book():
    """The appendix includes the generated table; no page writes a second one by hand."""
    from critscale.bookbuild import site

    assert "family_names.md" in Path(site.__file__).read_text()
    includes = [p.name for p in PAGES if "_generated/family_names.md" in p.read_text()]
    assert includes == [APPENDIX.name]


# ---------------------------------------------------------------- (b) the appendix
def test_appendix_is_the_books_statements_not_the_brief():
    """Before this test the appendix pasted docs/theory.md: 'to within a constant', 'O(1) offsets', the build plan
    'T-0 ... Figure: Left panel', the machine review among its sources."""
    text = APPENDIX.read_text()
    assert re.findall(r"```\{include\}\s*(\S+)", text) == ["_generated/family_names.md"]
    for phrase in ("T-0", "P-13", "within a constant", "O(1) offset", "$O(1)$ offset", "Left panel", "Pith",
                   "machine review", "grok", "0.84 / 0.92"):
        assert phrase not in text, phrase


def test_appendix_links_each_statement_of_the_chapters_and_every_link_resolves():
    text = APPENDIX.read_text()
    targets = prose.references(text)
    assert set(targets) <= prose.labels(ROOT), sorted(set(targets) - prose.labels(ROOT))
    statements = set()
    for path in CHAPTERS:
        statements |= set(re.findall(r"^:label: ((?:thm|prop|cor|lem)-\d\d-[\w-]+)", path.read_text(), re.M))
    assert statements and statements <= set(targets), sorted(statements - set(targets))


def test_appendix_has_one_numbering_the_books():
    """No 'Theorem 6' typed as text: a result is named by a link that shows the book's number."""
    result = re.compile(r"\b(Theorems?|Thm\.?|Lemmas?|Corollar(?:y|ies)|Cor\.|Prop(?:osition)?s?\.?)\s+\d+")
    assert not result.search(prose.reader_text(APPENDIX.read_text()))


def test_appendix_marks_the_chapters_corrections():
    """Sandwich width (ch 02), the stretched tail (ch 06), the planted case of the entropy relation (ch 09/10),
    the Legendre offsets (ch 09), the truncated limit quantiles (ch 06): each a marked correction."""
    text = APPENDIX.read_text()
    assert text.count("**Correction.**") >= 5
    for target in ("cor-02-width", "prop-06-stretched", "prop-10-rules", "ch-legendre-entropy", "ch-gumbel-window"):
        assert target in text


def test_every_reference_of_the_chapters_and_pages_resolves():
    known = prose.labels(ROOT)
    missing = [f"{p.relative_to(ROOT)}: {t}" for p in CHAPTERS + PAGES for t in prose.references(p.read_text())
               if t not in known]
    assert missing == []


# ---------------------------------------------------------------- (c) number format
def test_no_e_notation_in_reader_text():
    """Scientific numbers read 2.9×10⁻¹² (critscale.page.tables.format_number(..., plain=True)); no '2.9e-12' typed in
    prose and no {glue:text}`key:.1e` (eighteen of them before this test)."""
    assert _hits(E_NUMBER, CHAPTERS + [REPRO] + PAGES) == []
    found = []
    for path in CHAPTERS:
        text = prose.COMMENT.sub(" ", path.read_text())
        for number, line in enumerate(text.split("\n"), 1):
            found += [f"{path.name}:{number}: {m.group(0)}" for m in E_FORMAT.finditer(line)]
    assert found == []


# ---------------------------------------------------------------- short "where it stops" sections
def _limits_section(path):
    lines = path.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("## What") and "where it stops" in line)
    end = next(i for i in range(start + 1, len(lines)) if re.match(r"## |```\{code-cell\}|\(sec-", lines[i]))
    return [text for _, text in prose.reader_lines("\n".join(lines[start + 1:end]))]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_where_it_stops_is_short(path):
    """At most 12 lines of at most ~1,800 characters in all: chapters 04, 05 and 06 had 12-16 lines of 2,400-3,500
    characters, and chapter 03 one line of five clauses."""
    section = _limits_section(path)
    assert len(section) <= 12, len(section)
    assert sum(len(line) for line in section) <= 1800, sum(len(line) for line in section)
    assert max(len(line) for line in section) <= 400, max(section, key=len)


# ---------------------------------------------------------------- one sentence per line, bold for what must not be missed
SENTENCE_BREAK = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<!\bFig)(?<!\bvs)(?<!\bcf)(?<!\bEq)(?<!\bNo)[.?!]\)? +(?=[A-Z])")
PROSE_SOURCES = CHAPTERS + [REPRO] + PAGES


def _sentence_text(line):
    """A reader line without math, list markers and run-in headings ('**Title.** ...'), for sentence counting."""
    line = re.sub(r"\$[^$]*\$", "M", line)
    line = re.sub(r"^\s*(#+\s*)?(\d+\.|[-*]|[A-Z]\.)\s+", "", line)
    return re.sub(r"^\*\*[^*]+\*\*\s*|^\*\([^)]*\)\*\s*", "", line)


def test_one_sentence_per_line():
    """A second sentence starts on its own line (an indented continuation inside a list item); chapter 09's
    'ψ(x) = x^p' item, chapter 10's SSMax item and the reconstruction's caveats held two or three before this test."""
    found = [f"{path.relative_to(ROOT)}:{number}" for path in PROSE_SOURCES
             for number, line in prose.reader_lines(path.read_text()) if SENTENCE_BREAK.search(_sentence_text(line))]
    assert found == []


def test_bold_marks_words_not_numbers_or_paragraphs():
    """No bold number or pasted value ('**{glue:text}`k`**'), and no paragraph bold from start to end."""
    bad = []
    for path in PROSE_SOURCES:
        paragraphs, last = [], None
        for number, line in prose.reader_lines(path.read_text().replace("{glue", "GLUE{glue")):
            if last is None or number != last + 1:
                paragraphs.append([])
            paragraphs[-1].append((number, line))
            last = number
            for match in re.finditer(r"\*\*(.+?)\*\*", line):
                if re.match(r"\s*(GLUE|[-+−]?\d)", match.group(1)):
                    bad.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)[:60]}")
        for paragraph in paragraphs:
            text = " ".join(line.strip() for _, line in paragraph)
            if re.fullmatch(r"\*\*[^*]+\*\*[.:]?", text):
                bad.append(f"{path.relative_to(ROOT)}:{paragraph[0][0]}: a bold paragraph")
    assert bad == []


def test_generated_sentences_are_not_bold_from_start_to_end():
    bad = [f"{page}::{key}" for page, key, text in _glued_strings()
           if text.strip().startswith("**") and text.strip().endswith("**")]
    assert bad == []


def test_a_glued_table_names_families_by_reader_name_and_stores_the_registry_names(tmp_path, monkeypatch):
    """Tables with a 'family' column (chapter 04's drift table, chapter 06's per-family fits, ...) showed `gauss`
    and `planted_shrink` as row labels; the glued table now shows reader names, the stored records keep the
    registry names the tests index by."""
    import pandas as pd

    from critscale.page import pagedata
    from critscale.page.tables import table_bundle

    frame = pd.DataFrame({"family": ["gauss", "planted_shrink", "sphere3"], "x": [1.0, 2.0, 3.0]})
    shown = table_bundle(pagedata.with_reader_names(frame))["text/markdown"]
    for name in ("Gaussian", "shrinking planted", "sphere S²"):
        assert name in shown
    assert not CODE_NAME.search(prose.CODE_SPAN.sub(" ", shown))
    monkeypatch.setenv("CRITSCALE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("CRITSCALE_NOTEBOOK", "t")
    pagedata.record("table", frame)
    stored = json.loads((tmp_path / "t.json").read_text())["values"]["table"]
    assert [r["family"] for r in stored["records"]] == ["gauss", "planted_shrink", "sphere3"]
    assert frame.family.tolist() == ["gauss", "planted_shrink", "sphere3"]  # the caller's frame is not changed


def test_a_glued_table_maps_every_column_of_family_names_not_only_one_called_family():
    """Chapter 10's exponent table ('closest family': gauss, planted, edge) and chapter 11's medians ('rows of':
    gauss, sphere4, ..., sphere128) showed registry names; a column whose cells are all registry names is shown in
    reader names, a column of other words ('scores', 'qk') is left as it is."""
    import pandas as pd

    from critscale.page import pagedata
    from critscale.page.tables import table_bundle

    frame = pd.DataFrame({"closest family": ["gauss", "planted", "edge"], "rows of": ["sphere4", "gauss", "sphere128"],
                          "kind": ["scores", "qk", "planted"], "x": [1.0, 2.0, 3.0]})
    shown = table_bundle(pagedata.with_reader_names(frame))["text/markdown"]
    assert not CODE_NAME.search(prose.CODE_SPAN.sub(" ", shown)), shown
    for name in ("Gaussian", "endpoint singularity", "sphere S³", "sphere S¹²⁷", "scores", "qk"):
        assert name in shown
    assert frame["rows of"].tolist() == ["sphere4", "gauss", "sphere128"]  # the caller's frame is not changed


def test_figure_stamps_name_the_seed_coordinates_in_words():
    """The stamp under a figure printed 'seeds [12697, f, n]'; it now reads 'seeds [12697, family, length]'."""
    from critscale.page.plotting import seed_text

    assert seed_text("[12697, f, n]") == "[12697, family, length]"
    assert seed_text([2605, 12697, "f", "n"]) == "[2605, 12697, family, length]"
    assert seed_text(7) == "7"
    stamps = [line for path in CHAPTERS for line in path.read_text().split("\n") if "extra=" in line]
    assert not [line for line in stamps if re.search(r"kappa_bar|kappa16|ptail\d|planted_shrink", line.split("extra=")[1])]


# ---------------------------------------------------------------- chapter 12: reader names in its prose, tables, figures
KERNELS = ROOT / "notebooks" / "12_kernels.md"
FAMILY_WORD = re.compile(CODE_NAME.pattern + r"|(?<![\w.])(?:sphere|ptail|pareto)<\w+>")
GLUED_BLOCK = re.compile(r"^```\{glue:(?:figure)?\}\s*([\w.-]+)\s*$", re.M)
KIND_NUMBER = re.compile(r"\bkinds? \d")  # the records' old integer names of scores, qk and sampled


def _kernels_results():
    """Chapter 12's ci results; skips when missing or older than the chapter's source (they would judge old text)."""
    results = CI_RESULTS / f"{KERNELS.stem}.json"
    if not results.exists():
        pytest.skip(f"{results.relative_to(ROOT)} missing: `make test` builds the ci book first")
    if results.stat().st_mtime < KERNELS.stat().st_mtime:
        pytest.skip(f"{results.relative_to(ROOT)} is older than {KERNELS.relative_to(ROOT)}: `make test` rebuilds it")
    return json.loads(results.read_text())


def _strings(value):
    """Every string a glued value shows: itself, or a table's column names and cells."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and "records" in value:
        return [str(c) for c in value.get("columns", [])] + [v for r in value["records"] for v in r.values()
                                                             if isinstance(v, str)]
    return []


def test_chapter_12_prose_and_captions_name_families_by_reader_name():
    """Chapter 12's text, its captions and its inline code: the live-check list wrote `sphere9` and `sphere<d>`,
    and the naming paragraph 'the GPU results ... call them kinds 1, 2 and 3'."""
    found = [f"{number}: {m.group(0)!r}" for number, line in prose.reader_lines(KERNELS.read_text(), keep_inline_code=True)
             for m in FAMILY_WORD.finditer(line)]
    found += [f"{number}: {m.group(0)!r}" for number, line in prose.reader_lines(KERNELS.read_text())
              for pattern in (RAW_LABEL, E_NUMBER, KIND_NUMBER) for m in pattern.finditer(line)]
    assert found == []


def test_the_family_word_pattern_sees_code_names_and_spares_code_and_reader_names():
    line = [text for _, text in prose.reader_lines("- `sphere9` and other `sphere<d>`, `cs.gap_counts`, Gaussian\n",
                                                   keep_inline_code=True)][0]
    assert [m.group(0) for m in FAMILY_WORD.finditer(line)] == ["sphere9", "sphere<d>"]
    assert not FAMILY_WORD.search("sampled (Gaussian), sphere S⁸, ck.sampled_row_stats, planted")
    assert FAMILY_WORD.search("sampled (gauss)") and FAMILY_WORD.search("sampled (unif)")


def test_chapter_12_glued_text_and_tables_use_reader_names_and_one_number_format():
    """The live-check table labelled its rows 'sampled (gauss)', 'sampled (edge)'; the benchmark's ceilings read
    '4.03e+12 per s' and its full table '1.2e+03' ms and 'mufu: 0.133'; the benchmark note named 'kinds 1, 2 and 3'."""
    values = _kernels_results()["values"]
    keys = set(GLUED.findall(KERNELS.read_text())) | set(GLUED_BLOCK.findall(KERNELS.read_text()))
    bad = []
    for key in sorted(keys):
        for text in _strings(values.get(key)):
            clean = prose.CODE_SPAN.sub(" ", text)
            for pattern in (CODE_NAME, RAW_LABEL, E_NUMBER, KIND_NUMBER, re.compile(r"\b(?:mufu|hbm|fma|alu):")):
                bad += [f"{key}: {m.group(0)!r}" for m in pattern.finditer(clean)]
    assert keys and bad == []


def test_chapter_12_figures_name_families_by_reader_name():
    """The text of each figure (axis labels, legends, ticks: the comments of its SVG) holds no family code name."""
    results = _kernels_results()
    folder = CI_RESULTS / "figures" / KERNELS.stem
    texts = {path.name: re.findall(r"<!-- (.*?) -->", path.read_text()) for path in sorted(folder.glob("*.svg"))}
    assert set(texts) >= {f"{key}.svg" for key in results.get("figures", {})}
    bad = [f"{name}: {text!r}" for name, lines in texts.items() for text in lines if CODE_NAME.search(text)]
    assert bad == []


# ---------------------------------------------------------------- sentences against their chapter's own numbers
def _fresh_results(stem):
    """A chapter's ci values; skips when missing or older than the chapter's source (they would judge old text)."""
    results, source = CI_RESULTS / f"{stem}.json", ROOT / "notebooks" / f"{stem}.md"
    if not results.exists():
        pytest.skip(f"{results.relative_to(ROOT)} missing: `make test` builds the ci book first")
    if results.stat().st_mtime < source.stat().st_mtime:
        pytest.skip(f"{results.relative_to(ROOT)} is older than {source.relative_to(ROOT)}: `make test` rebuilds it")
    return json.loads(results.read_text())["values"]


def _reader_text(stem):
    return "\n".join(text for _, text in prose.reader_lines((ROOT / "notebooks" / f"{stem}.md").read_text()))


def _box(stem):
    """The source of a chapter's summary box ('In short')."""
    text = (ROOT / "notebooks" / f"{stem}.md").read_text()
    return text.split(":::{admonition} In short", 1)[1].split("\n:::", 1)[0]


def _convex_collisions_at_largest_length(values):
    """Chapter 06: the five families' (E sum p^2, its standard error) at c = 1.5 and the largest length."""
    found = {}
    for key, value in values.items():
        match = re.fullmatch(r"convex_coll_(\w+?)_c1p5_n(\d+)", key)
        if match:
            found.setdefault(int(match.group(2)), {})[match.group(1)] = (value, values[f"{key}_sem"])
    means = found[max(found)]
    assert len(means) == 5, sorted(means)
    return means


def _families_spread_beyond_noise(values):
    """Chapter 06: at c = 1.5 and the largest length, do the five families' E sum p^2 differ by more than two
    standard errors of the difference between the highest and the lowest?"""
    means = _convex_collisions_at_largest_length(values)
    (high, se_high), (low, se_low) = max(means.values()), min(means.values())
    return high - low > 2 * (se_high**2 + se_low**2) ** 0.5


def _families_above_limit_beyond_noise(values):
    """Chapter 06: at c = 1.5 and the largest length, is each of the five families' E sum p^2 above the limit
    1 - 1/c by more than two of its standard errors?"""
    means = _convex_collisions_at_largest_length(values)
    return all(mean - (1 - 1 / 1.5) > 2 * se for mean, se in means.values())


# The rung of each standard family: the leading-order growth exponent of its kappa_bar_n in the family's coordinate
# (log log n for the Gumbel-class and planted families, log n for the Weibull-class ones), Proposition prop-05-ladder.
RUNGS = {"gauss": 0.5, "ptail1": 0.0, "ptail3": 2 / 3, "logexp": 1.0, "edge": 2.0, "planted": 1.0, "simplex": 1.0,
         "planted_shrink": 2.0, "unif": 1.0, "sphere3": 1.0, "sphere5": 0.5, "sphere9": 0.25}


def _a_fit_below_its_rung(values):
    """Chapter 05: does any family's fitted exponent of the median kappa_16 lie below its rung?"""
    assert set(values["fits"]) == set(RUNGS), sorted(values["fits"])
    return any(fit["fitted"] < RUNGS[name] for name, fit in values["fits"].items())


CLAIMS = [
    # (chapter, a phrase, the recorded fact that bars it)
    ("06_gumbel_window", r"collapse onto one curve|fall on one curve|lie on one curve|headline collapse",
     _families_spread_beyond_noise),
    ("06_gumbel_window", r"not on one curve[^\n]*ranges from", lambda v: not _families_spread_beyond_noise(v)),
    ("06_gumbel_window", r"above the limit by their finite-size correction",
     lambda v: not _families_above_limit_beyond_noise(v)),
    ("04_critical_temperatures",
     r"invariance is accumulation-scale invariance|rescaling \*?is\*? accumulation-scale rescaling",
     lambda v: v["verdict_count_neither"] > 0 or v["verdict_count_Su_only"] > 0),
    ("05_ladder", r"fitted exponents lie above the rungs", _a_fit_below_its_rung),
    ("05_ladder", r"For every family of independent scores the measured accumulation scale grows like",
     lambda v: bool(v["step_qrow_rejected"])),
]
PROFILES = ("ci", "cpu")


def _fresh_profiles(stem):
    """(profile, values) of every built profile whose results are newer than the chapter's source; skips when none
    is (old results would judge the text by numbers of an earlier build)."""
    source = ROOT / "notebooks" / f"{stem}.md"
    found = []
    for profile in PROFILES:
        results = ROOT / "build" / "results" / profile / f"{stem}.json"
        if results.exists() and results.stat().st_mtime >= source.stat().st_mtime:
            found.append((profile, json.loads(results.read_text())["values"]))
    if not found:
        pytest.skip(f"no build/results/<profile>/{stem}.json newer than {source.relative_to(ROOT)}: `make test` rebuilds it")
    return found


@pytest.mark.parametrize("stem, phrase, barred", CLAIMS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CLAIMS)])
def test_no_sentence_claims_what_its_numbers_contradict(stem, phrase, barred):
    """A phrase may stand only where the chapter's recorded numbers, in every profile built, allow it.
    Chapter 06 said the five families 'collapse onto one curve' while its own glued spread at c = 1.5 is several
    standard errors wide (ci), then 'not on one curve: ... ranges from 0.324 to 0.407' where that spread is within
    two standard errors (cpu), and 'above the limit by their finite-size correction' with 0.324 below 0.333 (cpu);
    chapter 04 said entropy invariance 'is accumulation-scale invariance' (then 'entropy-invariant rescaling *is*
    accumulation-scale rescaling') while neither rule held in 9 to 10 pairs; chapter 05 said 'the fitted exponents
    lie above the rungs' with exp(-x^3) at 0.662 against 2/3 (cpu) and sphere S^2 at 0.986 against 1 (ci), and its
    box 'for every family of independent scores' the scale follows the quantile row, which the planted fits reject."""
    claimed = re.findall(phrase, _reader_text(stem), flags=re.I)
    for profile, values in _fresh_profiles(stem):
        assert not (claimed and barred(values)), (profile, claimed)


def test_the_claim_rules_bar_what_the_recorded_numbers_contradict():
    """The rules above on made-up numbers: a family below its rung, a family at or below the limit."""
    fits = {name: {"fitted": rung + 0.1} for name, rung in RUNGS.items()}
    assert not _a_fit_below_its_rung({"fits": fits})
    fits["ptail3"]["fitted"] = 0.662
    assert _a_fit_below_its_rung({"fits": fits})
    values = {f"convex_coll_{f}_c1p5_n18": 0.40 for f in ("a", "b", "c", "d", "e")}
    values |= {f"{k}_sem": 0.02 for k in list(values)}
    assert _families_above_limit_beyond_noise(values)
    values["convex_coll_e_c1p5_n18"] = 0.324
    assert not _families_above_limit_beyond_noise(values)


def test_the_spread_rule_bars_a_spread_beyond_noise():
    values = {f"convex_coll_{f}_c1p5_n12": m for f, m in zip(("a", "b", "c", "d", "e"), (0.37, 0.38, 0.40, 0.41, 0.45))}
    values |= {f"{k}_sem": 0.02 for k in list(values)}
    assert _families_spread_beyond_noise(values)
    values["convex_coll_e_c1p5_n12"] = 0.39
    assert not _families_spread_beyond_noise(values)


BOX_VERDICTS = {
    "06_gumbel_window": "extrap_verdict_text",  # the six declared cells, failures named
    "07_weibull_window": "extrap_exceptions",   # the tested corrections that miss 0
    "12_kernels": "live_agreement",             # whether the live check agreed, not a typed 'agree'
}


@pytest.mark.parametrize("stem", sorted(BOX_VERDICTS))
def test_summary_box_reports_the_recorded_failures(stem):
    """Chapter 07's box gave the one passing cell it chose (keys on S⁸ at c = 1) and not that the cell on S⁴ at
    c = 1 misses 0 at z = -3.1; a box pastes the chapter's count of failures.  Chapter 12's box typed that the
    kernels 'agree with the float64 reference' whatever its live check found."""
    assert f"`{BOX_VERDICTS[stem]}" in _box(stem)


def test_chapters_are_named_not_counted_from_the_end():
    """'(the last chapter diagnoses them)' in chapters 10 and 11 meant chapter 13; the last chapter is 14."""
    assert _hits(re.compile(r"\bthe last chapter\b", re.I), CHAPTERS) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_glued_tables_use_one_number_format(path):
    """A pasted table cell reads 2.9 × 10⁻¹², not '2.92e-56 / 0.00977 / 0.709' (chapter 03's tightness tables)."""
    values = _fresh_results(path.stem)
    bad = [f"{key}: {m.group(0)!r}" for key in sorted(set(GLUED_BLOCK.findall(path.read_text())))
           for text in _strings(values.get(key)) for m in E_NUMBER.finditer(prose.CODE_SPAN.sub(" ", text))]
    assert bad == []


GLUE_FORMAT = re.compile(r"\{glue:text\}`([\w.-]+):([^`]+)`")


def test_formatted_glue_prints_no_e_notation():
    """'{glue:text}`key:.3g`' prints 4.92e+03 once the value reaches 1000 (chapter 04's Weibull drift reaches 492 in
    the cpu profile); every formatted paste of the chapters renders its recorded ci value without e-notation."""
    if not CI_RESULTS.exists():
        pytest.skip("build/results/ci missing: `make test` builds the ci book first")
    bad, checked = [], 0
    for path in CHAPTERS + [KERNELS]:
        results = CI_RESULTS / f"{path.stem}.json"
        values = json.loads(results.read_text()).get("values", {}) if results.exists() else {}
        for key, spec in set(GLUE_FORMAT.findall(prose.COMMENT.sub(" ", path.read_text()))):
            value = values.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                checked += 1
                text = format(value, spec)
                bad += [f"{path.stem}::{key}:{spec} -> {text}"] if E_NUMBER.search(text) else []
    assert checked and bad == []


def test_a_g_format_turns_into_e_notation_at_large_values():
    """Why the test above matters: the same format that prints 492 prints 4.92e+03."""
    assert not E_NUMBER.search(format(492.3, ".3g")) and E_NUMBER.search(format(4923.0, ".3g"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figures_name_families_by_reader_name(path):
    """The text drawn in a chapter's figures (titles, ticks, legends: the comments of each SVG) holds no family code
    name; chapter 05's robustness panels were ticked 'gauss ... planted_shrink' and chapter 09's profiles titled
    'ptail3'."""
    _fresh_results(path.stem)
    folder = CI_RESULTS / "figures" / path.stem
    bad = [f"{svg.name}: {text!r}" for svg in sorted(folder.glob("*.svg"))
           for text in re.findall(r"<!-- (.*?) -->", svg.read_text()) if CODE_NAME.search(text)]
    assert bad == []


# ---------------------------------------------------------------- sentences the page itself contradicts (chapters 01-06, pages)
NO_ABSCISSA = "no page compares an abscissa of convergence with kappa; only kappa_K (Corollary) and kappa_bar (ladder) are"
PAGE_CONTRADICTIONS = [
    # (source, a pattern of its reader text, what on the page contradicts it)
    ("notebooks/01_definitions.md", r"\$g\s*=\s*w\s*=\s*1\$", "the symbol w is defined nowhere on the page"),
    ("notebooks/02_free_energy.md", r"\$g\s*=\s*w\s*=\s*1\$", "the symbol w is defined nowhere on the page"),
    ("notebooks/02_free_energy.md", r"The figure shows[^\n]*within \$1\+\\log\\log n\$",
     "the sandwich figure draws the theta = 1/2 bound Lambda(beta/2) + log 2, not the 1 + log log n window"),
    ("notebooks/03_collapse_and_spreading.md", r"cut off at \$t=\\log n\$, which keeps the ratio below",
     "the infinite Zipf row keeps the ratio below 1 as well (the test below): the cut-off is not the reason"),
    ("notebooks/05_ladder.md", r"one or two decades of length", "the exponents are fitted over 2^10 to 2^20, three decades"),
    ("notebooks/06_gumbel_window.md", r"(?:extrapolates to|sits)\s+standard errors from",
     "a signed z read as a distance ('sits -3.7 standard errors from its limit')"),
    ("notebooks/06_gumbel_window.md", r"lengths \$2\^\{?\d+\}?\$ to \$2\^\{?\d+\}?\$ of this profile",
     "a caption typing the lengths of one profile"),
    ("notebooks/06_gumbel_window.md", r"whose hazard decreases, they do not\.",
     "Proposition prop-06-stretched: the stretched rows leave the window only on 1 < c < 1/p and return above it"),
    ("notebooks/01_definitions.md", r"which agree with \$\\kappa\$ up to constants for regularly accumulating", NO_ABSCISSA),
    ("book/reconstruction.md", r"These agree up to constants for regularly accumulating rows", NO_ABSCISSA),
    ("book/theory_brief.md", r"the alternatives agree with \$\\kappa\$ up to constants", NO_ABSCISSA),
    ("book/theory_brief.md", r"rescaling is therefore accumulation-scale rescaling",
     "chapter 04: neither rescaling rule is consistent with exact in 10 of its 36 pairs"),
]


@pytest.mark.parametrize("source, pattern, why", PAGE_CONTRADICTIONS,
                         ids=[f"{Path(c[0]).stem}-{i}" for i, c in enumerate(PAGE_CONTRADICTIONS)])
def test_no_sentence_the_page_itself_contradicts(source, pattern, why):
    """Each pattern is a sentence a referee read of the rendered cpu book found contradicted by its own page (the
    reason is the third field); every one of them stood in the text before this test."""
    text = prose.reader_text((ROOT / source).read_text())
    assert not re.search(pattern, text), why


def test_the_infinite_zipf_row_keeps_the_collapse_ratio_below_one():
    """Exercise 3.1's answer: for s_k = -log k (kappa = 1) the ratio (Z - 1)(beta - kappa)/kappa of the infinite row
    is (zeta(beta) - 1)(beta - 1), below 1 at every beta > 1 (the sum is below its integral) and tending to 1 as
    beta -> 1; so the bound is sharp and the finite cut-off is not what keeps the ratio below 1."""
    import numpy as np
    from scipy.special import zeta

    betas = 1 + np.logspace(-4, 1, 60)
    ratio = (zeta(betas) - 1) * (betas - 1)
    assert np.all(ratio < 1) and ratio[0] > 0.999
    text = prose.reader_text((ROOT / "notebooks" / "03_collapse_and_spreading.md").read_text())
    assert "Even the infinite row keeps the ratio below $1$" in text


STATUS_COUNT = re.compile(r"^Status: (both|all (?:two|three|four|five|six)) proved", re.M)
COUNT_WORDS = {"both": 2, "all two": 2, "all three": 3, "all four": 4, "all five": 5, "all six": 6}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_status_line_counts_the_statements_it_calls_proved(path):
    """'Status: all four proved here' in chapter 02 counted its definition among the proved statements; a status
    line that says 'both' or 'all N' proved counts the chapter's theorems, lemmas, propositions and corollaries."""
    text = path.read_text()
    proved = len(re.findall(r"^```\{prf:(?:theorem|lemma|proposition|corollary)\}", text, re.M))
    for match in STATUS_COUNT.finditer(text):
        assert COUNT_WORDS[match.group(1)] == proved, (match.group(0), proved)


def test_the_appendix_reports_the_quantile_row_rejection_only_where_chapter_05_records_it():
    """The appendix says the planted fits reject the quantile row's slope; chapter 05's recorded numbers must agree
    in every profile built (its box and its text paste the same verdict)."""
    text = prose.reader_text(APPENDIX.read_text())
    claimed = "lies outside the 95% intervals of the fits" in text
    for profile, values in _fresh_profiles("05_ladder"):
        assert claimed == bool(values["step_qrow_rejected"]), profile


def test_an_equation_reference_is_not_wrapped_in_a_second_pair_of_parentheses():
    """An {eq} reference renders with its own parentheses, '(8)'; the appendix wrote '({eq}`eq-06-kappa-bar`)',
    which the reader saw as '((8))'."""
    wrapped = re.compile(r"\(\{eq\}`[^`]*`\)")
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in PROSE_SOURCES for m in wrapped.finditer(p.read_text())]
    assert found == []


# ---------------------------------------------------------------- a bound read off a rounded extreme
BOUND_PAGES = [ROOT / "notebooks" / f"{stem}.md" for stem in (
    "01_definitions", "02_free_energy", "03_collapse_and_spreading", "04_critical_temperatures", "05_ladder",
    "06_gumbel_window", "07_weibull_window", "08_planted_window", "09_legendre_entropy", "10_rescaling_rules",
    "11_dimension_crossover", "12_kernels", "99_reproducibility")]
BOUND_WORD = r"(?:at most|at least|within|up to|exceeds?|more than|less than|no more than|\\ge|\\le|≥|≤)"
BOUND_GLUE = re.compile(BOUND_WORD + r"(?:\s+a\s+factor(?:\s+of)?)?[\s$|=z_\\pm{}]*\{glue:text\}`([\w.-]+):[^`]*[fg%]`")
RANGE_GLUE = re.compile(r"\bbetween[\s$c=]*\{glue:text\}`([\w.-]+):[^`]*[fg%]`\s+and\s+\{glue:text\}`([\w.-]+):[^`]*[fg%]`")
THRESHOLDS = {  # keys that are a declared threshold or a parameter, not an observed extreme: a bound by them is exact
    "extrap_z_family", "c_max_model", "mc_z_threshold", "live_beta_max_qk", "goal_scores32_ms", "goal_qk_ms",
    "extrap_z_pass",  # chapter 06's declared pass criterion (|z| of 4), fixed before the data
}


def _rounded_bounds(text):
    text = prose.COMMENT.sub(" ", text)
    found = BOUND_GLUE.findall(text) + [key for pair in RANGE_GLUE.findall(text) for key in pair]
    return [key for key in found if key not in THRESHOLDS]


@pytest.mark.parametrize("path", BOUND_PAGES, ids=lambda p: p.stem)
def test_no_bound_is_a_rounded_observed_extreme(path):
    """'each within 1.1 standard errors' pasted the largest |z| rounded to the nearest tenth, so a largest |z| of
    1.108 read 'within 1.1', false as written (chapter 07; likewise its '|z| >= 6.9' for 6.87 and 'no |z| exceeds 1.3'
    for 1.34, chapter 08's 'within 1.2' for 1.22, chapter 09's 'within 2.1' for 2.14 and chapter 11's 'at most 0.076'
    for 0.0765 in the cpu book; chapter 01's 'at most 0.12 times the rounding model' for 0.121, chapter 04's 'at
    least 0.43' for 0.427 and chapter 05's 'moves by at most a factor 1.12' for 1.125 in the ci book).  An observed
    extreme is stated as what it is ('the largest |z| is 1.1'), a range of two as 'from X to Y'; a bound word before
    a rounded paste is kept for declared thresholds only."""
    assert _rounded_bounds(path.read_text()) == []


def test_the_bound_pattern_sees_a_rounded_extreme_and_spares_thresholds():
    old = ("each within {glue:text}`kink_weibull_max_abs_z:.1f` standard errors; rejected at $|z|\\ge$ "
           "{glue:text}`extrap_min_abs_z_alternative:.1f`; no $|z_\\pm|$ exceeds {glue:text}`x_c4:.1f`; "
           "misses $0$ by more than $|z|=${glue:text}`extrap_z_family:.2f`; the largest is {glue:text}`y:.1f`; "
           "below {glue:text}`truncation_tolerance`")
    assert _rounded_bounds(old) == ["kink_weibull_max_abs_z", "extrap_min_abs_z_alternative", "x_c4"]
    factor = ("moves by at most a factor {glue:text}`drift_max:.2f` with; differ by a factor of up to "
              "{glue:text}`factor_max:.2f`; sits at $c$ between {glue:text}`c_min:.2f` and {glue:text}`c_max:.2f`; "
              "between $n=${glue:text}`n_small` and $n=${glue:text}`n_big`; ranges from {glue:text}`lo:.2f` to "
              "{glue:text}`hi:.2f`; a cell passes when within {glue:text}`extrap_z_pass:.0f` standard errors")
    assert _rounded_bounds(factor) == ["drift_max", "factor_max", "c_min", "c_max"]


def _code_cells(path):
    """The code cells of a MyST notebook, each up to its closing fence on a line of its own, without cell options."""
    cells, current = [], None
    for line in path.read_text().split("\n"):
        if current is None:
            current = [] if line.startswith("```{code-cell}") else None
        elif line == "```":
            cells.append("\n".join(l for l in current if not l.startswith(":tags:")))
            current = None
        else:
            current.append(line)
    return cells


BOUND_END = re.compile(BOUND_WORD + r"(?:\s+a\s+factor(?:\s+of)?)?[\s$|=z_\\pm{}]*$")
CODE_THRESHOLDS = {  # expressions a code-built sentence may bound by: declared thresholds and grid points
    "z_family",      # chapter 07's family-wise |z| threshold
    "max(c_below)",  # a point of chapter 09's declared c grid, printed exactly by :g
}


def _rounded_code_bounds(source):
    """The expressions an f-string rounds (:.Nf, :.Ng, :g, :%) right after a bound word, thresholds left out."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            for text, value in zip(node.values, node.values[1:]):
                if not (isinstance(text, ast.Constant) and isinstance(value, ast.FormattedValue)):
                    continue
                spec = "".join(part.value for part in getattr(value.format_spec, "values", [])
                               if isinstance(part, ast.Constant))
                if (spec.endswith(("f", "g", "%")) and BOUND_END.search(text.value)
                        and ast.unparse(value.value) not in CODE_THRESHOLDS):
                    found.append(ast.unparse(value.value))
    return found


@pytest.mark.parametrize("path", BOUND_PAGES, ids=lambda p: p.stem)
def test_no_code_built_sentence_bounds_by_a_rounded_observed_extreme(path):
    """Chapter 05's box clause read 'misses that scale's by at most {step_max:.3f}' and chapter 06's verdict
    'intercepts at most {max(...):.1f} standard errors from 0 and the neighbouring critical points at least
    {min(...):.1f} away': a rounded extreme after a bound word is false whenever it rounds the wrong way (the cpu
    book's 'at least 7.7' for 7.65).  A sentence built in a code cell states the extreme as what it is, as the prose
    does."""
    assert [found for cell in _code_cells(path) for found in _rounded_code_bounds(cell)] == []


def test_the_code_bound_pattern_sees_a_rounded_extreme_and_spares_thresholds():
    old = ('a = f"misses by at most {step_max:.3f}, "\n'
           'b = (f", with intercepts at most {max(z):.1f} standard errors "\n'
           '     f"and the neighbours at least "\n'
           '     f"{min(alt):.1f} away")\n'
           'c = f"noise alone exceeds $|z|={z_family:.2f}$ in at most 5% of runs; {n} rows within {rows} rows"\n'
           'd = f"the largest miss is {step_max:.3f}"\n')
    assert _rounded_code_bounds(old) == ["step_max", "max(z)", "min(alt)"]


def test_the_stretched_exponential_entropy_limit_carries_its_hypothesis():
    """Chapter 09's limit 1 - c^{p/(p-1)} holds for p > 1 only (a convex -log F-bar); for p < 1 it would be a
    negative entropy.  Every line that states it names the range of p (the derivation's 'psi(x) = x^p' item and
    the exercise's solution stated it for every p before this test)."""
    text = (ROOT / "notebooks" / "09_legendre_entropy.md").read_text()
    bare = [f"09_legendre_entropy.md:{number}" for number, line in prose.reader_lines(text)
            if "c^{p/(p-1)}" in line.replace(" ", "")
            and not re.search(r"p\s*>\s*1|p\s*<\s*1|p\s*\\downarrow\s*1", line)]
    assert bare == []


# ---------------------------------------------------------------- chapter 12: provenance in its box, equal work per panel
def _kernels_cells():
    """The code cells of chapter 12, each up to its closing fence on a line of its own."""
    return _code_cells(KERNELS)


def _reads_a_commit(node):
    """A subscript ``x["commit"]``, an attribute ``x.commit`` or a variable named for commits."""
    import ast

    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and "commit" in str(node.slice.value)
    return ("commit" in node.attr) if isinstance(node, ast.Attribute) else (
        isinstance(node, ast.Name) and "commit" in node.id)


def test_chapter_12_prose_pastes_no_commit():
    """Where and at which commit a GPU result was made is the provenance box's business: 'Tests on the GPU: 45
    passed ... at commit 1f03a07d5d3f' and 'The kernel tests recorded on the GPU ran at commit 1f03a07d5d3f'
    pasted it into the prose.  No string the prose pastes is built from a record's commit."""
    import ast

    source = KERNELS.read_text()
    pasted = set(GLUED.findall(source)) | set(GLUED_BLOCK.findall(source))
    bad = []
    for cell in _kernels_cells():
        for node in ast.walk(ast.parse(cell)):
            if (isinstance(node, ast.Call) and ast.unparse(node.func) == "cs.record" and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in pasted
                    and any(_reads_a_commit(part) for part in ast.walk(node.args[1]))):
                bad.append(node.args[0].value)
    assert bad == []


def test_chapter_12_gpu_notes_point_to_the_provenance_box():
    """The note above each recorded GPU result named device, software, driver, commit, date and wall time in the
    prose; on chapter 12 it names the device and points to the box, which carries the rest."""
    from critscale.page import gpu_results

    data = {"provenance": {"device": "NVIDIA H200", "commit": "1f03a07d5d3f", "date_utc": "2026-11-30T00:55:50Z",
                           "versions": {"torch": "2.11.0"}, "driver": "580", "wall_time_s": 41.0}}
    short = gpu_results.note_text(data, "Kernel tests", provenance_in_box=True)
    assert "NVIDIA H200" in short and "provenance box" in short
    assert "1f03a07d5d3f" not in short and "2026-11-30" not in short and "torch" not in short
    assert "1f03a07d5d3f" in gpu_results.note_text(data, "Kernel tests")  # other pages keep the full note
    assert gpu_results.describe_in_box(data) == "torch 2.11.0; driver 580; wall time 41 s"
    calls = re.findall(r"show_gpu_result_note\((.*?)\)\n", KERNELS.read_text(), flags=re.S)
    assert len(calls) == 3 and all("provenance_in_box=True" in call for call in calls)


def test_chapter_12_floors_figure_draws_a_recorded_time_only_on_its_own_grid():
    """The floors figure drew the older run's time on the ratio-1.25 grid (80 ms) on the row of the doubling grid
    (floor 24 ms): unequal work in one panel.  Run the figure's own cell on a small table: a diamond appears only
    where the recorded grid is the row's grid, and the stamp names the GPU run's commit and date."""
    import types

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    import critscale as cs_real

    cell = next(c for c in _kernels_cells() if 'record_figure("kernels_floors_fig"' in c)
    pairs = [("scores", "grid32"), ("scores", "grid1"), ("scores", "grid32-geo"), ("qk", "grid32"),
             ("sampled", "grid32")]
    floors = pd.DataFrame({"kind": [k for k, _ in pairs], "grid": [g for _, g in pairs],
                           "one launch (ms)": [19.0, 8.0, 10.0, 0.0, 0.0],  # stored scores: both passes in one
                           "pass 1 (ms)": [0.0, 0.0, 0.0, 5.0, 7.0], "pass 2 (ms)": [0.0, 0.0, 29.0, 25.0, 26.0],
                           "floor (ms)": [19.0, 8.0, 39.0, 30.0, 33.0], "goal (ms)": [20.0, 9.6, None, 28.0, 28.6],
                           "recorded (ms)": [80.2, 12.6, 80.2, 168.0, 157.0],
                           "recorded grid": ["grid32-geo", "grid1", "grid32-geo", "grid32-geo", "grid32-geo"]})
    figures = {}
    cs = types.SimpleNamespace(plotting=cs_real.plotting, record_figure=lambda key, fig: figures.__setitem__(key, fig))
    scope = {"cs": cs, "np": np, "pd": pd, "plt": plt, "floors": floors, "profile": "test", "ROWS": 4096, "N": 2**20,
             "sp": {"triton": "3.7.1"}, "facts": {"device": "NVIDIA H200", "clock_mhz": 1980.0},
             "bench": {"provenance": {"commit": "1f03a07d5d3f", "date_utc": "2026-11-30T00:56:40Z"}}}
    exec(cell, scope)
    fig = figures["kernels_floors_fig"]
    diamonds = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() == "D"]
    assert len(diamonds) == 1
    drawn = np.isfinite(np.asarray(diamonds[0].get_xdata(), dtype=float))
    assert drawn.tolist() == (floors["recorded grid"] == floors.grid).tolist()
    stamp = " ".join(t.get_text() for t in fig.texts)
    assert "1f03a07d5d3f" in stamp and "2026-11-30" in stamp
    plt.close(fig)


@pytest.mark.parametrize("stem", ["07_weibull_window", "08_planted_window", "09_legendre_entropy",
                                  "10_rescaling_rules", "11_dimension_crossover", "99_reproducibility"])
def test_glued_tables_name_families_by_reader_name(stem):
    """Chapter 10's drift table headed a column 'edge rows' and its exponent table listed 'gauss', 'edge' as the
    closest family; chapter 11's medians were labelled 'gauss', 'sphere4', ... 'sphere128'.  The markdown a page
    pastes for a table (headers and cells) holds no family code name."""
    import nbformat

    _fresh_results(stem)
    executed = ROOT / "build" / "executed" / "ci" / f"{stem}.ipynb"
    if not executed.exists():
        pytest.skip(f"{executed.relative_to(ROOT)} missing")
    source = (ROOT / "notebooks" / f"{stem}.md").read_text()
    pasted = set(GLUED_BLOCK.findall(source))
    bad = []
    for cell in nbformat.read(executed, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            shown = output.get("data", {}).get("application/papermill.record/text/markdown")
            if name in pasted and isinstance(shown, str) and shown.lstrip().startswith("|"):
                bad += [f"{name}: {m.group(0)!r}" for m in CODE_NAME.finditer(prose.CODE_SPAN.sub(" ", shown))]
    assert bad == []


def test_a_table_cell_keeps_a_code_span_as_code():
    """The reproducibility page's parameters are code (`families=['gauss']`); a table cell escaped every backtick
    and underscore, so a parameter could only be shown as text, with its family code names."""
    from critscale.page.tables import to_markdown

    import pandas as pd

    md = to_markdown(pd.DataFrame({"parameters": ["`figure_families=['gauss']`, `n=4096`", "a_b `x|y`"]}))
    assert "`figure_families=['gauss']`, `n=4096`" in md
    assert r"a\_b `x\|y`" in md
    assert 'f"`{k}={v}`"' in REPRO.read_text()  # the page's parameters column, each parameter a code span


def test_recorded_dates_are_written_one_way():
    """The reproducibility page's table of GPU results listed '2026-11-30 00:37 UTC' beside
    '2026-11-30T00:56:40Z': one quantity, two formats.  Every recorded date is written as the page boxes write
    theirs."""
    from critscale.page.gpu_results import date_text

    assert date_text("2026-11-30T00:56:40Z") == "2026-11-30 00:56 UTC"
    assert date_text("2026-11-30 00:37 UTC") == "2026-11-30 00:37 UTC"
    assert date_text("2026-11-30T01:56:40+01:00") == "2026-11-30 00:56 UTC"
    with pytest.raises(ValueError, match="recorded date 'soon'"):
        date_text("soon")
    assert 'cs.gpu_results.date_text(p["date_utc"])' in REPRO.read_text()


def test_chapter_12_provenance_box_writes_dates_as_the_book_does():
    """Chapter 12's provenance box wrote '2026-12-01T16:26:17Z' under the page's own '2026-12-01 16:39 UTC'. Run the
    box's own function on the committed records: every date it writes is 'YYYY-MM-DD HH:MM UTC', and each GPU
    record's line carries its software (moved there from the notes in the prose)."""
    source = KERNELS.read_text()
    function = source[source.index("def data_provenance():"):source.index("\ndata_provenance()")]
    import critscale as cs

    shown = []
    scope = {"cs": cs, "json": json, "Markdown": str, "display": shown.append, "sass_name": "kernels_sass",
             "bench_name": "kernels_bench", "tests_name": "kernels_tests", "mc_name": "kernels_montecarlo"}
    exec(function, scope)
    scope["data_provenance"]()
    box = shown[0]
    assert not re.search(r"\d{4}-\d\d-\d\dT\d", box), box
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", box)) >= 2
    for line in box.split("\n"):
        if line.startswith("> GPU "):
            assert "driver" in line and "wall time" in line, line


def test_chapter_07_failed_cell_is_written_as_its_table_writes_it():
    """The prose gave the failed cell's intercept as '-1.9×10⁻⁴ ± 6.3×10⁻⁵' beside the table's '-0.000191 ±
    0.000063': one quantity, two formats.  Run the chapter's own sentence builder on that cell."""
    import types

    import critscale as cs

    source = (ROOT / "notebooks" / "07_weibull_window.md").read_text()
    function = source[source.index("def exception_text"):source.index("\n\n\nfailed =")]
    fit = types.SimpleNamespace(intercept=-0.000191, se=0.000063, z=lambda at: (-0.000191 - at) / 0.000063)
    scope = {"cs": cs, "ALPHA": {"sphere5": 2}, "limit_value": lambda alpha, key, c: (0.3289, 0.001)}
    exec(function, scope)
    text = scope["exception_text"]("sphere5", "collision", 1.0, fit)
    assert cs.tables.interval(-0.000191, -0.000254, -0.000128) in text and "×10" not in text, text


# ---------------------------------------------------------------- chapters 13 and 14: code names only where code is run
DIAGNOSTIC_CHAPTERS = [ROOT / "notebooks" / f"{stem}.md" for stem in ("13_gpt2_attention", "14_context_extension")]
CODE_WORD = re.compile(r"(?<![\w\\{])[a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9](?![\w{])"  # snake_case: best_rule, rope_parameters
                       r"|\b[\w/.-]+\.(?:py|json|npz|yaml)\b"  # file paths: schedule.json, tests/test_x.py
                       r"|\bcritscale\.[a-z_.]+")  # module paths: critscale.diagnostic.schedule
CODE_SECTIONS = ("How to run it", "Exercise")  # where a reader is told what to type
MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$")
SENTENCE_START = re.compile(r"^\s*(?:[A-Z0-9$({\"*]|\\\()")


def _prose_of(path, keep_inline_code=True, raw_roles=False):
    """(line number, reader text without math) of a chapter, outside the sections that show code and the figure
    directives' keys; with ``raw_roles`` the source line itself (its glue roles kept)."""
    text = path.read_text()
    raw, section, where = text.split("\n"), None, {}
    for number, line in enumerate(raw, 1):
        section = line[3:].strip() if line.startswith("## ") else section
        where[number] = section
    for number, line in prose.reader_lines(text, keep_inline_code=keep_inline_code):
        if where[number] in CODE_SECTIONS or raw[number - 1].lstrip().startswith("```{glue:figure}"):
            continue
        yield number, raw[number - 1] if raw_roles else MATH.sub(" ", line)


def test_the_code_word_pattern_sees_code_names_and_spares_prose():
    found = [m.group(0) for m in CODE_WORD.finditer(
        "the audit (best_rule) writes schedule.json, run by tests/test_x.py, see critscale.diagnostic.schedule")]
    assert found == ["best_rule", "schedule.json", "tests/test_x.py", "critscale.diagnostic.schedule"]
    assert not CODE_WORD.search("the sink null, i.i.d. Gaussian heads, 2.9×10⁻¹², Gemma 3, `transformers`, e.g. this")


@pytest.mark.parametrize("path", DIAGNOSTIC_CHAPTERS, ids=lambda p: p.stem)
def test_chapters_13_and_14_prose_names_no_code(path):
    """A reader gets what a thing is, not its code name: chapter 13 wrote `best_rule`, `nearest_rule`,
    `beyond_null`, `critscale.diagnostic.schedule.layer_schedule`, `schedule.json` and
    tests/test_diagnostic_calibration.py as reader text, chapter 14 the config's `rope_parameters` and
    `attention_factor`; code names belong in the code cells and the 'How to run it' section."""
    found = [f"{number}: {m.group(0)!r}" for number, line in _prose_of(path) for m in CODE_WORD.finditer(line)]
    assert found == []


def _paragraphs(path):
    """Paragraphs of a chapter's prose as lists of source lines; a list item or a table row starts its own."""
    raw = path.read_text().split("\n")
    paragraphs, last = [], None
    for number, _ in _prose_of(path):
        line = raw[number - 1]
        if line.lstrip().startswith("|"):
            last = None
            continue
        if last is None or number != last + 1 or re.match(r"\s*(?:[-*]|\d+\.)\s", line):
            paragraphs.append([])
        paragraphs[-1].append(line)
        last = number
    return paragraphs


@pytest.mark.parametrize("path", DIAGNOSTIC_CHAPTERS, ids=lambda p: p.stem)
def test_chapters_13_and_14_paragraphs_are_short(path):
    """At most five sentences a paragraph (one sentence a line; a line that starts in lower case continues the
    sentence above): chapter 13's verdict paragraph held seven, chapter 14's criterion eight."""
    long = [(p[0][:60], n) for p in _paragraphs(path)
            if (n := sum(bool(SENTENCE_START.match(re.sub(r"^\s*(?:[-*]|\d+\.)\s+", "", line))) for line in p)) > 5]
    assert long == []


@pytest.mark.parametrize("path", DIAGNOSTIC_CHAPTERS, ids=lambda p: p.stem)
def test_chapters_13_and_14_paste_no_e_notation(path):
    """Chapter 13 pasted its capture errors as {glue:text}`key:.1e` (3.7e-06) and chapter 14's box pasted its
    differences with :.3g, which the ci profile prints as 3.29e-07 beside 2.48×10⁻⁷; every formatted paste of the
    recorded ci values prints without e-notation."""
    text = prose.COMMENT.sub(" ", path.read_text())
    assert E_FORMAT.findall(text) == []
    values = _fresh_results(path.stem)
    bad = [f"{key}:{spec} -> {format(values[key], spec)}" for key, spec in set(GLUE_FORMAT.findall(text))
           if isinstance(values.get(key), float) and E_NUMBER.search(format(values[key], spec))]
    assert bad == []


def _markdown_outputs(path):
    """The sentences a chapter's cells print as markdown (the verdict sentences of chapter 13), from its executed ci
    notebook when that is fresher than the source; none otherwise (the glued values are still checked)."""
    executed = ROOT / "build" / "executed" / "ci" / f"{path.stem}.ipynb"
    if not executed.exists() or executed.stat().st_mtime < path.stat().st_mtime:
        return []
    cells = json.loads(executed.read_text())["cells"]
    return ["".join(o["data"]["text/markdown"]) for c in cells if c["cell_type"] == "code"
            for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})
            and not o.get("metadata", {}).get("scrapbook") and "Computed by this page" not in "".join(o["data"]["text/markdown"])]


@pytest.mark.parametrize("path", DIAGNOSTIC_CHAPTERS, ids=lambda p: p.stem)
def test_chapters_13_and_14_glued_sentences_are_reader_text(path):
    """A string a chapter pastes carries no raw LaTeX that markdown would print as '(\\beta)' (chapter 13's verdict
    sentence printed 'rule constant (\\beta)'), no e-notation, no code name and no file path."""
    values = _fresh_results(path.stem)
    keys = sorted({key for _, line in _prose_of(path, raw_roles=True) for key in GLUED.findall(line)})
    strings = [(key, values[key]) for key in keys if isinstance(values.get(key), str)]
    strings += [("a cell's sentences", text) for text in _markdown_outputs(path)]
    bad = [f"{key}: {m.group(0)!r}" for key, text in strings
           for pattern in (re.compile(r"\\\(|\\\)"), E_NUMBER, CODE_WORD)
           for m in pattern.finditer(MATH.sub(" ", prose.CODE_SPAN.sub(" ", text)))]
    assert strings and bad == []


def test_chapter_13_gpu_note_is_short_paragraphs_without_paths():
    """The note on the previous pipeline's GPU run was one paragraph of seven sentences ending on
    '(`scripts/gpu_gpt2.py`, ...)'; it is two paragraphs of reader text, the commit left to the provenance note."""
    from critscale.page import gpu_results
    from critscale.diagnostic.gpu_runs import recorded_text

    data = gpu_results.load("gpt2_small_attention")
    text = recorded_text(data, gauss_linear_share=0.7)
    paragraphs = text.split("\n\n")
    assert len(paragraphs) >= 2
    assert all(len(re.findall(r"[.!?](?:\s|$)", p)) <= 5 for p in paragraphs), paragraphs
    assert not CODE_WORD.search(MATH.sub(" ", text)) and "`" not in text and data["provenance"]["commit"] not in text
