#!/usr/bin/env python3
"""Reference tokenizers of issue 41's families, made without downloads, and their ids for the
corpus (tests/data/tokenizer/corpus.txt plus the cases below): HF `tokenizers` is the reference
for tokenizer.json, SentencePiece itself for a GGUF "llama" vocabulary (llama.cpp's algorithm).

  qwen2/  a byte-level BPE trained here with Qwen2's tokenizer.json layout: NFC normalizer, Split
          of Qwen2's regex (\\p{N} alone) + ByteLevel(use_regex=false), ChatML specials. Written
          as tokenizer.json and as model.gguf (tokenizer.ggml.model "gpt2", pre "qwen2").
  spm/    a SentencePiece BPE model trained here with Llama 2's settings (byte_fallback,
          split_digits, identity normalization, whitespace kept, a dummy prefix), written as
          tokenizer.json the way transformers converts Llama 2 (legacy: Prepend + Replace
          normalizer) and again with a Metaspace pre-tokenizer (prepend_scheme "first",
          tokenizer_metaspace.json), and as model.gguf (model "llama": pieces, scores, types).

cases.json holds, per text: "ids" (HF tokenizers, add_special_tokens=False) for each
tokenizer.json, and "gguf" ids: for qwen2 HF's on the text as given without NFC (llama.cpp
normalizes nothing; such cases are marked "nfc": true and the GGUF path is compared only where
NFC leaves the text alone); for spm the text split at special tokens, each stretch encoded by
SentencePiece (which adds the dummy prefix to each, as llama.cpp does).

Run on a machine with tokenizers, sentencepiece and transformers (the GPU machine), with the
gguf wheel on the path:  python3 scripts/tokenizer_families.py OUT_DIR
"""
import json
import os
import sys
import unicodedata

import sentencepiece as spm
import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPACE = "\u2581"

EXTRA = [
    "Hello world", " Hello world", "  two leading spaces", "trailing  ", "a  b   c", "\n\nnew\nlines\n",
    "tab\there", "Numbers 12345 and 3.14159 and 2026-11-29", "x1y22z333", "don't I'LL we've",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9", "cafe\u0301 decomposed", "A\u030a ring, \u212b angstrom, \u2126 ohm",
    "\u1100\u1161\u11a8 jamo", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u4f60\u597d\uff0c\u4e16\u754c",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "emoji \U0001F600\U0001F680 \u2764\ufe0f",
    "rare \u16a0\u16a1\u16a2 runes and \U00010348 gothic", "\u0915\u094d\u0937 Devanagari",
    "<s>starts with bos", "ends with eos</s>", "mid <s> and </s> text", "<unk> literal",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>",
    "\u2581already a meta space", " \u2581 mixed", "", " ", "  ", "\n", "\u00a0nbsp\u00a0", "a\u200bzero width",
]

CHATML = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus():
    with open(os.path.join(ROOT, "tests/data/tokenizer/corpus.txt"), encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    return texts + EXTRA


def training_text(texts):
    # the corpus itself, repeated with variations, and some plain prose: enough for a few
    # thousand merges without any download
    prose = ("The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces; "
             "a byte-level BPE never meets an unknown character, a SentencePiece model falls back "
             "to bytes. Numbers like 1024, 65536 and 3.14 appear, as do words in other scripts: "
             "caf\u00e9, na\u00efve, \u00fcber, \u4f60\u597d, \u3053\u3093\u306b\u3061\u306f, "
             "\ud55c\uad6d\uc5b4, \u0437\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439\u0442\u0435. ")
    out = [t for t in texts if t]
    for i in range(200):
        out.append(prose * (1 + i % 3))
        out.append(" ".join(t for t in texts[i % len(texts): i % len(texts) + 5]))
    return out


def ids_of(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def write_gguf(path, kv):
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    for key, (kind, value) in kv.items():
        getattr(w, "add_" + kind)(key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def qwen2(out, texts):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=CHATML, show_progress=False)
    tok.train_from_iterator(training_text(texts), trainer)
    d = os.path.join(out, "qwen2")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    j = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    assert j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == QWEN2_REGEX
    vocab = tok.get_vocab()
    tokens = [None] * len(vocab)
    for s, i in vocab.items():
        tokens[i] = s
    merges = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    types = [3 if t in CHATML else 1 for t in tokens]
    write_gguf(os.path.join(d, "model.gguf"), {
        "tokenizer.ggml.model": ("string", "gpt2"), "tokenizer.ggml.pre": ("string", "qwen2"),
        "tokenizer.ggml.tokens": ("array", tokens), "tokenizer.ggml.token_type": ("array", types),
        "tokenizer.ggml.merges": ("array", merges),
        "tokenizer.ggml.eos_token_id": ("uint32", vocab["<|endoftext|>"]),
        "tokenizer.ggml.add_bos_token": ("bool", False)})
    cases = []
    for text in texts:
        ids = ids_of(tok, text)
        nfc = unicodedata.normalize("NFC", text) != text
        raw = Tokenizer.from_str(tok.to_str())
        raw.normalizer = None
        cases.append({"text": text, "ids": ids, "gguf": ids_of(raw, text), "nfc": nfc})
    return cases


def spm_model(out, texts):
    d = os.path.join(out, "spm")
    os.makedirs(d, exist_ok=True)
    prefix = os.path.join(d, "spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_text(texts)), model_prefix=prefix, vocab_size=1200, model_type="bpe",
        byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, allow_whitespace_only_pieces=True,
        character_coverage=0.99, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else
             5 if sp.is_unused(i) else 1 for i in range(n)]
    write_gguf(os.path.join(d, "model.gguf"), {
        "tokenizer.ggml.model": ("string", "llama"), "tokenizer.ggml.tokens": ("array", pieces),
        "tokenizer.ggml.scores": ("array", scores), "tokenizer.ggml.token_type": ("array", types),
        "tokenizer.ggml.bos_token_id": ("uint32", 1), "tokenizer.ggml.eos_token_id": ("uint32", 2),
        "tokenizer.ggml.unknown_token_id": ("uint32", 0), "tokenizer.ggml.add_bos_token": ("bool", True),
        "tokenizer.ggml.add_space_prefix": ("bool", True)})
    # tokenizer.json as transformers' LlamaConverter writes it (legacy), from the merges its
    # SentencePieceExtractor derives
    from transformers.convert_slow_tokenizer import SentencePieceExtractor
    ext = SentencePieceExtractor(prefix + ".model")
    got = ext.extract(None)  # transformers 5: the model's kwargs (vocab, merges in piece order)
    vocab, merges = got["vocab"], got["merges"]
    specials = [tokenizers.AddedToken(p, special=True, normalized=False) for p in ("<unk>", "<s>", "</s>")]

    def build(metaspace):
        bpe = models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True)
        tok = Tokenizer(bpe)
        if metaspace:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
            tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        else:
            tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
            tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                             decoders.Strip(" ", 1, 0)])
        tok.add_special_tokens(specials)
        return tok
    legacy, meta = build(False), build(True)
    legacy.save(os.path.join(d, "tokenizer.json"))
    meta.save(os.path.join(d, "tokenizer_metaspace.json"))
    special_ids = {"<unk>": 0, "<s>": 1, "</s>": 2}
    cases = []
    for text in texts:
        want = []  # llama.cpp: specials out first, each stretch between them by SentencePiece
        pos = start = 0
        while pos <= len(text):
            hit = next((s for s in special_ids if text.startswith(s, pos)), None) if pos < len(text) else None
            if hit is None and pos < len(text):
                pos += 1
                continue
            if pos > start:
                want += sp.encode(text[start:pos])
            if hit is None:
                break
            want.append(special_ids[hit])
            pos += len(hit)
            start = pos
        cases.append({"text": text, "ids": ids_of(legacy, text), "metaspace": ids_of(meta, text), "gguf": want})
    return cases


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/data/tokenizer/families")
    texts = corpus()
    meta = {"tokenizers": tokenizers.__version__, "sentencepiece": spm.__version__,
            "python": sys.version.split()[0], "unicode": unicodedata.unidata_version,
            "encode": "add_special_tokens=False", "n_cases": len(texts)}
    for name, fn in (("qwen2", qwen2), ("spm", spm_model)):
        cases = fn(out, texts)
        with open(os.path.join(out, name, "cases.json"), "w", encoding="utf-8") as f:
            f.write("{\"meta\": " + json.dumps(meta) + ",\n\"cases\": [\n")
            f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
            f.write("\n]}\n")
        print(name, len(cases), "cases")


if __name__ == "__main__":
    main()
