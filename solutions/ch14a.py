"""Chapter 14a (the engine): reference solutions: schedules of requests that need `lengths[i]`
decode steps each, at most `max_batch` at a time; and mixed steps of chunked prefill and decode
under a token budget."""
__all__ = ["continuous_schedule", "static_steps", "mixed_schedule"]


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


def mixed_schedule(prompt_lens, new_tokens, token_budget):
    """Exercise 14a.3 (medium): chunked prefill in mixed steps. Request i arrives before the first
    step with a prompt of prompt_lens[i] tokens and wants new_tokens[i] >= 1 tokens. Every step
    first has a decode row (i, 1) for each request whose prompt is done and that still wants
    tokens, in order of arrival (even past the budget); then, while the step has fewer than
    token_budget tokens, a chunk (i, n) of each unfinished prompt in order of arrival, n as many of
    its tokens as the budget still holds. The step that finishes a prompt gives that request its
    first token, each decode row one more. Return the steps, each its list of rows in that order."""
    done, wanted, steps = [0] * len(prompt_lens), list(new_tokens), []
    while any(wanted):
        rows = [(i, 1) for i, w in enumerate(wanted) if w and done[i] == prompt_lens[i]]
        for i, _ in rows:
            wanted[i] -= 1
        budget = token_budget - len(rows)
        for i, n in enumerate(prompt_lens):
            if done[i] < n and budget > 0:
                take = min(n - done[i], budget)
                rows.append((i, take))
                budget -= take
                done[i] += take
                wanted[i] -= done[i] == n           # the last chunk samples the first token
        steps.append(rows)
    return steps
