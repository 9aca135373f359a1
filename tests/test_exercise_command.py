"""`python -m tffedu.exercises chNN`, the learner's check: one verdict per exercise, exit status 0
only when all are answered and correct. Run on a copy of the clone's exercise files whose
exercises/ch05.py is a stub, the reference solution with one mistake, then the reference solution."""
import pathlib
import shutil
import subprocess
import sys

import pytest

from tffedu import exercises

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = ["conftest.py", "tests/conftest.py", "tests/exercise_harness.py", "tests/exercises/test_ch05.py",
         "exercises/__init__.py", "exercises/ch05.py", "solutions/__init__.py", "solutions/ch05.py"]


@pytest.fixture
def clone(tmp_path):
    for f in FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, tmp_path / f)
    return tmp_path


def answer(clone, source: str):
    (clone / "exercises" / "ch05.py").write_text(source)


def test_stub_wrong_and_right(clone, capsys):
    assert [(v.exercise, v.status) for v in exercises.results("ch05", clone)] == [
        ("05.1 topo_order", "not answered yet"), ("05.2 lifetimes", "not answered yet"),
        ("05.3 dead_nodes", "not answered yet")]
    assert exercises.check("ch05", clone) is False
    assert "0 of 3 correct" in capsys.readouterr().out

    solution = (ROOT / "solutions" / "ch05.py").read_text()
    forgets_outputs = "    for n in outputs:\n        life[n][1] = len(order) - 1\n"   # they live to the end
    assert forgets_outputs in solution
    answer(clone, solution.replace(forgets_outputs, ""))
    got = {v.exercise: v for v in exercises.results("ch05", clone)}
    assert [v.status for v in got.values()] == ["correct", "wrong", "correct"]
    assert "AssertionError" in got["05.2 lifetimes"].why and "Use -v" not in got["05.2 lifetimes"].why
    assert exercises.check("ch05", clone) is False
    assert "05.2 lifetimes   wrong: AssertionError" in capsys.readouterr().out

    answer(clone, solution)
    assert exercises.check("ch05", clone) is True
    assert "3 of 3 correct" in capsys.readouterr().out


def test_command_line(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "tffedu.exercises", *args], capture_output=True,
                              text=True, cwd=tmp_path, timeout=300)
    r = run("ch05")                            # the clone's own file: a stub, from any folder
    assert r.returncode == 1 and "not answered yet" in r.stdout
    r = run("ch99")
    assert r.returncode == 2 and "no exercises for 'ch99'" in r.stderr and "ch05" in r.stderr
    assert run().returncode == 2 and run("--help").returncode == 2
