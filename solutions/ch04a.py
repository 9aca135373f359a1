"""Chapter 04a (SentencePiece): reference solutions."""

__all__ = ["escape_spaces", "byte_fallback_ids"]


def escape_spaces(text, add_prefix):
    """Exercise 04a.1 (easy): SentencePiece's spelling of `text`: every space becomes "▁" (U+2581),
    and one more "▁" goes in front when `add_prefix` (the dummy prefix)."""
    return ("\u2581" if add_prefix else "") + text.replace(" ", "\u2581")


def byte_fallback_ids(ch, byte_ids):
    """Exercise 04a.2 (medium): the ids of a character no piece covers: the tokens of its UTF-8 bytes,
    in order; `byte_ids` maps a byte value (0-255) to the id of its <0xXX> token."""
    return [byte_ids[b] for b in ch.encode("utf-8")]
