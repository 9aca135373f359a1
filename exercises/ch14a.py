"""Chapter 14a (the engine): your answers: schedules of requests that need `lengths[i]`
decode steps each, at most `max_batch` at a time.

Write each function, then check it: pytest tests/exercises -k ch14a
(the reference answers are in solutions/ch14a.py: look once you have tried)
"""
__all__ = ['continuous_schedule', 'static_steps']


def continuous_schedule(lengths, max_batch):
    """Exercise 14a.1 (medium): continuous batching. Each step runs up to max_batch requests; a
    request that has had all its steps leaves, and the waiting ones (in order of arrival) take the
    free places at the next step. Return the list of steps, each the sorted request ids it runs."""
    raise NotImplementedError("ch14a: continuous_schedule is yours to write")


def static_steps(lengths, max_batch):
    """Exercise 14a.2 (easy): the number of steps when requests are batched statically: groups of
    max_batch in arrival order, each group running until its longest request is done."""
    raise NotImplementedError("ch14a: static_steps is yours to write")
