"""Chapter 04 (the tokenizer): reference solutions."""
__all__ = ["bytes_to_unicode", "bpe"]


def bytes_to_unicode():
    """Exercise 04.1 (easy): GPT-2's byte -> printable character table (a dict of 256 ints -> str).
    The printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' map to themselves; every other byte b, in
    increasing order, maps to chr(256 + n) where n counts the bytes mapped so far this way."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def bpe(symbols, ranks):
    """Exercise 04.2 (medium): byte-pair encoding of one pre-tokenized word. `symbols` is the word as
    a list of strings (one per character), `ranks` maps a pair (left, right) to its merge rank (0 is
    merged first). Repeatedly merge the adjacent pair of lowest rank — every occurrence of it, left
    to right — until no pair has a rank; return the list of tokens."""
    parts = list(symbols)
    while len(parts) > 1:
        pairs = [(ranks.get((a, b)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
        pairs = [(r, i) for r, i in pairs if r is not None]
        if not pairs:
            break
        r, _ = min(pairs)
        left, right = next((parts[i], parts[i + 1]) for rr, i in pairs if rr == r)
        merged, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] == left and parts[i + 1] == right:
                merged.append(left + right)
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
    return parts
