"""Chapter 04 (the tokenizer): your answers.

Write each function, then check it: python -m tffedu.exercises ch04
(the reference answers are in solutions/ch04.py: look once you have tried)
"""
__all__ = ['bytes_to_unicode', 'bpe']


def bytes_to_unicode():
    """Exercise 04.1 (easy): GPT-2's byte -> printable character table (a dict of 256 ints -> str).
    The printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' map to themselves; every other byte b, in
    increasing order, maps to chr(256 + n) where n counts the bytes mapped so far this way."""
    raise NotImplementedError("ch04: bytes_to_unicode is yours to write")


def bpe(symbols, ranks):
    """Exercise 04.2 (medium): byte-pair encoding of one pre-tokenized word. `symbols` is the word as
    a list of strings (one per character), `ranks` maps a pair (left, right) to its merge rank (0 is
    merged first). Repeatedly merge the adjacent pair of lowest rank — every occurrence of it, left
    to right — until no pair has a rank; return the list of tokens."""
    raise NotImplementedError("ch04: bpe is yours to write")
