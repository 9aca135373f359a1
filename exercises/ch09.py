"""Chapter 09 (the paged KV cache): your answers. Pages are [num_pages, page_size, H, D].

Write each function, then check it: python -m tffedu.exercises ch09
(the reference answers are in solutions/ch09.py: look once you have tried)
"""
import numpy as np
__all__ = ['slot_mapping', 'gather_kv', 'paged_decode_attention']


def slot_mapping(page_table, positions, page_size):
    """Exercise 09.1 (easy): the flat slot (page * page_size + offset in the page) of each token
    position of a sequence whose pages are `page_table`."""
    raise NotImplementedError("ch09: slot_mapping is yours to write")


def gather_kv(pages, page_table, n_tokens):
    """Exercise 09.2 (medium): the first n_tokens K (or V) vectors of a sequence, contiguous
    [n_tokens, H, D], read through its page table."""
    raise NotImplementedError("ch09: gather_kv is yours to write")


def paged_decode_attention(q, k_pages, v_pages, page_table, n_tokens):
    """Exercise 09.3 (hard): one decode step's attention for one sequence: q [Hq, D] against the
    sequence's n_tokens cached keys and values (all visible), GQA (query head h reads KV head
    h // (Hq / Hkv)), scale 1/sqrt(D). Returns [Hq, D]."""
    raise NotImplementedError("ch09: paged_decode_attention is yours to write")
