"""Chapter 05a (drawing a graph): reference solutions."""
__all__ = ["layer_rows", "count_crossings"]


def layer_rows(nodes, edges):
    """Exercise 05a.1 (easy): the row of every node in a layered drawing: 0 for a node with no
    inputs, else 1 + the largest row among its inputs (the longest path from a source). `edges` are
    (u, v) pairs, v reads u; the graph is acyclic. Returns {node: row}."""
    inputs = {n: [] for n in nodes}
    for u, v in edges:
        inputs[v].append(u)
    row = {}

    def visit(n):
        if n not in row:
            row[n] = 1 + max((visit(u) for u in inputs[n]), default=-1)
        return row[n]
    for n in nodes:
        visit(n)
    return row


def count_crossings(edges, x_top, x_bottom):
    """Exercise 05a.2 (medium): how many pairs of edges cross between two adjacent rows, when node
    u of the top row sits at x_top[u] and node v of the bottom row at x_bottom[v] (all distinct);
    each edge (u, v) is a straight segment. Two edges sharing an end point do not cross."""
    n = 0
    for i, (a, b) in enumerate(edges):
        for c, d in edges[i + 1:]:
            if a != c and b != d and (x_top[a] - x_top[c]) * (x_bottom[b] - x_bottom[d]) < 0:
                n += 1
    return n
