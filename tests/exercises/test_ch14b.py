"""Chapter 14b exercises: the tokens a prefix cache saves (reference: a page-by-page comparison of
the token lists) and a stream's text pieces (reference: Python's UTF-8 decoding of the whole text)."""
import random

rng = random.Random(0)


def _brute_cached(prompts, ps):
    out = []
    for i, p in enumerate(prompts):
        k = 0
        while (k + 1) * ps <= len(p) - 1 and any(len(q) >= (k + 1) * ps and q[:(k + 1) * ps] == p[:(k + 1) * ps]
                                                  for q in prompts[:i]):
            k += 1
        out.append(k * ps)
    return out


def test_ch14b_1_cached_tokens(impl):
    system = [rng.randrange(50) for _ in range(40)]
    cases = [([system + [1, 2, 3], system + [4, 5], system[:17], system + [1, 2, 3]], 8),
             ([list(range(16)), list(range(16)), list(range(17))], 16),      # a whole repeat: its last page is computed
             ([[rng.randrange(3) for _ in range(rng.randrange(1, 60))] for _ in range(12)], 4)]
    for prompts, ps in cases:
        assert list(impl.cached_tokens(prompts, ps)) == _brute_cached(prompts, ps), (ps, [len(p) for p in prompts])


def test_ch14b_2_stream_text(impl):
    for text in ["中国的首都是北京。", "naïve café — déjà vu 🙂", "plain ascii", "🙂🙂a🙂"]:
        raw = text.encode()
        cuts = sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, len(raw) // 2)))
        tokens = [raw[a:b] for a, b in zip([0] + cuts, cuts + [len(raw)])]
        pieces = list(impl.stream_text(tokens))
        assert "".join(pieces) == text, (tokens, pieces)
        assert all(p and "\ufffd" not in p for p in pieces), pieces
        assert len(pieces) <= len(tokens)


def test_ch14b_3_kv_outweighs_weights(impl):
    cases = [(8_040_000_000, 147_456, 1), (8_040_000_000, 147_456, 16), (96_000_000, 46_080, 4),
             (1000, 10, 100), (1001, 10, 100), (1, 7, 3)]
    cases += [(rng.randrange(1, 10**10), rng.randrange(1, 10**6), rng.randrange(1, 65)) for _ in range(50)]
    for w, t, b in cases:
        d = impl.kv_outweighs_weights(w, t, b)
        assert b * d * t >= w and b * (d - 1) * t < w, dict(weight_bytes=w, token_bytes=t, batch=b, got=d)


def _each_alone(token_bytes):
    return [bytes(b).decode("utf-8", errors="replace") for b in token_bytes]


def _last_token_cached(prompts, ps):
    from solutions.ch14b import cached_tokens
    return [min(c + ps, len(p)) if len(p) % ps == 0 and c + ps == len(p) else c
            for c, p in zip(cached_tokens(prompts, ps), prompts)]


WRONG = {"test_ch14b_1_cached_tokens": {"last-token-cached": {"cached_tokens": _last_token_cached}},
         "test_ch14b_2_stream_text": {"each-alone": {"stream_text": _each_alone}},
         "test_ch14b_3_kv_outweighs_weights": {"one-sequence": {"kv_outweighs_weights": lambda w, t, b: -(-w // t)}}}
