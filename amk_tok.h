/* amk_tok.h - AMK's tokenizer layer. Part of AMK (amk.h has the library's manual).

   WHAT IT DOES
     Byte-level BPE (SmolLM2, Llama-3, Qwen2, GPT-2 pre-tokenizers; Qwen2's NFC normalizer) and
     SentencePiece BPE with byte fallback (Llama 2, Mistral, TinyLlama), built from a GGUF file or
     an HF tokenizer.json: encode with special tokens matched verbatim, decode, the chat prompt of
     one turn in the model family's format. Letters, digits and spaces are classified by Unicode 16
     (the >>unicode_tables block, written by scripts/gen_unicode_tables.py). A tokenizer is
     immutable once built: one may be used from many threads at once.
   WHAT IT DOES NOT DO
     Unigram SentencePiece models (T5, ...), WordPiece, normalizers other than NFC and
     SentencePiece's space handling, or pre-tokenizers other than the ones above.
   CONTENTS
     declarations >>tokenizer | implementation >>impl_tokenizer */
#ifndef AMK_TOK_H
#define AMK_TOK_H

#include "amk_model.h"
#include "amk_nfc.h" /* Qwen2's tokenizer.json normalizer */

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>tokenizer =================================================================================== */
/* A BPE tokenizer of one of two kinds.
   Byte-level (REFERENCE.md §3.2): text -> special tokens matched verbatim -> (NFC, where the
   tokenizer.json asks for it) -> pre-tokenizer pieces -> bytes in GPT-2's byte alphabet -> BPE
   merges -> ids.
   SentencePiece BPE (a GGUF "llama" vocabulary with scores, or a tokenizer.json whose BPE model
   has byte_fallback): each stretch of text between special tokens -> spaces as U+2581 ("▁"), and
   "▁" in front where the tokenizer adds a space prefix -> its characters as symbols (one the
   vocabulary lacks: its bytes' <0xXX> tokens, else unk) -> BPE merges -> ids. The merges are the
   file's (tokenizer.json) or, from a GGUF, every split of a token into two tokens, ranked by the
   token's score (llama.cpp's rule: the highest score first, ties leftmost).
   Built from a GGUF file, an HF tokenizer.json, or a format-neutral spec (byte-level only).
   Immutable once built: one tokenizer may be used from many threads at once. Encoding keeps no
   cache. Letters, digits and spaces are classified by Unicode 16 (the >>unicode_tables block), as
   HF tokenizers' regex engine does; the output matches HF tokenizers id for id on SmolLM2 and on
   the committed Qwen2-style and SentencePiece cases (tests/test_tokenizer.c).
   What it does NOT do: Unigram models, normalizers other than NFC and SentencePiece's, BPE
   dropout, other pre-tokenizer regexes than the ones below. */
typedef struct amk_tokenizer amk_tokenizer;

/* The pre-tokenizer: how text is cut into pieces before BPE. */
typedef enum amk_pretok {
    AMK_PRETOK_SMOLLM = 0,    /* every \p{N} alone, then the GPT-2 regex (HF Digits + ByteLevel) */
    AMK_PRETOK_LLAMA3 = 1,    /* the Llama-3 regex (case-insensitive contractions, \p{N}{1,3}) */
    AMK_PRETOK_GPT2 = 2,      /* the GPT-2 regex alone (HF ByteLevel with use_regex) */
    AMK_PRETOK_QWEN2 = 3,     /* the Llama-3 regex with \p{N} alone (Qwen2, Qwen2.5, Qwen3) */
    AMK_PRETOK_SPM = 4,       /* SentencePiece: a stretch of text between specials is one piece */
    AMK_PRETOK_METASPACE = 5  /* SentencePiece split at each "▁" (HF Metaspace with split) */
} amk_pretok;

/* Everything a byte-level BPE needs, format-neutral. Strings are copied by amk_tokenizer_create. */
typedef struct amk_tokenizer_spec {
    int n_tokens;
    const char *const *tokens;   /* [n_tokens] id -> string in GPT-2's byte alphabet (specials: text) */
    const size_t *token_lens;    /* [n_tokens] byte lengths, or NULL: tokens are NUL-terminated */
    const int *token_types;      /* [n_tokens] GGUF token_type (3 control, 4 user-defined: matched
                                    verbatim in text, decoded as their text), or NULL: no specials */
    int n_merges;
    const char *const *merges;   /* [n_merges] "A B" in rank order (split at the first space after
                                    the first byte, as llama.cpp does) */
    const size_t *merge_lens;    /* [n_merges] or NULL: NUL-terminated */
    amk_pretok pretok;           /* a byte-level one: SMOLLM, LLAMA3, GPT2 or QWEN2 */
    int bos_id, eos_id;          /* -1 when none */
    int add_bos;                 /* encode adds bos_id when asked for the default (add_bos < 0) */
    int ignore_merges;           /* a whole piece that is a vocab token is used directly (Llama-3) */
} amk_tokenizer_spec;

/* Builds a tokenizer. Every merge's parts and result must be vocab tokens (AMK_ERR_PARSE naming the
   merge otherwise, as HF does). Duplicate token strings: the lowest id wins. Byte values with no
   token in the vocab are dropped by encode (SmolLM2 lacks 21, e.g. 0x04 and 0xF5-0xFF), as HF does
   when there is no unk token. */
AMK_API amk_result amk_tokenizer_create(const amk_tokenizer_spec *s, amk_tokenizer **out,
                                        amk_diag *d);
/* From a GGUF's tokenizer.ggml.* keys. Model "gpt2" (byte-level): pre "smollm" -> SMOLLM,
   "llama-bpe"/"llama3"/"llama-v3" -> LLAMA3 with ignore_merges, "qwen2" -> QWEN2, "gpt2" or
   "default" (or absent) -> GPT2, anything else AMK_ERR_UNSUPPORTED naming it. Model "llama"
   (SentencePiece): tokens, scores and token_type (2 unknown, 3 control, 4 user-defined, 6 byte),
   add_space_prefix (default 1: every stretch of text between specials gets "▁" in front, as
   llama.cpp does), add_bos_token (default 1), unknown_token_id. Other models:
   AMK_ERR_UNSUPPORTED. No NFC (llama.cpp applies none). g may be closed after this returns. */
AMK_API amk_result amk_tokenizer_from_gguf(const amk_gguf *g, amk_tokenizer **out, amk_diag *d);
/* From an HF tokenizer.json, model BPE, one of:
   - byte-level: pre_tokenizer ByteLevel, Digits+ByteLevel, or Split (the Llama-3 or the Qwen2
     regex)+ByteLevel; normalizer none or NFC;
   - SentencePiece: byte_fallback true, with the normalizer Prepend("▁")+Replace(" ", "▁") (Llama
     2's "legacy" conversion: every stretch between specials gets the prefix) and no
     pre_tokenizer, or no normalizer and a Metaspace pre_tokenizer ("▁", prepend_scheme first:
     only text at the start of the input gets the prefix, always, or never; split or not);
     fuse_unk as given, unk_token from the model.
   bos/eos/add_bos come from tokenizer_config.json in the same folder when it exists (bos_token,
   eos_token, add_bos_token), else from a TemplateProcessing post-processor that starts with a
   special token (then add_bos = 1), else none. Anything else: AMK_ERR_UNSUPPORTED naming it. */
AMK_API amk_result amk_tokenizer_from_json(const char *path, amk_tokenizer **out, amk_diag *d);
/* The same from memory: json is tokenizer.json's text, config tokenizer_config.json's or NULL. */
AMK_API amk_result amk_tokenizer_from_json_text(const char *json, size_t json_len,
                                                const char *config, size_t config_len,
                                                amk_tokenizer **out, amk_diag *d);
AMK_API void amk_tokenizer_free(amk_tokenizer *t);
/* The tokenizer of an opened model: a GGUF's own keys, else tokenizer.json in the model's
   directory (amk_tokenizer_from_gguf / amk_tokenizer_from_json). */
AMK_API amk_result amk_tokenizer_from_model(const amk_model *m, amk_tokenizer **out, amk_diag *d);

/* Encodes len bytes of UTF-8 text: special tokens (like <|im_start|>) are matched verbatim first,
   longest at the leftmost position. add_bos: 1 prepends BOS (if the tokenizer has one), 0 does
   not, -1 follows the tokenizer's own add_bos. Writes up to cap ids and returns how many the full
   encoding has (call again with a bigger buffer if that is > cap), or -1 on a bad argument, out of
   memory or more than INT_MAX ids. Invalid UTF-8 is no error: its bytes go through the byte
   alphabet like any other (each invalid byte is a character of its own, neither letter, digit
   nor space, for the pre-tokenizer). */
AMK_API int amk_tokenizer_encode(const amk_tokenizer *t, const char *text, size_t len, int add_bos,
                                 int *ids, int cap);
/* Writes the bytes of token id (a special: its text) to buf; returns the count written, or -1 for
   a bad id or when they do not fit in cap (nothing is written then). Not NUL-terminated. Tokens may
   end inside a UTF-8 character: concatenate the bytes of a sequence before printing. */
AMK_API int amk_tokenizer_decode(const amk_tokenizer *t, int id, char *buf, size_t cap);
/* The bytes of token id without copying (points into t), or NULL for a bad id. */
AMK_API const char *amk_tokenizer_token_bytes(const amk_tokenizer *t, int id, size_t *len);
AMK_API int amk_tokenizer_n_vocab(const amk_tokenizer *t);
AMK_API int amk_tokenizer_bos(const amk_tokenizer *t);      /* -1 if none */
AMK_API int amk_tokenizer_eos(const amk_tokenizer *t);      /* -1 if none */
AMK_API int amk_tokenizer_add_bos(const amk_tokenizer *t);  /* the default of encode's add_bos */
AMK_API amk_pretok amk_tokenizer_pretok(const amk_tokenizer *t);
/* 1 if id is a special token (matched verbatim, decoded as its text), else 0. */
AMK_API int amk_tokenizer_is_special(const amk_tokenizer *t, int id);
/* The id of an exact vocab string in the byte alphabet ("Ġthe") or of a special's text, or -1. */
AMK_API int amk_tokenizer_token_id(const amk_tokenizer *t, const char *text);
/* The id of the one-byte token for byte value b (0..255), or -1 if the vocab has none. */
AMK_API int amk_tokenizer_byte_token(const amk_tokenizer *t, int b);
/* Runs a pre-tokenizer alone (no special tokens, no normalizer; SPM: one piece; METASPACE: a
   piece before each "▁" but the first character): writes the end offset of each piece into ends
   (up to cap) and returns the number of pieces, or -1 on a bad argument or more than INT_MAX. */
AMK_API int amk_tokenizer_pretokenize(amk_pretok p, const char *text, size_t len, size_t *ends,
                                      int cap);
/* The chat formats of the families (one user turn, the text up to where the assistant's answer
   starts; BOS is not in the text: encode adds it where the tokenizer does). */
typedef enum amk_chat_format {
    AMK_CHAT_NONE = 0,   /* the tokenizer has no chat format AMK knows */
    AMK_CHAT_CHATML = 1, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2, Qwen2.5, Qwen3) */
    AMK_CHAT_LLAMA3 = 2, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    AMK_CHAT_MISTRAL = 3, /* [INST] system\n\nuser [/INST] */
    AMK_CHAT_LLAMA2 = 4  /* [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] */
} amk_chat_format;
/* The tokenizer's chat format: from the model's chat template where the file has one (GGUF
   tokenizer.chat_template, tokenizer_config.json chat_template: which markers it uses), else from
   the vocabulary (<|im_start|>, <|start_header_id|>, SentencePiece with an [INST] token: MISTRAL,
   other SentencePiece: LLAMA2). t NULL: CHATML. */
AMK_API amk_chat_format amk_tokenizer_chat_format(const amk_tokenizer *t);
/* The chat prompt of one user turn in the tokenizer's format (amk_tokenizer_chat_format).
   system NULL gives the format's default system prompt where the model's template has one
   (SmolLM2's and Qwen2.5's, REFERENCE §3.1; a tokenizer without a template: SmolLM2's for the
   smollm pre-tokenizer), else no system turn; "" an empty one. Writes a NUL-terminated prefix
   into buf (cap bytes) and returns the length of the whole prompt (like snprintf), or -1 if user
   is NULL or the tokenizer has no chat format (or its format's marker tokens). t may be NULL:
   SmolLM2's ChatML. */
AMK_API int amk_tokenizer_chat_prompt(const amk_tokenizer *t, const char *system, const char *user,
                                      char *buf, size_t cap);


#ifdef __cplusplus
}
#endif
#endif /* AMK_TOK_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_TOK_IMPLEMENTATION_DONE)
#define AMK_TOK_IMPLEMENTATION_DONE
/* ==== >>impl_tokenizer ============================================================================== */
/* >>unicode_tables begin (scripts/gen_unicode_tables.py rewrites up to the end marker) */
/* The Unicode tables - GENERATED by scripts/gen_unicode_tables.py; do not edit.
   Source: unicodedata2 16.0.0 (Unicode 16.0.0).
   Sorted, disjoint code-point ranges with their class: 1 = L (General_Category L*),
   2 = N (N*), 3 = W (the White_Space property, which is Oniguruma's and Rust's Unicode \s).
   Code points in no range are 'other'. 677 L, 144 N, 10 W ranges. */
#define AMK__UNI_L 1
#define AMK__UNI_N 2
#define AMK__UNI_W 3
#define AMK__UNI_VERSION "16.0.0"
typedef struct amk__uni_range { uint32_t lo, hi; unsigned char cls; } amk__uni_range;
static const amk__uni_range amk__uni_ranges[831] = {
{0x9,0xD,3},{0x20,0x20,3},{0x30,0x39,2},{0x41,0x5A,1},{0x61,0x7A,1},{0x85,0x85,3},{0xA0,0xA0,3},
{0xAA,0xAA,1},{0xB2,0xB3,2},{0xB5,0xB5,1},{0xB9,0xB9,2},{0xBA,0xBA,1},{0xBC,0xBE,2},{0xC0,0xD6,1},
{0xD8,0xF6,1},{0xF8,0x2C1,1},{0x2C6,0x2D1,1},{0x2E0,0x2E4,1},{0x2EC,0x2EC,1},{0x2EE,0x2EE,1},
{0x370,0x374,1},{0x376,0x377,1},{0x37A,0x37D,1},{0x37F,0x37F,1},{0x386,0x386,1},{0x388,0x38A,1},
{0x38C,0x38C,1},{0x38E,0x3A1,1},{0x3A3,0x3F5,1},{0x3F7,0x481,1},{0x48A,0x52F,1},{0x531,0x556,1},
{0x559,0x559,1},{0x560,0x588,1},{0x5D0,0x5EA,1},{0x5EF,0x5F2,1},{0x620,0x64A,1},{0x660,0x669,2},
{0x66E,0x66F,1},{0x671,0x6D3,1},{0x6D5,0x6D5,1},{0x6E5,0x6E6,1},{0x6EE,0x6EF,1},{0x6F0,0x6F9,2},
{0x6FA,0x6FC,1},{0x6FF,0x6FF,1},{0x710,0x710,1},{0x712,0x72F,1},{0x74D,0x7A5,1},{0x7B1,0x7B1,1},
{0x7C0,0x7C9,2},{0x7CA,0x7EA,1},{0x7F4,0x7F5,1},{0x7FA,0x7FA,1},{0x800,0x815,1},{0x81A,0x81A,1},
{0x824,0x824,1},{0x828,0x828,1},{0x840,0x858,1},{0x860,0x86A,1},{0x870,0x887,1},{0x889,0x88E,1},
{0x8A0,0x8C9,1},{0x904,0x939,1},{0x93D,0x93D,1},{0x950,0x950,1},{0x958,0x961,1},{0x966,0x96F,2},
{0x971,0x980,1},{0x985,0x98C,1},{0x98F,0x990,1},{0x993,0x9A8,1},{0x9AA,0x9B0,1},{0x9B2,0x9B2,1},
{0x9B6,0x9B9,1},{0x9BD,0x9BD,1},{0x9CE,0x9CE,1},{0x9DC,0x9DD,1},{0x9DF,0x9E1,1},{0x9E6,0x9EF,2},
{0x9F0,0x9F1,1},{0x9F4,0x9F9,2},{0x9FC,0x9FC,1},{0xA05,0xA0A,1},{0xA0F,0xA10,1},{0xA13,0xA28,1},
{0xA2A,0xA30,1},{0xA32,0xA33,1},{0xA35,0xA36,1},{0xA38,0xA39,1},{0xA59,0xA5C,1},{0xA5E,0xA5E,1},
{0xA66,0xA6F,2},{0xA72,0xA74,1},{0xA85,0xA8D,1},{0xA8F,0xA91,1},{0xA93,0xAA8,1},{0xAAA,0xAB0,1},
{0xAB2,0xAB3,1},{0xAB5,0xAB9,1},{0xABD,0xABD,1},{0xAD0,0xAD0,1},{0xAE0,0xAE1,1},{0xAE6,0xAEF,2},
{0xAF9,0xAF9,1},{0xB05,0xB0C,1},{0xB0F,0xB10,1},{0xB13,0xB28,1},{0xB2A,0xB30,1},{0xB32,0xB33,1},
{0xB35,0xB39,1},{0xB3D,0xB3D,1},{0xB5C,0xB5D,1},{0xB5F,0xB61,1},{0xB66,0xB6F,2},{0xB71,0xB71,1},
{0xB72,0xB77,2},{0xB83,0xB83,1},{0xB85,0xB8A,1},{0xB8E,0xB90,1},{0xB92,0xB95,1},{0xB99,0xB9A,1},
{0xB9C,0xB9C,1},{0xB9E,0xB9F,1},{0xBA3,0xBA4,1},{0xBA8,0xBAA,1},{0xBAE,0xBB9,1},{0xBD0,0xBD0,1},
{0xBE6,0xBF2,2},{0xC05,0xC0C,1},{0xC0E,0xC10,1},{0xC12,0xC28,1},{0xC2A,0xC39,1},{0xC3D,0xC3D,1},
{0xC58,0xC5A,1},{0xC5D,0xC5D,1},{0xC60,0xC61,1},{0xC66,0xC6F,2},{0xC78,0xC7E,2},{0xC80,0xC80,1},
{0xC85,0xC8C,1},{0xC8E,0xC90,1},{0xC92,0xCA8,1},{0xCAA,0xCB3,1},{0xCB5,0xCB9,1},{0xCBD,0xCBD,1},
{0xCDD,0xCDE,1},{0xCE0,0xCE1,1},{0xCE6,0xCEF,2},{0xCF1,0xCF2,1},{0xD04,0xD0C,1},{0xD0E,0xD10,1},
{0xD12,0xD3A,1},{0xD3D,0xD3D,1},{0xD4E,0xD4E,1},{0xD54,0xD56,1},{0xD58,0xD5E,2},{0xD5F,0xD61,1},
{0xD66,0xD78,2},{0xD7A,0xD7F,1},{0xD85,0xD96,1},{0xD9A,0xDB1,1},{0xDB3,0xDBB,1},{0xDBD,0xDBD,1},
{0xDC0,0xDC6,1},{0xDE6,0xDEF,2},{0xE01,0xE30,1},{0xE32,0xE33,1},{0xE40,0xE46,1},{0xE50,0xE59,2},
{0xE81,0xE82,1},{0xE84,0xE84,1},{0xE86,0xE8A,1},{0xE8C,0xEA3,1},{0xEA5,0xEA5,1},{0xEA7,0xEB0,1},
{0xEB2,0xEB3,1},{0xEBD,0xEBD,1},{0xEC0,0xEC4,1},{0xEC6,0xEC6,1},{0xED0,0xED9,2},{0xEDC,0xEDF,1},
{0xF00,0xF00,1},{0xF20,0xF33,2},{0xF40,0xF47,1},{0xF49,0xF6C,1},{0xF88,0xF8C,1},{0x1000,0x102A,1},
{0x103F,0x103F,1},{0x1040,0x1049,2},{0x1050,0x1055,1},{0x105A,0x105D,1},{0x1061,0x1061,1},
{0x1065,0x1066,1},{0x106E,0x1070,1},{0x1075,0x1081,1},{0x108E,0x108E,1},{0x1090,0x1099,2},
{0x10A0,0x10C5,1},{0x10C7,0x10C7,1},{0x10CD,0x10CD,1},{0x10D0,0x10FA,1},{0x10FC,0x1248,1},
{0x124A,0x124D,1},{0x1250,0x1256,1},{0x1258,0x1258,1},{0x125A,0x125D,1},{0x1260,0x1288,1},
{0x128A,0x128D,1},{0x1290,0x12B0,1},{0x12B2,0x12B5,1},{0x12B8,0x12BE,1},{0x12C0,0x12C0,1},
{0x12C2,0x12C5,1},{0x12C8,0x12D6,1},{0x12D8,0x1310,1},{0x1312,0x1315,1},{0x1318,0x135A,1},
{0x1369,0x137C,2},{0x1380,0x138F,1},{0x13A0,0x13F5,1},{0x13F8,0x13FD,1},{0x1401,0x166C,1},
{0x166F,0x167F,1},{0x1680,0x1680,3},{0x1681,0x169A,1},{0x16A0,0x16EA,1},{0x16EE,0x16F0,2},
{0x16F1,0x16F8,1},{0x1700,0x1711,1},{0x171F,0x1731,1},{0x1740,0x1751,1},{0x1760,0x176C,1},
{0x176E,0x1770,1},{0x1780,0x17B3,1},{0x17D7,0x17D7,1},{0x17DC,0x17DC,1},{0x17E0,0x17E9,2},
{0x17F0,0x17F9,2},{0x1810,0x1819,2},{0x1820,0x1878,1},{0x1880,0x1884,1},{0x1887,0x18A8,1},
{0x18AA,0x18AA,1},{0x18B0,0x18F5,1},{0x1900,0x191E,1},{0x1946,0x194F,2},{0x1950,0x196D,1},
{0x1970,0x1974,1},{0x1980,0x19AB,1},{0x19B0,0x19C9,1},{0x19D0,0x19DA,2},{0x1A00,0x1A16,1},
{0x1A20,0x1A54,1},{0x1A80,0x1A89,2},{0x1A90,0x1A99,2},{0x1AA7,0x1AA7,1},{0x1B05,0x1B33,1},
{0x1B45,0x1B4C,1},{0x1B50,0x1B59,2},{0x1B83,0x1BA0,1},{0x1BAE,0x1BAF,1},{0x1BB0,0x1BB9,2},
{0x1BBA,0x1BE5,1},{0x1C00,0x1C23,1},{0x1C40,0x1C49,2},{0x1C4D,0x1C4F,1},{0x1C50,0x1C59,2},
{0x1C5A,0x1C7D,1},{0x1C80,0x1C8A,1},{0x1C90,0x1CBA,1},{0x1CBD,0x1CBF,1},{0x1CE9,0x1CEC,1},
{0x1CEE,0x1CF3,1},{0x1CF5,0x1CF6,1},{0x1CFA,0x1CFA,1},{0x1D00,0x1DBF,1},{0x1E00,0x1F15,1},
{0x1F18,0x1F1D,1},{0x1F20,0x1F45,1},{0x1F48,0x1F4D,1},{0x1F50,0x1F57,1},{0x1F59,0x1F59,1},
{0x1F5B,0x1F5B,1},{0x1F5D,0x1F5D,1},{0x1F5F,0x1F7D,1},{0x1F80,0x1FB4,1},{0x1FB6,0x1FBC,1},
{0x1FBE,0x1FBE,1},{0x1FC2,0x1FC4,1},{0x1FC6,0x1FCC,1},{0x1FD0,0x1FD3,1},{0x1FD6,0x1FDB,1},
{0x1FE0,0x1FEC,1},{0x1FF2,0x1FF4,1},{0x1FF6,0x1FFC,1},{0x2000,0x200A,3},{0x2028,0x2029,3},
{0x202F,0x202F,3},{0x205F,0x205F,3},{0x2070,0x2070,2},{0x2071,0x2071,1},{0x2074,0x2079,2},
{0x207F,0x207F,1},{0x2080,0x2089,2},{0x2090,0x209C,1},{0x2102,0x2102,1},{0x2107,0x2107,1},
{0x210A,0x2113,1},{0x2115,0x2115,1},{0x2119,0x211D,1},{0x2124,0x2124,1},{0x2126,0x2126,1},
{0x2128,0x2128,1},{0x212A,0x212D,1},{0x212F,0x2139,1},{0x213C,0x213F,1},{0x2145,0x2149,1},
{0x214E,0x214E,1},{0x2150,0x2182,2},{0x2183,0x2184,1},{0x2185,0x2189,2},{0x2460,0x249B,2},
{0x24EA,0x24FF,2},{0x2776,0x2793,2},{0x2C00,0x2CE4,1},{0x2CEB,0x2CEE,1},{0x2CF2,0x2CF3,1},
{0x2CFD,0x2CFD,2},{0x2D00,0x2D25,1},{0x2D27,0x2D27,1},{0x2D2D,0x2D2D,1},{0x2D30,0x2D67,1},
{0x2D6F,0x2D6F,1},{0x2D80,0x2D96,1},{0x2DA0,0x2DA6,1},{0x2DA8,0x2DAE,1},{0x2DB0,0x2DB6,1},
{0x2DB8,0x2DBE,1},{0x2DC0,0x2DC6,1},{0x2DC8,0x2DCE,1},{0x2DD0,0x2DD6,1},{0x2DD8,0x2DDE,1},
{0x2E2F,0x2E2F,1},{0x3000,0x3000,3},{0x3005,0x3006,1},{0x3007,0x3007,2},{0x3021,0x3029,2},
{0x3031,0x3035,1},{0x3038,0x303A,2},{0x303B,0x303C,1},{0x3041,0x3096,1},{0x309D,0x309F,1},
{0x30A1,0x30FA,1},{0x30FC,0x30FF,1},{0x3105,0x312F,1},{0x3131,0x318E,1},{0x3192,0x3195,2},
{0x31A0,0x31BF,1},{0x31F0,0x31FF,1},{0x3220,0x3229,2},{0x3248,0x324F,2},{0x3251,0x325F,2},
{0x3280,0x3289,2},{0x32B1,0x32BF,2},{0x3400,0x4DBF,1},{0x4E00,0xA48C,1},{0xA4D0,0xA4FD,1},
{0xA500,0xA60C,1},{0xA610,0xA61F,1},{0xA620,0xA629,2},{0xA62A,0xA62B,1},{0xA640,0xA66E,1},
{0xA67F,0xA69D,1},{0xA6A0,0xA6E5,1},{0xA6E6,0xA6EF,2},{0xA717,0xA71F,1},{0xA722,0xA788,1},
{0xA78B,0xA7CD,1},{0xA7D0,0xA7D1,1},{0xA7D3,0xA7D3,1},{0xA7D5,0xA7DC,1},{0xA7F2,0xA801,1},
{0xA803,0xA805,1},{0xA807,0xA80A,1},{0xA80C,0xA822,1},{0xA830,0xA835,2},{0xA840,0xA873,1},
{0xA882,0xA8B3,1},{0xA8D0,0xA8D9,2},{0xA8F2,0xA8F7,1},{0xA8FB,0xA8FB,1},{0xA8FD,0xA8FE,1},
{0xA900,0xA909,2},{0xA90A,0xA925,1},{0xA930,0xA946,1},{0xA960,0xA97C,1},{0xA984,0xA9B2,1},
{0xA9CF,0xA9CF,1},{0xA9D0,0xA9D9,2},{0xA9E0,0xA9E4,1},{0xA9E6,0xA9EF,1},{0xA9F0,0xA9F9,2},
{0xA9FA,0xA9FE,1},{0xAA00,0xAA28,1},{0xAA40,0xAA42,1},{0xAA44,0xAA4B,1},{0xAA50,0xAA59,2},
{0xAA60,0xAA76,1},{0xAA7A,0xAA7A,1},{0xAA7E,0xAAAF,1},{0xAAB1,0xAAB1,1},{0xAAB5,0xAAB6,1},
{0xAAB9,0xAABD,1},{0xAAC0,0xAAC0,1},{0xAAC2,0xAAC2,1},{0xAADB,0xAADD,1},{0xAAE0,0xAAEA,1},
{0xAAF2,0xAAF4,1},{0xAB01,0xAB06,1},{0xAB09,0xAB0E,1},{0xAB11,0xAB16,1},{0xAB20,0xAB26,1},
{0xAB28,0xAB2E,1},{0xAB30,0xAB5A,1},{0xAB5C,0xAB69,1},{0xAB70,0xABE2,1},{0xABF0,0xABF9,2},
{0xAC00,0xD7A3,1},{0xD7B0,0xD7C6,1},{0xD7CB,0xD7FB,1},{0xF900,0xFA6D,1},{0xFA70,0xFAD9,1},
{0xFB00,0xFB06,1},{0xFB13,0xFB17,1},{0xFB1D,0xFB1D,1},{0xFB1F,0xFB28,1},{0xFB2A,0xFB36,1},
{0xFB38,0xFB3C,1},{0xFB3E,0xFB3E,1},{0xFB40,0xFB41,1},{0xFB43,0xFB44,1},{0xFB46,0xFBB1,1},
{0xFBD3,0xFD3D,1},{0xFD50,0xFD8F,1},{0xFD92,0xFDC7,1},{0xFDF0,0xFDFB,1},{0xFE70,0xFE74,1},
{0xFE76,0xFEFC,1},{0xFF10,0xFF19,2},{0xFF21,0xFF3A,1},{0xFF41,0xFF5A,1},{0xFF66,0xFFBE,1},
{0xFFC2,0xFFC7,1},{0xFFCA,0xFFCF,1},{0xFFD2,0xFFD7,1},{0xFFDA,0xFFDC,1},{0x10000,0x1000B,1},
{0x1000D,0x10026,1},{0x10028,0x1003A,1},{0x1003C,0x1003D,1},{0x1003F,0x1004D,1},
{0x10050,0x1005D,1},{0x10080,0x100FA,1},{0x10107,0x10133,2},{0x10140,0x10178,2},
{0x1018A,0x1018B,2},{0x10280,0x1029C,1},{0x102A0,0x102D0,1},{0x102E1,0x102FB,2},
{0x10300,0x1031F,1},{0x10320,0x10323,2},{0x1032D,0x10340,1},{0x10341,0x10341,2},
{0x10342,0x10349,1},{0x1034A,0x1034A,2},{0x10350,0x10375,1},{0x10380,0x1039D,1},
{0x103A0,0x103C3,1},{0x103C8,0x103CF,1},{0x103D1,0x103D5,2},{0x10400,0x1049D,1},
{0x104A0,0x104A9,2},{0x104B0,0x104D3,1},{0x104D8,0x104FB,1},{0x10500,0x10527,1},
{0x10530,0x10563,1},{0x10570,0x1057A,1},{0x1057C,0x1058A,1},{0x1058C,0x10592,1},
{0x10594,0x10595,1},{0x10597,0x105A1,1},{0x105A3,0x105B1,1},{0x105B3,0x105B9,1},
{0x105BB,0x105BC,1},{0x105C0,0x105F3,1},{0x10600,0x10736,1},{0x10740,0x10755,1},
{0x10760,0x10767,1},{0x10780,0x10785,1},{0x10787,0x107B0,1},{0x107B2,0x107BA,1},
{0x10800,0x10805,1},{0x10808,0x10808,1},{0x1080A,0x10835,1},{0x10837,0x10838,1},
{0x1083C,0x1083C,1},{0x1083F,0x10855,1},{0x10858,0x1085F,2},{0x10860,0x10876,1},
{0x10879,0x1087F,2},{0x10880,0x1089E,1},{0x108A7,0x108AF,2},{0x108E0,0x108F2,1},
{0x108F4,0x108F5,1},{0x108FB,0x108FF,2},{0x10900,0x10915,1},{0x10916,0x1091B,2},
{0x10920,0x10939,1},{0x10980,0x109B7,1},{0x109BC,0x109BD,2},{0x109BE,0x109BF,1},
{0x109C0,0x109CF,2},{0x109D2,0x109FF,2},{0x10A00,0x10A00,1},{0x10A10,0x10A13,1},
{0x10A15,0x10A17,1},{0x10A19,0x10A35,1},{0x10A40,0x10A48,2},{0x10A60,0x10A7C,1},
{0x10A7D,0x10A7E,2},{0x10A80,0x10A9C,1},{0x10A9D,0x10A9F,2},{0x10AC0,0x10AC7,1},
{0x10AC9,0x10AE4,1},{0x10AEB,0x10AEF,2},{0x10B00,0x10B35,1},{0x10B40,0x10B55,1},
{0x10B58,0x10B5F,2},{0x10B60,0x10B72,1},{0x10B78,0x10B7F,2},{0x10B80,0x10B91,1},
{0x10BA9,0x10BAF,2},{0x10C00,0x10C48,1},{0x10C80,0x10CB2,1},{0x10CC0,0x10CF2,1},
{0x10CFA,0x10CFF,2},{0x10D00,0x10D23,1},{0x10D30,0x10D39,2},{0x10D40,0x10D49,2},
{0x10D4A,0x10D65,1},{0x10D6F,0x10D85,1},{0x10E60,0x10E7E,2},{0x10E80,0x10EA9,1},
{0x10EB0,0x10EB1,1},{0x10EC2,0x10EC4,1},{0x10F00,0x10F1C,1},{0x10F1D,0x10F26,2},
{0x10F27,0x10F27,1},{0x10F30,0x10F45,1},{0x10F51,0x10F54,2},{0x10F70,0x10F81,1},
{0x10FB0,0x10FC4,1},{0x10FC5,0x10FCB,2},{0x10FE0,0x10FF6,1},{0x11003,0x11037,1},
{0x11052,0x1106F,2},{0x11071,0x11072,1},{0x11075,0x11075,1},{0x11083,0x110AF,1},
{0x110D0,0x110E8,1},{0x110F0,0x110F9,2},{0x11103,0x11126,1},{0x11136,0x1113F,2},
{0x11144,0x11144,1},{0x11147,0x11147,1},{0x11150,0x11172,1},{0x11176,0x11176,1},
{0x11183,0x111B2,1},{0x111C1,0x111C4,1},{0x111D0,0x111D9,2},{0x111DA,0x111DA,1},
{0x111DC,0x111DC,1},{0x111E1,0x111F4,2},{0x11200,0x11211,1},{0x11213,0x1122B,1},
{0x1123F,0x11240,1},{0x11280,0x11286,1},{0x11288,0x11288,1},{0x1128A,0x1128D,1},
{0x1128F,0x1129D,1},{0x1129F,0x112A8,1},{0x112B0,0x112DE,1},{0x112F0,0x112F9,2},
{0x11305,0x1130C,1},{0x1130F,0x11310,1},{0x11313,0x11328,1},{0x1132A,0x11330,1},
{0x11332,0x11333,1},{0x11335,0x11339,1},{0x1133D,0x1133D,1},{0x11350,0x11350,1},
{0x1135D,0x11361,1},{0x11380,0x11389,1},{0x1138B,0x1138B,1},{0x1138E,0x1138E,1},
{0x11390,0x113B5,1},{0x113B7,0x113B7,1},{0x113D1,0x113D1,1},{0x113D3,0x113D3,1},
{0x11400,0x11434,1},{0x11447,0x1144A,1},{0x11450,0x11459,2},{0x1145F,0x11461,1},
{0x11480,0x114AF,1},{0x114C4,0x114C5,1},{0x114C7,0x114C7,1},{0x114D0,0x114D9,2},
{0x11580,0x115AE,1},{0x115D8,0x115DB,1},{0x11600,0x1162F,1},{0x11644,0x11644,1},
{0x11650,0x11659,2},{0x11680,0x116AA,1},{0x116B8,0x116B8,1},{0x116C0,0x116C9,2},
{0x116D0,0x116E3,2},{0x11700,0x1171A,1},{0x11730,0x1173B,2},{0x11740,0x11746,1},
{0x11800,0x1182B,1},{0x118A0,0x118DF,1},{0x118E0,0x118F2,2},{0x118FF,0x11906,1},
{0x11909,0x11909,1},{0x1190C,0x11913,1},{0x11915,0x11916,1},{0x11918,0x1192F,1},
{0x1193F,0x1193F,1},{0x11941,0x11941,1},{0x11950,0x11959,2},{0x119A0,0x119A7,1},
{0x119AA,0x119D0,1},{0x119E1,0x119E1,1},{0x119E3,0x119E3,1},{0x11A00,0x11A00,1},
{0x11A0B,0x11A32,1},{0x11A3A,0x11A3A,1},{0x11A50,0x11A50,1},{0x11A5C,0x11A89,1},
{0x11A9D,0x11A9D,1},{0x11AB0,0x11AF8,1},{0x11BC0,0x11BE0,1},{0x11BF0,0x11BF9,2},
{0x11C00,0x11C08,1},{0x11C0A,0x11C2E,1},{0x11C40,0x11C40,1},{0x11C50,0x11C6C,2},
{0x11C72,0x11C8F,1},{0x11D00,0x11D06,1},{0x11D08,0x11D09,1},{0x11D0B,0x11D30,1},
{0x11D46,0x11D46,1},{0x11D50,0x11D59,2},{0x11D60,0x11D65,1},{0x11D67,0x11D68,1},
{0x11D6A,0x11D89,1},{0x11D98,0x11D98,1},{0x11DA0,0x11DA9,2},{0x11EE0,0x11EF2,1},
{0x11F02,0x11F02,1},{0x11F04,0x11F10,1},{0x11F12,0x11F33,1},{0x11F50,0x11F59,2},
{0x11FB0,0x11FB0,1},{0x11FC0,0x11FD4,2},{0x12000,0x12399,1},{0x12400,0x1246E,2},
{0x12480,0x12543,1},{0x12F90,0x12FF0,1},{0x13000,0x1342F,1},{0x13441,0x13446,1},
{0x13460,0x143FA,1},{0x14400,0x14646,1},{0x16100,0x1611D,1},{0x16130,0x16139,2},
{0x16800,0x16A38,1},{0x16A40,0x16A5E,1},{0x16A60,0x16A69,2},{0x16A70,0x16ABE,1},
{0x16AC0,0x16AC9,2},{0x16AD0,0x16AED,1},{0x16B00,0x16B2F,1},{0x16B40,0x16B43,1},
{0x16B50,0x16B59,2},{0x16B5B,0x16B61,2},{0x16B63,0x16B77,1},{0x16B7D,0x16B8F,1},
{0x16D40,0x16D6C,1},{0x16D70,0x16D79,2},{0x16E40,0x16E7F,1},{0x16E80,0x16E96,2},
{0x16F00,0x16F4A,1},{0x16F50,0x16F50,1},{0x16F93,0x16F9F,1},{0x16FE0,0x16FE1,1},
{0x16FE3,0x16FE3,1},{0x17000,0x187F7,1},{0x18800,0x18CD5,1},{0x18CFF,0x18D08,1},
{0x1AFF0,0x1AFF3,1},{0x1AFF5,0x1AFFB,1},{0x1AFFD,0x1AFFE,1},{0x1B000,0x1B122,1},
{0x1B132,0x1B132,1},{0x1B150,0x1B152,1},{0x1B155,0x1B155,1},{0x1B164,0x1B167,1},
{0x1B170,0x1B2FB,1},{0x1BC00,0x1BC6A,1},{0x1BC70,0x1BC7C,1},{0x1BC80,0x1BC88,1},
{0x1BC90,0x1BC99,1},{0x1CCF0,0x1CCF9,2},{0x1D2C0,0x1D2D3,2},{0x1D2E0,0x1D2F3,2},
{0x1D360,0x1D378,2},{0x1D400,0x1D454,1},{0x1D456,0x1D49C,1},{0x1D49E,0x1D49F,1},
{0x1D4A2,0x1D4A2,1},{0x1D4A5,0x1D4A6,1},{0x1D4A9,0x1D4AC,1},{0x1D4AE,0x1D4B9,1},
{0x1D4BB,0x1D4BB,1},{0x1D4BD,0x1D4C3,1},{0x1D4C5,0x1D505,1},{0x1D507,0x1D50A,1},
{0x1D50D,0x1D514,1},{0x1D516,0x1D51C,1},{0x1D51E,0x1D539,1},{0x1D53B,0x1D53E,1},
{0x1D540,0x1D544,1},{0x1D546,0x1D546,1},{0x1D54A,0x1D550,1},{0x1D552,0x1D6A5,1},
{0x1D6A8,0x1D6C0,1},{0x1D6C2,0x1D6DA,1},{0x1D6DC,0x1D6FA,1},{0x1D6FC,0x1D714,1},
{0x1D716,0x1D734,1},{0x1D736,0x1D74E,1},{0x1D750,0x1D76E,1},{0x1D770,0x1D788,1},
{0x1D78A,0x1D7A8,1},{0x1D7AA,0x1D7C2,1},{0x1D7C4,0x1D7CB,1},{0x1D7CE,0x1D7FF,2},
{0x1DF00,0x1DF1E,1},{0x1DF25,0x1DF2A,1},{0x1E030,0x1E06D,1},{0x1E100,0x1E12C,1},
{0x1E137,0x1E13D,1},{0x1E140,0x1E149,2},{0x1E14E,0x1E14E,1},{0x1E290,0x1E2AD,1},
{0x1E2C0,0x1E2EB,1},{0x1E2F0,0x1E2F9,2},{0x1E4D0,0x1E4EB,1},{0x1E4F0,0x1E4F9,2},
{0x1E5D0,0x1E5ED,1},{0x1E5F0,0x1E5F0,1},{0x1E5F1,0x1E5FA,2},{0x1E7E0,0x1E7E6,1},
{0x1E7E8,0x1E7EB,1},{0x1E7ED,0x1E7EE,1},{0x1E7F0,0x1E7FE,1},{0x1E800,0x1E8C4,1},
{0x1E8C7,0x1E8CF,2},{0x1E900,0x1E943,1},{0x1E94B,0x1E94B,1},{0x1E950,0x1E959,2},
{0x1EC71,0x1ECAB,2},{0x1ECAD,0x1ECAF,2},{0x1ECB1,0x1ECB4,2},{0x1ED01,0x1ED2D,2},
{0x1ED2F,0x1ED3D,2},{0x1EE00,0x1EE03,1},{0x1EE05,0x1EE1F,1},{0x1EE21,0x1EE22,1},
{0x1EE24,0x1EE24,1},{0x1EE27,0x1EE27,1},{0x1EE29,0x1EE32,1},{0x1EE34,0x1EE37,1},
{0x1EE39,0x1EE39,1},{0x1EE3B,0x1EE3B,1},{0x1EE42,0x1EE42,1},{0x1EE47,0x1EE47,1},
{0x1EE49,0x1EE49,1},{0x1EE4B,0x1EE4B,1},{0x1EE4D,0x1EE4F,1},{0x1EE51,0x1EE52,1},
{0x1EE54,0x1EE54,1},{0x1EE57,0x1EE57,1},{0x1EE59,0x1EE59,1},{0x1EE5B,0x1EE5B,1},
{0x1EE5D,0x1EE5D,1},{0x1EE5F,0x1EE5F,1},{0x1EE61,0x1EE62,1},{0x1EE64,0x1EE64,1},
{0x1EE67,0x1EE6A,1},{0x1EE6C,0x1EE72,1},{0x1EE74,0x1EE77,1},{0x1EE79,0x1EE7C,1},
{0x1EE7E,0x1EE7E,1},{0x1EE80,0x1EE89,1},{0x1EE8B,0x1EE9B,1},{0x1EEA1,0x1EEA3,1},
{0x1EEA5,0x1EEA9,1},{0x1EEAB,0x1EEBB,1},{0x1F100,0x1F10C,2},{0x1FBF0,0x1FBF9,2},
{0x20000,0x2A6DF,1},{0x2A700,0x2B739,1},{0x2B740,0x2B81D,1},{0x2B820,0x2CEA1,1},
{0x2CEB0,0x2EBE0,1},{0x2EBF0,0x2EE5D,1},{0x2F800,0x2FA1D,1},{0x30000,0x3134A,1},
{0x31350,0x323AF,1}
};
/* >>unicode_tables end */
/* why: 2^24 ids is 64x the largest real vocab (256k) and keeps every id and count in an int */
#define AMK__TOK_MAX_TOKENS (1 << 24)
/* The default system prompts of the chat templates AMK knows (a template holding one of them
   gets it when no system prompt is given). */
static const char *const amk__tok_systems[] = {
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face", /* SmolLM2 */
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."  /* Qwen2.5 */
};
#define AMK__TOK_LLAMA3_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define AMK__TOK_QWEN2_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* A merge rule keyed by the ids of its two parts. rank < 0 marks an empty slot. */
typedef struct amk__tok_merge { uint64_t key; int rank, id; } amk__tok_merge;

struct amk_tokenizer {
    int n_tokens;
    char *arena;                 /* every token string, then every token's decoded bytes */
    size_t *str_off, *str_len;   /* [n_tokens] token string (byte alphabet) in arena */
    size_t *bytes_off, *bytes_len; /* [n_tokens] decoded bytes in arena */
    unsigned char *special;      /* [n_tokens] 1 = matched verbatim, decoded as its text */
    int *tok_slots; size_t tok_mask;           /* open addressing: string -> id, -1 empty */
    amk__tok_merge *merge_slots; size_t merge_mask; /* open addressing: (a, b) -> rank, result */
    int *specials; int n_specials; /* special ids grouped by first byte, longest first */
    int special_start[257];      /* specials[special_start[b] .. special_start[b+1]) start with b */
    int byte_id[256];            /* the one-byte token of each byte value (SentencePiece: <0xXX>), -1 if none */
    amk_pretok pretok;
    int bos, eos, add_bos, ignore_merges;
    int spm;                     /* SentencePiece BPE (pretok SPM or METASPACE) */
    int space_prefix;            /* SentencePiece: 0 none, 1 "▁" before text at the input's start, 2 before every stretch */
    int prefix_once;             /* SentencePiece: no prefix where the stretch begins with a space (HF Metaspace) */
    int unk, fuse_unk;           /* SentencePiece: the unknown token (-1: none) and whether runs of it fuse */
    int nfc;                     /* byte-level: NFC before the pre-tokenizer (Qwen2's tokenizer.json) */
    amk_chat_format chat;        /* the chat format (amk__tok_chat_detect) */
    int chat_system;             /* its default system prompt: an index of amk__tok_systems, -1 none */
};

/* ---- the byte alphabet (GPT-2 encoder.py bytes_to_unicode) ----------------------------------- */

/* The code point standing for byte b: printable Latin-1 bytes stand for themselves, the other 68
   (0x00-0x20, 0x7F-0xA0, 0xAD) for U+0100, U+0101, ... in increasing byte order. */
AMK__FN uint32_t amk__tok_byte_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    if (b <= 0x20) return 0x100u + (uint32_t)b;             /* 33 bytes: U+0100..U+0120 */
    if (b <= 0xA0) return 0x121u + (uint32_t)(b - 0x7F);    /* 34 bytes: U+0121..U+0142 */
    return 0x143u;                                          /* 0xAD */
}
/* The byte a code point of the alphabet stands for, or -1. */
AMK__FN int amk__tok_cp_byte(uint32_t cp) {
    if (cp <= 0xFF) return amk__tok_byte_cp((int)cp) == cp ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* ---- UTF-8 and character classes ------------------------------------------------------------- */

#define AMK__TOK_INVALID 0xFFFFFFFFu /* the "code point" of a byte that is not valid UTF-8 */

/* Decodes the character at s[0..avail) (avail >= 1) strictly (>>impl_common's amk__utf8_seq_len: no
   overlongs, surrogates or values above U+10FFFF); returns its length, 1 for an invalid byte
   (*cp = AMK__TOK_INVALID). */
AMK__FN size_t amk__tok_utf8(const unsigned char *s, size_t avail, uint32_t *cp) {
    int n = amk__utf8_seq_len(s, avail), i;
    uint32_t v;
    if (n == 0) { *cp = AMK__TOK_INVALID; return 1; }
    v = n == 1 ? s[0] : s[0] & (0xFFu >> (n + 1)); /* the lead byte's payload bits */
    for (i = 1; i < n; i++) v = (v << 6) | (s[i] & 0x3Fu);
    *cp = v;
    return (size_t)n;
}

/* Character classes of the pre-tokenizer regexes. END is the end of the text (or, for SMOLLM's
   second pass, a \p{N} character, which the first pass already cut off). */
enum { AMK__TC_OTHER = 0, AMK__TC_L = AMK__UNI_L, AMK__TC_N = AMK__UNI_N, AMK__TC_W = AMK__UNI_W,
       AMK__TC_END = 4 };

AMK__FN int amk__tok_class_cp(uint32_t cp) {
    size_t lo = 0, hi = sizeof amk__uni_ranges / sizeof amk__uni_ranges[0];
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return AMK__TC_L;
        if (cp >= '0' && cp <= '9') return AMK__TC_N;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return AMK__TC_W;
        return AMK__TC_OTHER;
    }
    while (lo < hi) { /* the last range with lo <= cp */
        size_t mid = lo + (hi - lo) / 2;
        if (amk__uni_ranges[mid].lo <= cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && cp <= amk__uni_ranges[lo - 1].hi) return amk__uni_ranges[lo - 1].cls;
    return AMK__TC_OTHER;
}

/* A cursor over the text a pre-tokenizer matches. */
typedef struct amk__tok_text {
    const unsigned char *s;
    size_t len;
    int n_is_end; /* SMOLLM's second pass: \p{N} reads as the end */
} amk__tok_text;

/* The class of the character at pos (END past the text), its code point and length. */
AMK__FN int amk__tok_peek(const amk__tok_text *x, size_t pos, uint32_t *cp, size_t *n) {
    int c;
    if (pos >= x->len) { *cp = AMK__TOK_INVALID; *n = 0; return AMK__TC_END; }
    *n = amk__tok_utf8(x->s + pos, x->len - pos, cp);
    c = *cp == AMK__TOK_INVALID ? AMK__TC_OTHER : amk__tok_class_cp(*cp);
    if (c == AMK__TC_N && x->n_is_end) { *n = 0; return AMK__TC_END; }
    return c;
}

/* pos after the run of class-c characters starting at pos. */
AMK__FN size_t amk__tok_run(const amk__tok_text *x, size_t pos, int c) {
    uint32_t cp;
    size_t n;
    while (amk__tok_peek(x, pos, &cp, &n) == c) pos += n;
    return pos;
}

/* \s+(?!\S)|\s+ at pos (a whitespace character): the whole run when the text ends after it or
   the run is one character, else the run less its last character (left for the next piece). */
AMK__FN size_t amk__tok_space_run(const amk__tok_text *x, size_t pos) {
    uint32_t cp;
    size_t n, q = pos, last = pos;
    int c;
    while ((c = amk__tok_peek(x, q, &cp, &n)) == AMK__TC_W) { last = q; q += n; }
    if (c == AMK__TC_END || last == pos) return q;
    return last;
}

/* One match of 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at pos
   (not at the end); returns its end. */
AMK__FN size_t amk__tok_match_gpt2(const amk__tok_text *x, size_t pos) {
    const unsigned char *s = x->s;
    uint32_t cp, cp1;
    size_t n, n1, p = pos;
    int c = amk__tok_peek(x, pos, &cp, &n), c1;
    if (cp == '\'' && pos + 1 < x->len) {
        unsigned a = s[pos + 1], b = pos + 2 < x->len ? s[pos + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    }
    if (cp == ' ') {
        c1 = amk__tok_peek(x, pos + 1, &cp1, &n1);
        if (c1 == AMK__TC_L || c1 == AMK__TC_N || c1 == AMK__TC_OTHER) { c = c1; p = pos + 1; }
    }
    if (c == AMK__TC_L || c == AMK__TC_N || c == AMK__TC_OTHER) return amk__tok_run(x, p, c);
    return amk__tok_space_run(x, pos);
}

/* ASCII letter case fold for the (?i:...) contractions; U+017F LONG S folds to 's' in Unicode
   simple case folding, which the regex engines of HF tokenizers apply. */
AMK__FN uint32_t amk__tok_fold(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp == 0x17F) return 's';
    return cp;
}

/* One match of the Llama-3 regex (REFERENCE §3.3) at pos (not at the end); returns its end.
   max_digits 3 (\p{N}{1,3}), or 1: Qwen2's regex, the same with \p{N} alone. */
AMK__FN size_t amk__tok_match_llama3(const amk__tok_text *x, size_t pos, int max_digits) {
    uint32_t cp, cp1, cp2;
    size_t n, n1, n2, p, q, nl_end = 0;
    int c = amk__tok_peek(x, pos, &cp, &n), c1, k;
    if (cp == '\'') { /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        amk__tok_peek(x, pos + 1, &cp1, &n1);
        cp1 = amk__tok_fold(cp1);
        if (cp1 == 's' || cp1 == 't' || cp1 == 'm' || cp1 == 'd') return pos + 1 + n1;
        if (cp1 == 'r' || cp1 == 'v' || cp1 == 'l') {
            amk__tok_peek(x, pos + 1 + n1, &cp2, &n2);
            cp2 = amk__tok_fold(cp2);
            if ((cp1 != 'l' && cp2 == 'e') || (cp1 == 'l' && cp2 == 'l')) return pos + 1 + n1 + n2;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c == AMK__TC_L) return amk__tok_run(x, pos, AMK__TC_L);
    if (c != AMK__TC_N && cp != '\r' && cp != '\n' &&
        amk__tok_peek(x, pos + n, &cp1, &n1) == AMK__TC_L)
        return amk__tok_run(x, pos + n, AMK__TC_L);
    /* \p{N}{1,3} (Qwen2: \p{N}) */
    if (c == AMK__TC_N) {
        for (p = pos, k = 0; k < max_digits && amk__tok_peek(x, p, &cp1, &n1) == AMK__TC_N; k++) p += n1;
        return p;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    p = pos;
    if (cp == ' ' && amk__tok_peek(x, pos + 1, &cp1, &n1) == AMK__TC_OTHER) { c = AMK__TC_OTHER; p = pos + 1; }
    if (c == AMK__TC_OTHER) {
        p = amk__tok_run(x, p, AMK__TC_OTHER);
        while (p < x->len && (x->s[p] == '\r' || x->s[p] == '\n')) p++;
        return p;
    }
    /* \s*[\r\n]+ : the whitespace run up to and including its last \r or \n */
    for (q = pos; (c1 = amk__tok_peek(x, q, &cp1, &n1)) == AMK__TC_W; q += n1)
        if (cp1 == '\r' || cp1 == '\n') nl_end = q + n1;
    if (nl_end) return nl_end;
    return amk__tok_space_run(x, pos);
}

/* "▁" (U+2581), SentencePiece's space, in UTF-8. */
#define AMK__TOK_SPACE "\xE2\x96\x81"

/* The end of the pre-tokenizer piece that starts at pos < len. */
AMK__FN size_t amk__tok_next_piece(amk_pretok p, const unsigned char *s, size_t len, size_t pos) {
    amk__tok_text x;
    uint32_t cp;
    size_t n;
    x.s = s;
    x.len = len;
    x.n_is_end = 0;
    if (p == AMK_PRETOK_LLAMA3 || p == AMK_PRETOK_QWEN2) return amk__tok_match_llama3(&x, pos, p == AMK_PRETOK_LLAMA3 ? 3 : 1);
    if (p == AMK_PRETOK_SPM) return len;
    if (p == AMK_PRETOK_METASPACE) { /* up to the next "▁" after the first character */
        pos += amk__tok_utf8(s + pos, len - pos, &cp);
        while (pos < len && !(len - pos >= 3 && memcmp(s + pos, AMK__TOK_SPACE, 3) == 0)) pos++;
        return pos;
    }
    if (p == AMK_PRETOK_SMOLLM) {
        /* pass 1 (HF Digits, individual): every \p{N} alone; pass 2 sees the text between them */
        if (amk__tok_peek(&x, pos, &cp, &n) == AMK__TC_N) return pos + n;
        x.n_is_end = 1;
    }
    return amk__tok_match_gpt2(&x, pos);
}

AMK_API int amk_tokenizer_pretokenize(amk_pretok p, const char *text, size_t len, size_t *ends,
                                      int cap) {
    size_t pos = 0;
    int count = 0;
    if ((!text && len) || cap < 0 || (!ends && cap > 0)) return -1;
    if ((int)p < (int)AMK_PRETOK_SMOLLM || (int)p > (int)AMK_PRETOK_METASPACE) return -1;
    while (pos < len) {
        pos = amk__tok_next_piece(p, (const unsigned char *)text, len, pos);
        if (count == INT_MAX) return -1;
        if (count < cap) ends[count] = pos;
        count++;
    }
    return count;
}

/* ---- hash maps ------------------------------------------------------------------------------- */

AMK__FN uint64_t amk__tok_hash(const char *s, size_t n) { /* FNV-1a */
    uint64_t h = 0xCBF29CE484222325ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}
AMK__FN size_t amk__tok_hash_pair(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull; /* why: Fibonacci hashing spreads consecutive ids */
    return (size_t)(key ^ (key >> 31));
}

/* Table size: a power of two at least twice n, so probes stay short. 0 on overflow. */
AMK__FN size_t amk__tok_table_size(size_t n) {
    size_t m = 16;
    while (m < 2 * n) {
        if (m > SIZE_MAX / 4) return 0;
        m *= 2;
    }
    return m;
}

AMK__FN int amk__tok_lookup(const amk_tokenizer *t, const char *s, size_t n) {
    size_t i = (size_t)amk__tok_hash(s, n) & t->tok_mask;
    int id;
    while ((id = t->tok_slots[i]) >= 0) {
        if (t->str_len[id] == n && memcmp(t->arena + t->str_off[id], s, n) == 0) return id;
        i = (i + 1) & t->tok_mask;
    }
    return -1;
}

AMK__FN const amk__tok_merge *amk__tok_merge_get(const amk_tokenizer *t, int a, int b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = amk__tok_hash_pair(key) & t->merge_mask;
    while (t->merge_slots[i].rank >= 0) {
        if (t->merge_slots[i].key == key) return &t->merge_slots[i];
        i = (i + 1) & t->merge_mask;
    }
    return NULL;
}

/* ---- building -------------------------------------------------------------------------------- */

/* One merge rule as two strings (not NUL-terminated). */
typedef struct amk__tok_pair { const char *a; size_t alen; const char *b; size_t blen; } amk__tok_pair;

/* What every front end (spec, tokenizer.json, GGUF) hands to amk__tok_build. */
typedef struct amk__tok_src {
    int n_tokens;
    const char *const *tokens; const size_t *token_lens; /* lens may be NULL: NUL-terminated */
    const unsigned char *special;                        /* [n_tokens] or NULL */
    int n_merges; const amk__tok_pair *merges;
    const float *scores;         /* SentencePiece without merges: [n_tokens], merges derived from them */
    const unsigned char *is_byte; /* SentencePiece: [n_tokens] 1 for a <0xXX> token, or NULL: by its string */
    amk_pretok pretok;
    int bos, eos, add_bos, ignore_merges;
    int space_prefix, prefix_once, unk, fuse_unk, nfc; /* as amk_tokenizer's */
    const char *chat_template; size_t chat_template_len; /* the model's, or NULL */
} amk__tok_src;

AMK_API void amk_tokenizer_free(amk_tokenizer *t) {
    if (!t) return;
    amk__free(t->arena);
    amk__free(t->str_off);
    amk__free(t->str_len);
    amk__free(t->bytes_off);
    amk__free(t->bytes_len);
    amk__free(t->special);
    amk__free(t->tok_slots);
    amk__free(t->merge_slots);
    amk__free(t->specials);
    amk__free(t);
}

/* Decodes token string s (byte alphabet) into out; a string with a character outside the
   alphabet decodes to itself, as HF's ByteLevel decoder does. Returns the length (<= n). */
AMK__FN size_t amk__tok_decode_string(const char *s, size_t n, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k = 0;
    while (i < n) {
        uint32_t cp;
        size_t m = amk__tok_utf8(u + i, n - i, &cp);
        int b = cp == AMK__TOK_INVALID ? -1 : amk__tok_cp_byte(cp);
        if (b < 0) {
            if (n) memcpy(out, s, n);
            return n;
        }
        out[k++] = (char)b;
        i += m;
    }
    return k;
}

/* The byte b of a SentencePiece byte token "<0xHH>" (upper-case hex, as SentencePiece writes
   them), or -1. */
AMK__FN int amk__tok_spm_byte(const char *s, size_t n) {
    int i, v = 0;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    for (i = 3; i < 5; i++) {
        const char c = s[i];
        if (c >= '0' && c <= '9') v = 16 * v + (c - '0');
        else if (c >= 'A' && c <= 'F') v = 16 * v + (c - 'A' + 10);
        else return -1;
    }
    return v;
}

/* A SentencePiece token's bytes: its byte (a byte token), else its text with each "▁" a space.
   Returns the length (<= n). */
AMK__FN size_t amk__tok_spm_decode(const char *s, size_t n, int byte, char *out) {
    size_t i = 0, k = 0;
    if (byte >= 0) { out[0] = (char)byte; return 1; }
    while (i < n) {
        if (n - i >= 3 && memcmp(s + i, AMK__TOK_SPACE, 3) == 0) { out[k++] = ' '; i += 3; }
        else out[k++] = s[i++];
    }
    return k;
}

/* Puts merge (a, b) -> r at rank into the table (room assured); a pair already there keeps its
   rank (the first, the lowest). */
AMK__FN void amk__tok_merge_put(amk_tokenizer *t, int a, int b, int r, int rank) {
    const uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t h;
    if (amk__tok_merge_get(t, a, b)) return;
    h = amk__tok_hash_pair(key) & t->merge_mask;
    while (t->merge_slots[h].rank >= 0) h = (h + 1) & t->merge_mask;
    t->merge_slots[h].key = key;
    t->merge_slots[h].rank = rank;
    t->merge_slots[h].id = r;
}

/* A token and its score, for ranking. */
typedef struct amk__tok_scored { float score; int id; } amk__tok_scored;
AMK__FN int amk__tok_by_score(const void *pa, const void *pb) {
    const amk__tok_scored *a = (const amk__tok_scored *)pa, *b = (const amk__tok_scored *)pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* SentencePiece merges from scores (llama.cpp's tokenizer merges two symbols when their text is a
   token, the highest score first, ties leftmost): every split of a token's text into two tokens
   (at a character boundary) is a merge into it, ranked by the token's score, equal scores one
   rank (the heap then takes the leftmost). Specials, byte and empty tokens take no part, nor
   tokens longer than AMK__TOK_SPM_MAX_MERGE bytes (why: the splits of a token cost its length
   squared; SentencePiece's pieces are at most 16 characters by default, and a hostile file must
   not make this quadratic in its size). scores NaN rank last. */
#define AMK__TOK_SPM_MAX_MERGE 256
AMK__FN amk_result amk__tok_spm_merges(amk_tokenizer *t, const float *scores, const unsigned char *is_byte) {
    amk__tok_scored *order = (amk__tok_scored *)amk__malloc((size_t)t->n_tokens * sizeof *order);
    int *rank = (int *)amk__malloc((size_t)t->n_tokens * sizeof(int));
    size_t n_pairs = 0, m, p;
    int i, pass, r = 0;
    if (!order || !rank) { amk__free(order); amk__free(rank); return AMK_ERR_OUT_OF_MEMORY; }
    for (i = 0; i < t->n_tokens; i++) {
        order[i].score = scores[i] == scores[i] ? scores[i] : -HUGE_VALF;
        order[i].id = i;
    }
    qsort(order, (size_t)t->n_tokens, sizeof *order, amk__tok_by_score);
    for (i = 0; i < t->n_tokens; i++) {
        if (i > 0 && order[i].score != order[i - 1].score) r++;
        rank[order[i].id] = r;
    }
    amk__free(order);
    for (pass = 0; pass < 2; pass++) { /* count the pairs, then put them */
        for (i = 0; i < t->n_tokens; i++) {
            const char *s = t->arena + t->str_off[i];
            const size_t n = t->str_len[i];
            if (t->special[i] || n < 2 || n > AMK__TOK_SPM_MAX_MERGE || (is_byte && is_byte[i])) continue;
            for (p = 1; p < n; p++) {
                int a, b;
                if (((unsigned char)s[p] & 0xC0) == 0x80) continue; /* inside a character */
                a = amk__tok_lookup(t, s, p);
                b = amk__tok_lookup(t, s + p, n - p);
                if (a < 0 || b < 0 || t->special[a] || t->special[b]) continue;
                if (pass == 0) n_pairs++;
                else amk__tok_merge_put(t, a, b, i, rank[i]);
            }
        }
        if (pass == 0) {
            m = amk__tok_table_size(n_pairs);
            t->merge_slots = m ? (amk__tok_merge *)amk__malloc(m * sizeof(amk__tok_merge)) : NULL;
            if (!t->merge_slots) { amk__free(rank); return AMK_ERR_OUT_OF_MEMORY; }
            t->merge_mask = m - 1;
            for (p = 0; p < m; p++) {
                t->merge_slots[p].key = 0;
                t->merge_slots[p].rank = -1;
                t->merge_slots[p].id = -1;
            }
        }
    }
    amk__free(rank);
    return AMK_OK;
}

/* The chat format and default system prompt of t: from the chat template's text (tmpl, may be
   NULL) where it has one of the formats' markers, else from the vocabulary (amk_tokenizer_chat_format). */
AMK__FN void amk__tok_chat_detect(amk_tokenizer *t, const char *tmpl, size_t n) {
    char *z = NULL;
    size_t i;
    t->chat = AMK_CHAT_NONE;
    t->chat_system = -1;
    if (tmpl && n && (z = (char *)amk__malloc(n + 1)) != NULL) { /* why a copy: strstr needs the NUL */
        memcpy(z, tmpl, n);
        z[n] = 0;
        t->chat = strstr(z, "<|im_start|>") ? AMK_CHAT_CHATML : strstr(z, "<|start_header_id|>") ? AMK_CHAT_LLAMA3
                : strstr(z, "<<SYS>>") ? AMK_CHAT_LLAMA2 : strstr(z, "[INST]") ? AMK_CHAT_MISTRAL : AMK_CHAT_NONE;
        for (i = 0; i < sizeof amk__tok_systems / sizeof amk__tok_systems[0] && t->chat == AMK_CHAT_CHATML; i++)
            if (strstr(z, amk__tok_systems[i])) { t->chat_system = (int)i; break; }
        amk__free(z);
        if (t->chat != AMK_CHAT_NONE) return;
    }
    if (amk__tok_lookup(t, "<|im_start|>", 12) >= 0) {
        t->chat = AMK_CHAT_CHATML;
        if (t->pretok == AMK_PRETOK_SMOLLM) t->chat_system = 0;
    } else if (amk__tok_lookup(t, "<|start_header_id|>", 19) >= 0) {
        t->chat = AMK_CHAT_LLAMA3;
    } else if (t->spm) {
        t->chat = amk__tok_lookup(t, "[INST]", 6) >= 0 ? AMK_CHAT_MISTRAL : AMK_CHAT_LLAMA2;
    }
}

/* Groups the special ids by first byte, longest first in each group, so encode tries the longest
   match at a position first. */
AMK__FN amk_result amk__tok_build_specials(amk_tokenizer *t) {
    int i, b, n = 0, *fill;
    int count[256];
    memset(count, 0, sizeof count);
    for (i = 0; i < t->n_tokens; i++)
        if (t->special[i] && t->bytes_len[i] > 0) { count[(unsigned char)t->arena[t->bytes_off[i]]]++; n++; }
    t->specials = (int *)amk__malloc((size_t)(n ? n : 1) * sizeof(int));
    fill = (int *)amk__malloc(256 * sizeof(int));
    if (!t->specials || !fill) { amk__free(fill); return AMK_ERR_OUT_OF_MEMORY; }
    t->special_start[0] = 0;
    for (b = 0; b < 256; b++) {
        t->special_start[b + 1] = t->special_start[b] + count[b];
        fill[b] = t->special_start[b];
    }
    for (i = 0; i < t->n_tokens; i++) {
        int j, lo;
        if (!t->special[i] || t->bytes_len[i] == 0) continue;
        b = (unsigned char)t->arena[t->bytes_off[i]];
        lo = t->special_start[b];
        /* insertion keeps the bucket longest first (buckets are tiny: a few specials share a byte) */
        for (j = fill[b]++; j > lo && t->bytes_len[t->specials[j - 1]] < t->bytes_len[i]; j--)
            t->specials[j] = t->specials[j - 1];
        t->specials[j] = i;
    }
    t->n_specials = n;
    amk__free(fill);
    return AMK_OK;
}

AMK__FN amk_result amk__tok_build(const amk__tok_src *src, amk_tokenizer **out, amk_diag *d) {
    amk_tokenizer *t;
    size_t total = 0, pos, m;
    int i, b;
    char *cat = NULL;
    size_t cat_cap = 0;
    *out = NULL;
    if (src->n_tokens <= 0 || src->n_tokens > AMK__TOK_MAX_TOKENS)
        return amk__fail(d, AMK_ERR_PARSE, "tokenizer: %d tokens (expected 1..%d)", src->n_tokens,
                         AMK__TOK_MAX_TOKENS);
    if (src->n_merges < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: negative merge count");
    if (src->bos < -1 || src->bos >= src->n_tokens || src->eos < -1 || src->eos >= src->n_tokens)
        return amk__fail(d, AMK_ERR_PARSE, "tokenizer: bos %d or eos %d is not a token id", src->bos,
                         src->eos);
    t = (amk_tokenizer *)amk__calloc(1, sizeof *t);
    if (!t) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    t->n_tokens = src->n_tokens;
    t->pretok = src->pretok;
    t->bos = src->bos;
    t->eos = src->eos;
    t->add_bos = src->add_bos ? 1 : 0;
    t->ignore_merges = src->ignore_merges ? 1 : 0;
    t->spm = src->pretok == AMK_PRETOK_SPM || src->pretok == AMK_PRETOK_METASPACE;
    t->space_prefix = src->space_prefix;
    t->prefix_once = src->prefix_once ? 1 : 0;
    t->unk = src->unk;
    t->fuse_unk = src->fuse_unk ? 1 : 0;
    t->nfc = src->nfc ? 1 : 0;
    t->str_off = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->str_len = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->bytes_off = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->bytes_len = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->special = (unsigned char *)amk__calloc((size_t)t->n_tokens, 1);
    if (!t->str_off || !t->str_len || !t->bytes_off || !t->bytes_len || !t->special) goto oom;
    for (i = 0; i < t->n_tokens; i++) {
        const char *s = src->tokens[i];
        size_t n = src->token_lens ? src->token_lens[i] : (s ? strlen(s) : 0);
        uint64_t sum;
        if (!s && n) {
            amk_tokenizer_free(t);
            return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: token %d is NULL", i);
        }
        if (!amk__add_u64(total, n, &sum) || !amk__add_u64(sum, sum, &sum) || sum > SIZE_MAX - 1) {
            amk_tokenizer_free(t);
            return amk__fail(d, AMK_ERR_PARSE, "tokenizer: token strings too large");
        }
        t->str_len[i] = n;
        total += n;
        t->special[i] = (unsigned char)(src->special && src->special[i]);
    }
    /* strings, then decoded bytes (never longer than their string) */
    t->arena = (char *)amk__malloc(2 * total + 1);
    if (!t->arena) goto oom;
    for (i = 0, pos = 0; i < t->n_tokens; i++) {
        t->str_off[i] = pos;
        if (t->str_len[i]) memcpy(t->arena + pos, src->tokens[i], t->str_len[i]);
        pos += t->str_len[i];
    }
    for (i = 0; i < t->n_tokens; i++) {
        const char *s = t->arena + t->str_off[i];
        t->bytes_off[i] = pos;
        if (t->special[i]) {
            if (t->str_len[i]) memcpy(t->arena + pos, s, t->str_len[i]);
            t->bytes_len[i] = t->str_len[i];
        } else if (t->spm) {
            const int byte = src->is_byte ? (src->is_byte[i] ? amk__tok_spm_byte(s, t->str_len[i]) : -1)
                                          : amk__tok_spm_byte(s, t->str_len[i]);
            t->bytes_len[i] = amk__tok_spm_decode(s, t->str_len[i], byte, t->arena + pos);
        } else {
            t->bytes_len[i] = amk__tok_decode_string(s, t->str_len[i], t->arena + pos);
        }
        pos += t->bytes_len[i];
    }

    /* string -> id; on duplicates the lowest id wins */
    m = amk__tok_table_size((size_t)t->n_tokens);
    if (!m) goto oom;
    t->tok_mask = m - 1;
    t->tok_slots = (int *)amk__malloc(m * sizeof(int));
    if (!t->tok_slots) goto oom;
    memset(t->tok_slots, 0xFF, m * sizeof(int)); /* all -1 */
    for (i = 0; i < t->n_tokens; i++) {
        const char *s = t->arena + t->str_off[i];
        size_t h;
        if (amk__tok_lookup(t, s, t->str_len[i]) >= 0) continue;
        h = (size_t)amk__tok_hash(s, t->str_len[i]) & t->tok_mask;
        while (t->tok_slots[h] >= 0) h = (h + 1) & t->tok_mask;
        t->tok_slots[h] = i;
    }
    for (b = 0; b < 256; b++) {
        unsigned char u[8];
        size_t n = t->spm ? (size_t)snprintf((char *)u, sizeof u, "<0x%02X>", b) : amk__utf8_put(u, amk__tok_byte_cp(b));
        t->byte_id[b] = amk__tok_lookup(t, (const char *)u, n);
    }
    if (src->unk < -1 || src->unk >= t->n_tokens) {
        amk_tokenizer_free(t);
        return amk__fail(d, AMK_ERR_PARSE, "tokenizer: unk %d is not a token id", src->unk);
    }
    if (src->scores && src->n_merges == 0) { /* SentencePiece from a GGUF: merges from the scores */
        if (amk__tok_spm_merges(t, src->scores, src->is_byte) != AMK_OK) goto oom;
        goto specials;
    }

    /* (a, b) -> rank and result; a repeated pair keeps its first (lowest) rank */
    m = amk__tok_table_size((size_t)src->n_merges);
    if (!m) goto oom;
    t->merge_mask = m - 1;
    t->merge_slots = (amk__tok_merge *)amk__malloc(m * sizeof(amk__tok_merge));
    if (!t->merge_slots) goto oom;
    for (pos = 0; pos < m; pos++) {
        t->merge_slots[pos].key = 0;
        t->merge_slots[pos].rank = -1;
        t->merge_slots[pos].id = -1;
    }
    for (i = 0; i < src->n_merges; i++) {
        const amk__tok_pair *pr = &src->merges[i];
        int ia = amk__tok_lookup(t, pr->a, pr->alen), ib = amk__tok_lookup(t, pr->b, pr->blen), ir;
        size_t need = pr->alen + pr->blen; /* both bounded by the input, no overflow */
        if (need > cat_cap) {
            char *nc = (char *)amk__realloc(cat, need);
            if (!nc) goto oom;
            cat = nc;
            cat_cap = need;
        }
        if (pr->alen) memcpy(cat, pr->a, pr->alen);
        if (pr->blen) memcpy(cat + pr->alen, pr->b, pr->blen);
        ir = amk__tok_lookup(t, cat, need);
        if (ia < 0 || ib < 0 || ir < 0) {
            amk__free(cat);
            amk_tokenizer_free(t);
            return amk__fail(d, AMK_ERR_PARSE, "tokenizer: merge %d ('%.*s' + '%.*s') names a token "
                             "not in the vocabulary", i, (int)(pr->alen > 64 ? 64 : pr->alen), pr->a,
                             (int)(pr->blen > 64 ? 64 : pr->blen), pr->b);
        }
        amk__tok_merge_put(t, ia, ib, ir, i);
    }
    amk__free(cat);
    cat = NULL;
specials:
    if (amk__tok_build_specials(t) != AMK_OK) goto oom;
    amk__tok_chat_detect(t, src->chat_template, src->chat_template_len);
    *out = t;
    return AMK_OK;
oom:
    amk__free(cat);
    amk_tokenizer_free(t);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
}

/* Splits "A B" at the first space after the first byte (llama.cpp's rule; with exactly one space
   it is HF's too). 0 if there is none. */
AMK__FN int amk__tok_split_merge(const char *s, size_t n, amk__tok_pair *out) {
    size_t i;
    for (i = 1; i < n; i++) {
        if (s[i] == ' ') {
            out->a = s;
            out->alen = i;
            out->b = s + i + 1;
            out->blen = n - i - 1;
            return 1;
        }
    }
    return 0;
}

AMK_API amk_result amk_tokenizer_create(const amk_tokenizer_spec *s, amk_tokenizer **out,
                                        amk_diag *d) {
    amk__tok_src src;
    amk__tok_pair *pairs = NULL;
    unsigned char *special = NULL;
    amk_result r;
    int i;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!s || !s->tokens || s->n_tokens <= 0 || s->n_tokens > AMK__TOK_MAX_TOKENS ||
        s->n_merges < 0 || (s->n_merges > 0 && !s->merges))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: bad spec (NULL tokens or merges, or "
                         "a count out of range)");
    if (s->pretok != AMK_PRETOK_SMOLLM && s->pretok != AMK_PRETOK_LLAMA3 && s->pretok != AMK_PRETOK_GPT2 &&
        s->pretok != AMK_PRETOK_QWEN2)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: pre-tokenizer %d is not a byte-level one", (int)s->pretok);
    pairs = (amk__tok_pair *)amk__malloc((size_t)(s->n_merges ? s->n_merges : 1) * sizeof *pairs);
    special = (unsigned char *)amk__calloc((size_t)s->n_tokens, 1);
    if (!pairs || !special) {
        amk__free(pairs);
        amk__free(special);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    for (i = 0; i < s->n_merges; i++) {
        const char *m = s->merges[i];
        size_t n = s->merge_lens ? s->merge_lens[i] : (m ? strlen(m) : 0);
        if (!m || !amk__tok_split_merge(m, n, &pairs[i])) {
            amk__free(pairs);
            amk__free(special);
            return amk__fail(d, AMK_ERR_PARSE, "tokenizer: merge %d is not \"A B\"", i);
        }
    }
    if (s->token_types)
        for (i = 0; i < s->n_tokens; i++) /* why: 3 control, 4 user-defined */
            special[i] = (unsigned char)(s->token_types[i] == 3 || s->token_types[i] == 4);
    memset(&src, 0, sizeof src);
    src.unk = -1;
    src.n_tokens = s->n_tokens;
    src.tokens = s->tokens;
    src.token_lens = s->token_lens;
    src.special = special;
    src.n_merges = s->n_merges;
    src.merges = pairs;
    src.pretok = s->pretok;
    src.bos = s->bos_id;
    src.eos = s->eos_id;
    src.add_bos = s->add_bos;
    src.ignore_merges = s->ignore_merges;
    r = amk__tok_build(&src, out, d);
    amk__free(pairs);
    amk__free(special);
    return r;
}

/* ---- GGUF ------------------------------------------------------------------------------------ */

AMK_API amk_result amk_tokenizer_from_gguf(const amk_gguf *g, amk_tokenizer **out, amk_diag *d) {
    static const char *const k_tokens = "tokenizer.ggml.tokens", *const k_merges = "tokenizer.ggml.merges",
                             *const k_types = "tokenizer.ggml.token_type", *const k_scores = "tokenizer.ggml.scores";
    amk__tok_src src;
    const char *model, *pre, **tokens = NULL;
    size_t len, *lens = NULL;
    unsigned char *special = NULL, *is_byte = NULL;
    float *scores = NULL;
    amk__tok_pair *pairs = NULL;
    int64_t n_tok, n_merges, n_types, v;
    uint32_t et = 0;
    int i, flag, spm;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!g) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: gguf is NULL");
    memset(&src, 0, sizeof src);
    src.unk = -1;
    model = amk_gguf_get_string(g, "tokenizer.ggml.model", &len);
    if (!model) return amk__fail(d, AMK_ERR_NOT_FOUND, "gguf: no tokenizer.ggml.model");
    spm = len == 5 && memcmp(model, "llama", 5) == 0;
    if (!spm && (len != 4 || memcmp(model, "gpt2", 4) != 0))
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "gguf: tokenizer model '%.*s' is not supported "
                         "(byte-level BPE \"gpt2\" or SentencePiece BPE \"llama\")", (int)(len > 64 ? 64 : len), model);
    pre = amk_gguf_get_string(g, "tokenizer.ggml.pre", &len);
    if (spm) {
        src.pretok = AMK_PRETOK_SPM; /* why pre ignored: llama.cpp's SentencePiece takes none */
    } else if (!pre || (len == 4 && memcmp(pre, "gpt2", 4) == 0) || (len == 7 && memcmp(pre, "default", 7) == 0)) {
        src.pretok = AMK_PRETOK_GPT2;
    } else if (len == 6 && memcmp(pre, "smollm", 6) == 0) {
        src.pretok = AMK_PRETOK_SMOLLM;
    } else if ((len == 9 && memcmp(pre, "llama-bpe", 9) == 0) || (len == 6 && memcmp(pre, "llama3", 6) == 0) ||
               (len == 8 && memcmp(pre, "llama-v3", 8) == 0)) {
        src.pretok = AMK_PRETOK_LLAMA3;
        src.ignore_merges = 1;
    } else if (len == 5 && memcmp(pre, "qwen2", 5) == 0) {
        src.pretok = AMK_PRETOK_QWEN2;
    } else {
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "gguf: pre-tokenizer '%.*s' is not supported "
                         "(smollm, llama-bpe, qwen2, gpt2)", (int)(len > 64 ? 64 : len), pre);
    }
    n_tok = amk_gguf_array_len(g, k_tokens, &et);
    if (n_tok < 1 || n_tok > AMK__TOK_MAX_TOKENS || et != AMK_GGUF_STRING)
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s is missing, empty, too long or not strings", k_tokens);
    n_merges = spm ? -1 : amk_gguf_array_len(g, k_merges, &et);
    if (n_merges < 0) n_merges = 0;
    else if (n_merges > INT_MAX || (n_merges > 0 && et != AMK_GGUF_STRING))
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s is too long or not strings", k_merges);
    n_types = amk_gguf_array_len(g, k_types, NULL);
    if (n_types >= 0 && n_types != n_tok)
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s has %lld entries for %lld tokens", k_types,
                         (long long)n_types, (long long)n_tok);
    if (spm && (amk_gguf_array_len(g, k_scores, &et) != n_tok || et != AMK_GGUF_FLOAT32))
        return amk__fail(d, AMK_ERR_PARSE, "gguf: a SentencePiece vocabulary needs %s, %lld float32 scores",
                         k_scores, (long long)n_tok);
    tokens = (const char **)amk__malloc((size_t)n_tok * sizeof *tokens);
    lens = (size_t *)amk__malloc((size_t)n_tok * sizeof *lens);
    special = (unsigned char *)amk__calloc((size_t)n_tok, 1);
    is_byte = (unsigned char *)amk__calloc((size_t)n_tok, 1);
    scores = spm ? (float *)amk__malloc((size_t)n_tok * sizeof *scores) : NULL;
    pairs = (amk__tok_pair *)amk__malloc((size_t)(n_merges ? n_merges : 1) * sizeof *pairs);
    if (!tokens || !lens || !special || !is_byte || (spm && !scores) || !pairs) {
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < (int)n_tok; i++) {
        tokens[i] = amk_gguf_array_string(g, k_tokens, i, &lens[i]);
        if (!tokens[i]) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is unreadable", k_tokens, i);
            goto done;
        }
        if (spm) {
            double sc;
            if (!amk_gguf_array_float(g, k_scores, i, &sc)) {
                r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is not a number", k_scores, i);
                goto done;
            }
            scores[i] = (float)sc;
        }
        if (n_types < 0) continue;
        if (!amk_gguf_array_int(g, k_types, i, &v)) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is not an integer", k_types, i);
            goto done;
        }
        /* why: 3 control, 4 user-defined (and SentencePiece's 2 unknown) are matched verbatim; 6 byte */
        special[i] = (unsigned char)(v == 3 || v == 4 || (spm && v == 2));
        is_byte[i] = (unsigned char)(spm && v == 6);
        if (spm && v == 2 && src.unk < 0) src.unk = i;
    }
    for (i = 0; i < (int)n_merges; i++) {
        const char *m = amk_gguf_array_string(g, k_merges, i, &len);
        if (!m || !amk__tok_split_merge(m, len, &pairs[i])) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is not \"A B\"", k_merges, i);
            goto done;
        }
    }
    src.n_tokens = (int)n_tok;
    src.tokens = tokens;
    src.token_lens = lens;
    src.special = special;
    src.n_merges = (int)n_merges;
    src.merges = pairs;
    src.scores = scores;
    src.is_byte = spm && n_types >= 0 ? is_byte : NULL;
    src.bos = src.eos = -1;
    if (amk_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v)) src.bos = v >= 0 && v < n_tok ? (int)v : -2;
    if (amk_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v)) src.eos = v >= 0 && v < n_tok ? (int)v : -2;
    if (amk_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &v)) src.unk = v >= 0 && v < n_tok ? (int)v : -3;
    if (src.bos == -2 || src.eos == -2 || src.unk == -3) {
        r = amk__fail(d, AMK_ERR_PARSE, "gguf: tokenizer.ggml.bos/eos/unknown_token_id is not a token id");
        goto done;
    }
    /* why: llama.cpp adds BOS for llama-bpe and SentencePiece when the file does not say; others
       default to no */
    src.add_bos = src.pretok == AMK_PRETOK_LLAMA3 || spm;
    if (amk_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &flag)) src.add_bos = flag;
    if (spm) {
        src.space_prefix = 2;
        if (amk_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &flag) && !flag) src.space_prefix = 0;
    }
    src.chat_template = amk_gguf_get_string(g, "tokenizer.chat_template", &src.chat_template_len);
    r = amk__tok_build(&src, out, d);
done:
    amk__free(tokens);
    amk__free(lens);
    amk__free(special);
    amk__free(is_byte);
    amk__free(scores);
    amk__free(pairs);
    return r;
}

/* ---- tokenizer.json -------------------------------------------------------------------------- */

/* Fails with the location of JSON value v and a path. */
AMK__FN amk_result amk__tok_jfail(amk_diag *d, const amk__jval *v, const char *path, amk_result r,
                                  const char *fmt, ...) {
    if (d) {
        va_list ap;
        d->result = r;
        if (v) { d->line = v->line; d->col = v->col; }
        snprintf(d->path, sizeof d->path, "%s", path);
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return r;
}

AMK__FN int amk__tok_jstr_is(const amk__jval *v, const char *s) {
    return v && v->type == AMK__J_STRING && v->slen == strlen(s) && memcmp(v->s, s, v->slen) == 0;
}
/* obj[key] as a bool: 1/0, or def when absent or null. -1 when of another type. */
AMK__FN int amk__tok_jbool(const amk__jval *obj, const char *key, int def) {
    const amk__jval *v = amk__json_get(obj, key);
    if (!v || v->type == AMK__J_NULL) return def;
    return v->type == AMK__J_BOOL ? (int)v->i : -1;
}
/* obj[key] is absent, null, or an empty string. */
AMK__FN int amk__tok_jempty(const amk__jval *obj, const char *key) {
    const amk__jval *v = amk__json_get(obj, key);
    return !v || v->type == AMK__J_NULL || (v->type == AMK__J_STRING && v->slen == 0);
}

/* A ByteLevel pre-tokenizer object with add_prefix_space false and the given use_regex. */
AMK__FN int amk__tok_is_bytelevel(const amk__jval *v, int use_regex) {
    return v && amk__tok_jstr_is(amk__json_get(v, "type"), "ByteLevel") &&
           amk__tok_jbool(v, "add_prefix_space", 1) == 0 && amk__tok_jbool(v, "use_regex", 1) == use_regex;
}

/* Maps the pre_tokenizer object onto one of ours. */
AMK__FN amk_result amk__tok_json_pretok(const amk__jval *pt, amk_pretok *out, amk_diag *d) {
    const amk__jval *type = amk__json_get(pt, "type"), *list = amk__json_get(pt, "pretokenizers");
    if (amk__tok_is_bytelevel(pt, 1)) { *out = AMK_PRETOK_GPT2; return AMK_OK; }
    if (amk__tok_jstr_is(type, "Sequence") && list && list->type == AMK__J_ARRAY && list->n == 2) {
        const amk__jval *a = &list->items[0], *b = &list->items[1];
        if (amk__tok_jstr_is(amk__json_get(a, "type"), "Digits") &&
            amk__tok_jbool(a, "individual_digits", 0) == 1 && amk__tok_is_bytelevel(b, 1)) {
            *out = AMK_PRETOK_SMOLLM;
            return AMK_OK;
        }
        if (amk__tok_jstr_is(amk__json_get(a, "type"), "Split") &&
            amk__tok_jstr_is(amk__json_get(a, "behavior"), "Isolated") &&
            amk__tok_jbool(a, "invert", 0) == 0 && amk__tok_is_bytelevel(b, 0)) {
            const amk__jval *re = amk__json_get(amk__json_get(a, "pattern"), "Regex");
            if (amk__tok_jstr_is(re, AMK__TOK_LLAMA3_REGEX)) { *out = AMK_PRETOK_LLAMA3; return AMK_OK; }
            if (amk__tok_jstr_is(re, AMK__TOK_QWEN2_REGEX)) { *out = AMK_PRETOK_QWEN2; return AMK_OK; }
        }
    }
    return amk__tok_jfail(d, pt, "/pre_tokenizer", AMK_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer "
                          "'%.40s' is not supported (ByteLevel, Digits+ByteLevel, Split of the Llama-3 or Qwen2 "
                          "regex+ByteLevel)", type && type->type == AMK__J_STRING ? type->s : "?");
}

/* A SentencePiece tokenizer.json (BPE with byte_fallback): its space handling, from the normalizer
   Prepend("▁") + Replace(" ", "▁") with no pre_tokenizer (every stretch between specials gets the
   prefix), or no normalizer and a Metaspace pre_tokenizer (prepend_scheme first, always or never,
   or the older add_prefix_space; not where the stretch already begins with "▁"; split: a piece a
   word). */
AMK__FN amk_result amk__tok_json_spm(const amk__jval *root, amk__tok_src *src, amk_diag *d) {
    const amk__jval *nz = amk__json_get(root, "normalizer"), *pt = amk__json_get(root, "pre_tokenizer");
    const int no_nz = !nz || nz->type == AMK__J_NULL, no_pt = !pt || pt->type == AMK__J_NULL;
    src->pretok = AMK_PRETOK_SPM;
    if (!no_nz && no_pt && amk__tok_jstr_is(amk__json_get(nz, "type"), "Sequence")) {
        const amk__jval *list = amk__json_get(nz, "normalizers");
        if (list && list->type == AMK__J_ARRAY && list->n == 2 &&
            amk__tok_jstr_is(amk__json_get(&list->items[0], "type"), "Prepend") &&
            amk__tok_jstr_is(amk__json_get(&list->items[0], "prepend"), AMK__TOK_SPACE) &&
            amk__tok_jstr_is(amk__json_get(&list->items[1], "type"), "Replace") &&
            amk__tok_jstr_is(amk__json_get(amk__json_get(&list->items[1], "pattern"), "String"), " ") &&
            amk__tok_jstr_is(amk__json_get(&list->items[1], "content"), AMK__TOK_SPACE)) {
            src->space_prefix = 2;
            return AMK_OK;
        }
    }
    if (no_nz && !no_pt && amk__tok_jstr_is(amk__json_get(pt, "type"), "Metaspace") &&
        amk__tok_jstr_is(amk__json_get(pt, "replacement"), AMK__TOK_SPACE)) {
        const amk__jval *scheme = amk__json_get(pt, "prepend_scheme");
        const int split = amk__tok_jbool(pt, "split", 1);
        src->prefix_once = 1;
        if (scheme && scheme->type != AMK__J_NULL) {
            if (amk__tok_jstr_is(scheme, "first")) src->space_prefix = 1;
            else if (amk__tok_jstr_is(scheme, "always")) src->space_prefix = 2;
            else if (amk__tok_jstr_is(scheme, "never")) src->space_prefix = 0;
            else scheme = NULL;
        } else {
            src->space_prefix = amk__tok_jbool(pt, "add_prefix_space", 1) == 1 ? 2 : 0;
            scheme = pt;
        }
        if (scheme && split >= 0) {
            src->pretok = split ? AMK_PRETOK_METASPACE : AMK_PRETOK_SPM;
            return AMK_OK;
        }
    }
    return amk__tok_jfail(d, no_nz ? pt : nz, no_nz ? "/pre_tokenizer" : "/normalizer", AMK_ERR_UNSUPPORTED,
                          "tokenizer.json: a byte_fallback BPE needs the normalizer Prepend(\"\xE2\x96\x81\")+"
                          "Replace(\" \", \"\xE2\x96\x81\") and no pre_tokenizer, or a Metaspace pre_tokenizer "
                          "and no normalizer");
}

/* The id of a special-token value of tokenizer_config.json: "text" or {"content": "text"}. */
AMK__FN int amk__tok_config_token(const amk_tokenizer *t, const amk__jval *v) {
    if (v && v->type == AMK__J_OBJECT) v = amk__json_get(v, "content");
    if (!v || v->type != AMK__J_STRING) return -1;
    return amk__tok_lookup(t, v->s, v->slen);
}

/* bos from a TemplateProcessing post-processor (possibly inside a Sequence) whose "single"
   template starts with a special token: Llama-3's way of adding <|begin_of_text|>. */
AMK__FN const amk__jval *amk__tok_template_bos(const amk__jval *pp) {
    const amk__jval *list, *single, *first;
    int i;
    if (!pp || pp->type != AMK__J_OBJECT) return NULL;
    list = amk__json_get(pp, "processors");
    if (amk__tok_jstr_is(amk__json_get(pp, "type"), "Sequence") && list && list->type == AMK__J_ARRAY) {
        for (i = 0; i < list->n; i++) {
            const amk__jval *r = amk__tok_template_bos(&list->items[i]);
            if (r) return r;
        }
        return NULL;
    }
    if (!amk__tok_jstr_is(amk__json_get(pp, "type"), "TemplateProcessing")) return NULL;
    single = amk__json_get(pp, "single");
    if (!single || single->type != AMK__J_ARRAY || single->n < 1) return NULL;
    first = amk__json_get(&single->items[0], "SpecialToken");
    return first ? amk__json_get(first, "id") : NULL;
}

AMK_API amk_result amk_tokenizer_from_json_text(const char *json, size_t json_len, const char *config,
                                                size_t config_len, amk_tokenizer **out, amk_diag *d) {
    amk__jdoc doc, cdoc;
    const amk__jval *root, *model, *vocab, *merges, *added, *pt, *v;
    amk__tok_src src;
    const char **tokens = NULL;
    size_t *lens = NULL;
    unsigned char *special = NULL;
    amk__tok_pair *pairs = NULL;
    int i, n_entries, max_id = -1, im, spm;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!json) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: json is NULL");
    memset(&src, 0, sizeof src);
    memset(&cdoc, 0, sizeof cdoc);
    r = amk__json_parse(json, json_len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) return r;
    root = doc.root;
    model = amk__json_get(root, "model");
    if (!model || model->type != AMK__J_OBJECT) {
        r = amk__tok_jfail(d, root, "/model", AMK_ERR_PARSE, "tokenizer.json: no \"model\" object");
        goto done;
    }
    src.unk = -1;
    v = amk__json_get(model, "type");
    spm = amk__tok_jbool(model, "byte_fallback", 0);
    if ((v && !amk__tok_jstr_is(v, "BPE")) || spm < 0 || !amk__tok_jempty(model, "continuing_subword_prefix") ||
        !amk__tok_jempty(model, "end_of_word_suffix") || !amk__tok_jempty(model, "dropout")) {
        r = amk__tok_jfail(d, model, "/model", AMK_ERR_UNSUPPORTED, "tokenizer.json: only a BPE model is "
                           "supported (no subword prefix/suffix or dropout)");
        goto done;
    }
    if (spm) {
        if ((r = amk__tok_json_spm(root, &src, d)) != AMK_OK) goto done;
        src.fuse_unk = amk__tok_jbool(model, "fuse_unk", 0) == 1;
    } else {
        v = amk__json_get(root, "normalizer");
        if (v && v->type != AMK__J_NULL) {
            if (!amk__tok_jstr_is(amk__json_get(v, "type"), "NFC")) {
                r = amk__tok_jfail(d, v, "/normalizer", AMK_ERR_UNSUPPORTED,
                                   "tokenizer.json: of the normalizers only NFC is supported with a byte-level BPE");
                goto done;
            }
            src.nfc = 1;
        }
        pt = amk__json_get(root, "pre_tokenizer");
        if (!pt || pt->type != AMK__J_OBJECT) {
            r = amk__tok_jfail(d, root, "/pre_tokenizer", AMK_ERR_UNSUPPORTED, "tokenizer.json: no pre_tokenizer "
                               "(a byte-level BPE needs one)");
            goto done;
        }
        if ((r = amk__tok_json_pretok(pt, &src.pretok, d)) != AMK_OK) goto done;
    }
    im = amk__tok_jbool(model, "ignore_merges", 0);
    if (im < 0) {
        r = amk__tok_jfail(d, model, "/model/ignore_merges", AMK_ERR_PARSE,
                           "tokenizer.json: ignore_merges is not a bool");
        goto done;
    }
    src.ignore_merges = im;

    vocab = amk__json_get(model, "vocab");
    merges = amk__json_get(model, "merges");
    added = amk__json_get(root, "added_tokens");
    if (!vocab || vocab->type != AMK__J_OBJECT || (merges && merges->type != AMK__J_ARRAY) ||
        (added && added->type != AMK__J_ARRAY && added->type != AMK__J_NULL)) {
        r = amk__tok_jfail(d, model, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: model.vocab must be an "
                           "object, model.merges and added_tokens arrays");
        goto done;
    }
    if (vocab->n > AMK__TOK_MAX_TOKENS ||
        (added && added->type == AMK__J_ARRAY && added->n > AMK__TOK_MAX_TOKENS)) {
        r = amk__tok_jfail(d, vocab, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: more than %d tokens",
                           AMK__TOK_MAX_TOKENS);
        goto done;
    }
    n_entries = vocab->n + (added && added->type == AMK__J_ARRAY ? added->n : 0);
    for (i = 0; i < vocab->n; i++) {
        v = &vocab->items[i];
        if (v->type != AMK__J_INT || v->i < 0 || v->i >= n_entries) {
            r = amk__tok_jfail(d, v, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: id of token %d is not an "
                               "integer in [0, %d)", i, n_entries);
            goto done;
        }
        if (v->i > max_id) max_id = (int)v->i;
    }
    for (i = 0; added && added->type == AMK__J_ARRAY && i < added->n; i++) {
        const amk__jval *a = &added->items[i], *id = amk__json_get(a, "id"), *c = amk__json_get(a, "content");
        if (!id || id->type != AMK__J_INT || id->i < 0 || id->i >= n_entries || !c ||
            c->type != AMK__J_STRING) {
            r = amk__tok_jfail(d, a, "/added_tokens", AMK_ERR_PARSE, "tokenizer.json: added token %d "
                               "needs an id in [0, %d) and a string content", i, n_entries);
            goto done;
        }
        if (id->i > max_id) max_id = (int)id->i;
    }
    if (max_id < 0) {
        r = amk__tok_jfail(d, vocab, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: empty vocabulary");
        goto done;
    }
    src.n_tokens = max_id + 1;
    tokens = (const char **)amk__calloc((size_t)src.n_tokens, sizeof *tokens);
    lens = (size_t *)amk__calloc((size_t)src.n_tokens, sizeof *lens);
    special = (unsigned char *)amk__calloc((size_t)src.n_tokens, 1);
    pairs = (amk__tok_pair *)amk__malloc((size_t)(merges && merges->n ? merges->n : 1) * sizeof *pairs);
    if (!tokens || !lens || !special || !pairs) {
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < vocab->n; i++) {
        int id = (int)vocab->items[i].i;
        if (tokens[id]) {
            r = amk__tok_jfail(d, &vocab->items[i], "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: id %d is "
                               "given to two tokens", id);
            goto done;
        }
        tokens[id] = vocab->keys[i];
        lens[id] = vocab->key_lens[i];
    }
    for (i = 0; added && added->type == AMK__J_ARRAY && i < added->n; i++) {
        const amk__jval *a = &added->items[i], *c = amk__json_get(a, "content");
        int id = (int)amk__json_get(a, "id")->i;
        tokens[id] = c->s; /* an added token's content is its text, matched verbatim */
        lens[id] = c->slen;
        special[id] = 1;
    }
    for (i = 0; i < src.n_tokens; i++)
        if (!tokens[i]) tokens[i] = ""; /* a hole in the ids: an empty token encode never yields */
    for (i = 0; merges && i < merges->n; i++) {
        const amk__jval *m = &merges->items[i];
        if (m->type == AMK__J_STRING && amk__tok_split_merge(m->s, m->slen, &pairs[i])) continue;
        if (m->type == AMK__J_ARRAY && m->n == 2 && m->items[0].type == AMK__J_STRING &&
            m->items[1].type == AMK__J_STRING) {
            pairs[i].a = m->items[0].s;
            pairs[i].alen = m->items[0].slen;
            pairs[i].b = m->items[1].s;
            pairs[i].blen = m->items[1].slen;
            continue;
        }
        r = amk__tok_jfail(d, m, "/model/merges", AMK_ERR_PARSE, "tokenizer.json: merge %d is neither \"A B\" "
                           "nor [\"A\", \"B\"]", i);
        goto done;
    }
    src.tokens = tokens;
    src.token_lens = lens;
    src.special = special;
    src.n_merges = merges ? merges->n : 0;
    src.merges = pairs;
    src.bos = src.eos = -1;
    if ((r = amk__tok_build(&src, out, d)) != AMK_OK) goto done;
    v = amk__json_get(model, "unk_token");
    if (spm && v && v->type == AMK__J_STRING) {
        (*out)->unk = amk__tok_lookup(*out, v->s, v->slen);
        if ((*out)->unk < 0) {
            r = amk__tok_jfail(d, v, "/model/unk_token", AMK_ERR_PARSE, "tokenizer.json: unk_token is not a token");
            goto fail_built;
        }
    }

    v = amk__tok_template_bos(amk__json_get(root, "post_processor"));
    if (v && v->type == AMK__J_STRING) {
        (*out)->bos = amk__tok_lookup(*out, v->s, v->slen);
        (*out)->add_bos = (*out)->bos >= 0;
    }
    if (config) {
        const amk__jval *c;
        amk_diag cd;
        amk_diag_clear(&cd);
        if ((r = amk__json_parse(config, config_len, AMK_JSON_MAX_DEPTH, &cdoc, &cd)) != AMK_OK) {
            amk__tok_jfail(d, NULL, "tokenizer_config.json", r, "tokenizer_config.json:%d:%d: %s",
                           cd.line, cd.col, cd.message);
            if (d) { d->line = cd.line; d->col = cd.col; }
            goto fail_built;
        }
        c = cdoc.root;
        if (c->type != AMK__J_OBJECT) {
            r = amk__tok_jfail(d, c, "tokenizer_config.json", AMK_ERR_PARSE,
                               "tokenizer_config.json is not an object");
            goto fail_built;
        }
        if ((v = amk__json_get(c, "bos_token")) && v->type != AMK__J_NULL)
            (*out)->bos = amk__tok_config_token(*out, v);
        if ((v = amk__json_get(c, "eos_token")) && v->type != AMK__J_NULL)
            (*out)->eos = amk__tok_config_token(*out, v);
        if ((v = amk__json_get(c, "chat_template")) && v->type == AMK__J_ARRAY) { /* [{name, template}]: the default */
            for (i = 0; i < v->n && !amk__tok_jstr_is(amk__json_get(&v->items[i], "name"), "default"); i++) {}
            v = i < v->n ? amk__json_get(&v->items[i], "template") : NULL;
        }
        if (v && v->type == AMK__J_STRING) amk__tok_chat_detect(*out, v->s, v->slen);
        im = amk__tok_jbool(c, "add_bos_token", (*out)->add_bos);
        if (im < 0) {
            r = amk__tok_jfail(d, amk__json_get(c, "add_bos_token"), "tokenizer_config.json/add_bos_token",
                               AMK_ERR_PARSE, "add_bos_token is not a bool");
            goto fail_built;
        }
        (*out)->add_bos = im;
    }
    goto done;
fail_built:
    amk_tokenizer_free(*out);
    *out = NULL;
done:
    amk__free(tokens);
    amk__free(lens);
    amk__free(special);
    amk__free(pairs);
    amk__json_free(&doc);
    if (cdoc.root || cdoc.arena) amk__json_free(&cdoc);
    return r;
}

/* d's message (from amk_tokenizer_from_json_text) prefixed with the file it is about, path or
   cpath (tokenizer_config.json, NULL when not read), and its line:col; the text's own "tokenizer.json:"
   and "tokenizer_config.json:L:C:" prefixes give way to the real name. d->path keeps a JSON path
   when it has one, else gets the file. */
AMK__FN void amk__tok_name_file(amk_diag *d, const char *path, const char *cpath) {
    static const char *const own[2] = {"tokenizer.json: ", "tokenizer_config.json"};
    const int in_config = cpath && strncmp(d->path, own[1], strlen(own[1])) == 0;
    const char *file = in_config ? cpath : path, *msg = d->message;
    char buf[sizeof d->message];
    if (strstr(d->message, file)) return; /* an I/O error already names it */
    if (strncmp(msg, own[0], strlen(own[0])) == 0) {
        msg += strlen(own[0]);
    } else if (strncmp(msg, own[1], strlen(own[1])) == 0) { /* "tokenizer_config.json:L:C: msg" */
        const char *p = strstr(msg, ": ");
        if (p && p[-1] >= '0' && p[-1] <= '9') msg = p + 2;
    }
    if (d->line > 0) snprintf(buf, sizeof buf, "%.200s:%d:%d: %.280s", file, d->line, d->col, msg);
    else snprintf(buf, sizeof buf, "%.200s: %.300s", file, msg);
    memcpy(d->message, buf, sizeof buf);
    if (!d->path[0]) snprintf(d->path, sizeof d->path, "%.191s", file); /* why the precision: path holds 192 */
}

AMK_API amk_result amk_tokenizer_from_json(const char *path, amk_tokenizer **out, amk_diag *d) {
    char *text = NULL, *ctext = NULL, *cpath;
    size_t n = 0, cn = 0, dir;
    const char *slash;
    amk_result r;
    FILE *f;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: path is NULL");
    if (d) d->line = d->col = 0; /* why: the message's line:col below are this call's only */
    if ((r = amk__read_file(path, &text, &n, d)) != AMK_OK) return r;
    slash = strrchr(path, '/');
    dir = slash ? (size_t)(slash - path) + 1 : 0;
    cpath = (char *)amk__malloc(dir + sizeof "tokenizer_config.json");
    if (!cpath) { amk__free(text); return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory"); }
    memcpy(cpath, path, dir);
    memcpy(cpath + dir, "tokenizer_config.json", sizeof "tokenizer_config.json");
    f = fopen(cpath, "rb"); /* optional: read it only when it is there */
    if (f) {
        fclose(f);
        r = amk__read_file(cpath, &ctext, &cn, d);
    }
    if (r == AMK_OK) r = amk_tokenizer_from_json_text(text, n, ctext, cn, out, d);
    if (r != AMK_OK && d) amk__tok_name_file(d, path, ctext ? cpath : NULL);
    amk__free(cpath);
    amk__free(text);
    amk__free(ctext);
    return r;
}

/* ---- encoding -------------------------------------------------------------------------------- */

/* Scratch memory of one encode call, grown to the longest piece. */
typedef struct amk__tok_work {
    int *sym_id, *prev, *next;  /* [sym_cap] each: symbols in a linked list; sym_id -1 = merged away */
    int sym_cap;                /* prev and next point into sym_id's block */
    uint64_t *heap; int n_heap, heap_cap; /* candidate pairs: rank << 32 | left symbol, min first */
    char *str; int str_cap;     /* a piece in the byte alphabet (ignore_merges lookup) */
    int *ids; int cap;          /* the caller's output */
    int64_t total;              /* ids the full encoding has so far */
} amk__tok_work;

AMK__FN void amk__tok_emit(amk__tok_work *w, int id) {
    if (w->total < w->cap) w->ids[w->total] = id;
    w->total++;
}

/* Pushes the pair (left, next[left]) when a merge exists for it. 0 on out of memory. The key
   orders by rank, then leftmost (ties), as HF and llama.cpp do; 8 bytes keep the heap in cache. */
AMK__FN int amk__tok_push(const amk_tokenizer *t, amk__tok_work *w, int left) {
    const amk__tok_merge *m;
    uint64_t key;
    int i;
    if (left < 0 || w->next[left] < 0) return 1;
    m = amk__tok_merge_get(t, w->sym_id[left], w->sym_id[w->next[left]]);
    if (!m) return 1;
    if (!amk__grow((void **)&w->heap, &w->heap_cap, w->n_heap + 1, sizeof *w->heap)) return 0;
    key = ((uint64_t)(uint32_t)m->rank << 32) | (uint32_t)left;
    for (i = w->n_heap++; i > 0 && key < w->heap[(i - 1) / 4]; i = (i - 1) / 4) w->heap[i] = w->heap[(i - 1) / 4];
    w->heap[i] = key;
    return 1;
}

AMK__FN uint64_t amk__tok_pop(amk__tok_work *w) {
    uint64_t top = w->heap[0], last = w->heap[--w->n_heap];
    int i = 0, n = w->n_heap;
    for (;;) {
        int c = 4 * i + 1, j, end = c + 4 < n ? c + 4 : n;
        if (c >= n) break;
        for (j = c + 1; j < end; j++)
            if (w->heap[j] < w->heap[c]) c = j;
        if (w->heap[c] >= last) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

AMK__FN int amk__tok_merge_all(const amk_tokenizer *t, amk__tok_work *w, int k);
AMK__FN int amk__tok_syms(amk__tok_work *w, size_t n);
AMK__FN void amk__tok_sym(amk__tok_work *w, int k, int id);

/* BPE of one piece: bytes -> one-byte symbols -> merges (amk__tok_merge_all) -> ids. */
AMK__FN int amk__tok_bpe(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s, size_t n) {
    int i, k = 0;
    if (n > (size_t)INT_MAX / 4) return 0; /* why: keeps 2-byte-per-byte string sizes in an int */
    if (t->ignore_merges) {
        size_t j, m = 0;
        int id;
        if (!amk__grow((void **)&w->str, &w->str_cap, (int)(2 * n), 1)) return 0;
        for (j = 0; j < n; j++) m += amk__utf8_put((unsigned char *)w->str + m, amk__tok_byte_cp(s[j]));
        id = amk__tok_lookup(t, w->str, m);
        if (id >= 0 && !t->special[id]) { amk__tok_emit(w, id); return 1; }
    }
    if (!amk__tok_syms(w, n)) return 0;
    for (i = 0; i < (int)n; i++) { /* bytes with no token are dropped, as HF does with no unk */
        int id = t->byte_id[s[i]];
        if (id < 0) continue;
        amk__tok_sym(w, k++, id);
    }
    return amk__tok_merge_all(t, w, k);
}

/* Room for n symbols in w. 0 on out of memory. */
AMK__FN int amk__tok_syms(amk__tok_work *w, size_t n) {
    if ((int)n > w->sym_cap) { /* sym_id, prev and next in one block of 3n ints */
        amk__free(w->sym_id);
        w->sym_id = (int *)amk__malloc(3 * n * sizeof(int));
        w->sym_cap = w->sym_id ? (int)n : 0;
        if (!w->sym_id) return 0;
    }
    w->prev = w->sym_id + w->sym_cap;
    w->next = w->prev + w->sym_cap;
    return 1;
}

/* Appends symbol id as the k-th. */
AMK__FN void amk__tok_sym(amk__tok_work *w, int k, int id) {
    w->sym_id[k] = id;
    w->prev[k] = k - 1;
    w->next[k] = k + 1;
}

/* The BPE merges of the k symbols in w: repeatedly the lowest-ranked adjacent pair (ties
   leftmost); then their ids out. O(k log k) with a heap of candidate pairs, stale ones skipped. */
AMK__FN int amk__tok_merge_all(const amk_tokenizer *t, amk__tok_work *w, int k) {
    int i;
    if (k == 0) return 1;
    w->next[k - 1] = -1;
    w->n_heap = 0;
    for (i = 0; i + 1 < k; i++)
        if (!amk__tok_push(t, w, i)) return 0;
    while (w->n_heap > 0) {
        uint64_t key = amk__tok_pop(w);
        int left = (int)(uint32_t)key, right = w->next[left];
        const amk__tok_merge *m;
        /* stale unless left still has a right neighbour and their merge is the one queued (a
           rank names one pair) */
        if (w->sym_id[left] < 0 || right < 0) continue;
        m = amk__tok_merge_get(t, w->sym_id[left], w->sym_id[right]);
        if (!m || (uint64_t)(uint32_t)m->rank != key >> 32) continue;
        w->sym_id[left] = m->id;
        w->sym_id[right] = -1;
        w->next[left] = w->next[right];
        if (w->next[right] >= 0) w->prev[w->next[right]] = left;
        if (!amk__tok_push(t, w, w->prev[left]) || !amk__tok_push(t, w, left)) return 0;
    }
    for (i = 0; i >= 0; i = w->next[i]) amk__tok_emit(w, w->sym_id[i]); /* symbol 0 is never merged away */
    return 1;
}

/* SentencePiece BPE of one piece (already with "▁" for spaces): its characters as symbols (one
   the vocabulary lacks: its bytes' <0xXX> tokens, or unk, a run of unks one with fuse_unk, or
   nothing), merged. */
AMK__FN int amk__tok_spm_piece(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s, size_t n) {
    size_t i, j, m;
    int k = 0;
    if (!amk__tok_syms(w, n)) return 0;
    for (i = 0; i < n; i += m) {
        uint32_t cp;
        int id, bytes = 1;
        m = amk__tok_utf8(s + i, n - i, &cp);
        id = amk__tok_lookup(t, (const char *)s + i, m);
        if (id >= 0) { amk__tok_sym(w, k++, id); continue; }
        for (j = 0; j < m; j++) bytes &= t->byte_id[s[i + j]] >= 0;
        if (bytes) {
            for (j = 0; j < m; j++) amk__tok_sym(w, k++, t->byte_id[s[i + j]]);
        } else if (t->unk >= 0 && !(t->fuse_unk && k > 0 && w->sym_id[k - 1] == t->unk)) {
            amk__tok_sym(w, k++, t->unk);
        }
    }
    return amk__tok_merge_all(t, w, k);
}

/* SentencePiece of a stretch of text between specials: spaces as "▁", the prefix where the
   tokenizer puts one (at_start: the stretch begins the input), then its pieces. */
AMK__FN int amk__tok_spm(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s, size_t n, int at_start) {
    size_t i, m = 3, pos = 0, end;
    int pre = t->space_prefix == 2 || (t->space_prefix == 1 && at_start);
    unsigned char *u;
    if (n > (size_t)INT_MAX / 4 - 1) return 0; /* why: 3 bytes a space and the prefix in an int */
    if (!amk__grow((void **)&w->str, &w->str_cap, (int)(3 * n + 3), 1)) return 0;
    u = (unsigned char *)w->str;
    for (i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(u + m, AMK__TOK_SPACE, 3); m += 3; }
        else u[m++] = s[i];
    }
    if (pre && t->prefix_once && m >= 6 && memcmp(u + 3, AMK__TOK_SPACE, 3) == 0) pre = 0;
    if (pre) memcpy(u, AMK__TOK_SPACE, 3);
    else pos = 3;
    while (pos < m) {
        end = amk__tok_next_piece(t->pretok, u, m, pos);
        if (!amk__tok_spm_piece(t, w, u + pos, end - pos)) return 0;
        pos = end;
    }
    return 1;
}

/* Pre-tokenizes and encodes a stretch of text that holds no special token; at_start: it begins
   the input. */
AMK__FN int amk__tok_encode_plain(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s,
                                  size_t len, int at_start) {
    unsigned char *norm = NULL;
    size_t pos = 0;
    int ok = 1;
    if (len == 0) return 1;
    if (t->spm) return amk__tok_spm(t, w, s, len, at_start);
    if (t->nfc) { /* why per stretch: HF normalizes each stretch between added tokens */
        size_t n;
        if (!amk__nfc(s, len, &norm, &n)) return 0;
        if (norm) { s = norm; len = n; }
    }
    while (ok && pos < len) {
        size_t end = amk__tok_next_piece(t->pretok, s, len, pos);
        ok = amk__tok_bpe(t, w, s + pos, end - pos);
        pos = end;
    }
    amk__free(norm);
    return ok;
}

/* The longest special token at s[0..avail), or -1. */
AMK__FN int amk__tok_special_at(const amk_tokenizer *t, const unsigned char *s, size_t avail) {
    int j, b = s[0];
    for (j = t->special_start[b]; j < t->special_start[b + 1]; j++) {
        int id = t->specials[j];
        size_t n = t->bytes_len[id];
        if (n <= avail && memcmp(s, t->arena + t->bytes_off[id], n) == 0) return id;
    }
    return -1;
}

AMK_API int amk_tokenizer_encode(const amk_tokenizer *t, const char *text, size_t len, int add_bos,
                                 int *ids, int cap) {
    const unsigned char *s = (const unsigned char *)text;
    amk__tok_work w;
    size_t pos = 0, start = 0;
    int ok = 1;
    if (!t || (!text && len) || cap < 0 || (!ids && cap > 0)) return -1;
    memset(&w, 0, sizeof w);
    w.ids = ids;
    w.cap = cap;
    if ((add_bos < 0 ? t->add_bos : add_bos) && t->bos >= 0) amk__tok_emit(&w, t->bos);
    while (ok && pos < len) {
        int id = t->n_specials ? amk__tok_special_at(t, s + pos, len - pos) : -1;
        if (id < 0) { pos++; continue; }
        ok = amk__tok_encode_plain(t, &w, s + start, pos - start, start == 0);
        amk__tok_emit(&w, id);
        pos += t->bytes_len[id];
        start = pos;
    }
    if (ok) ok = amk__tok_encode_plain(t, &w, s + start, len - start, start == 0);
    amk__free(w.sym_id);
    amk__free(w.heap);
    amk__free(w.str);
    if (!ok || w.total > INT_MAX) return -1;
    return (int)w.total;
}

/* ---- decoding and queries -------------------------------------------------------------------- */

AMK_API const char *amk_tokenizer_token_bytes(const amk_tokenizer *t, int id, size_t *len) {
    if (!t || id < 0 || id >= t->n_tokens) return NULL;
    if (len) *len = t->bytes_len[id];
    return t->arena + t->bytes_off[id];
}

AMK_API int amk_tokenizer_decode(const amk_tokenizer *t, int id, char *buf, size_t cap) {
    size_t n;
    const char *b = amk_tokenizer_token_bytes(t, id, &n);
    if (!b || n > cap || n > INT_MAX || (n && !buf)) return -1;
    if (n) memcpy(buf, b, n);
    return (int)n;
}

AMK_API int amk_tokenizer_n_vocab(const amk_tokenizer *t) { return t ? t->n_tokens : 0; }
AMK_API int amk_tokenizer_bos(const amk_tokenizer *t) { return t ? t->bos : -1; }
AMK_API int amk_tokenizer_eos(const amk_tokenizer *t) { return t ? t->eos : -1; }
AMK_API int amk_tokenizer_add_bos(const amk_tokenizer *t) { return t ? t->add_bos : 0; }
AMK_API amk_pretok amk_tokenizer_pretok(const amk_tokenizer *t) { return t ? t->pretok : AMK_PRETOK_GPT2; }
AMK_API int amk_tokenizer_is_special(const amk_tokenizer *t, int id) {
    return t && id >= 0 && id < t->n_tokens && t->special[id];
}
AMK_API int amk_tokenizer_token_id(const amk_tokenizer *t, const char *text) {
    if (!t || !text) return -1;
    return amk__tok_lookup(t, text, strlen(text));
}
AMK_API int amk_tokenizer_byte_token(const amk_tokenizer *t, int b) {
    return t && b >= 0 && b < 256 ? t->byte_id[b] : -1;
}

AMK_API amk_chat_format amk_tokenizer_chat_format(const amk_tokenizer *t) { return t ? t->chat : AMK_CHAT_CHATML; }

AMK_API int amk_tokenizer_chat_prompt(const amk_tokenizer *t, const char *system, const char *user,
                                      char *buf, size_t cap) {
    /* a format's text: head [sys_open system sys_close] user_open user tail, and the marker token
       its tokenizer must have (NULL: none) */
    static const struct { const char *marker, *head, *sys_open, *sys_close, *user_open, *tail; } fmt[5] = {
        {NULL, NULL, NULL, NULL, NULL, NULL}, /* AMK_CHAT_NONE */
        {"<|im_start|>", "", "<|im_start|>system\n", "<|im_end|>\n", "<|im_start|>user\n",
         "<|im_end|>\n<|im_start|>assistant\n"},
        {"<|start_header_id|>", "", "<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
         "<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
        {NULL, "[INST] ", "", "\n\n", "", " [/INST]"},                      /* AMK_CHAT_MISTRAL */
        {NULL, "[INST] ", "<<SYS>>\n", "\n<</SYS>>\n\n", "", " [/INST]"}}; /* AMK_CHAT_LLAMA2 */
    const amk_chat_format f = amk_tokenizer_chat_format(t);
    const int sys_i = t ? t->chat_system : 0;
    amk__sb sb;
    int n;
    if (!user || f == AMK_CHAT_NONE || (t && fmt[f].marker && amk_tokenizer_token_id(t, fmt[f].marker) < 0)) return -1;
    if (!system && sys_i >= 0) system = amk__tok_systems[sys_i];
    memset(&sb, 0, sizeof sb);
    amk__sb_puts(&sb, fmt[f].head);
    if (system) {
        amk__sb_puts(&sb, fmt[f].sys_open);
        amk__sb_puts(&sb, system);
        amk__sb_puts(&sb, fmt[f].sys_close);
    }
    amk__sb_puts(&sb, fmt[f].user_open);
    amk__sb_puts(&sb, user);
    amk__sb_puts(&sb, fmt[f].tail);
    if (sb.oom || sb.len > INT_MAX) { amk__sb_free(&sb); return -1; }
    n = (int)sb.len;
    if (buf && cap) {
        size_t k = sb.len < cap ? sb.len : cap - 1;
        memcpy(buf, sb.p, k);
        buf[k] = 0;
    }
    amk__sb_free(&sb);
    return n;
}

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */
