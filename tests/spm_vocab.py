"""A small SentencePiece vocabulary trained here by Google's `sentencepiece` (the reference
implementation of its own format), and its GGUF keys written the way llama.cpp's converter
writes a SentencePiece vocabulary (tokens, scores, token types)."""
import io
import pathlib

import numpy as np

DATA = pathlib.Path(__file__).parent / "data"
SPECIALS = ("<|im_start|>", "<|im_end|>")     # user-defined pieces (ids 3 and 4)


def corpus() -> list[str]:
    "English sentences and the Chinese sample of tests/data, one per line."
    en = ("The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces; a piece is "
          "a token. Numbers like 12345 and 3.14159 are split into digits. Hello, world! How are you "
          "doing today? SentencePiece treats the input as a sequence of Unicode characters, whitespace "
          "included. A space becomes the meta symbol, and characters without a piece become bytes. ")
    lines = (en * 20).replace(". ", ".\n").replace("? ", "?\n").splitlines()
    return [x for x in lines + (DATA / "zh_sample.txt").read_text().splitlines() if x.strip()]


def train(vocab_size: int = 1000, add_dummy_prefix: bool = True, byte_fallback: bool = True):
    "A BPE SentencePieceProcessor with Llama 2's trainer options (identity normalization, bytes)."
    import sentencepiece as spm
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()), model_writer=model, vocab_size=vocab_size, model_type="bpe",
        byte_fallback=byte_fallback, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=add_dummy_prefix, split_digits=True, allow_whitespace_only_pieces=True,
        character_coverage=0.98, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        user_defined_symbols=list(SPECIALS), minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def gguf_keys(sp, add_space_prefix: bool = True) -> dict:
    "The tokenizer.ggml.* keys of `sp`, as llama.cpp's converter writes them (model 'llama')."
    types = []
    for i in range(sp.get_piece_size()):
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else
                     5 if sp.is_unused(i) else 4 if sp.id_to_piece(i) in SPECIALS else 1)
    n = sp.get_piece_size()
    return {"tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": [sp.id_to_piece(i) for i in range(n)],
            "tokenizer.ggml.scores": np.array([sp.get_score(i) for i in range(n)], np.float32),
            "tokenizer.ggml.token_type": np.array(types, np.int32),
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_bos_token": True,
            "tokenizer.ggml.add_space_prefix": add_space_prefix}


def hf_folder(sp, folder, style: str) -> None:
    """A HF folder (tokenizer.json, tokenizer_config.json) of `sp` built with HF `tokenizers`' own
    classes, in the styles real SentencePiece models were converted to: "legacy" (Llama 2, Mistral
    v0.1: a ▁ prepended to every stretch by the normalizer), "first" (a Metaspace pre-tokenizer that
    prepends to the text's first stretch only) and "gemma" (spaces replaced, nothing prepended). Its
    merges are every split of a piece into two pieces, by the piece's score (transformers' SpmConverter)."""
    import json
    import pathlib
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    n = sp.get_piece_size()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    by_score = sorted(range(n), key=lambda i: -sp.get_score(i))
    merges = []
    for i in by_score:
        p = sp.id_to_piece(i)
        if sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) or p in SPECIALS:
            continue
        merges += [(p[:k], p[k:]) for k in range(1, len(p)) if p[:k] in vocab and p[k:] in vocab]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if style == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    elif style == "first":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    else:
        tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in SPECIALS])
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True}))
