"""Chapter 14a (the engine): your answers: schedules of requests that need `lengths[i]`
decode steps each, at most `max_batch` at a time; and mixed steps of chunked prefill and decode
under a token budget.

Write each function, then check it: python -m tffedu.exercises ch14a
(the reference answers are in solutions/ch14a.py: look once you have tried)
"""
__all__ = ['continuous_schedule', 'static_steps', 'mixed_schedule']


def continuous_schedule(lengths, max_batch):
    """Exercise 14a.1 (medium): continuous batching. Each step runs up to max_batch requests; a
    request that has had all its steps leaves, and the waiting ones (in order of arrival) take the
    free places at the next step. Return the list of steps, each the sorted request ids it runs."""
    raise NotImplementedError("ch14a: continuous_schedule is yours to write")


def static_steps(lengths, max_batch):
    """Exercise 14a.2 (easy): the number of steps when requests are batched statically: groups of
    max_batch in arrival order, each group running until its longest request is done."""
    raise NotImplementedError("ch14a: static_steps is yours to write")


def mixed_schedule(prompt_lens, new_tokens, token_budget):
    """Exercise 14a.3 (medium): chunked prefill in mixed steps. Request i arrives before the first
    step with a prompt of prompt_lens[i] tokens and wants new_tokens[i] >= 1 tokens. Every step
    first has a decode row (i, 1) for each request whose prompt is done and that still wants
    tokens, in order of arrival (even past the budget); then, while the step has fewer than
    token_budget tokens, a chunk (i, n) of each unfinished prompt in order of arrival, n as many of
    its tokens as the budget still holds. The step that finishes a prompt gives that request its
    first token, each decode row one more. Return the steps, each its list of rows in that order."""
    raise NotImplementedError("ch14a: mixed_schedule is yours to write")
