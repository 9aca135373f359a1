"""Chapter 14b (the engine at work): your answers.

Write each function, then check it: python -m tffedu.exercises ch14b
(the reference answers are in solutions/ch14b.py: look once you have tried)
"""
import codecs
__all__ = ['cached_tokens', 'stream_text', 'kv_outweighs_weights']


def cached_tokens(prompts, page_size):
    """Exercise 14b.1 (easy): prompts (lists of token ids) arrive one after another. A prompt takes
    from the cache every whole page of its start (tokens [k*page_size, (k+1)*page_size)) that an
    earlier prompt had in full, with the same tokens from the first one to the page's end; but it
    always computes its last token itself. Returns, for each prompt, how many tokens came from the
    cache."""
    raise NotImplementedError("ch14b: cached_tokens is yours to write")


def stream_text(token_bytes):
    """Exercise 14b.2 (medium): token_bytes is a list of bytes, each token's piece of a UTF-8 text
    (a character may be split over tokens). Returns the pieces of text a stream yields: after each
    token, the new text whose bytes end on a whole character (nothing if there is none yet), the
    bytes of an unfinished character held for the next token."""
    raise NotImplementedError("ch14b: stream_text is yours to write")


def kv_outweighs_weights(weight_bytes, token_bytes, batch):
    """Exercise 14b.3 (easy): the smallest context depth at which the K/V that `batch` sequences
    read in one decode step (token_bytes per token of context each) are at least the weights'
    weight_bytes."""
    raise NotImplementedError("ch14b: kv_outweighs_weights is yours to write")
