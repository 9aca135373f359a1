"""Chapter 06a (the executor): your answers.

Write each function, then check it: python -m tffedu.exercises ch06a
(the reference answers are in solutions/ch06a.py: look once you have tried)
"""
__all__ = ['execute', 'frees_after']


def execute(program, ops, inputs):
    """Exercise 06a.1 (easy): a tiny executor. `program` is a list of (name, op, [input names],
    attrs) in a valid order, `ops` maps op -> function(*arrays, **attrs), `inputs` maps the graph's
    inputs (and weights) to arrays. Run every step and return a dict of every value by name."""
    raise NotImplementedError("ch06a: execute is yours to write")


def frees_after(program, outputs):
    """Exercise 06a.2 (medium): the values an executor can drop after each step: for step i, the
    sorted names whose last reader is step i (a value nobody reads is dropped after the step that
    makes it). Graph inputs are never dropped, nor are `outputs`."""
    raise NotImplementedError("ch06a: frees_after is yours to write")
