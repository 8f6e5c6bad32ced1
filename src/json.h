/* ==== >>impl_json: the strict JSON DOM and the program file format (spec §6) ================== */
/* (part of amk.h's implementation; included once from amk.h)

   The DOM parser is iterative: open containers live on an explicit frame stack (at most
   max_depth deep) and finished values on a slot stack; when a container closes, its children are
   copied into one arena block. So the C stack never grows with the input, and memory is a few
   arena blocks proportional to the input length, not one malloc per node. */

/* ---- arena ----------------------------------------------------------------------------------- */

typedef struct amk__jblock {
    struct amk__jblock *next;
    size_t used, cap;
} amk__jblock;

/* why: 16 keeps every carved object (pointers, int64, double) aligned like malloc's own result */
#define AMK__JALIGN 16
#define AMK__JHDR ((sizeof(amk__jblock) + AMK__JALIGN - 1) / AMK__JALIGN * AMK__JALIGN)
#define AMK__JBLOCK_MIN ((size_t)1 << 16) /* why: 64 KiB amortises malloc; small docs use one */
#define AMK__JBLOCK_MAX ((size_t)1 << 22) /* why: 4 MiB caps the unused tail of the last block */

/* n bytes from the arena, 16-aligned; NULL on out of memory. */
AMK__FN void *amk__jarena_alloc(amk__jblock **head, size_t n) {
    amk__jblock *b = *head;
    void *r;
    if (n > SIZE_MAX - AMK__JHDR - AMK__JALIGN) return NULL;
    n = (n + AMK__JALIGN - 1) / AMK__JALIGN * AMK__JALIGN;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : AMK__JBLOCK_MIN;
        if (cap > AMK__JBLOCK_MAX) cap = AMK__JBLOCK_MAX;
        if (cap < n) cap = n;
        b = (amk__jblock *)amk__malloc(AMK__JHDR + cap);
        if (!b) return NULL;
        b->next = *head;
        b->used = 0;
        b->cap = cap;
        *head = b;
    }
    r = (char *)b + AMK__JHDR + b->used;
    b->used += n;
    return r;
}

AMK__FN void amk__jarena_free(amk__jblock *b) {
    while (b) {
        amk__jblock *next = b->next;
        amk__free(b);
        b = next;
    }
}

/* ---- parser state ------------------------------------------------------------------------------ */

/* A finished value waiting for its container to close, with its key when the container is an
   object. */
typedef struct amk__jslot {
    amk__jval v;
    const char *key;
    size_t key_len;
    int key_line, key_col;
} amk__jslot;

/* An open container. key* is the member key read last (objects), waiting for its value. */
typedef struct amk__jframe {
    int is_object;
    int start;          /* first slot of this container's children */
    int line, col;
    const char *key;
    size_t key_len;
    int key_line, key_col;
} amk__jframe;

typedef struct amk__jp {
    const unsigned char *s;
    size_t len, pos;
    int line;
    size_t line_start;  /* offset of the first byte of the current line */
    int max_depth;
    amk__jblock *arena;
    amk__jslot *slots; int n_slots, cap_slots;
    amk__jframe *frames; int n_frames, cap_frames;
    amk_diag *d;
} amk__jp;

AMK__FN int amk__jp_col(const amk__jp *p, size_t pos) {
    size_t c = pos - p->line_start + 1;
    return c > (size_t)INT_MAX ? INT_MAX : (int)c;
}

/* Reports a parse error at line:col with a printf message; returns AMK_ERR_PARSE. */
AMK__FN amk_result amk__jp_fail_at(amk__jp *p, int line, int col, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    if (!p->d) return AMK_ERR_PARSE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->d->line = line;
    p->d->col = col;
    return amk__fail(p->d, AMK_ERR_PARSE, "%s", msg);
}
#define AMK__JP_FAIL(p, pos, ...) amk__jp_fail_at((p), (p)->line, amk__jp_col((p), (pos)), __VA_ARGS__)

AMK__FN amk_result amk__jp_oom(amk__jp *p) {
    if (p->d) { p->d->line = p->line; p->d->col = amk__jp_col(p, p->pos); }
    return amk__fail(p->d, AMK_ERR_OUT_OF_MEMORY, "out of memory parsing JSON");
}

AMK__FN amk_result amk__jp_eof(amk__jp *p) { return AMK__JP_FAIL(p, p->len, "unexpected end of input"); }

/* Describes the byte at pos for a message: 'x' for printable ASCII, else its hex code. */
AMK__FN void amk__jp_describe(const amk__jp *p, size_t pos, char *buf, size_t size) {
    unsigned c = p->s[pos];
    if (c >= 0x20 && c < 0x7F) snprintf(buf, size, "character '%c'", (char)c);
    else snprintf(buf, size, "byte 0x%02X", c);
}

AMK__FN void amk__jp_ws(amk__jp *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c == '\n') {
            if (p->line < INT_MAX) p->line++;
            p->line_start = p->pos + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        p->pos++;
    }
}

AMK__FN int amk__jp_hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        unsigned c = s[i], h;
        if (c >= '0' && c <= '9') h = c - '0';
        else if (c >= 'a' && c <= 'f') h = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') h = c - 'A' + 10;
        else return 0;
        v = v * 16 + h;
    }
    *out = v;
    return 1;
}

/* Length of the valid UTF-8 sequence at s[0..avail), 0 if invalid (overlong, surrogate, above
   U+10FFFF, bad or missing continuation byte). RFC 3629 table 4. */
AMK__FN int amk__utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    int n, i;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)n > avail) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

AMK__FN size_t amk__utf8_put(unsigned char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses the string starting at the '"' at p->pos into a NUL-terminated arena copy. */
AMK__FN amk_result amk__jp_string(amk__jp *p, const char **out, size_t *out_len) {
    const unsigned char *s = p->s;
    size_t q = p->pos + 1, span;
    unsigned char *o, *w;
    /* why: the decoded text is never longer than the raw text up to the closing quote, so one
       exact-size allocation suffices; this scan only sizes it, the loop below validates. */
    while (q < p->len && s[q] != '"') q += s[q] == '\\' ? 2 : 1;
    span = (q < p->len ? q : p->len) - p->pos;
    w = o = (unsigned char *)amk__jarena_alloc(&p->arena, span + 1);
    if (!o) return amk__jp_oom(p);
    q = p->pos + 1;
    for (;;) {
        unsigned c;
        if (q >= p->len) return AMK__JP_FAIL(p, p->len, "unexpected end of input in a string");
        c = s[q];
        if (c == '"') break;
        if (c < 0x20) return AMK__JP_FAIL(p, q, "control character 0x%02X in a string (must be escaped)", c);
        if (c == '\\') {
            unsigned cp;
            if (q + 1 >= p->len) return AMK__JP_FAIL(p, p->len, "unexpected end of input in a string");
            switch (s[q + 1]) {
            case '"': *w++ = '"'; q += 2; continue;
            case '\\': *w++ = '\\'; q += 2; continue;
            case '/': *w++ = '/'; q += 2; continue;
            case 'b': *w++ = '\b'; q += 2; continue;
            case 'f': *w++ = '\f'; q += 2; continue;
            case 'n': *w++ = '\n'; q += 2; continue;
            case 'r': *w++ = '\r'; q += 2; continue;
            case 't': *w++ = '\t'; q += 2; continue;
            case 'u': break;
            default: {
                char what[32];
                amk__jp_describe(p, q + 1, what, sizeof what);
                return AMK__JP_FAIL(p, q, "invalid escape: backslash followed by %s", what);
            }
            }
            if (p->len - q < 6 || !amk__jp_hex4(s + q + 2, &cp))
                return AMK__JP_FAIL(p, q, "\\u must be followed by 4 hex digits");
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return AMK__JP_FAIL(p, q, "lone low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->len - q < 12 || s[q + 6] != '\\' || s[q + 7] != 'u' || !amk__jp_hex4(s + q + 8, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return AMK__JP_FAIL(p, q, "lone high surrogate \\u%04X (a low surrogate escape must follow)", cp);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
            }
            w += amk__utf8_put(w, cp);
            q += 6;
        } else if (c < 0x80) {
            *w++ = (unsigned char)c;
            q++;
        } else {
            int n = amk__utf8_seq_len(s + q, p->len - q);
            if (!n) return AMK__JP_FAIL(p, q, "invalid UTF-8 in a string");
            memcpy(w, s + q, (size_t)n);
            w += n;
            q += (size_t)n;
        }
    }
    *w = 0;
    *out = (const char *)o;
    *out_len = (size_t)(w - o);
    p->pos = q + 1;
    return AMK_OK;
}

/* Converts the number text s[start..end) (already checked against the JSON grammar) to a double
   independently of the process locale: the '.' is removed and the exponent adjusted, so strtod
   only sees digits and an exponent ("12.5e3" -> "125e2"). 0 if it overflows to infinity. */
AMK__FN int amk__jp_number_value(const unsigned char *s, size_t start, size_t end, double *out) {
    char small[96], *buf = small;
    size_t i = start, n = 0, cap = end - start + 32;
    int64_t exp10 = 0, n_frac = 0, e = 0;
    int eneg = 0, ok;
    double v;
    if (cap > sizeof small) {
        buf = (char *)amk__malloc(cap);
        if (!buf) return -1;
    }
    if (s[i] == '-') buf[n++] = s[i++];
    while (i < end && s[i] >= '0' && s[i] <= '9') buf[n++] = (char)s[i++];
    if (i < end && s[i] == '.') {
        i++;
        while (i < end && s[i] >= '0' && s[i] <= '9') {
            buf[n++] = (char)s[i++];
            if (n_frac < INT32_MAX) n_frac++; /* why: past 2^31 digits the value is 0 anyway */
        }
    }
    if (i < end && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (s[i] == '+' || s[i] == '-') eneg = s[i++] == '-';
        /* why: saturate; a decimal exponent beyond 10^9 is 0 or infinity for any mantissa */
        while (i < end) {
            if (e < 1000000000) e = e * 10 + (s[i] - '0');
            i++;
        }
    }
    exp10 = (eneg ? -e : e) - n_frac;
    snprintf(buf + n, cap - n, "e%lld", (long long)exp10);
    v = strtod(buf, NULL);
    ok = v <= DBL_MAX && v >= -DBL_MAX;
    if (buf != small) amk__free(buf);
    *out = v;
    return ok;
}

/* Parses the number at p->pos into v (INT when integral and within int64, else REAL). */
AMK__FN amk_result amk__jp_number(amk__jp *p, amk__jval *v) {
    const unsigned char *s = p->s;
    size_t start = p->pos, i = p->pos;
    int neg = 0, integral = 1, overflow = 0, cv;
    int64_t acc = 0;
    if (s[i] == '-') { neg = 1; i++; }
    if (i >= p->len) return amk__jp_eof(p);
    if (s[i] == '0') {
        i++;
        if (i < p->len && s[i] >= '0' && s[i] <= '9') return AMK__JP_FAIL(p, start, "leading zeros are not allowed in a number");
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < p->len && s[i] >= '0' && s[i] <= '9') {
            int dg = s[i] - '0';
            if (!overflow) {
                /* accumulate negatives toward INT64_MIN so -9223372036854775808 is an INT */
                if (neg) {
                    if (acc < INT64_MIN / 10 || (acc == INT64_MIN / 10 && dg > 8)) overflow = 1;
                    else acc = acc * 10 - dg;
                } else {
                    if (acc > INT64_MAX / 10 || (acc == INT64_MAX / 10 && dg > 7)) overflow = 1;
                    else acc = acc * 10 + dg;
                }
            }
            i++;
        }
    } else {
        char what[32];
        if (neg && (s[i] == 'I' || s[i] == 'N')) return AMK__JP_FAIL(p, start, "Infinity and NaN are not valid JSON numbers");
        amk__jp_describe(p, i, what, sizeof what);
        return AMK__JP_FAIL(p, i, "expected a digit after '-', found %s", what);
    }
    if (i < p->len && s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len) return amk__jp_eof(p);
        if (s[i] < '0' || s[i] > '9') return AMK__JP_FAIL(p, i, "expected a digit after '.' in a number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len) return amk__jp_eof(p);
        if (s[i] < '0' || s[i] > '9') return AMK__JP_FAIL(p, i, "expected a digit in the exponent of a number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (integral && !overflow) {
        v->type = AMK__J_INT;
        v->i = acc;
        v->f = (double)acc;
        p->pos = i;
        return AMK_OK;
    }
    cv = amk__jp_number_value(s, start, i, &v->f);
    if (cv < 0) return amk__jp_oom(p);
    if (!cv) return AMK__JP_FAIL(p, start, "number out of range of a double");
    v->type = AMK__J_REAL;
    v->big = integral; /* an integer literal outside int64 */
    p->pos = i;
    return AMK_OK;
}

AMK__FN amk_result amk__jp_literal(amk__jp *p, const char *word, size_t n) {
    size_t avail = p->len - p->pos;
    if (memcmp(p->s + p->pos, word, avail < n ? avail : n) != 0)
        return AMK__JP_FAIL(p, p->pos, "invalid literal (expected %s)", word);
    if (avail < n) return amk__jp_eof(p);
    p->pos += n;
    return AMK_OK;
}

/* Parses a scalar value at p->pos (not at end of input). */
AMK__FN amk_result amk__jp_scalar(amk__jp *p, amk__jval *v) {
    unsigned c = p->s[p->pos];
    char what[32];
    switch (c) {
    case '"':
        v->type = AMK__J_STRING;
        return amk__jp_string(p, &v->s, &v->slen);
    case 't': v->type = AMK__J_BOOL; v->i = 1; return amk__jp_literal(p, "true", 4);
    case 'f': v->type = AMK__J_BOOL; v->i = 0; return amk__jp_literal(p, "false", 5);
    case 'n': v->type = AMK__J_NULL; return amk__jp_literal(p, "null", 4);
    case 'N': case 'I': return AMK__JP_FAIL(p, p->pos, "Infinity and NaN are not valid JSON numbers");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return amk__jp_number(p, v);
        if (c == 0xEF && p->len - p->pos >= 3 && p->s[p->pos + 1] == 0xBB && p->s[p->pos + 2] == 0xBF)
            return AMK__JP_FAIL(p, p->pos, "a UTF-8 byte order mark is not allowed");
        if (c == '/') return AMK__JP_FAIL(p, p->pos, "comments are not allowed in JSON");
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected a value, found %s", what);
    }
}

/* Reads `"key" :` of an object member into the top frame. */
AMK__FN amk_result amk__jp_key(amk__jp *p, int after_comma) {
    amk__jframe *f = &p->frames[p->n_frames - 1];
    amk_result r;
    char what[32];
    amk__jp_ws(p);
    if (p->pos >= p->len) return amk__jp_eof(p);
    if (p->s[p->pos] != '"') {
        if (after_comma && p->s[p->pos] == '}') return AMK__JP_FAIL(p, p->pos, "trailing comma before '}'");
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected a string key, found %s", what);
    }
    f->key_line = p->line;
    f->key_col = amk__jp_col(p, p->pos);
    r = amk__jp_string(p, &f->key, &f->key_len);
    if (r != AMK_OK) return r;
    amk__jp_ws(p);
    if (p->pos >= p->len) return amk__jp_eof(p);
    if (p->s[p->pos] != ':') {
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected ':' after an object key, found %s", what);
    }
    p->pos++;
    return AMK_OK;
}

typedef struct amk__jkey { const char *s; size_t len; int idx; } amk__jkey;

AMK__FN int amk__jkey_cmp(const void *a, const void *b) {
    const amk__jkey *x = (const amk__jkey *)a, *y = (const amk__jkey *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->s, y->s, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Index (in document order) of the first member whose key repeats an earlier one, -1 if none,
   -2 on out of memory. O(n log n): tokenizer.json has objects with 50k keys. */
AMK__FN int amk__jp_find_dup(const amk__jslot *m, int n) {
    amk__jkey *k;
    int i, j, first = -1;
    if (n <= 8) { /* why: pairwise is cheaper than sorting for the objects programs are made of */
        for (i = 1; i < n; i++)
            for (j = 0; j < i; j++)
                if (m[i].key_len == m[j].key_len && memcmp(m[i].key, m[j].key, m[i].key_len) == 0) return i;
        return -1;
    }
    k = (amk__jkey *)amk__malloc((size_t)n * sizeof(amk__jkey));
    if (!k) return -2;
    for (i = 0; i < n; i++) { k[i].s = m[i].key; k[i].len = m[i].key_len; k[i].idx = i; }
    qsort(k, (size_t)n, sizeof(amk__jkey), amk__jkey_cmp);
    for (i = 1; i < n; i++)
        if (k[i].len == k[i - 1].len && memcmp(k[i].s, k[i - 1].s, k[i].len) == 0 && (first < 0 || k[i].idx < first))
            first = k[i].idx;
    amk__free(k);
    return first;
}

/* Closes the top container: moves its children from the slot stack into the arena. */
AMK__FN amk_result amk__jp_close(amk__jp *p, amk__jval *v) {
    amk__jframe *f = &p->frames[p->n_frames - 1];
    amk__jslot *m = p->slots + f->start;
    int n = p->n_slots - f->start, i;
    memset(v, 0, sizeof *v);
    v->type = f->is_object ? AMK__J_OBJECT : AMK__J_ARRAY;
    v->line = f->line;
    v->col = f->col;
    v->n = n;
    if (n) {
        v->items = (amk__jval *)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(amk__jval));
        if (!v->items) return amk__jp_oom(p);
        for (i = 0; i < n; i++) v->items[i] = m[i].v;
    }
    if (f->is_object && n) {
        int dup = amk__jp_find_dup(m, n);
        if (dup == -2) return amk__jp_oom(p);
        if (dup >= 0) {
            char name[48]; /* why: enough to recognise a key; longer ones end in "..." */
            size_t k, kn = m[dup].key_len < sizeof name - 1 ? m[dup].key_len : sizeof name - 1;
            for (k = 0; k < kn; k++) {
                unsigned char c = (unsigned char)m[dup].key[k];
                name[k] = (char)(c < 0x20 || c == 0x7F ? '?' : c);
            }
            name[kn] = 0;
            return amk__jp_fail_at(p, m[dup].key_line, m[dup].key_col, "duplicate key \"%s%s\"", name,
                                   kn < m[dup].key_len ? "..." : "");
        }
        v->keys = (const char **)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(const char *));
        v->key_lens = (size_t *)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(size_t));
        if (!v->keys || !v->key_lens) return amk__jp_oom(p);
        for (i = 0; i < n; i++) { v->keys[i] = m[i].key; v->key_lens[i] = m[i].key_len; }
    }
    p->n_slots = f->start;
    p->n_frames--;
    return AMK_OK;
}

/* The whole document: values, then after each value either the end of its container, a comma,
   or (at top level) the end of input. */
AMK__FN amk_result amk__jp_run(amk__jp *p, amk__jval *root) {
    amk_result r;
    for (;;) {
        amk__jval v;
        unsigned c;
        memset(&v, 0, sizeof v);
        amk__jp_ws(p);
        if (p->pos >= p->len) return amk__jp_eof(p);
        c = p->s[p->pos];
        v.line = p->line;
        v.col = amk__jp_col(p, p->pos);
        if (c == '[' || c == '{') {
            amk__jframe *f;
            if (p->n_frames >= p->max_depth)
                return AMK__JP_FAIL(p, p->pos, "nesting deeper than %d", p->max_depth);
            if (!amk__grow((void **)&p->frames, &p->cap_frames, p->n_frames + 1, sizeof(amk__jframe)))
                return amk__jp_oom(p);
            f = &p->frames[p->n_frames++];
            memset(f, 0, sizeof *f);
            f->is_object = c == '{';
            f->start = p->n_slots;
            f->line = v.line;
            f->col = v.col;
            p->pos++;
            amk__jp_ws(p);
            if (p->pos < p->len && p->s[p->pos] == (c == '{' ? '}' : ']')) {
                p->pos++;
                r = amk__jp_close(p, &v);
                if (r != AMK_OK) return r;
            } else {
                if (f->is_object && (r = amk__jp_key(p, 0)) != AMK_OK) return r;
                continue;
            }
        } else {
            r = amk__jp_scalar(p, &v);
            if (r != AMK_OK) return r;
        }
        /* v is complete: hand it to its container, closing containers as they end */
        for (;;) {
            amk__jframe *f;
            amk__jslot *sl;
            char what[32];
            if (p->n_frames == 0) {
                amk__jp_ws(p);
                if (p->pos < p->len) {
                    amk__jp_describe(p, p->pos, what, sizeof what);
                    return AMK__JP_FAIL(p, p->pos, "unexpected %s after the JSON value", what);
                }
                *root = v;
                return AMK_OK;
            }
            f = &p->frames[p->n_frames - 1];
            if (!amk__grow((void **)&p->slots, &p->cap_slots, p->n_slots + 1, sizeof(amk__jslot)))
                return amk__jp_oom(p);
            sl = &p->slots[p->n_slots++];
            sl->v = v;
            sl->key = f->key;
            sl->key_len = f->key_len;
            sl->key_line = f->key_line;
            sl->key_col = f->key_col;
            amk__jp_ws(p);
            if (p->pos >= p->len) return amk__jp_eof(p);
            c = p->s[p->pos];
            if (c == ',') {
                p->pos++;
                if (f->is_object) {
                    if ((r = amk__jp_key(p, 1)) != AMK_OK) return r;
                } else {
                    amk__jp_ws(p);
                    if (p->pos < p->len && p->s[p->pos] == ']') return AMK__JP_FAIL(p, p->pos, "trailing comma before ']'");
                }
                break;
            }
            if (c != (f->is_object ? '}' : ']')) {
                amk__jp_describe(p, p->pos, what, sizeof what);
                if (f->is_object) return AMK__JP_FAIL(p, p->pos, "expected ',' or '}' after object member, found %s", what);
                return AMK__JP_FAIL(p, p->pos, "expected ',' or ']' after array element, found %s", what);
            }
            p->pos++;
            if ((r = amk__jp_close(p, &v)) != AMK_OK) return r;
        }
    }
}

AMK__FN amk_result amk__json_parse(const char *text, size_t len, int max_depth, amk__jdoc *doc,
                                  amk_diag *d) {
    amk__jp p;
    amk__jval root;
    amk_result r;
    doc->root = NULL;
    doc->arena = NULL;
    if (!text && len) return amk__fail(d, AMK_ERR_INVALID_ARG, "JSON text is NULL");
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)(text ? text : "");
    p.len = len;
    p.line = 1;
    p.max_depth = max_depth < 0 ? 0 : max_depth;
    p.d = d;
    memset(&root, 0, sizeof root);
    r = amk__jp_run(&p, &root);
    amk__free(p.slots);
    amk__free(p.frames);
    if (r == AMK_OK) {
        doc->root = (amk__jval *)amk__jarena_alloc(&p.arena, sizeof(amk__jval));
        if (!doc->root) r = amk__jp_oom(&p);
        else *doc->root = root;
    }
    if (r != AMK_OK) {
        amk__jarena_free(p.arena);
        doc->root = NULL;
        return r;
    }
    doc->arena = p.arena;
    return AMK_OK;
}

AMK__FN void amk__json_free(amk__jdoc *doc) {
    if (!doc) return;
    amk__jarena_free((amk__jblock *)doc->arena);
    doc->arena = NULL;
    doc->root = NULL;
}

AMK__FN const amk__jval *amk__json_get(const amk__jval *obj, const char *key) {
    size_t n;
    int i;
    if (!obj || obj->type != AMK__J_OBJECT || !key) return NULL;
    n = strlen(key);
    for (i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
    return NULL;
}

AMK__FN void amk__json_put_string(amk__sb *sb, const char *s, size_t len) {
    size_t i, run = 0;
    amk__sb_putc(sb, '"');
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\t') esc = "\\t";
        else if (c == '\r') esc = "\\r";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        if (!esc) { run++; continue; }
        if (run) amk__sb_putn(sb, s + i - run, run); /* the plain bytes before this one */
        run = 0;
        amk__sb_puts(sb, esc);
    }
    if (run) amk__sb_putn(sb, s + len - run, run);
    amk__sb_putc(sb, '"');
}

AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v) {
    char num[40];
    int i;
    switch (v->type) {
    case AMK__J_NULL: amk__sb_puts(sb, "null"); break;
    case AMK__J_BOOL: amk__sb_puts(sb, v->i ? "true" : "false"); break;
    case AMK__J_INT: amk__sb_printf(sb, "%lld", (long long)v->i); break;
    case AMK__J_REAL: amk__fmt_double(num, sizeof num, v->f); amk__sb_puts(sb, num); break;
    case AMK__J_STRING: amk__json_put_string(sb, v->s, v->slen); break;
    case AMK__J_ARRAY:
        amk__sb_putc(sb, '[');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_putc(sb, ',');
            amk__json_put_value(sb, &v->items[i]);
        }
        amk__sb_putc(sb, ']');
        break;
    case AMK__J_OBJECT:
        amk__sb_putc(sb, '{');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_putc(sb, ',');
            amk__json_put_string(sb, v->keys[i], v->key_lens[i]);
            amk__sb_putc(sb, ':');
            amk__json_put_value(sb, &v->items[i]);
        }
        amk__sb_putc(sb, '}');
        break;
    }
}

/* ==== program JSON (spec §6) =================================================================== */

AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out, amk_diag *d) { AMK__UNUSED(text); AMK__UNUSED(len); *out = NULL; return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d) { AMK__UNUSED(path); *out = NULL; return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len) { AMK__UNUSED(p); *out = NULL; if (out_len) *out_len = 0; return AMK_ERR_UNSUPPORTED; }
AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d) { AMK__UNUSED(p); AMK__UNUSED(path); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
