"""Chapter 14a exercises: continuous against static batching. Reference: a step-by-step
simulation with fixed slots (a free slot takes the next waiting request). Mixed steps: a
token-by-token simulation (each budget token goes to the oldest unfinished prompt)."""
import random


def simulate(lengths, max_batch):
    slots, left, nxt, steps = [None] * max_batch, list(lengths), 0, []
    while True:
        for i in range(max_batch):
            if slots[i] is None and nxt < len(lengths):
                slots[i], nxt = nxt, nxt + 1
        busy = [s for s in slots if s is not None]
        if not busy:
            return steps
        steps.append(sorted(busy))
        for i, s in enumerate(slots):
            if s is not None:
                left[s] -= 1
                if left[s] == 0:
                    slots[i] = None


def test_ch14a_1_continuous_schedule(impl):
    rng = random.Random(0)
    for _ in range(30):
        lengths = [rng.randint(1, 12) for _ in range(rng.randint(1, 15))]
        b = rng.randint(1, 5)
        assert [sorted(s) for s in impl.continuous_schedule(lengths, b)] == simulate(lengths, b)


def test_ch14a_2_static_steps(impl):
    rng = random.Random(1)
    for _ in range(30):
        lengths = [rng.randint(1, 12) for _ in range(rng.randint(1, 15))]
        b = rng.randint(1, 5)
        steps, t = 0, 0
        for i in range(0, len(lengths), b):      # simulate each group until all of it is done
            left = lengths[i:i + b]
            while any(x > 0 for x in left):
                left = [x - 1 for x in left]
                steps += 1
        assert impl.static_steps(lengths, b) == steps


def simulate_mixed(prompt_lens, new_tokens, budget):
    left, want, steps = list(prompt_lens), list(new_tokens), []
    while any(want):
        rows = []
        for i in range(len(left)):                    # decode rows first
            if left[i] == 0 and want[i]:
                rows.append((i, 1))
                want[i] -= 1
        used, chunk = len(rows), {}
        while used < budget and any(left):            # one prompt token at a time
            i = next(j for j, n in enumerate(left) if n)
            left[i] -= 1
            chunk[i] = chunk.get(i, 0) + 1
            used += 1
            if left[i] == 0:
                want[i] -= 1
        steps.append(rows + list(chunk.items()))
    return steps


def test_ch14a_3_mixed_schedule(impl):
    rows = lambda steps: [[tuple(r) for r in s] for s in steps]
    # worked by hand: a 10-token and a 3-token prompt, 2 tokens each, 4 tokens a step
    assert rows(impl.mixed_schedule([10, 3], [2, 2], 4)) == [
        [(0, 4)], [(0, 4)], [(0, 2), (1, 2)], [(0, 1), (1, 1)], [(1, 1)]]
    rng = random.Random(3)
    for _ in range(40):
        n = rng.randint(1, 6)
        lens, new = [rng.randint(1, 40) for _ in range(n)], [rng.randint(1, 8) for _ in range(n)]
        budget = rng.randint(1, 24)
        got = rows(impl.mixed_schedule(lens, new, budget))
        assert got == simulate_mixed(lens, new, budget), (lens, new, budget)


def _chunks(rows, prompt_lens, done, want, room):
    "Prompt chunks in order of arrival into `room` tokens (both wrong schedulers below fill them so)."
    for i, n in enumerate(prompt_lens):
        if done[i] < n and room > 0:
            take = min(n - done[i], room)
            rows.append((i, take))
            room -= take
            done[i] += take
            want[i] -= done[i] == n


def _prefill_stalls(prompt_lens, new_tokens, budget):  # the old engine: a prefill step or a decode step
    done, want, steps = [0] * len(prompt_lens), list(new_tokens), []
    while any(want):
        rows = []
        _chunks(rows, prompt_lens, done, want, budget)
        if not rows:
            rows = [(i, 1) for i, w in enumerate(want) if w]
            for i, _ in rows:
                want[i] -= 1
        steps.append(rows)
    return steps


def _budget_ignores_decodes(prompt_lens, new_tokens, budget):   # chunks get the whole budget
    done, want, steps = [0] * len(prompt_lens), list(new_tokens), []
    while any(want):
        rows = [(i, 1) for i, w in enumerate(want) if w and done[i] == prompt_lens[i]]
        for i, _ in rows:
            want[i] -= 1
        _chunks(rows, prompt_lens, done, want, budget)
        steps.append(rows)
    return steps


def _refill_late(lengths, max_batch):            # refills only when the whole batch is done
    out, i = [], 0
    while i < len(lengths):
        group = list(range(i, min(i + max_batch, len(lengths))))
        left = {r: lengths[r] for r in group}
        while left:
            out.append(sorted(left))
            left = {r: n - 1 for r, n in left.items() if n > 1}
        i += max_batch
    return out


WRONG = {"test_ch14a_1_continuous_schedule": {"static": {"continuous_schedule": _refill_late}},
         "test_ch14a_2_static_steps": {"average": {"static_steps": lambda lengths, b: -(-sum(lengths) // b)}},
         "test_ch14a_3_mixed_schedule": {"stall": {"mixed_schedule": _prefill_stalls},
                                         "budget": {"mixed_schedule": _budget_ignores_decodes}}}
