"""Chapter 05 (the computation graph): your answers.

Write each function, then check it: python -m tffedu.exercises ch05
(the reference answers are in solutions/ch05.py: look once you have tried)
"""
__all__ = ['topo_order', 'lifetimes', 'dead_nodes']


def topo_order(nodes, edges):
    """Exercise 05.1 (easy): Kahn's algorithm. `nodes` a list of names, `edges` (u, v) pairs meaning
    v reads u. Return every node once, each after all of its inputs; among nodes that are ready at
    the same time keep the order of `nodes`. Raise ValueError on a cycle."""
    raise NotImplementedError("ch05: topo_order is yours to write")


def lifetimes(order, edges, outputs=()):
    """Exercise 05.2 (medium): for each node of a topological `order`, the (first, last) step at
    which its value must be in memory: first = its own step, last = the step of its last reader
    (itself if nobody reads it). A graph output lives to the end (last = len(order) - 1)."""
    raise NotImplementedError("ch05: lifetimes is yours to write")


def dead_nodes(nodes, edges, outputs):
    """Exercise 05.3 (hard): dead-code elimination. The nodes whose value no output depends on
    (walk backwards from the outputs), as a set."""
    raise NotImplementedError("ch05: dead_nodes is yours to write")
