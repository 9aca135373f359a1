"""Chapter 16 (speculative decoding): reference solutions."""

__all__ = ["expected_tokens", "ngram_draft", "break_even"]


def expected_tokens(alpha: float, k: int) -> float:
    """Exercise 16.1 (easy): the tokens a verify step of k drafts yields on average when each draft,
    in order, is accepted with probability alpha until the first rejection (the step always adds
    the model's own token after the accepted ones). alpha in [0, 1], k >= 0."""
    return float(sum(alpha ** i for i in range(k + 1)))


def ngram_draft(ids: list, k: int, n: int) -> list:
    """Exercise 16.2 (medium): prompt lookup with one n-gram size. Find the latest start i < len(ids)
    - n where ids[i:i+n] equals the last n tokens and at least one token follows (i + n <
    len(ids)); return up to k tokens from i + n on (they may run into the tail itself). No such
    place, or len(ids) <= n: []."""
    L = len(ids)
    for i in range(L - n - 1, -1, -1):
        if ids[i:i + n] == ids[L - n:]:
            return list(ids[i + n:i + n + k])
    return []


def break_even(cost: float, k: int) -> float:
    """Exercise 16.3 (medium): a verify step of k >= 1 drafts costs `cost` decode steps (cost >= 1).
    Return the acceptance rate alpha in [0, 1] at which it yields exactly `cost` tokens on average
    (exercise 16.1), within 1e-6; float('nan') if even alpha = 1 yields fewer."""
    if cost > k + 1:
        return float("nan")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, k) < cost else (lo, mid)
    return hi
