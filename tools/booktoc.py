#!/usr/bin/env python3
"""Write book/_toc.yml from the notebooks that exist: a new chapter is a new notebook and a re-run.

    python tools/booktoc.py            # rewrite book/_toc.yml
    python tools/booktoc.py --check    # exit 1 if book/_toc.yml is not what it would write

A chapter is the notebooks that share a two-digit prefix: `NN_name` opens it, `NNa_…`, `NNb_…` are
its sections, in the order of their names (the reading order). Chapters fall into the parts below
by number. tests/test_book.py runs the check.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOC = ROOT / "book" / "_toc.yml"
PARTS = [("Foundations", 0, 2), ("Model files", 3, 4), ("The CPU engine", 5, 9),
         ("The GPU", 10, 13), ("Generation", 14, 99)]
HEADER = """\
# Written by tools/booktoc.py from the notebooks in notebooks/ (do not edit by hand: add a notebook
# and run `python tools/booktoc.py`). Paths are relative to the repository root, where the book is
# built: jupyter-book build . --config book/_config.yml --toc book/_toc.yml
format: jb-book
root: book/intro
parts:
"""


def chapters() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]*.ipynb")):
        m = re.match(r"(\d\d)([a-z]?)_", p.name)
        if m:
            out.setdefault(int(m.group(1)), []).append(p.stem)
    return out


def render() -> str:
    chs = chapters()
    lines = [HEADER.rstrip("\n")]
    for caption, lo, hi in PARTS:
        mine = [n for n in sorted(chs) if lo <= n <= hi]
        if not mine:
            continue
        lines += [f"  - caption: {caption}", "    chapters:"]
        for n in mine:
            first, *rest = chs[n]
            lines.append(f"      - file: notebooks/{first}")
            if rest:
                lines.append("        sections:")
                lines += [f"          - file: notebooks/{s}" for s in rest]
    lines += ["  - caption: Back matter", "    chapters:", "      - file: book/glossary", "      - file: book/references"]
    return "\n".join(lines) + "\n"


def main(argv):
    text = render()
    if "--check" in argv:
        if TOC.read_text() != text:
            print("book/_toc.yml is out of date: run python tools/booktoc.py", file=sys.stderr)
            return 1
        return 0
    TOC.write_text(text)
    print("wrote", TOC.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
