"""Every chapter's exercise file matches its reference: the same functions, the same signatures,
and a check file for it (tools/exercise_stubs.py writes the stubs from the solutions)."""
import importlib
import inspect
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p.stem for p in (ROOT / "solutions").glob("ch*.py"))


def test_every_chapter_has_exercises():
    assert CHAPTERS, "no solutions/ch*.py"


@pytest.mark.parametrize("ch", CHAPTERS)
def test_stub_matches_solution(ch):
    sol, mine = (importlib.import_module(f"{pkg}.{ch}") for pkg in ("solutions", "exercises"))
    assert list(mine.__all__) == list(sol.__all__), ch
    for name in sol.__all__:
        assert inspect.signature(getattr(mine, name)) == inspect.signature(getattr(sol, name)), name
        assert getattr(mine, name).__doc__ == getattr(sol, name).__doc__, f"{ch}.{name}: docstring"
    assert (ROOT / "tests" / "exercises" / f"test_{ch}.py").exists()
