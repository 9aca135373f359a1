"""The exercise checks of tests/exercises/: every test that takes the fixture `impl` runs four ways.

    python -m tffedu.exercises ch05         # your answers, one line per exercise
    pytest tests/exercises/test_ch05.py     # all four ways

* `[yours]`     your answer, in exercises/chNN.py (skipped while it still raises NotImplementedError);
* `[reference]` the reference solution, in solutions/chNN.py: must pass (CI runs it);
* `[stub]`      every function raising NotImplementedError: must fail;
* `[wrong-…]`   the reference with a plausible mistake (the test file's WRONG): must fail.
Loaded by tests/conftest.py (one conftest for the whole suite: a second file named conftest.py
would shadow `from conftest import ...` in the other tests). The last two are strict xfails (a stub must fail on NotImplementedError or an assertion, a wrong
answer on anything): they show that a check tells a wrong answer from a right one.
"""
import importlib
import sys
import types

import pytest

from tffedu.exercises import NOT_ANSWERED, YOURS   # the skip reason that command reads, its test ids

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAILS = (AssertionError, NotImplementedError)


def _chapter(module) -> str:
    return module.__name__.rsplit("test_", 1)[-1]          # tests/exercises/test_ch05.py -> ch05

__all__ = ["pytest_generate_tests", "impl", "pytest_pyfunc_call", "pytest_terminal_summary"]


def _stub(solution) -> types.SimpleNamespace:
    def raiser(name):
        def f(*a, **k):
            raise NotImplementedError(f"{name} is a stub")
        return f
    return types.SimpleNamespace(**{n: raiser(n) for n in solution.__all__})


def pytest_generate_tests(metafunc):
    if "impl" not in metafunc.fixturenames:
        return
    wrong = getattr(metafunc.module, "WRONG", {}).get(metafunc.function.__name__, {})
    params = [pytest.param("yours", id="yours"), pytest.param("reference", id="reference"),
              pytest.param("stub", id="stub", marks=pytest.mark.xfail(
                  strict=True, raises=FAILS, reason="a check must fail on a stub"))]
    params += [pytest.param(f"wrong:{label}", id=f"wrong-{label}", marks=pytest.mark.xfail(
        strict=True, reason=f"a check must fail on a wrong answer ({label})"))
        for label in wrong]
    metafunc.parametrize("impl", params, indirect=True)


@pytest.fixture
def impl(request):
    "The module under test: the learner's, the reference, a stub, or the reference with a mistake."
    ch = _chapter(request.module)
    kind = request.param
    if kind == "yours":
        return importlib.import_module(f"exercises.{ch}")
    solution = importlib.import_module(f"solutions.{ch}")
    if kind == "reference":
        return solution
    if kind == "stub":
        return _stub(solution)
    label = kind.split(":", 1)[1]
    ns = types.SimpleNamespace(**{n: getattr(solution, n) for n in solution.__all__})
    for name, fn in request.module.WRONG[request.function.__name__][label].items():
        setattr(ns, name, fn)
    return ns


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    "Your answer that is not written yet is skipped, not failed."
    try:
        return (yield)
    except NotImplementedError as e:
        params = getattr(pyfuncitem, "callspec", None)
        if params is not None and params.params.get("impl") == "yours":
            pytest.skip(f"{NOT_ANSWERED}: {e}")
        raise


def pytest_terminal_summary(terminalreporter):
    "Unanswered exercises are skips: name them, so that '3 passed' is not read as 'my answers passed'."
    unanswered = {m.groups() for r in terminalreporter.stats.get("skipped", [])
                  if NOT_ANSWERED in str(r.longrepr) and (m := YOURS.search(r.nodeid))}
    chapters: dict[str, int] = {}
    for ch, _, _ in unanswered:
        chapters["ch" + ch] = chapters.get("ch" + ch, 0) + 1
    if chapters:
        terminalreporter.write_sep("-", "exercises not answered yet")
        terminalreporter.write_line(", ".join(f"{ch} ({n})" for ch, n in sorted(chapters.items())))
        terminalreporter.write_line("(python -m tffedu.exercises chNN checks your answers one by one)")
