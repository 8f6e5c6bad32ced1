#!/usr/bin/env python3
"""Reference token ids for the C tokenizer's tests, from SmolLM2's own tokenizer.

Reads the vocabulary, merges and special tokens of SmolLM2-135M-Instruct from its GGUF file and builds
the tokenizer exactly as the model's tokenizer.json on the HF hub describes it (a BPE model with the
pre-tokenizer Sequence[Digits(individual_digits=true), ByteLevel(add_prefix_space=false,
use_regex=true)], a ByteLevel decoder, and ids 0-16 as special added tokens), with the `tokenizers`
library. Writes:
  tests/data/tokenizer/smollm2_tokenizer.json   that tokenizer (the C tests load it)
  tests/data/tokenizer/tokenizer_config.json    bos/eos/add_bos and the chat template
  tests/data/tokenizer/smollm2_ref.json         one case per line: {"text": ..., "ids": [...]}

The texts are the hand-written cases of tests/data/tokenizer/corpus.txt (one JSON string a line).

Why not transformers' GGUF loader alone (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`): it
ignores tokenizer.ggml.pre = "smollm" and builds a plain ByteLevel pre-tokenizer without the Digits
split, so " 1" becomes one piece there, unlike the hub tokenizer and llama.cpp. The script still runs
its conversion (convert_gguf_tokenizer, fed the fields read here: its own GGUF reader needs torch)
and records on how many cases it agrees; the cases where it differs must all hold digits, which
checks that vocabulary and merges were carried over the same way.

Usage (a throwaway venv: python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install transformers
gguf tokenizers):
  /tmp/tokvenv/bin/python scripts/tokenizer_reference.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import importlib.metadata
import json
import os
import sys
import unicodedata

import gguf
import tokenizers
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors


def bytes_to_unicode():
    """GPT-2's byte alphabet: printable bytes stand for themselves, the 68 others for U+0100...."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")


def field(reader, key):
    f = reader.fields[key]
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [int(f.parts[i][0]) for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]].tolist()[0]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    r = gguf.GGUFReader(path)
    assert field(r, "tokenizer.ggml.model") == "gpt2" and field(r, "tokenizer.ggml.pre") == "smollm"
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in field(r, "tokenizer.ggml.merges")]
    bos, eos = field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id")

    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges,
                               unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    assert tok.get_vocab_size() == len(tokens)
    tok.save(os.path.join(DATA, "smollm2_tokenizer.json"), pretty=False)  # why: pretty is > 3 MB
    config = {"bos_token": tokens[bos], "eos_token": tokens[eos],
              "add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token")),
              "chat_template": field(r, "tokenizer.chat_template")}
    with open(os.path.join(DATA, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)

    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        corpus = [json.loads(line) for line in f.read().split("\n") if line]

    # REFERENCE §3.2's vectors (from a third-party script) must hold.
    for text, ids in [("Hello world! 123", [19556, 905, 17, 216, 33, 34, 35]), ("\n", [198]),
                      ("The capital of France is", [504, 3575, 282, 4649, 314])]:
        got = tok.encode(text, add_special_tokens=False).ids
        assert got == ids, (text, got, ids)

    byte_chars = bytes_to_unicode()
    missing = {b for b in range(256) if tok.token_to_id(byte_chars[b]) is None}
    agree = digits_only_differ = 0
    try:  # transformers' own GGUF tokenizer conversion, fed the fields read above (its file reader needs torch)
        import transformers
        from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer
        hf, _ = convert_gguf_tokenizer("llama", {
            "tokenizer_type": "gpt2", "pre_tokenizer_type": "smollm", "tokens": tokens, "token_type": types,
            "merges": field(r, "tokenizer.ggml.merges"), "bos_token_id": bos, "eos_token_id": eos})
        tf_version = transformers.__version__
    except Exception as e:  # the reference does not depend on it
        hf, tf_version = None, "unavailable (%s)" % e

    lines = []
    for text in corpus:
        ids = tok.encode(text, add_special_tokens=False).ids
        # SmolLM2's vocab lacks 21 byte tokens (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1,
        # 0xF1, 0xF2, 0xF5-0xFF): with no unk token, BPE drops those bytes.
        kept = bytes(b for b in text.encode("utf-8") if b not in missing)
        assert tok.decode(ids, skip_special_tokens=False).encode("utf-8") == kept, repr(text)
        if hf is not None:
            other = hf.encode(text, add_special_tokens=False).ids
            if other == ids:
                agree += 1
            else:
                assert any(unicodedata.category(c)[0] == "N" for c in text), ("GGUF loader differs", text)
                digits_only_differ += 1
        lines.append(json.dumps({"text": text, "ids": ids}, ensure_ascii=True))

    meta = {"source": os.path.basename(path), "tokenizers": tokenizers.__version__,
            "gguf": importlib.metadata.version("gguf"), "transformers": tf_version,
            "python": sys.version.split()[0],
            "note": "HF tokenizers classifies \\p{L} \\p{N} \\s by Unicode 16 (Oniguruma), its Digits step "
                    "by Rust's char::is_numeric (Unicode 17 in this build); the >>unicode_tables block of amk.h is Unicode 16",
            "transformers_gguf_loader": "agrees on %d cases; differs on %d, all containing digits "
            "(it ignores the smollm Digits pre-tokenizer)" % (agree, digits_only_differ),
            "encode": "add_special_tokens=False", "n_cases": len(lines),
            "bytes_without_token": ["0x%02X" % b for b in sorted(missing)]}
    with open(os.path.join(DATA, "smollm2_ref.json"), "w", encoding="utf-8") as f:
        f.write("{\"meta\": " + json.dumps(meta) + ",\n\"cases\": [\n")
        f.write(",\n".join(lines))
        f.write("\n]}\n")
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
