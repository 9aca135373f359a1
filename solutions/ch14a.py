"""Chapter 14a (the engine): reference solutions: schedules of requests that need `lengths[i]`
decode steps each, at most `max_batch` at a time."""
__all__ = ["continuous_schedule", "static_steps"]


def continuous_schedule(lengths, max_batch):
    """Exercise 14a.1 (medium): continuous batching. Each step runs up to max_batch requests; a
    request that has had all its steps leaves, and the waiting ones (in order of arrival) take the
    free places at the next step. Return the list of steps, each the sorted request ids it runs."""
    waiting, running, left, steps = list(range(len(lengths))), [], list(lengths), []
    while waiting or running:
        while waiting and len(running) < max_batch:
            running.append(waiting.pop(0))
        steps.append(sorted(running))
        for r in running:
            left[r] -= 1
        running = [r for r in running if left[r] > 0]
    return steps


def static_steps(lengths, max_batch):
    """Exercise 14a.2 (easy): the number of steps when requests are batched statically: groups of
    max_batch in arrival order, each group running until its longest request is done."""
    return sum(max(lengths[i:i + max_batch]) for i in range(0, len(lengths), max_batch))
