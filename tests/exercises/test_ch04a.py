"""Chapter 04a exercises: SentencePiece's spelling of spaces and its byte fallback, against Google's
`sentencepiece` on a vocabulary it trained (tests/spm_vocab.py)."""
import pytest

import spm_vocab


@pytest.fixture(scope="module")
def sp():
    return spm_vocab.train()


def test_ch04a_1_escape_spaces(impl, sp):
    for text in ("Hello world", "  two leading", "trailing  ", "a  b   c", "The quick brown fox."):
        assert impl.escape_spaces(text, True) == "".join(sp.encode(text, out_type=str))
    nopre = spm_vocab.train(add_dummy_prefix=False)
    assert impl.escape_spaces("Hello world", False) == "".join(nopre.encode("Hello world", out_type=str))


def test_ch04a_2_byte_fallback_ids(impl, sp):
    byte_ids = {int(sp.id_to_piece(i)[3:5], 16): i for i in range(sp.get_piece_size()) if sp.is_byte(i)}
    for ch in ("🙂", "é", "\u2603", "𝄞", "\x7f"):
        assert sp.id_to_piece(sp.encode(ch)[0]) == "\u2581"          # the dummy prefix, then the bytes
        assert list(impl.byte_fallback_ids(ch, byte_ids)) == sp.encode(ch)[1:]


WRONG = {"test_ch04a_1_escape_spaces": {"no-prefix": {"escape_spaces": lambda t, p: t.replace(" ", "\u2581")}},
         "test_ch04a_2_byte_fallback_ids": {"code-points": {"byte_fallback_ids": lambda ch, ids: [
             ids[ord(c) % 256] for c in ch]}}}
