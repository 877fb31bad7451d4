"""The documents hold together: links and cited headings exist, the benchmark commands that docs/
names (scripts and their flags) are in the repository, and the size limits a newcomer can read
in one look hold.

Read from the files; nothing is run.
"""

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
DOCS = sorted((REPO / "docs").rglob("*.md"))
PAGES = [REPO / "README.md", REPO / "BUILD.md", *DOCS]
CODE = sorted(p for folder in ("tf_placeto", "measure", "examples", "tests")
              for p in (REPO / folder).rglob("*.py"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# a citation in code: docs/<page>.md, "<heading>" (the heading may wrap onto the next line)
CITATION = re.compile(r"(docs/[\w/-]+\.md),\s*\"([^\"]+)\"")
SCRIPT = re.compile(r"-m (measure|examples)\.(\w+)([^`]*)`")


def _anchors(page: pathlib.Path) -> set:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces to -."""
    anchors = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _headings(page: pathlib.Path) -> set:
    return {line.lstrip("#").strip() for line in page.read_text().splitlines()
            if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_of_a_page_leads_somewhere(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue                                    # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    assert not broken, f"{page.name}: " + ", ".join(broken)


def test_every_heading_the_code_cites_is_a_heading():
    missing = []
    for path in CODE:
        text = re.sub(r"\n\s*#?\s*", " ", path.read_text())     # join wrapped comment lines
        for page, heading in CITATION.findall(text):
            if not (REPO / page).exists() or heading not in _headings(REPO / page):
                missing.append(f"{path.relative_to(REPO)}: {page}, \"{heading}\"")
    assert not missing, "\n".join(missing)


def test_the_code_cites_documents_not_the_build_notes():
    citing = [str(p.relative_to(REPO)) for p in CODE if "BUILD.md" in p.read_text()
              and p.name != "test_docs.py"]
    assert not citing, "cite a page of docs/ by file and heading: " + ", ".join(citing)


def _with_shared_options(script: pathlib.Path) -> str:
    """The script's source and that of the benchmark modules it imports options from."""
    source = script.read_text()
    shared = re.findall(r"from measure(?:\.(\w+))? import (\w+)", source)
    for module, name in shared:
        imported = REPO / "measure" / f"{module or name}.py"
        if imported.exists():
            source += imported.read_text()
    return source


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_figure_names_a_command_in_the_repository(page):
    text = page.read_text()
    assert "/tmp/" not in text, "a script in /tmp is not a result: commit it or drop the figure"
    unknown = []
    for package, module, arguments in SCRIPT.findall(text):
        script = REPO / package / f"{module}.py"
        if not script.exists():
            unknown.append(f"{package}.{module}")
            continue
        source = _with_shared_options(script)
        arguments = re.sub(r"\"[^\"]*\"|'[^']*'", "", arguments)   # quoted: passed on
        unknown += [f"{package}.{module} {flag}" for flag in re.findall(r"(--[\w-]+)", arguments)
                    if f'"{flag}"' not in source]
    assert not unknown, "commands that are not in the repository: " + ", ".join(unknown)


def test_every_results_page_opens_with_todays_figures_and_is_indexed():
    index = (REPO / "docs" / "results" / "README.md").read_text()
    for page in sorted((REPO / "docs" / "results").glob("*.md")):
        if page.name == "README.md":
            continue
        assert f"({page.name})" in index, f"{page.name} is not in docs/results/README.md"
        head = page.read_text().split("\n## ")[:2]
        assert "| date " in "".join(head), \
            f"{page.name} must open with a table of today's figures, with their date"


def test_the_maps_stay_short():
    readme = (REPO / "README.md").read_text().splitlines()
    assert len(readme) < 250
    wide = [cell.strip()[:40] for line in readme if line.startswith("|")
            for cell in line.split("|") if len(cell.strip()) > 200]
    assert not wide, f"README table cells over 200 characters: {wide}"
    assert len((REPO / "BUILD.md").read_text().splitlines()) < 200
