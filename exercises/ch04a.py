"""Chapter 04a (SentencePiece): your answers.

Write each function, then check it: python -m tffedu.exercises ch04a
(the reference answers are in solutions/ch04a.py: look once you have tried)
"""
__all__ = ['escape_spaces', 'byte_fallback_ids']


def escape_spaces(text, add_prefix):
    """Exercise 04a.1 (easy): SentencePiece's spelling of `text`: every space becomes "▁" (U+2581),
    and one more "▁" goes in front when `add_prefix` (the dummy prefix)."""
    raise NotImplementedError("ch04a: escape_spaces is yours to write")


def byte_fallback_ids(ch, byte_ids):
    """Exercise 04a.2 (medium): the ids of a character no piece covers: the tokens of its UTF-8 bytes,
    in order; `byte_ids` maps a byte value (0-255) to the id of its <0xXX> token."""
    raise NotImplementedError("ch04a: byte_fallback_ids is yours to write")
