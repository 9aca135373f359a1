"""Chapter 00 exercises: softmax (reference: torch) and the greedy decode loop (reference: the
argmax chain of a toy model, followed by hand)."""
import numpy as np
import torch


def test_ch00_1_softmax(impl):
    rng = np.random.default_rng(0)
    for scale in (1.0, 30.0, 1e4):
        z = rng.standard_normal(1000) * scale
        ref = torch.softmax(torch.from_numpy(z), 0).numpy()
        got = np.asarray(impl.softmax(z))
        assert got.shape == z.shape and np.all(np.isfinite(got)), scale
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-300)


def test_ch00_2_greedy_generate(impl):
    V = 17
    table = np.random.default_rng(1).standard_normal((V, V))

    def logits_fn(ids):     # row t scores the token after ids[:t+1]: here it depends on two of them
        ids = np.asarray(ids)
        return table[(ids + np.roll(ids, 1)) % V]

    prompt = [3, 5, 7]
    ids, ref = list(prompt), []
    for _ in range(12):
        nxt = int(np.argmax(table[(ids[-1] + ids[-2]) % V]))
        ids.append(nxt)
        ref.append(nxt)
    assert list(impl.greedy_generate(logits_fn, prompt, 12)) == ref
    assert list(impl.greedy_generate(logits_fn, prompt, 0)) == []


def _first_row(logits_fn, ids, n):
    ids = list(ids)
    for _ in range(n):
        ids.append(int(np.argmax(logits_fn(ids)[0])))
    return ids[-n:] if n else []


WRONG = {"test_ch00_1_softmax": {"no-max-shift": {"softmax": lambda z: np.exp(z) / np.exp(z).sum()}},
         "test_ch00_2_greedy_generate": {"first-row": {"greedy_generate": _first_row}}}
