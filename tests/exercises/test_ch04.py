"""Chapter 04 exercises: GPT-2's byte map and BPE merges. Reference: HF tokenizers (its ByteLevel
pre-tokenizer and its BPE model)."""
import random

from tokenizers import models, pre_tokenizers


def test_ch04_1_bytes_to_unicode(impl):
    table = impl.bytes_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    for text in ["Hello world!", "a\tb\nc  d", "ünïcödé ½ ©", "深度学习", "👍🏽", "\x00\x7f\x80"[:2]]:
        ((ref, _),) = bl.pre_tokenize_str(text)
        assert "".join(table[b] for b in text.encode("utf-8")) == ref, text


def merges_vocab(seed):
    "A random byte-level-like vocabulary: 6 letters and 30 merges learned on random words."
    rng = random.Random(seed)
    alphabet = list("abcdef")
    vocab, merges = {c: i for i, c in enumerate(alphabet)}, []
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 9))) for _ in range(50)]
    while len(merges) < 30:
        a, b = rng.choice(list(vocab)), rng.choice(list(vocab))
        if a + b not in vocab and len(a + b) <= 6:
            merges.append((a, b))
            vocab[a + b] = len(vocab)
    return vocab, merges, words


def test_ch04_2_bpe(impl):
    for seed in range(10):
        vocab, merges, words = merges_vocab(seed)
        hf = models.BPE(vocab, merges)
        ranks = {m: i for i, m in enumerate(merges)}
        for w in words + ["aaaa", "abab" * 3, "f"]:
            ref = [t.value for t in hf.tokenize(w)]
            assert list(impl.bpe(list(w), ranks)) == ref, (seed, w)


def _first_pair_first(symbols, ranks):        # merges the leftmost mergeable pair, not the best
    parts = list(symbols)
    while True:
        for i, (a, b) in enumerate(zip(parts, parts[1:])):
            if (a, b) in ranks:
                parts[i:i + 2] = [a + b]
                break
        else:
            return parts


def _latin1(): return {b: chr(b) for b in range(256)}


WRONG = {"test_ch04_1_bytes_to_unicode": {"identity": {"bytes_to_unicode": _latin1}},
         "test_ch04_2_bpe": {"leftmost-pair": {"bpe": _first_pair_first}}}
