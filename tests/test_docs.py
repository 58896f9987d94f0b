"""Docs that cannot drift: docs/architecture.md's import table and module map are what
``tests/import_graph.py`` makes from the code, and no file of the repository (code, comment or
doc) cites a file of the repository that does not exist."""

import re

from import_graph import imports_table, modules_map
from repo_paths import REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"


def between(text: str, marker: str) -> str:
    start, end = f"<!-- {marker} -->\n", f"\n<!-- end {marker} -->"
    assert start in text and end in text, f"docs/architecture.md lost its {marker!r} markers"
    return text.split(start, 1)[1].split(end, 1)[0]


def test_the_architecture_tables_are_the_code():
    text = ARCHITECTURE.read_text()
    fix = "regenerate it: python tests/import_graph.py --write"
    assert between(text, "imports table") == imports_table(), f"the import table drifted: {fix}"
    assert between(text, "modules map") == modules_map(), f"the module map drifted: {fix}"


# a cited path: at least one folder, then a file name; leading placeholders (REPO/, OUT/) dropped
CITED = re.compile(r"(?<![\w.-])((?:[\w.-]+/)+[\w-]+\.(?:py|md|sh|yaml|txt|toml))\b")
TOP = {p.name for p in REPO.iterdir()} | {
    p.name for p in (REPO / "truneg_fairseq").iterdir() if p.is_dir()
}


def cited_paths(text: str):
    """The repository paths ``text`` cites (placeholders, URLs and outputs left out)."""
    for m in CITED.finditer(text):
        if "://" in text[max(0, m.start() - 40) : m.start()]:
            continue
        parts = m.group(1).split("/")
        while parts and parts[0].isupper():  # REPO/, OUT/, SAVE_DIR/ ...
            parts.pop(0)
        if len(parts) < 2 or parts[0] not in TOP or any(p.split(".")[0].isupper() for p in parts):
            continue
        yield "/".join(parts)


def missing_citations(files):
    out = []
    for path in files:
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for cited in cited_paths(line):
                if not any(
                    (REPO / base / cited).exists() for base in ("", "truneg_fairseq", "examples")
                ):
                    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
                    out.append(f"{where}:{i}: {cited}")
    return out


def test_no_file_cites_a_file_that_does_not_exist():
    files = [
        p
        for top in ("truneg_fairseq", "scripts", "benchmarks", "examples", "docs", "tests")
        for p in (REPO / top).rglob("*")
        if p.suffix in (".py", ".md", ".sh", ".yaml") and p.is_file()
    ] + [REPO / "README.md", REPO / "Makefile"]
    bad = missing_citations(files)
    assert bad == [], "citations of files that do not exist:\n" + "\n".join(bad)


def test_the_citation_check_sees_a_missing_file(tmp_path):
    doc = tmp_path / "x.md"
    gone = "compat/" + "gone.py"
    doc.write_text(f"see {gone} and core/step.py, REPO/examples/paths.sh, scripts/NAME.py\n")
    assert [b.split(": ")[1] for b in missing_citations([doc])] == [gone]


def test_every_benchmark_file_is_in_the_scripts_table():
    """docs/benchmarks.md's "The scripts" names every file of benchmarks/, and no other."""
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    table = text.split("## The scripts", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.M))
    files = {p.name for p in (REPO / "benchmarks").iterdir() if p.suffix in (".py", ".sh")}
    assert files and named == files, (sorted(files - named), sorted(named - files))


def test_every_console_command_is_in_the_install_table():
    """docs/install.md's table of commands names each console command of the package once."""
    import truneg_fairseq

    text = (REPO / "docs" / "install.md").read_text(encoding="utf-8")
    table = text.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `truneg-")]
    named = [name for row in rows for name in re.findall(r"`(truneg-[a-z-]+)`", row)]
    assert sorted(named) == sorted(truneg_fairseq.COMMANDS)


def test_the_readme_says_where_each_demo_writes_its_results():
    """make demo-quick stops after the first look, whose results are under WORKDIR/first_look/
    (tests/test_demo_quick.py runs it); the full run's are under WORKDIR/results/."""
    make = (REPO / "Makefile").read_text()
    quick = re.search(r"^demo-quick:.*\n\t.*--workdir (\S+) --quick", make, re.M)
    assert quick, "the Makefile's demo-quick target runs the demo with --workdir and --quick"
    work = quick.group(1)
    readme = " ".join((REPO / "README.md").read_text().split())
    said = re.search(r"`make demo-quick` stops after it, its results in `([^`]+)`", readme)
    assert said and said.group(1) == f"{work}/first_look/results/", said
    assert f"the full run's land in `{work}/results/`" in readme
