"""Chapter 06a (the executor): reference solutions."""
__all__ = ["execute", "frees_after"]


def execute(program, ops, inputs):
    """Exercise 06a.1 (easy): a tiny executor. `program` is a list of (name, op, [input names],
    attrs) in a valid order, `ops` maps op -> function(*arrays, **attrs), `inputs` maps the graph's
    inputs (and weights) to arrays. Run every step and return a dict of every value by name."""
    env = dict(inputs)
    for name, op, args, attrs in program:
        env[name] = ops[op](*(env[a] for a in args), **attrs)
    return env


def frees_after(program, outputs):
    """Exercise 06a.2 (medium): the values an executor can drop after each step: for step i, the
    sorted names whose last reader is step i (a value nobody reads is dropped after the step that
    makes it). Graph inputs are never dropped, nor are `outputs`."""
    made = {name: i for i, (name, _, _, _) in enumerate(program)}
    last = dict(made)
    for i, (_, _, args, _) in enumerate(program):
        for a in args:
            if a in made:
                last[a] = max(last[a], i)
    out = [[] for _ in program]
    for name, i in last.items():
        if name not in outputs:
            out[i].append(name)
    return [sorted(x) for x in out]
