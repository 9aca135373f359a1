"""Chapter 05 (the computation graph): reference solutions."""
__all__ = ["topo_order", "lifetimes", "dead_nodes"]


def topo_order(nodes, edges):
    """Exercise 05.1 (easy): Kahn's algorithm. `nodes` a list of names, `edges` (u, v) pairs meaning
    v reads u. Return every node once, each after all of its inputs; among nodes that are ready at
    the same time keep the order of `nodes`. Raise ValueError on a cycle."""
    indeg = {n: 0 for n in nodes}
    users = {n: [] for n in nodes}
    for u, v in edges:
        indeg[v] += 1
        users[u].append(v)
    rank = {n: i for i, n in enumerate(nodes)}
    ready = sorted((n for n in nodes if indeg[n] == 0), key=rank.get)
    out = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for v in users[n]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
                ready.sort(key=rank.get)
    if len(out) != len(nodes):
        raise ValueError(f"the graph has a cycle through {sorted(set(nodes) - set(out))}")
    return out


def lifetimes(order, edges, outputs=()):
    """Exercise 05.2 (medium): for each node of a topological `order`, the (first, last) step at
    which its value must be in memory: first = its own step, last = the step of its last reader
    (itself if nobody reads it). A graph output lives to the end (last = len(order) - 1)."""
    step = {n: i for i, n in enumerate(order)}
    life = {n: [i, i] for n, i in step.items()}
    for u, v in edges:
        life[u][1] = max(life[u][1], step[v])
    for n in outputs:
        life[n][1] = len(order) - 1
    return {n: tuple(v) for n, v in life.items()}


def dead_nodes(nodes, edges, outputs):
    """Exercise 05.3 (hard): dead-code elimination. The nodes whose value no output depends on
    (walk backwards from the outputs), as a set."""
    inputs = {n: [] for n in nodes}
    for u, v in edges:
        inputs[v].append(u)
    live, todo = set(), list(outputs)
    while todo:
        n = todo.pop()
        if n not in live:
            live.add(n)
            todo.extend(inputs[n])
    return set(nodes) - live
