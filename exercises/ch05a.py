"""Chapter 05a (drawing a graph): your answers.

Write each function, then check it: python -m tffedu.exercises ch05a
(the reference answers are in solutions/ch05a.py: look once you have tried)
"""
__all__ = ['layer_rows', 'count_crossings']


def layer_rows(nodes, edges):
    """Exercise 05a.1 (easy): the row of every node in a layered drawing: 0 for a node with no
    inputs, else 1 + the largest row among its inputs (the longest path from a source). `edges` are
    (u, v) pairs, v reads u; the graph is acyclic. Returns {node: row}."""
    raise NotImplementedError("ch05a: layer_rows is yours to write")


def count_crossings(edges, x_top, x_bottom):
    """Exercise 05a.2 (medium): how many pairs of edges cross between two adjacent rows, when node
    u of the top row sits at x_top[u] and node v of the bottom row at x_bottom[v] (all distinct);
    each edge (u, v) is a straight segment. Two edges sharing an end point do not cross."""
    raise NotImplementedError("ch05a: count_crossings is yours to write")
