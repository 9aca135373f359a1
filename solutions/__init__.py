"""Reference solutions of the exercises (`exercises/chNN.py` holds the learner's stubs).

CI runs every check in tests/exercises against these, and against stubs and wrong answers, which
must fail.
"""
