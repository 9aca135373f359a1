"""Chapter 16 exercises: speculative decoding's arithmetic. References: a Monte Carlo run of a
verify step (drafts accepted at random until the first rejection), a brute-force search over every
start for the n-gram, and the defining equation of the break-even rate."""
import math
import random

from tffedu.speculative import PromptLookup


def test_ch16_1_expected_tokens(impl):
    rng = random.Random(0)
    for alpha, k in [(0.0, 3), (1.0, 5), (0.5, 0), (0.7, 4), (0.3, 8), (0.9, 16)]:
        runs = 40_000
        total = 0
        for _ in range(runs):
            a = 0
            while a < k and rng.random() < alpha:
                a += 1
            total += a + 1                       # the kept drafts and the model's own token
        assert abs(impl.expected_tokens(alpha, k) - total / runs) < 0.05 * (k + 1), (alpha, k)
    assert impl.expected_tokens(1.0, 7) == 8 and impl.expected_tokens(0.0, 7) == 1


def test_ch16_2_ngram_draft(impl):
    rng = random.Random(1)
    for _ in range(300):
        ids = [rng.randrange(4) for _ in range(rng.randint(0, 30))]
        k, n = rng.randint(1, 6), rng.randint(1, 4)
        starts = [i for i in range(len(ids)) if i + n < len(ids) and ids[i:i + n] == ids[len(ids) - n:]
                  and len(ids) > n]
        want = ids[max(starts) + n:max(starts) + n + k] if starts else []
        assert impl.ngram_draft(list(ids), k, n) == want, (ids, k, n)
        if len(ids) > n:
            assert want == PromptLookup(k=k, max_ngram=n, min_ngram=n).draft(ids, k)


def test_ch16_3_break_even(impl):
    for k in (1, 2, 4, 8):
        for cost in (1.0, 1.2, 1.9, 2.5, 4.0, 9.5):
            a = impl.break_even(cost, k)
            if cost > k + 1:
                assert math.isnan(a), (cost, k)
                continue
            assert 0 <= a <= 1
            assert abs(sum(a ** i for i in range(k + 1)) - cost) < 1e-4, (cost, k, a)
