"""The README and docs/*.md point only at what exists: relative links and images name files of the repository, every
``#anchor`` names a heading of its page (GitHub's slugs), and every backticked repository path (``grpo_core/.../x.py``,
``benchmarks/x.py``, ``examples/x.yaml``, ``tests/doctor/corpus/``) and ``python -m grpo_core...`` module exists.

The checks are plain functions of a page's text, so each is also tested on a broken page (it must fail)."""

from __future__ import annotations

import glob
import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: A backticked path is checked when it starts with one of the repository's own top-level folders.
TOP_LEVEL = ("app", "grpo_core", "storage", "tests", "benchmarks", "examples", "docs", ".ci")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target), target up to the first space or ")" (an optional "title" may follow).
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE = re.compile(r"(`+)(.+?)\1")
_TOPS = "|".join(re.escape(t) for t in TOP_LEVEL)
_PATH = re.compile(rf"^(?:{_TOPS})/(?:[\w.*-]+/)*[\w.*-]*$")
#: ``grpo_core/NAME/worker.py``, ``runs/run-N/``: a name to fill in, not a path.
_PLACEHOLDER = re.compile(r"(?:^|[/_.-])[A-Z]+(?:[/_.-]|$)")
_MODULE = re.compile(r"python -m ((?:app|grpo_core|storage|benchmarks|tests)(?:\.\w+)+)")


def _prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a heading or link inside a fence is not one)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        lines.append("" if fenced else line)
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: inline markup dropped, lower case, every character that is not a letter,
    digit, space, hyphen or underscore removed, each space a hyphen (github-slugger's rule)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = text.lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a page: its headings' slugs, a repeated slug numbered -1, -2, ... as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for line in _prose_lines(text):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path, text: str) -> list[str]:
    """Relative links and images of ``text`` (the page ``page``) whose file or ``#anchor`` does not exist."""
    problems = []
    for number, line in enumerate(_prose_lines(text), 1):
        for target in _LINK.findall(_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
                continue
            path_part, _, anchor = target.partition("#")
            file = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.name}:{number}: {target}"
            if path_part and not file.exists():
                problems.append(f"{where}: no such file")
            elif path_part and not file.is_relative_to(REPO):
                problems.append(f"{where}: outside the repository")
            elif anchor and file.suffix == ".md" and anchor not in anchors(
                    file.read_text(encoding="utf-8") if path_part else text):
                problems.append(f"{where}: no heading with the anchor #{anchor} in {file.name}")
    return problems


def missing_paths(page: Path, text: str) -> list[str]:
    """Backticked repository paths and ``python -m`` modules of ``text`` that do not exist in the tree
    (``*`` is a glob that must match something)."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for _, code in _CODE.findall(line):
            for module in _MODULE.findall(code):
                base = REPO / module.replace(".", "/")
                if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
                    problems.append(f"{page.name}:{number}: python -m {module}: no such module")
            for word in code.split():
                word = word.rstrip(",;:)").split("::")[0]
                if not _PATH.match(word) or "..." in word or _PLACEHOLDER.search(word):
                    continue
                if "*" in word:
                    exists = bool(glob.glob(str(REPO / word)))
                else:
                    exists = (REPO / word).exists()
                if not exists:
                    problems.append(f"{page.name}:{number}: `{word}`: no such path in the repository")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_links_and_images_point_at_existing_files_and_headings(page):
    assert broken_links(page, page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_backticked_repository_paths_exist(page):
    assert missing_paths(page, page.read_text(encoding="utf-8")) == []


def test_the_pages_are_found_and_the_readme_links_into_docs():
    names = {p.name for p in PAGES}
    assert {"README.md", "architecture.md"} <= names
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/architecture.md)" in readme
    assert re.search(r"!\[[^\]]*\]\(docs/screenshots/\w+\.png\)", readme)


def test_slugs_follow_githubs_rules():
    assert github_slug("Quick start: a first run that learns") == "quick-start-a-first-run-that-learns"
    assert github_slug("The `code_tests` harness: results cross a process boundary") == (
        "the-code_tests-harness-results-cross-a-process-boundary")
    assert github_slug("What it does NOT protect against") == "what-it-does-not-protect-against"
    assert github_slug("Cost per execution (`benchmarks/bench_sandbox.py`)") == (
        "cost-per-execution-benchmarksbench_sandboxpy")
    assert github_slug("\"Not improving\" is a claim about power") == "not-improving-is-a-claim-about-power"
    assert anchors("# A\n## A\n```\n# A\n```\n### A\n") == {"a", "a-1", "a-2"}


def test_a_broken_link_image_anchor_or_path_is_reported():
    page = REPO / "README.md"
    text = "\n".join([
        "# Title",
        "## A section",
        "[ok](#a-section) [ok](docs/architecture.md#the-tree) ![ok](docs/screenshots/runs.png) [web](https://x.org/y)",
        "[gone](docs/no-such-page.md) ![gone](docs/screenshots/nope.png) [bad anchor](#no-such-section)",
        "[bad anchor elsewhere](docs/architecture.md#no-such-heading)",
        "`grpo_core/run_config.py` `grpo_core/runs.py` `benchmarks/bench_nothing.py` `tests/doctor/corpus/*.json`",
        "`examples/*.nothing` `python -m grpo_core.training.worker` `python -m grpo_core.engine.nothing`",
        "```", "[in a fence](nowhere.md)", "```",
    ])
    links = broken_links(page, text)
    assert len(links) == 4, links
    assert any("no-such-page.md" in p for p in links) and any("nope.png" in p for p in links)
    assert any("#no-such-section" in p for p in links) and any("#no-such-heading" in p for p in links)
    paths = missing_paths(page, text)
    assert sorted(p.split(": ", 1)[1] for p in paths) == sorted([
        "`grpo_core/runs.py`: no such path in the repository",
        "`benchmarks/bench_nothing.py`: no such path in the repository",
        "`examples/*.nothing`: no such path in the repository",
        "python -m grpo_core.engine.nothing: no such module",
    ]), paths
