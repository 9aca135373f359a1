"""Chapter 14a exercises: continuous against static batching. Reference: a step-by-step
simulation with fixed slots (a free slot takes the next waiting request)."""
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
         "test_ch14a_2_static_steps": {"average": {"static_steps": lambda lengths, b: -(-sum(lengths) // b)}}}
