"""The user-facing text: a short README whose results link to the results pages, pages of bounded
size, and no project history (issue numbers, commit hashes) where users read.

Users read README.md, the documentation site (docs/), the notebooks and the docstrings that
`--help` and the API reference print. The project's history lives in git and the issue tracker, so
none of these cites an issue ("issue 57", "issue #57"), and the README and the guide pages cite no
commit; docs/architecture.md, the maintainers' page, may. Figures live on the results pages,
docs/results.md and docs/speed.md (speed and memory), each with its command and host; the README's
results table quotes a headline figure per row and links to the section that holds it, on either
page, by an anchor that must exist on the page it names: GitHub's heading slug, which the site
also uses (`myst_heading_anchors = 3`: headings of levels 1-3 get one).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
RESULTS_PAGES = ("results.md", "speed.md")  # the pages the README's results table links to, in docs/
README_MAX_BYTES = 12 * 1024
PAGE_MAX_BYTES = 40 * 1024
PACKAGES = ("keras_transformer", "pipelines", "training_directory", "export", "tasks", "commands")  # folders

ISSUE = re.compile(r"\bissue\s+#?\d+", re.IGNORECASE)
# A word of hex digits that holds a digit and a letter: 7-12 long (an abbreviated commit) or 40 (a
# full one). Words of digits alone (step counts) or letters alone ("defaced") are not hashes.
HEX_WORD = re.compile(r"(?<![\w-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])([0-9a-f]{40}|[0-9a-f]{7,12})(?![\w-])")
# What may stand right before a hex word that is no commit: a digest in an example
# ("sha256 3f9a2c1d7e4b", "sha256": "...") or a hexadecimal number.
DIGEST_BEFORE = re.compile(r"(sha256|sha-256|sha1|md5|fingerprint|digest|0x)[\s\"':=]*$", re.IGNORECASE)
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def user_pages() -> list[Path]:
    """The Markdown pages of docs/ (the site's sources, not its build), README.md and the notebooks'
    README."""
    pages = [p for p in sorted(DOCS.rglob("*.md")) if "_build" not in p.relative_to(DOCS).parts]
    return [README, REPO / "notebooks" / "README.md", *pages]


def notebook_sources() -> dict[str, str]:
    """{"notebooks/NAME.ipynb cell i": source} of every cell of every notebook."""
    sources = {}
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            source = cell["source"]
            sources[f"{path.relative_to(REPO)} cell {i}"] = "".join(source) if isinstance(source, list) else source
    return sources


def docstrings(path: Path):
    """(name, docstring) of the module `path` and of every class and function in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield ("module" if isinstance(node, ast.Module) else f"{node.name} (line {node.lineno})"), text


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (and MyST's with myst_heading_anchors): the text as
    rendered (inline code, emphasis and links reduced to their words), lowercased, every character
    but letters, digits, "_", "-" and spaces dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [words](target) -> words
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The slugs of a Markdown page's headings of levels 1-3 outside code blocks; a repeated slug
    gets "-1", "-2", ... as on GitHub."""
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            slug = base = github_slug(match.group(2))
            count = 0
            while slug in found:
                count += 1
                slug = f"{base}-{count}"
            found.add(slug)
    return found


def results_table(readme: str) -> list[str]:
    """The body rows of the first table under the README's "## Results" heading."""
    section = readme.split("\n## Results", 1)
    assert len(section) == 2, 'README.md has no "## Results" section'
    body = section[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.lstrip().startswith("|")]
    assert len(rows) >= 3, "README.md's results section has no table"
    return [row for row in rows[2:]]  # past the header and its |---| line


def test_readme_fits_12_kib():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (f"README.md is {size:,} bytes, more than {README_MAX_BYTES:,}: move detail to "
                                      "the guide pages and link to them")


def test_readme_results_table_links_each_row_to_a_section_of_a_results_page():
    readme = README.read_text(encoding="utf-8")
    rows = results_table(readme)
    assert 5 <= len(rows) <= 8, f"the results table has {len(rows)} rows; keep 5-8 headline figures"
    row_link = re.compile(r"\]\(docs/(" + "|".join(re.escape(name) for name in RESULTS_PAGES) + r")#[\w-]+\)")
    pages = " or ".join(f"docs/{name}" for name in RESULTS_PAGES)
    for row in rows:
        assert row_link.search(row), f"a results row without a link to its section on {pages}: {row}"
    for name in RESULTS_PAGES:
        page = DOCS / name
        assert page.is_file(), f"docs/{name}, which the README's results table links to, does not exist"
        have = anchors(page)
        wanted = {link.split("#", 1)[1] for link in LINK.findall(readme) if link.startswith(f"docs/{name}#")}
        missing = sorted(wanted - have)
        assert not missing, (f"README.md links to docs/{name}#{', #'.join(missing)}, which no heading there makes "
                             f"(its anchors: {', '.join(sorted(have))})")


@pytest.mark.parametrize("name", ["results.md", "speed.md", "experiments.md"])
def test_results_and_experiments_pages_fit_40_kib(name):
    page = DOCS / name
    assert page.is_file(), f"docs/{name} does not exist"
    size = len(page.read_bytes())
    assert size <= PAGE_MAX_BYTES, f"docs/{name} is {size:,} bytes, more than {PAGE_MAX_BYTES:,}"


def test_no_issue_numbers_in_pages_or_notebooks():
    found = [f"{page.relative_to(REPO)}:{n}: {line.strip()}" for page in user_pages()
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if ISSUE.search(line)]
    found += [f"{where}: {match.group(0)}" for where, source in notebook_sources().items()
              for match in ISSUE.finditer(source)]
    assert not found, "issue numbers where users read (history lives in git):\n" + "\n".join(found)


def test_no_issue_numbers_in_docstrings():
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for name, text in docstrings(path):
                found += [f"{path.relative_to(REPO)}, {name}: {m.group(0)}" for m in ISSUE.finditer(text)]
    assert not found, "issue numbers in docstrings (--help and the API reference print them):\n" + "\n".join(found)


def commit_like_words(text: str) -> list[str]:
    """The hex words of `text` that look like a commit hash, not a digest in an example."""
    return [m.group(1) for m in HEX_WORD.finditer(text) if not DIGEST_BEFORE.search(text[max(0, m.start() - 20):m.start()])]


def test_commit_like_words_are_found_and_digests_are_not():
    assert commit_like_words("measured at 4e8008d, then a16008a and 0123456789abcdef0123456789abcdef01234567") == [
        "4e8008d", "a16008a", "0123456789abcdef0123456789abcdef01234567"]
    assert commit_like_words("ckpt-2380, 1234567 pairs, defaced, sha256 3f9a2c1d7e4b, 0x7f3a2b1c, #1f77b4") == []


def test_no_commit_hashes_in_readme_and_docs_pages():
    found = [f"{page.relative_to(REPO)}:{n}: {word}" for page in user_pages()
             if page.name.lower() != "architecture.md" or page.parent != DOCS
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for word in commit_like_words(line)]
    assert not found, "commit hashes where users read (history lives in git):\n" + "\n".join(found)


def test_benchmarks_page_is_gone():
    assert not (DOCS / "BENCHMARKS.md").exists(), ("docs/BENCHMARKS.md: its figures live in docs/results.md and "
                                                   "docs/speed.md")


def test_github_slugs():
    assert github_slug("Translation quality") == "translation-quality"
    assert github_slug("Table 3") == "table-3"
    assert github_slug("`train` and `--init_from`: fine-tuning") == "train-and---init_from-fine-tuning"
    assert github_slug("[Serving](guide/serving.md), n-best (beam 4)") == "serving-n-best-beam-4"
