"""Chapter 16 (speculative decoding): your answers.

Write each function, then check it: python -m tffedu.exercises ch16
(the reference answers are in solutions/ch16.py: look once you have tried)
"""
__all__ = ['expected_tokens', 'ngram_draft', 'break_even']


def expected_tokens(alpha: float, k: int) -> float:
    """Exercise 16.1 (easy): the tokens a verify step of k drafts yields on average when each draft,
    in order, is accepted with probability alpha until the first rejection (the step always adds
    the model's own token after the accepted ones). alpha in [0, 1], k >= 0."""
    raise NotImplementedError("ch16: expected_tokens is yours to write")


def ngram_draft(ids: list, k: int, n: int) -> list:
    """Exercise 16.2 (medium): prompt lookup with one n-gram size. Find the latest start i < len(ids)
    - n where ids[i:i+n] equals the last n tokens and at least one token follows (i + n <
    len(ids)); return up to k tokens from i + n on (they may run into the tail itself). No such
    place, or len(ids) <= n: []."""
    raise NotImplementedError("ch16: ngram_draft is yours to write")


def break_even(cost: float, k: int) -> float:
    """Exercise 16.3 (medium): a verify step of k >= 1 drafts costs `cost` decode steps (cost >= 1).
    Return the acceptance rate alpha in [0, 1] at which it yields exactly `cost` tokens on average
    (exercise 16.1), within 1e-6; float('nan') if even alpha = 1 yields fewer."""
    raise NotImplementedError("ch16: break_even is yours to write")
