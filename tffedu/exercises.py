"""Checks your answers to a chapter's exercises, one line per exercise (hand-written, not taught).

    python -m tffedu.exercises ch05            # from anywhere, in a clone of the repository
    from tffedu.exercises import check
    check("ch05")                               # in a notebook

Each exercise of the chapter is "not answered yet", "correct" or "wrong: <why>". The command exits
with status 0 only when every exercise is answered and correct. It runs the chapter's checks,
tests/exercises/test_chNN.py, on your file exercises/chNN.py alone, in a fresh Python each time
(an answer you have just edited is read again). `pytest tests/exercises/test_chNN.py` runs the
same checks on the reference solutions and on plausible wrong answers too.
"""
import pathlib
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from .errors import TffeduError

__all__ = ["Verdict", "results", "check", "main"]

ROOT = pathlib.Path(__file__).resolve().parents[1]   # the clone: tffedu/, exercises/, tests/
YOURS = re.compile(r"test_ch(\d\d[a-z]?)_(\d+)_(\w+)\[yours(?:-[^\]]*)?\]$")   # [yours] or [yours-case]
NOT_ANSWERED = "not answered yet"   # the reason tests/exercise_harness.py skips an unwritten answer with


@dataclass
class Verdict:
    exercise: str      # "05.1 topo_order"
    status: str        # "correct" | "not answered yet" | "wrong" | "not checked"
    why: str = ""      # for "wrong" and "not checked": what the check said

    def __str__(self):
        return f"{self.status}: {self.why}" if self.why else self.status


def _checks(chapter: str, root: pathlib.Path) -> pathlib.Path:
    folder = root / "tests" / "exercises"
    if not folder.is_dir():
        raise TffeduError(f"the exercises live in a clone of the repository (git clone, then pip "
                          f"install -e .); {root} has no tests/exercises")
    path = folder / f"test_{chapter}.py"
    if not re.fullmatch(r"ch\d\d[a-z]?", chapter) or not path.is_file():
        known = sorted(p.stem[len("test_"):] for p in folder.glob("test_ch*.py"))
        raise TffeduError(f"no exercises for {chapter!r}: the chapters are {', '.join(known)}")
    return path


def _why(element) -> str:
    "The first lines of what a failed check said (the assertion and the values it compared)."
    text = (element.get("message") or element.text or "").strip()
    lines = [line[:160] for line in text.splitlines() if line.strip() and "Use -v to get" not in line]
    return "\n".join(lines[:6] + (["..."] if len(lines) > 6 else []))


RANK = ["correct", NOT_ANSWERED, "not checked", "wrong"]   # which verdict of two cases wins


def _verdict(exercise: str, case) -> Verdict:
    "What one <testcase> of pytest's JUnit report says of your answer."
    failed = case.find("failure")
    failed = failed if failed is not None else case.find("error")
    if failed is not None:
        return Verdict(exercise, "wrong", _why(failed))
    skipped = case.find("skipped")
    if skipped is None:
        return Verdict(exercise, "correct")
    why = _why(skipped)
    return Verdict(exercise, NOT_ANSWERED) if NOT_ANSWERED in why else Verdict(exercise, "not checked", why)


def results(chapter: str, root: pathlib.Path = ROOT) -> list[Verdict]:
    """The verdict on each exercise of `chapter` ('ch05') in the clone `root`, in the chapter's order
    (pytest runs the checks in the order of their file, and the report keeps it)."""
    checks = _checks(chapter, pathlib.Path(root))
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "report.xml"
        run = subprocess.run([sys.executable, "-m", "pytest", str(checks), "-k", "yours",
                              "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                              f"--junitxml={report}"], cwd=root, capture_output=True, text=True)
        if not report.is_file():
            raise TffeduError(f"pytest did not run the checks (is it installed? pip install -e "
                              f"'.[test]'): {(run.stderr or run.stdout).strip()[-400:]}")
        verdicts: dict[str, Verdict] = {}     # an exercise checked on several cases: its worst
        for case in ET.parse(report).getroot().iter("testcase"):
            m = YOURS.match(case.get("name", ""))
            if m is None:
                continue
            v = _verdict(f"{m[1]}.{m[2]} {m[3]}", case)
            old = verdicts.get(v.exercise)
            if old is None or RANK.index(v.status) > RANK.index(old.status):
                verdicts[v.exercise] = v
    out = list(verdicts.values())
    if not out:
        raise TffeduError(f"pytest found no checks of your answers in {checks.name}:\n"
                          f"{(run.stdout + run.stderr).strip()[-1500:]}")
    return out


def check(chapter: str, root: pathlib.Path = ROOT) -> bool:
    "Print one line per exercise of `chapter`; True when every one is answered and correct."
    verdicts = results(chapter, root)
    print(f"{chapter}: your answers in exercises/{chapter}.py")
    width = max(len(v.exercise) for v in verdicts)
    for v in verdicts:
        first, *rest = str(v).splitlines()
        print(f"  {v.exercise:<{width}}  {first}")
        for line in rest:
            print(f"  {'':<{width}}    {line}")
    done = sum(v.status == "correct" for v in verdicts)
    print(f"{done} of {len(verdicts)} correct")
    return done == len(verdicts)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m tffedu.exercises chNN   (e.g. ch05: checks exercises/ch05.py)",
              file=sys.stderr)
        return 2
    try:
        return 0 if check(argv[0]) else 1
    except TffeduError as e:
        print(f"tffedu.exercises: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
