/* ==== >>tokenizer: byte-level BPE (GPT-2, SmolLM2, Llama-3) ================================== */
/* Included twice from amk.h: once with AMK__PART_DECL defined (public declarations, inside
   extern "C"), once with AMK__PART_IMPL defined (the implementation). */
#ifdef AMK__PART_DECL

/* A byte-level BPE tokenizer (REFERENCE.md §3.2): text -> special tokens matched verbatim ->
   pre-tokenizer pieces -> bytes in GPT-2's byte alphabet -> BPE merges -> ids. Built from a GGUF
   file, an HF tokenizer.json, or a format-neutral spec. Immutable once built: one tokenizer may be
   used from many threads at once. Encoding keeps no cache. Letters, digits and spaces are
   classified by Unicode 16 (src/unicode_tables.h), as HF tokenizers' regex engine does; the output
   matches HF tokenizers id for id on SmolLM2 (tests/test_tokenizer.c).
   What it does NOT do: SentencePiece ("llama" GGUF vocabularies), normalizers, BPE dropout,
   other pre-tokenizer regexes than the three below. */
typedef struct amk_tokenizer amk_tokenizer;

/* The pre-tokenizer: how text is cut into pieces before BPE. */
typedef enum amk_pretok {
    AMK_PRETOK_SMOLLM = 0, /* every \p{N} alone, then the GPT-2 regex (HF Digits + ByteLevel) */
    AMK_PRETOK_LLAMA3 = 1, /* the Llama-3 regex (case-insensitive contractions, \p{N}{1,3}) */
    AMK_PRETOK_GPT2 = 2    /* the GPT-2 regex alone (HF ByteLevel with use_regex) */
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
    amk_pretok pretok;
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
/* From a GGUF's tokenizer.ggml.* keys: model must be "gpt2" (else AMK_ERR_UNSUPPORTED); pre
   "smollm" -> SMOLLM, "llama-bpe"/"llama3"/"llama-v3" -> LLAMA3 with ignore_merges, "gpt2" or
   "default" (or absent) -> GPT2, anything else AMK_ERR_UNSUPPORTED naming it. g may be closed
   after this returns. */
AMK_API amk_result amk_tokenizer_from_gguf(const amk_gguf *g, amk_tokenizer **out, amk_diag *d);
/* From an HF tokenizer.json (model BPE; pre_tokenizer ByteLevel, Digits+ByteLevel or the Llama-3
   Split+ByteLevel; no normalizer). bos/eos/add_bos come from tokenizer_config.json in the same
   folder when it exists (bos_token, eos_token, add_bos_token), else from a TemplateProcessing
   post-processor that starts with a special token (then add_bos = 1), else none. */
AMK_API amk_result amk_tokenizer_from_json(const char *path, amk_tokenizer **out, amk_diag *d);
/* The same from memory: json is tokenizer.json's text, config tokenizer_config.json's or NULL. */
AMK_API amk_result amk_tokenizer_from_json_text(const char *json, size_t json_len,
                                                const char *config, size_t config_len,
                                                amk_tokenizer **out, amk_diag *d);
AMK_API void amk_tokenizer_free(amk_tokenizer *t);

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
/* Runs a pre-tokenizer alone (no special tokens): writes the end offset of each piece into ends
   (up to cap) and returns the number of pieces, or -1 on a bad argument or more than INT_MAX. */
AMK_API int amk_tokenizer_pretokenize(amk_pretok p, const char *text, size_t len, size_t *ends,
                                      int cap);
/* The ChatML prompt of SmolLM2 (REFERENCE §3.1) for one user turn, ending with
   "<|im_start|>assistant\n". system NULL gives the default system prompt; "" an empty one. Writes
   a NUL-terminated prefix into buf (cap bytes) and returns the length of the whole prompt (like
   snprintf), or -1 if t is given and has no <|im_start|> token, or user is NULL. t may be NULL. */
AMK_API int amk_tokenizer_chat_prompt(const amk_tokenizer *t, const char *system, const char *user,
                                      char *buf, size_t cap);

#endif /* AMK__PART_DECL */

#ifdef AMK__PART_IMPL
#include "unicode_tables.h"

/* why: 2^24 ids is 64x the largest real vocab (256k) and keeps every id and count in an int */
#define AMK__TOK_MAX_TOKENS (1 << 24)
#define AMK__TOK_DEFAULT_SYSTEM "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
#define AMK__TOK_LLAMA3_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
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
    int byte_id[256];            /* the one-byte token of each byte value, -1 if none */
    amk_pretok pretok;
    int bos, eos, add_bos, ignore_merges;
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

/* Decodes the character at s[0..avail) (avail >= 1) strictly (>>impl_json's amk__utf8_seq_len: no
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

/* One match of the Llama-3 regex (REFERENCE §3.3) at pos (not at the end); returns its end. */
AMK__FN size_t amk__tok_match_llama3(const amk__tok_text *x, size_t pos) {
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
    /* \p{N}{1,3} */
    if (c == AMK__TC_N) {
        for (p = pos, k = 0; k < 3 && amk__tok_peek(x, p, &cp1, &n1) == AMK__TC_N; k++) p += n1;
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

/* The end of the pre-tokenizer piece that starts at pos < len. */
AMK__FN size_t amk__tok_next_piece(amk_pretok p, const unsigned char *s, size_t len, size_t pos) {
    amk__tok_text x;
    uint32_t cp;
    size_t n;
    x.s = s;
    x.len = len;
    x.n_is_end = 0;
    if (p == AMK_PRETOK_LLAMA3) return amk__tok_match_llama3(&x, pos);
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
    if (p != AMK_PRETOK_SMOLLM && p != AMK_PRETOK_LLAMA3 && p != AMK_PRETOK_GPT2) return -1;
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
    amk_pretok pretok;
    int bos, eos, add_bos, ignore_merges;
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
        unsigned char u[4];
        size_t n = amk__utf8_put(u, amk__tok_byte_cp(b));
        t->byte_id[b] = amk__tok_lookup(t, (const char *)u, n);
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
        uint64_t key;
        size_t h, need = pr->alen + pr->blen; /* both bounded by the input, no overflow */
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
        key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        if (amk__tok_merge_get(t, ia, ib)) continue;
        h = amk__tok_hash_pair(key) & t->merge_mask;
        while (t->merge_slots[h].rank >= 0) h = (h + 1) & t->merge_mask;
        t->merge_slots[h].key = key;
        t->merge_slots[h].rank = i;
        t->merge_slots[h].id = ir;
    }
    amk__free(cat);
    cat = NULL;
    if (amk__tok_build_specials(t) != AMK_OK) goto oom;
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
    if (s->pretok != AMK_PRETOK_SMOLLM && s->pretok != AMK_PRETOK_LLAMA3 && s->pretok != AMK_PRETOK_GPT2)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: unknown pre-tokenizer %d", (int)s->pretok);
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
                             *const k_types = "tokenizer.ggml.token_type";
    amk__tok_src src;
    const char *model, *pre, **tokens = NULL;
    size_t len, *lens = NULL;
    unsigned char *special = NULL;
    amk__tok_pair *pairs = NULL;
    int64_t n_tok, n_merges, n_types, v;
    uint32_t et = 0;
    int i, flag;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!g) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: gguf is NULL");
    memset(&src, 0, sizeof src);
    model = amk_gguf_get_string(g, "tokenizer.ggml.model", &len);
    if (!model) return amk__fail(d, AMK_ERR_NOT_FOUND, "gguf: no tokenizer.ggml.model");
    if (len != 4 || memcmp(model, "gpt2", 4) != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "gguf: tokenizer model '%.*s' is not supported "
                         "(only byte-level BPE, \"gpt2\")", (int)(len > 64 ? 64 : len), model);
    pre = amk_gguf_get_string(g, "tokenizer.ggml.pre", &len);
    if (!pre || (len == 4 && memcmp(pre, "gpt2", 4) == 0) || (len == 7 && memcmp(pre, "default", 7) == 0)) {
        src.pretok = AMK_PRETOK_GPT2;
    } else if (len == 6 && memcmp(pre, "smollm", 6) == 0) {
        src.pretok = AMK_PRETOK_SMOLLM;
    } else if ((len == 9 && memcmp(pre, "llama-bpe", 9) == 0) || (len == 6 && memcmp(pre, "llama3", 6) == 0) ||
               (len == 8 && memcmp(pre, "llama-v3", 8) == 0)) {
        src.pretok = AMK_PRETOK_LLAMA3;
        src.ignore_merges = 1;
    } else {
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "gguf: pre-tokenizer '%.*s' is not supported "
                         "(smollm, llama-bpe, gpt2)", (int)(len > 64 ? 64 : len), pre);
    }
    n_tok = amk_gguf_array_len(g, k_tokens, &et);
    if (n_tok < 1 || n_tok > AMK__TOK_MAX_TOKENS || et != AMK_GGUF_STRING)
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s is missing, empty, too long or not strings", k_tokens);
    n_merges = amk_gguf_array_len(g, k_merges, &et);
    if (n_merges < 0) n_merges = 0;
    else if (n_merges > INT_MAX || (n_merges > 0 && et != AMK_GGUF_STRING))
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s is too long or not strings", k_merges);
    n_types = amk_gguf_array_len(g, k_types, NULL);
    if (n_types >= 0 && n_types != n_tok)
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s has %lld entries for %lld tokens", k_types,
                         (long long)n_types, (long long)n_tok);
    tokens = (const char **)amk__malloc((size_t)n_tok * sizeof *tokens);
    lens = (size_t *)amk__malloc((size_t)n_tok * sizeof *lens);
    special = (unsigned char *)amk__calloc((size_t)n_tok, 1);
    pairs = (amk__tok_pair *)amk__malloc((size_t)(n_merges ? n_merges : 1) * sizeof *pairs);
    if (!tokens || !lens || !special || !pairs) {
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < (int)n_tok; i++) {
        tokens[i] = amk_gguf_array_string(g, k_tokens, i, &lens[i]);
        if (!tokens[i]) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is unreadable", k_tokens, i);
            goto done;
        }
        if (n_types < 0) continue;
        if (!amk_gguf_array_int(g, k_types, i, &v)) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is not an integer", k_types, i);
            goto done;
        }
        special[i] = (unsigned char)(v == 3 || v == 4); /* why: 3 control, 4 user-defined */
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
    src.bos = src.eos = -1;
    if (amk_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v)) src.bos = v >= 0 && v < n_tok ? (int)v : -2;
    if (amk_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v)) src.eos = v >= 0 && v < n_tok ? (int)v : -2;
    if (src.bos == -2 || src.eos == -2) {
        r = amk__fail(d, AMK_ERR_PARSE, "gguf: tokenizer.ggml.bos/eos_token_id is not a token id");
        goto done;
    }
    /* why: llama.cpp adds BOS for llama-bpe when the file does not say; others default to no */
    src.add_bos = src.pretok == AMK_PRETOK_LLAMA3;
    if (amk_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &flag)) src.add_bos = flag;
    r = amk__tok_build(&src, out, d);
done:
    amk__free(tokens);
    amk__free(lens);
    amk__free(special);
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
            amk__tok_jstr_is(amk__json_get(amk__json_get(a, "pattern"), "Regex"), AMK__TOK_LLAMA3_REGEX) &&
            amk__tok_jstr_is(amk__json_get(a, "behavior"), "Isolated") &&
            amk__tok_jbool(a, "invert", 0) == 0 && amk__tok_is_bytelevel(b, 0)) {
            *out = AMK_PRETOK_LLAMA3;
            return AMK_OK;
        }
    }
    return amk__tok_jfail(d, pt, "/pre_tokenizer", AMK_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer "
                          "'%.40s' is not supported (ByteLevel, Digits+ByteLevel, Llama-3 Split+ByteLevel)",
                          type && type->type == AMK__J_STRING ? type->s : "?");
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
    int i, n_entries, max_id = -1, im;
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
    v = amk__json_get(model, "type");
    if ((v && !amk__tok_jstr_is(v, "BPE")) || amk__tok_jbool(model, "byte_fallback", 0) != 0 ||
        !amk__tok_jempty(model, "continuing_subword_prefix") ||
        !amk__tok_jempty(model, "end_of_word_suffix") ||
        !amk__tok_jempty(model, "dropout")) {
        r = amk__tok_jfail(d, model, "/model", AMK_ERR_UNSUPPORTED, "tokenizer.json: only a plain BPE model "
                           "is supported (no byte_fallback, subword prefix/suffix or dropout)");
        goto done;
    }
    v = amk__json_get(root, "normalizer");
    if (v && v->type != AMK__J_NULL) {
        r = amk__tok_jfail(d, v, "/normalizer", AMK_ERR_UNSUPPORTED,
                           "tokenizer.json: normalizers are not supported");
        goto done;
    }
    pt = amk__json_get(root, "pre_tokenizer");
    if (!pt || pt->type != AMK__J_OBJECT) {
        r = amk__tok_jfail(d, root, "/pre_tokenizer", AMK_ERR_UNSUPPORTED, "tokenizer.json: no pre_tokenizer "
                           "(a byte-level BPE needs one)");
        goto done;
    }
    if ((r = amk__tok_json_pretok(pt, &src.pretok, d)) != AMK_OK) goto done;
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

AMK_API amk_result amk_tokenizer_from_json(const char *path, amk_tokenizer **out, amk_diag *d) {
    char *text = NULL, *ctext = NULL, *cpath;
    size_t n = 0, cn = 0, dir;
    const char *slash;
    amk_result r;
    FILE *f;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: path is NULL");
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
    if (r != AMK_OK && d && !d->path[0]) snprintf(d->path, sizeof d->path, "%s", ctext ? cpath : path);
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

/* BPE of one piece: bytes -> one-byte symbols -> repeatedly merge the lowest-ranked adjacent pair
   (ties leftmost) -> ids. O(n log n) with a heap of candidate pairs, stale ones skipped. */
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
    if ((int)n > w->sym_cap) { /* sym_id, prev and next in one block of 3n ints */
        amk__free(w->sym_id);
        w->sym_id = (int *)amk__malloc(3 * n * sizeof(int));
        w->sym_cap = w->sym_id ? (int)n : 0;
        if (!w->sym_id) return 0;
    }
    w->prev = w->sym_id + w->sym_cap;
    w->next = w->prev + w->sym_cap;
    for (i = 0; i < (int)n; i++) { /* bytes with no token are dropped, as HF does with no unk */
        int id = t->byte_id[s[i]];
        if (id < 0) continue;
        w->sym_id[k] = id;
        w->prev[k] = k - 1;
        w->next[k] = k + 1;
        k++;
    }
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

/* Pre-tokenizes and encodes a stretch of text that holds no special token. */
AMK__FN int amk__tok_encode_plain(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s,
                                  size_t len) {
    size_t pos = 0;
    while (pos < len) {
        size_t end = amk__tok_next_piece(t->pretok, s, len, pos);
        if (!amk__tok_bpe(t, w, s + pos, end - pos)) return 0;
        pos = end;
    }
    return 1;
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
        ok = amk__tok_encode_plain(t, &w, s + start, pos - start);
        amk__tok_emit(&w, id);
        pos += t->bytes_len[id];
        start = pos;
    }
    if (ok) ok = amk__tok_encode_plain(t, &w, s + start, len - start);
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

AMK_API int amk_tokenizer_chat_prompt(const amk_tokenizer *t, const char *system, const char *user,
                                      char *buf, size_t cap) {
    amk__sb sb;
    int n;
    if (!user || (t && amk_tokenizer_token_id(t, "<|im_start|>") < 0)) return -1;
    memset(&sb, 0, sizeof sb);
    amk__sb_puts(&sb, "<|im_start|>system\n");
    amk__sb_puts(&sb, system ? system : AMK__TOK_DEFAULT_SYSTEM);
    amk__sb_puts(&sb, "<|im_end|>\n<|im_start|>user\n");
    amk__sb_puts(&sb, user);
    amk__sb_puts(&sb, "<|im_end|>\n<|im_start|>assistant\n");
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

#endif /* AMK__PART_IMPL */
