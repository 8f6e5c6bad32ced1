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
        /* blocks double up to the cap; an allocation larger than that gets a block of its own */
        size_t cap = !b ? AMK__JBLOCK_MIN : b->cap >= AMK__JBLOCK_MAX / 2 ? AMK__JBLOCK_MAX : b->cap * 2;
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
    int in_value;       /* a child value is being read (so an error path names it) */
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

/* Appends one JSON Pointer segment (RFC 6901: '~' -> "~0", '/' -> "~1") to path[size]; a path
   that does not fit is cut short. */
AMK__FN void amk__jpath_put(char *path, size_t size, const char *seg, size_t n) {
    size_t len = strlen(path), i;
    if (len + 1 >= size) return;
    path[len++] = '/';
    for (i = 0; i < n && len + 2 < size; i++) {
        char c = seg[i];
        if (c == '~' || c == '/') { path[len++] = '~'; path[len++] = c == '~' ? '0' : '1'; }
        else path[len++] = c ? c : '?';
    }
    path[len] = 0;
}
AMK__FN void amk__jpath_put_index(char *path, size_t size, int64_t i) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)i);
    amk__jpath_put(path, size, num, strlen(num));
}

/* Reports a parse error at line:col with a printf message; returns AMK_ERR_PARSE. d->path gets
   the JSON path of the value being read, from the open containers. */
AMK__FN amk_result amk__jp_fail_at(amk__jp *p, int line, int col, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    int i;
    if (!p->d) return AMK_ERR_PARSE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->d->line = line;
    p->d->col = col;
    p->d->path[0] = 0;
    for (i = 0; i < p->n_frames && p->frames[i].in_value; i++) {
        const amk__jframe *f = &p->frames[i];
        if (f->is_object) {
            amk__jpath_put(p->d->path, sizeof p->d->path, f->key, f->key_len);
        } else {
            int next = i + 1 < p->n_frames ? p->frames[i + 1].start : p->n_slots;
            amk__jpath_put_index(p->d->path, sizeof p->d->path, next - f->start);
        }
    }
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
            n_frac++;
        }
    }
    if (i < end && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < end && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        /* why: saturate; past 10^9 the value is 0 or infinity unless the mantissa itself is
           about a gigabyte of digits */
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

/* Whether the text at pos spells NaN or Infinity (for a precise message). */
AMK__FN int amk__jp_is_nonfinite(const amk__jp *p, size_t pos) {
    size_t avail = p->len - pos;
    return (avail >= 3 && memcmp(p->s + pos, "NaN", 3) == 0) ||
           (avail >= 8 && memcmp(p->s + pos, "Infinity", 8) == 0);
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
        if (i < p->len && s[i] >= '0' && s[i] <= '9')
            return AMK__JP_FAIL(p, start, "leading zeros are not allowed in a number");
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
        if (amk__jp_is_nonfinite(p, i)) return AMK__JP_FAIL(p, start, "Infinity and NaN are not valid JSON numbers");
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
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return amk__jp_number(p, v);
        if (amk__jp_is_nonfinite(p, p->pos))
            return AMK__JP_FAIL(p, p->pos, "Infinity and NaN are not valid JSON numbers");
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
    f->in_value = 1;
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
    int n = p->n_slots - f->start, i;
    amk__jslot *m = n ? p->slots + f->start : NULL;
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
            f->key = m[dup].key; /* the error path names the duplicate member */
            f->key_len = m[dup].key_len;
            f->in_value = 1;
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
                f->in_value = !f->is_object;
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
            f->in_value = 0;
            amk__jp_ws(p);
            if (p->pos >= p->len) return amk__jp_eof(p);
            c = p->s[p->pos];
            if (c == ',') {
                p->pos++;
                if (f->is_object) {
                    if ((r = amk__jp_key(p, 1)) != AMK_OK) return r;
                } else {
                    amk__jp_ws(p);
                    if (p->pos < p->len && p->s[p->pos] == ']')
                        return AMK__JP_FAIL(p, p->pos, "trailing comma before ']'");
                    f->in_value = 1;
                }
                break;
            }
            if (c != (f->is_object ? '}' : ']')) {
                amk__jp_describe(p, p->pos, what, sizeof what);
                return AMK__JP_FAIL(p, p->pos, "expected ',' or '%c' after %s, found %s", f->is_object ? '}' : ']',
                                    f->is_object ? "object member" : "array element", what);
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


/* Writes v as JSON; spaced puts ", " and ": " between items (the program file's style),
   otherwise the output is compact. */
AMK__FN void amk__json_put_value_sep(amk__sb *sb, const amk__jval *v, int spaced) {
    const char *comma = spaced ? ", " : ",", *colon = spaced ? ": " : ":";
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
            if (i) amk__sb_puts(sb, comma);
            amk__json_put_value_sep(sb, &v->items[i], spaced);
        }
        amk__sb_putc(sb, ']');
        break;
    case AMK__J_OBJECT:
        amk__sb_putc(sb, '{');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_puts(sb, comma);
            amk__json_put_string(sb, v->keys[i], v->key_lens[i]);
            amk__sb_puts(sb, colon);
            amk__json_put_value_sep(sb, &v->items[i], spaced);
        }
        amk__sb_putc(sb, '}');
        break;
    }
}

AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v) { amk__json_put_value_sep(sb, v, 0); }

/* ==== program JSON (spec §6) =================================================================== */

/* why: 2^24 buffers, counters, tasks or pages is far beyond any model (Llama-3-70B lowers to about
   10^5 tasks) and keeps every count comfortably inside int. */
#define AMK__JSON_MAX_ITEMS (1 << 24)

/* Loader state: the diag and the JSON path of the value being read. */
typedef struct amk__jl {
    amk_diag *d;
    char path[sizeof(((amk_diag *)0)->path)];
} amk__jl;

AMK__FN size_t amk__jl_key(amk__jl *L, const char *key) {
    size_t old = strlen(L->path);
    amk__jpath_put(L->path, sizeof L->path, key, strlen(key));
    return old;
}
AMK__FN size_t amk__jl_idx(amk__jl *L, int64_t i) {
    size_t old = strlen(L->path);
    amk__jpath_put_index(L->path, sizeof L->path, i);
    return old;
}
AMK__FN void amk__jl_pop(amk__jl *L, size_t old) { L->path[old] = 0; }
/* Extends the path with the key of member i of obj. */
AMK__FN size_t amk__jl_member_key(amk__jl *L, const amk__jval *obj, int i) {
    size_t old = strlen(L->path);
    amk__jpath_put(L->path, sizeof L->path, obj->keys[i], obj->key_lens[i]);
    return old;
}

/* Reports an error about value `at` (its line:col) at the current path. */
AMK__FN amk_result amk__jl_fail(amk__jl *L, const amk__jval *at, amk_result r, const char *fmt, ...) {
    char msg[sizeof(((amk_diag *)0)->message)];
    va_list ap;
    if (!L->d) return r;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->d->line = at ? at->line : 0;
    L->d->col = at ? at->col : 0;
    memcpy(L->d->path, L->path, sizeof L->path);
    return amk__fail(L->d, r, "%s", msg);
}

AMK__FN amk_result amk__jl_oom(amk__jl *L, const amk__jval *at) {
    return amk__jl_fail(L, at, AMK_ERR_OUT_OF_MEMORY, "out of memory loading the program");
}

AMK__FN const char *amk__jl_tname(const amk__jval *v) {
    switch (v->type) {
    case AMK__J_NULL: return "null";
    case AMK__J_BOOL: return "a boolean";
    case AMK__J_INT: return "an integer";
    case AMK__J_REAL: return v->big ? "an integer outside int64" : "a real number";
    case AMK__J_STRING: return "a string";
    case AMK__J_ARRAY: return "an array";
    default: return "an object";
    }
}

AMK__FN amk_result amk__jl_type(amk__jl *L, const amk__jval *v, amk__jtype t, const char *what) {
    if (v->type == t) return AMK_OK;
    return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected %s, found %s", what, amk__jl_tname(v));
}

/* An integer in [lo, hi] (a bool, a real such as 2.0 or a string is never an integer). */
AMK__FN amk_result amk__jl_int_value(amk__jl *L, const amk__jval *v, int64_t lo, int64_t hi, int64_t *out) {
    amk_result r = amk__jl_type(L, v, AMK__J_INT, "an integer");
    if (r != AMK_OK) return r;
    if (v->i < lo || v->i > hi)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected an integer in [%lld, %lld], found %lld",
                            (long long)lo, (long long)hi, (long long)v->i);
    *out = v->i;
    return AMK_OK;
}

/* Looks up obj[key] and extends the path with key. NULL when absent: an error if required (the
   caller then returns *r), otherwise the path is restored. */
AMK__FN const amk__jval *amk__jl_member(amk__jl *L, const amk__jval *obj, const char *key, int required,
                                      size_t *old, amk_result *r) {
    const amk__jval *v = amk__json_get(obj, key);
    *old = amk__jl_key(L, key);
    *r = AMK_OK;
    if (v) return v;
    if (required) *r = amk__jl_fail(L, obj, AMK_ERR_PARSE, "missing required key \"%s\"", key);
    else amk__jl_pop(L, *old);
    return NULL;
}

/* obj[key] as an integer in [lo, hi]; *out keeps its value when an optional key is absent. */
AMK__FN amk_result amk__jl_int(amk__jl *L, const amk__jval *obj, const char *key, int required, int64_t lo,
                              int64_t hi, int64_t *out) {
    size_t old;
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_int_value(L, v, lo, hi, out)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    return AMK_OK;
}
AMK__FN amk_result amk__jl_int32(amk__jl *L, const amk__jval *obj, const char *key, int required, int64_t lo,
                                int64_t hi, int *out) {
    int64_t v = *out;
    amk_result r = amk__jl_int(L, obj, key, required, lo, hi, &v);
    *out = (int)v;
    return r;
}

/* A string value without embedded NUL (the library keeps C strings). */
AMK__FN amk_result amk__jl_str_value(amk__jl *L, const amk__jval *v) {
    amk_result r = amk__jl_type(L, v, AMK__J_STRING, "a string");
    if (r != AMK_OK) return r;
    if (strlen(v->s) != v->slen) return amk__jl_fail(L, v, AMK_ERR_PARSE, "a string here must not contain \\u0000");
    return AMK_OK;
}

/* A heap copy of the key of member i of obj (keys become C strings, so no embedded NUL). */
AMK__FN amk_result amk__jl_key_copy(amk__jl *L, const amk__jval *obj, int i, char **out) {
    if (strlen(obj->keys[i]) != obj->key_lens[i])
        return amk__jl_fail(L, &obj->items[i], AMK_ERR_PARSE, "a key here must not contain \\u0000");
    if (!(*out = amk__strndup(obj->keys[i], obj->key_lens[i]))) return amk__jl_oom(L, obj);
    return AMK_OK;
}

/* obj[key] as a new heap string (nullable: JSON null gives NULL). *out keeps its value when an
   optional key is absent; a replaced value is freed. */
AMK__FN amk_result amk__jl_str(amk__jl *L, const amk__jval *obj, const char *key, int required, int nullable,
                              char **out) {
    size_t old;
    amk_result r;
    char *s = NULL;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if (!(nullable && v->type == AMK__J_NULL)) {
        if (v->type != AMK__J_STRING)
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected a string%s, found %s", nullable ? " or null" : "",
                                amk__jl_tname(v));
        if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
        if (!(s = amk__strndup(v->s, v->slen))) return amk__jl_oom(L, v);
    }
    amk__free(*out);
    *out = s;
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* obj[key] as one of names[0..n) (an enum by name); *out keeps its value when absent. */
AMK__FN amk_result amk__jl_enum(amk__jl *L, const amk__jval *obj, const char *key, int required,
                               const char *const *names, int n, int *out) {
    size_t old;
    amk_result r;
    int i;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
    for (i = 0; i < n; i++)
        if (strcmp(names[i], v->s) == 0) {
            *out = i;
            amk__jl_pop(L, old);
            return AMK_OK;
        }
    {
        char expect[160] = "";
        for (i = 0; i < n; i++) {
            size_t len = strlen(expect);
            snprintf(expect + len, sizeof expect - len, "%s%s", i ? ", " : "", names[i]);
        }
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "unknown %s \"%.64s\" (expected one of %s)", key, v->s, expect);
    }
}

/* Fails on a member of obj whose key is not in keys (NULL-terminated). */
AMK__FN amk_result amk__jl_known(amk__jl *L, const amk__jval *obj, const char *const *keys, const char *what) {
    int i, k;
    for (i = 0; i < obj->n; i++) {
        for (k = 0; keys[k]; k++)
            if (strlen(keys[k]) == obj->key_lens[i] && memcmp(keys[k], obj->keys[i], obj->key_lens[i]) == 0) break;
        if (!keys[k]) {
            amk__jl_member_key(L, obj, i);
            return amk__jl_fail(L, &obj->items[i], AMK_ERR_PARSE, "unknown key \"%.64s\" in %s", obj->keys[i], what);
        }
    }
    return AMK_OK;
}

/* Reads obj["id"] as a unique id in [0, n) (seen marks the ids taken). */
AMK__FN amk_result amk__jl_id(amk__jl *L, const amk__jval *obj, int n, amk__word *seen, const char *what,
                             int *out) {
    size_t old;
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, "id", 1, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer")) != AMK_OK) return r;
    if (v->i < 0 || v->i >= n)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "%s id %lld is out of range: ids are 0..%d", what, (long long)v->i,
                            n - 1);
    if (amk__bit_get(seen, (size_t)v->i))
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "duplicate %s id %lld", what, (long long)v->i);
    amk__bit_set(seen, (size_t)v->i);
    *out = (int)v->i;
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* Checks an array's length against the cap and allocates n zeroed elements (NULL for n == 0). */
AMK__FN amk_result amk__jl_alloc(amk__jl *L, const amk__jval *arr, const char *what, size_t elem, void **out) {
    *out = NULL;
    if (arr->n > AMK__JSON_MAX_ITEMS)
        return amk__jl_fail(L, arr, AMK_ERR_PARSE, "too many %s (%d, the limit is %d)", what, arr->n,
                            AMK__JSON_MAX_ITEMS);
    if (arr->n && !(*out = amk__calloc((size_t)arr->n, elem))) return amk__jl_oom(L, arr);
    return AMK_OK;
}

/* An array of ids, each in [0, n) (what names them in messages). */
AMK__FN amk_result amk__jl_refs(amk__jl *L, const amk__jval *obj, const char *key, int n, const char *what,
                               int **out, int *n_out) {
    size_t old, old2;
    amk_result r;
    int i;
    const amk__jval *v = amk__jl_member(L, obj, key, 1, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of ids")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, what, sizeof(int), (void **)out)) != AMK_OK) return r;
    *n_out = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *e = &v->items[i];
        old2 = amk__jl_idx(L, i);
        if ((r = amk__jl_type(L, e, AMK__J_INT, "an integer id")) != AMK_OK) return r;
        if (e->i < 0 || e->i >= n)
            return amk__jl_fail(L, e, AMK_ERR_PARSE, "%s id %lld does not exist (there are %d)", what,
                                (long long)e->i, n);
        (*out)[i] = (int)e->i;
        amk__jl_pop(L, old2);
    }
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* A decimal object key naming an id in [0, n) ("0", "17"; no sign, no leading zeros). */
AMK__FN int amk__jl_key_id(const char *s, size_t len, int64_t n, int64_t *out) {
    int64_t v = 0;
    size_t i;
    /* why: 10 digits exceed every id bound (2^31) without overflowing int64 */
    if (len == 0 || len > 10 || (len > 1 && s[0] == '0')) return 0;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v >= n) return 0;
    *out = v;
    return 1;
}

static const char *const amk__jl_buffer_keys[] = {"id", "name", "kind", "dtype", "shape", "space", "source", NULL};
static const char *const amk__jl_counter_keys[] = {"id", "init", "note", NULL};
static const char *const amk__jl_task_keys[] = {"id", "op", "inputs", "outputs", "out_counter", "waits", "params",
                                               "sm", "est_bytes", "est_flops", "label", NULL};
static const char *const amk__jl_wait_keys[] = {"counter", "threshold", NULL};
static const char *const amk__jl_pages_keys[] = {"buffer_to_page", "pages", NULL};
static const char *const amk__jl_page_keys[] = {"id", "space", "nbytes", "live_start", "live_end", NULL};

AMK__FN amk_result amk__jl_buffers(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i, k;
    if ((r = amk__jl_alloc(L, arr, "buffers", sizeof(amk_buffer), (void **)&p->buffers)) != AMK_OK) return r;
    p->n_buffers = p->cap_buffers = arr->n;
    if (!(seen = (amk__word *)amk__calloc(AMK__WORDS(arr->n) + 1, sizeof(amk__word)))) return amk__jl_oom(L, arr);
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i], *shape;
        size_t old = amk__jl_idx(L, i), old2;
        amk_buffer *b;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a buffer object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_buffer_keys, "a buffer")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "buffer", &id)) != AMK_OK) break;
        b = &p->buffers[id];
        b->id = id;
        b->space = AMK_SPACE_HBM;
        if ((r = amk__jl_str(L, e, "name", 1, 0, &b->name)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "kind", 1, amk__kind_names, AMK_KIND_COUNT, &b->kind)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "dtype", 1, amk__dtype_names, AMK_DTYPE_COUNT, &b->dtype)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "space", 0, amk__space_names, AMK_SPACE_COUNT, &b->space)) != AMK_OK) break;
        if ((r = amk__jl_str(L, e, "source", 0, 1, &b->source)) != AMK_OK) break;
        if (!(shape = amk__jl_member(L, e, "shape", 1, &old2, &r))) break;
        if ((r = amk__jl_type(L, shape, AMK__J_ARRAY, "a shape array")) != AMK_OK) break;
        if (shape->n > AMK_MAX_RANK) {
            r = amk__jl_fail(L, shape, AMK_ERR_PARSE, "rank %d is above the maximum %d", shape->n, AMK_MAX_RANK);
            break;
        }
        b->rank = shape->n;
        for (k = 0; k < shape->n && r == AMK_OK; k++) {
            size_t old3 = amk__jl_idx(L, k);
            r = amk__jl_int_value(L, &shape->items[k], 0, INT64_MAX, &b->shape[k]);
            if (r == AMK_OK) amk__jl_pop(L, old3);
        }
        if (r != AMK_OK) break;
        if (amk__buffer_nbytes(b) < 0) {
            r = amk__jl_fail(L, shape, AMK_ERR_PARSE, "the shape's element or byte count overflows int64");
            break;
        }
        amk__jl_pop(L, old2);
        amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_counters(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i;
    if ((r = amk__jl_alloc(L, arr, "counters", sizeof(amk_counter), (void **)&p->counters)) != AMK_OK) return r;
    p->n_counters = p->cap_counters = arr->n;
    if (!(seen = (amk__word *)amk__calloc(AMK__WORDS(arr->n) + 1, sizeof(amk__word)))) return amk__jl_oom(L, arr);
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i];
        size_t old = amk__jl_idx(L, i);
        amk_counter *c;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a counter object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_counter_keys, "a counter")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "counter", &id)) != AMK_OK) break;
        c = &p->counters[id];
        c->id = id;
        /* why: a counter is a uint32 on the device (amk_counter_t) */
        if ((r = amk__jl_int(L, e, "init", 0, 0, 4294967295LL, &c->init)) != AMK_OK) break;
        if ((r = amk__jl_str(L, e, "note", 0, 0, &c->note)) != AMK_OK) break;
        if (!c->note && !(c->note = amk__strdup(""))) { r = amk__jl_oom(L, e); break; }
        amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_params(amk__jl *L, const amk__jval *obj, amk_task *t) {
    amk_result r;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a params object")) != AMK_OK) return r;
    if (!obj->n) return AMK_OK;
    if (!(t->params = (amk_param *)amk__calloc((size_t)obj->n, sizeof(amk_param)))) return amk__jl_oom(L, obj);
    t->n_params = obj->n;
    for (i = 0; i < obj->n; i++) {
        const amk__jval *v = &obj->items[i];
        amk_param *pr = &t->params[i];
        size_t old = amk__jl_member_key(L, obj, i);
        if ((r = amk__jl_key_copy(L, obj, i, &pr->key)) != AMK_OK) return r;
        switch (v->type) {
        case AMK__J_INT: pr->type = AMK_PARAM_INT; pr->i = v->i; pr->f = (double)v->i; break;
        case AMK__J_REAL:
            if (v->big) return amk__jl_fail(L, v, AMK_ERR_PARSE, "integer param outside int64");
            pr->type = AMK_PARAM_REAL; pr->f = v->f; break;
        case AMK__J_BOOL: pr->type = AMK_PARAM_BOOL; pr->i = v->i; break;
        case AMK__J_NULL: pr->type = AMK_PARAM_NULL; break;
        case AMK__J_STRING:
            if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
            pr->type = AMK_PARAM_STRING;
            if (!(pr->s = amk__strndup(v->s, v->slen))) return amk__jl_oom(L, v);
            break;
        default:
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "a param must be a number, boolean, string or null, found %s",
                                amk__jl_tname(v));
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

AMK__FN amk_result amk__jl_task(amk__jl *L, const amk__jval *e, amk_program *p, amk__word *seen, amk_task *t) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    char *op = NULL;
    int i;
    t->sm = -1;
    if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a task object")) != AMK_OK) return r;
    if ((r = amk__jl_known(L, e, amk__jl_task_keys, "a task")) != AMK_OK) return r;
    if ((r = amk__jl_id(L, e, p->n_tasks, seen, "task", &t->id)) != AMK_OK) return r;
    if ((r = amk__jl_str(L, e, "op", 1, 0, &op)) != AMK_OK) return r;
    t->op = amk_op_from_name(op);
    if (t->op < 0) t->op_name = op; /* validate rejects it (OP_UNKNOWN) */
    else amk__free(op);
    if ((r = amk__jl_refs(L, e, "inputs", p->n_buffers, "buffer", &t->inputs, &t->n_inputs)) != AMK_OK) return r;
    if ((r = amk__jl_refs(L, e, "outputs", p->n_buffers, "buffer", &t->outputs, &t->n_outputs)) != AMK_OK) return r;
    if (!(v = amk__jl_member(L, e, "out_counter", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer counter id")) != AMK_OK) return r;
    if (v->i < 0 || v->i >= p->n_counters)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "counter id %lld does not exist (there are %d)", (long long)v->i,
                            p->n_counters);
    t->out_counter = (int)v->i;
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, e, "waits", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of waits")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, v, "waits", sizeof(amk_wait), (void **)&t->waits)) != AMK_OK) return r;
        t->n_waits = v->n;
        for (i = 0; i < v->n; i++) {
            const amk__jval *w = &v->items[i], *c;
            size_t old2 = amk__jl_idx(L, i), old3;
            if ((r = amk__jl_type(L, w, AMK__J_OBJECT, "a wait object {counter, threshold}")) != AMK_OK) return r;
            if ((r = amk__jl_known(L, w, amk__jl_wait_keys, "a wait")) != AMK_OK) return r;
            if (!(c = amk__jl_member(L, w, "counter", 1, &old3, &r))) return r;
            if ((r = amk__jl_type(L, c, AMK__J_INT, "an integer counter id")) != AMK_OK) return r;
            if (c->i < 0 || c->i >= p->n_counters)
                return amk__jl_fail(L, c, AMK_ERR_PARSE, "counter id %lld does not exist (there are %d)",
                                    (long long)c->i, p->n_counters);
            t->waits[i].counter = (int)c->i;
            amk__jl_pop(L, old3);
            /* any int64: validate checks the range (WAIT_UNSATISFIABLE) */
            r = amk__jl_int(L, w, "threshold", 1, INT64_MIN, INT64_MAX, &t->waits[i].threshold);
            if (r != AMK_OK) return r;
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    } else if (r != AMK_OK) {
        return r;
    }
    if ((v = amk__jl_member(L, e, "params", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_params(L, v, t)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, e, "sm", 0, &old, &r)) != NULL) {
        if (v->type != AMK__J_NULL) {
            int64_t sm;
            if (v->type == AMK__J_INT && v->i < 0)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "sm %lld is negative (use null for unassigned)",
                                    (long long)v->i);
            if ((r = amk__jl_int_value(L, v, 0, INT_MAX, &sm)) != AMK_OK) return r;
            t->sm = (int)sm;
        }
        amk__jl_pop(L, old);
    }
    if ((r = amk__jl_int(L, e, "est_bytes", 0, 0, INT64_MAX, &t->est_bytes)) != AMK_OK) return r;
    if ((r = amk__jl_int(L, e, "est_flops", 0, 0, INT64_MAX, &t->est_flops)) != AMK_OK) return r;
    if ((r = amk__jl_str(L, e, "label", 0, 0, &t->label)) != AMK_OK) return r;
    if (!t->label && !(t->label = amk__strdup(""))) return amk__jl_oom(L, e);
    return AMK_OK;
}

AMK__FN amk_result amk__jl_tasks(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i;
    if ((r = amk__jl_alloc(L, arr, "tasks", sizeof(amk_task), (void **)&p->tasks)) != AMK_OK) return r;
    p->n_tasks = p->cap_tasks = arr->n;
    if (!(seen = (amk__word *)amk__calloc(AMK__WORDS(arr->n) + 1, sizeof(amk__word)))) return amk__jl_oom(L, arr);
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        size_t old = amk__jl_idx(L, i);
        if ((r = amk__jl_task(L, &arr->items[i], p, seen, &p->tasks[i])) == AMK_OK) amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_pages(amk__jl *L, const amk__jval *obj, amk_program *p) {
    const amk__jval *arr, *map;
    amk__word *seen;
    amk_result r;
    size_t old;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a page allocation object or null")) != AMK_OK) return r;
    if ((r = amk__jl_known(L, obj, amk__jl_pages_keys, "the page allocation")) != AMK_OK) return r;
    if (!(arr = amk__jl_member(L, obj, "pages", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, arr, AMK__J_ARRAY, "an array of pages")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, arr, "pages", sizeof(amk_page), (void **)&p->pages)) != AMK_OK) return r;
    p->n_pages = arr->n;
    p->has_pages = 1;
    if (!(p->buffer_page = (int *)amk__malloc((size_t)p->n_buffers * sizeof(int)))) return amk__jl_oom(L, obj);
    for (i = 0; i < p->n_buffers; i++) p->buffer_page[i] = -1;
    if (!(seen = (amk__word *)amk__calloc(AMK__WORDS(arr->n) + 1, sizeof(amk__word)))) return amk__jl_oom(L, arr);
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i];
        size_t old2 = amk__jl_idx(L, i);
        amk_page *pg;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a page object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_page_keys, "a page")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "page", &id)) != AMK_OK) break;
        pg = &p->pages[id];
        pg->id = id;
        pg->live_start = pg->live_end = -1;
        if ((r = amk__jl_enum(L, e, "space", 1, amk__space_names, AMK_SPACE_COUNT, &pg->space)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "nbytes", 1, 0, INT64_MAX, &pg->nbytes)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "live_start", 0, -1, INT64_MAX, &pg->live_start)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "live_end", 0, -1, INT64_MAX, &pg->live_end)) != AMK_OK) break;
        amk__jl_pop(L, old2);
    }
    amk__free(seen);
    if (r != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(map = amk__jl_member(L, obj, "buffer_to_page", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, map, AMK__J_OBJECT, "an object {buffer id: page id}")) != AMK_OK) return r;
    for (i = 0; i < map->n; i++) {
        const amk__jval *v = &map->items[i];
        size_t old2 = amk__jl_member_key(L, map, i);
        int64_t b, pg;
        if (!amk__jl_key_id(map->keys[i], map->key_lens[i], p->n_buffers, &b))
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "key \"%.32s\" is not the decimal id of a buffer (there are %d)",
                                map->keys[i], p->n_buffers);
        if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer page id")) != AMK_OK) return r;
        pg = v->i;
        if (pg < 0 || pg >= p->n_pages)
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "page id %lld does not exist (there are %d)", (long long)pg,
                                p->n_pages);
        p->buffer_page[b] = (int)pg;
        amk__jl_pop(L, old2);
    }
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* amk_target's fields in spec order (§5.1): one table drives both reading and writing.
   Types: 's' char array, 'i' int, 'l' int64_t, 'f' double, 'b' int written as true/false. */
typedef struct amk__jfield {
    const char *name;
    char type;
    size_t offset, size;
} amk__jfield;

#define AMK__JT(name, type) {#name, type, offsetof(amk_target, name), sizeof(((amk_target *)0)->name)}
static const amk__jfield amk__jl_target_fields[] = {
    AMK__JT(name, 's'), AMK__JT(sm_arch, 'i'), AMK__JT(num_sms, 'i'), AMK__JT(smem_bytes_per_sm, 'l'),
    AMK__JT(smem_bytes_per_block_optin, 'l'), AMK__JT(regs_per_sm, 'l'), AMK__JT(max_threads_per_sm, 'i'),
    AMK__JT(max_regs_per_thread, 'i'), AMK__JT(l2_bytes, 'l'), AMK__JT(hbm_bytes, 'l'),
    AMK__JT(hbm_bandwidth_gbs, 'f'), AMK__JT(fp16_tflops, 'f'), AMK__JT(clock_ghz, 'f'),
    AMK__JT(supports_cooperative, 'b'), AMK__JT(wddm_tdr, 'b'), AMK__JT(note, 's')};
#undef AMK__JT
#define AMK__JT_COUNT ((int)(sizeof amk__jl_target_fields / sizeof amk__jl_target_fields[0]))

/* Missing fields are 0 or ""; unknown fields are dropped (forward compatibility, spec §6). */
AMK__FN amk_result amk__jl_target(amk__jl *L, const amk__jval *obj, amk_target *t) {
    amk_result r;
    int k;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a target object or null")) != AMK_OK) return r;
    memset(t, 0, sizeof *t);
    for (k = 0; k < AMK__JT_COUNT; k++) {
        const amk__jfield *f = &amk__jl_target_fields[k];
        const amk__jval *v = amk__json_get(obj, f->name);
        char *dst = (char *)t + f->offset;
        size_t old;
        int64_t iv;
        if (!v) continue;
        old = amk__jl_key(L, f->name);
        switch (f->type) {
        case 's':
            if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
            if (v->slen >= f->size)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "%s is longer than %d bytes", f->name, (int)f->size - 1);
            memcpy(dst, v->s, v->slen + 1);
            break;
        case 'i':
            if ((r = amk__jl_int_value(L, v, INT_MIN, INT_MAX, &iv)) != AMK_OK) return r;
            *(int *)(void *)dst = (int)iv;
            break;
        case 'l':
            if ((r = amk__jl_int_value(L, v, INT64_MIN, INT64_MAX, (int64_t *)(void *)dst)) != AMK_OK) return r;
            break;
        case 'f':
            if (v->type != AMK__J_INT && v->type != AMK__J_REAL)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected a number, found %s", amk__jl_tname(v));
            *(double *)(void *)dst = v->f;
            break;
        default:
            if ((r = amk__jl_type(L, v, AMK__J_BOOL, "true or false")) != AMK_OK) return r;
            *(int *)(void *)dst = (int)v->i;
            break;
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

static const char *const amk__jl_page_alloc_names[] = {"graph_color", "linear", "none"};

/* config.tiling: {archetype: {key: int}}. */
AMK__FN amk_result amk__jl_tiling(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i, j;
    if ((r = amk__jl_type(L, v, AMK__J_OBJECT, "an object {archetype: {key: int}}")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, "tiling archetypes", sizeof(amk_tiling), (void **)&c->tiling)) != AMK_OK) return r;
    c->n_tiling = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *a = &v->items[i];
        amk_tiling *t = &c->tiling[i];
        size_t old = amk__jl_member_key(L, v, i);
        if ((r = amk__jl_key_copy(L, v, i, &t->archetype)) != AMK_OK) return r;
        if ((r = amk__jl_type(L, a, AMK__J_OBJECT, "an object {key: int}")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, a, "tile params", sizeof(amk_tile_param), (void **)&t->items)) != AMK_OK) return r;
        t->n_items = a->n;
        for (j = 0; j < a->n; j++) {
            size_t old2 = amk__jl_member_key(L, a, j);
            if ((r = amk__jl_key_copy(L, a, j, &t->items[j].key)) != AMK_OK) return r;
            r = amk__jl_int_value(L, &a->items[j], INT64_MIN, INT64_MAX, &t->items[j].value);
            if (r != AMK_OK) return r;
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* config.fusion_grouping: [[op name, ...], ...]. */
AMK__FN amk_result amk__jl_fusion(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i, j;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of arrays of op names")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, "fusion groups", sizeof(amk_fusion_group), (void **)&c->fusion)) != AMK_OK) return r;
    c->n_fusion = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *g = &v->items[i];
        amk_fusion_group *fg = &c->fusion[i];
        size_t old = amk__jl_idx(L, i);
        if ((r = amk__jl_type(L, g, AMK__J_ARRAY, "an array of op names")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, g, "op names", sizeof(char *), (void **)&fg->names)) != AMK_OK) return r;
        fg->n_names = g->n;
        for (j = 0; j < g->n; j++) {
            size_t old2 = amk__jl_idx(L, j);
            if ((r = amk__jl_str_value(L, &g->items[j])) != AMK_OK) return r;
            if (!(fg->names[j] = amk__strndup(g->items[j].s, g->items[j].slen))) return amk__jl_oom(L, g);
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* config.sm_assignment: "load_balance", "round_robin" or {"<task id>": sm} (spec §5). */
AMK__FN amk_result amk__jl_sm_assignment(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i;
    if (v->type == AMK__J_STRING && strcmp(v->s, "load_balance") == 0 && v->slen == 12) {
        c->sm_assignment = AMK_SM_LOAD_BALANCE;
        return AMK_OK;
    }
    if (v->type == AMK__J_STRING && strcmp(v->s, "round_robin") == 0 && v->slen == 11) {
        c->sm_assignment = AMK_SM_ROUND_ROBIN;
        return AMK_OK;
    }
    if (v->type != AMK__J_OBJECT)
        return amk__jl_fail(L, v, AMK_ERR_PARSE,
                            "expected \"round_robin\", \"load_balance\" or an object {task id: sm}, found %s",
                            v->type == AMK__J_STRING ? "another string" : amk__jl_tname(v));
    c->sm_assignment = AMK_SM_EXPLICIT;
    if ((r = amk__jl_alloc(L, v, "sm_assignment entries", sizeof(int), (void **)&c->explicit_task)) != AMK_OK ||
        (r = amk__jl_alloc(L, v, "sm_assignment entries", sizeof(int), (void **)&c->explicit_sm)) != AMK_OK)
        return r;
    c->n_explicit = v->n;
    for (i = 0; i < v->n; i++) {
        size_t old = amk__jl_member_key(L, v, i);
        int64_t task, sm;
        if (!amk__jl_key_id(v->keys[i], v->key_lens[i], INT_MAX, &task))
            return amk__jl_fail(L, &v->items[i], AMK_ERR_PARSE, "key \"%.32s\" is not a decimal task id", v->keys[i]);
        if ((r = amk__jl_int_value(L, &v->items[i], 0, INT_MAX, &sm)) != AMK_OK) return r;
        c->explicit_task[i] = (int)task;
        c->explicit_sm[i] = (int)sm;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* Missing fields keep amk_config_default's values; unknown fields are dropped. */
AMK__FN amk_result amk__jl_config(amk__jl *L, const amk__jval *obj, amk_config *c) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    int pa = (int)c->page_allocation;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a config object or null")) != AMK_OK) return r;
    if ((v = amk__jl_member(L, obj, "tiling", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_tiling(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, obj, "fusion_grouping", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_fusion(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, obj, "sm_assignment", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_sm_assignment(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    r = amk__jl_int32(L, obj, "pipelining_depth", 0, INT_MIN, INT_MAX, &c->pipelining_depth);
    if (r != AMK_OK) return r;
    if ((r = amk__jl_enum(L, obj, "page_allocation", 0, amk__jl_page_alloc_names, 3, &pa)) != AMK_OK) return r;
    c->page_allocation = (amk_page_allocation)pa;
    r = amk__jl_int32(L, obj, "threads_per_block", 0, INT_MIN, INT_MAX, &c->threads_per_block);
    if (r != AMK_OK) return r;
    return amk__jl_int(L, obj, "smem_bytes_per_block", 0, INT64_MIN, INT64_MAX, &c->smem_bytes_per_block);
}

AMK__FN amk_result amk__jl_meta(amk__jl *L, const amk__jval *obj, amk_program *p) {
    amk_result r;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a meta object")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, obj, "meta keys", sizeof(amk_meta), (void **)&p->meta)) != AMK_OK) return r;
    p->n_meta = p->cap_meta = obj->n;
    for (i = 0; i < obj->n; i++) {
        amk__sb sb;
        size_t old = amk__jl_member_key(L, obj, i);
        if ((r = amk__jl_key_copy(L, obj, i, &p->meta[i].key)) != AMK_OK) return r;
        memset(&sb, 0, sizeof sb);
        amk__json_put_value(&sb, &obj->items[i]);
        if (sb.oom) { amk__sb_free(&sb); return amk__jl_oom(L, obj); }
        p->meta[i].json = sb.p;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* "MAJOR.MINOR.PATCH", each 1-9 decimal digits; 0 if malformed. */
AMK__FN int amk__jl_version(const char *s, size_t len, long *major) {
    size_t i = 0;
    int part;
    long v[3];
    for (part = 0; part < 3; part++) {
        size_t start = i;
        v[part] = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 9) v[part] = v[part] * 10 + (s[i++] - '0');
        if (i == start) return 0;
        if (part < 2) {
            if (i >= len || s[i] != '.') return 0;
            i++;
        }
    }
    if (i != len) return 0;
    *major = v[0];
    return 1;
}

/* An optional member that may be null (= absent): returns it with the path extended, or NULL. */
AMK__FN const amk__jval *amk__jl_nullable(amk__jl *L, const amk__jval *obj, const char *key, size_t *old) {
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, key, 0, old, &r);
    if (v && v->type == AMK__J_NULL) { amk__jl_pop(L, *old); return NULL; }
    return v;
}

AMK__FN amk_result amk__jl_program(amk__jl *L, const amk__jval *root, amk_program *p) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    long major = 0;
    if (root->type != AMK__J_OBJECT)
        return amk__jl_fail(L, root, AMK_ERR_PARSE, "the top level must be a program object, found %s",
                            amk__jl_tname(root));
    /* the version first: a newer major may change everything after it */
    if (!(v = amk__jl_member(L, root, "ir_version", 1, &old, &r))) return r;
    if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
    if (!amk__jl_version(v->s, v->slen, &major))
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "ir_version \"%.32s\" is not of the form MAJOR.MINOR.PATCH", v->s);
    if (major != AMK_IR_VERSION_MAJOR)
        return amk__jl_fail(L, v, AMK_ERR_VERSION, "ir_version %.32s is not supported (this is %s)", v->s,
                            AMK_IR_VERSION);
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, root, "abi_version", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_type(L, v, AMK__J_STRING, "a string")) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if (!(v = amk__jl_member(L, root, "buffers", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of buffers")) != AMK_OK) return r;
    if ((r = amk__jl_buffers(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(v = amk__jl_member(L, root, "counters", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of counters")) != AMK_OK) return r;
    if ((r = amk__jl_counters(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(v = amk__jl_member(L, root, "tasks", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of tasks")) != AMK_OK) return r;
    if ((r = amk__jl_tasks(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, root, "meta", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_meta(L, v, p)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "target", &old)) != NULL) {
        if ((r = amk__jl_target(L, v, &p->target)) != AMK_OK) return r;
        p->has_target = 1;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "pages", &old)) != NULL) {
        if ((r = amk__jl_pages(L, v, p)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "config", &old)) != NULL) {
        if ((r = amk__jl_config(L, v, &p->config)) != AMK_OK) return r;
        p->has_config = 1;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out, amk_diag *d) {
    amk__jdoc doc;
    amk__jl L;
    amk_program *p;
    amk_result r;
    amk_diag_clear(d);
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_json: out is NULL");
    *out = NULL;
    if (!text && len) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_json: text is NULL");
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) return r;
    if (!(p = amk_program_create())) {
        amk__json_free(&doc);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory loading the program");
    }
    memset(&L, 0, sizeof L);
    L.d = d;
    r = amk__jl_program(&L, doc.root, p);
    amk__json_free(&doc);
    if (r != AMK_OK) {
        amk_program_free(p);
        return r;
    }
    *out = p;
    return AMK_OK;
}

AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result r;
    amk_diag_clear(d);
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_file: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_file: path is NULL");
    /* why: mapping refuses what is not a regular file (a directory, a FIFO) before sizing it */
    if ((r = amk__map_file(path, &map, &size, d)) != AMK_OK) return r;
    r = amk_program_load_json((const char *)map, size, out, d);
    amk__unmap_file(map, size);
    if (r != AMK_OK && d) { /* prefix the message with file:line:col (the path stays JSON) */
        char prefix[128];
        size_t pl, ml = strlen(d->message);
        if (d->line) snprintf(prefix, sizeof prefix, "%s:%d:%d: ", path, d->line, d->col);
        else snprintf(prefix, sizeof prefix, "%s: ", path);
        pl = strlen(prefix);
        if (pl + ml + 1 > sizeof d->message) ml = sizeof d->message - pl - 1;
        memmove(d->message + pl, d->message, ml);
        memcpy(d->message, prefix, pl);
        d->message[pl + ml] = 0;
    }
    return r;
}

/* ---- writing ------------------------------------------------------------------------------------ */

/* Writer state. bad is set when p holds something the loader would refuse (a dangling id, an
   enum code without a name, a non-finite real, invalid UTF-8): the writer then fails rather than
   emit a file that does not load. */
typedef struct amk__jw {
    amk__sb sb;
    int bad;
} amk__jw;

AMK__FN void amk__jw_str(amk__jw *w, const char *s) {
    size_t i = 0, n;
    if (!s) s = "";
    n = strlen(s);
    while (i < n) {
        int k = amk__utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k) { w->bad = 1; break; }
        i += (size_t)k;
    }
    amk__json_put_string(&w->sb, s, n);
}

AMK__FN void amk__jw_real(amk__jw *w, double v) {
    char num[40];
    if (!(v <= DBL_MAX && v >= -DBL_MAX)) w->bad = 1;
    amk__fmt_double(num, sizeof num, v);
    amk__sb_puts(&w->sb, num);
}

AMK__FN void amk__jw_i64(amk__jw *w, int64_t v) { amk__sb_printf(&w->sb, "%lld", (long long)v); }

/* A name from a table, or bad for a code outside it. */
AMK__FN void amk__jw_enum(amk__jw *w, const char *const *names, int n, int code) {
    if (code < 0 || code >= n) { w->bad = 1; amk__sb_puts(&w->sb, "null"); return; }
    amk__jw_str(w, names[code]);
}

/* An id that must lie in [0, n). */
AMK__FN void amk__jw_ref(amk__jw *w, int64_t id, int64_t n) {
    if (id < 0 || id >= n) w->bad = 1;
    amk__jw_i64(w, id);
}

AMK__FN void amk__jw_key(amk__jw *w, const char *key) {
    amk__jw_str(w, key);
    amk__sb_puts(&w->sb, ": ");
}

/* A stored meta value, re-read so the file always holds canonical JSON. */
AMK__FN void amk__jw_meta_value(amk__jw *w, const char *json) {
    amk__jdoc doc;
    if (!json || amk__json_parse(json, strlen(json), AMK_JSON_MAX_DEPTH, &doc, NULL) != AMK_OK) {
        w->bad = 1;
        amk__sb_puts(&w->sb, "null");
        return;
    }
    amk__json_put_value_sep(&w->sb, doc.root, 1);
    amk__json_free(&doc);
}

AMK__FN void amk__jw_target(amk__jw *w, const amk_target *t) {
    int k;
    amk__sb_putc(&w->sb, '{');
    for (k = 0; k < AMK__JT_COUNT; k++) {
        const amk__jfield *f = &amk__jl_target_fields[k];
        const char *src = (const char *)t + f->offset;
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, f->name);
        switch (f->type) {
        case 's':
            if (!memchr(src, 0, f->size)) { w->bad = 1; amk__sb_puts(&w->sb, "\"\""); }
            else amk__jw_str(w, src);
            break;
        case 'i': amk__jw_i64(w, *(const int *)(const void *)src); break;
        case 'l': amk__jw_i64(w, *(const int64_t *)(const void *)src); break;
        case 'f': amk__jw_real(w, *(const double *)(const void *)src); break;
        default: amk__sb_puts(&w->sb, *(const int *)(const void *)src ? "true" : "false"); break;
        }
    }
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_buffer(amk__jw *w, const amk_buffer *b, int id) {
    int k;
    amk__sb_printf(&w->sb, "{\"id\": %d, \"name\": ", id);
    amk__jw_str(w, b->name);
    amk__sb_puts(&w->sb, ", \"kind\": ");
    amk__jw_enum(w, amk__kind_names, AMK_KIND_COUNT, b->kind);
    amk__sb_puts(&w->sb, ", \"dtype\": ");
    amk__jw_enum(w, amk__dtype_names, AMK_DTYPE_COUNT, b->dtype);
    amk__sb_puts(&w->sb, ", \"shape\": [");
    if (b->rank < 0 || b->rank > AMK_MAX_RANK || amk__buffer_nbytes(b) < 0) w->bad = 1;
    for (k = 0; k < b->rank && k < AMK_MAX_RANK; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_i64(w, b->shape[k]);
    }
    amk__sb_puts(&w->sb, "], \"space\": ");
    amk__jw_enum(w, amk__space_names, AMK_SPACE_COUNT, b->space);
    amk__sb_puts(&w->sb, ", \"source\": ");
    if (b->source) amk__jw_str(w, b->source);
    else amk__sb_puts(&w->sb, "null");
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_task(amk__jw *w, const amk_program *p, const amk_task *t) {
    int k;
    amk__sb_printf(&w->sb, "{\"id\": %d, \"op\": ", t->id);
    if (amk_op_spec_get(t->op)) amk__jw_str(w, amk_op_name(t->op));
    else if (t->op_name) amk__jw_str(w, t->op_name);
    else { w->bad = 1; amk__sb_puts(&w->sb, "null"); }
    amk__sb_puts(&w->sb, ", \"inputs\": [");
    for (k = 0; k < t->n_inputs; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_ref(w, t->inputs[k], p->n_buffers);
    }
    amk__sb_puts(&w->sb, "], \"outputs\": [");
    for (k = 0; k < t->n_outputs; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_ref(w, t->outputs[k], p->n_buffers);
    }
    amk__sb_puts(&w->sb, "], \"out_counter\": ");
    amk__jw_ref(w, t->out_counter, p->n_counters);
    amk__sb_puts(&w->sb, ", \"waits\": [");
    for (k = 0; k < t->n_waits; k++) {
        amk__sb_puts(&w->sb, k ? ", {\"counter\": " : "{\"counter\": ");
        amk__jw_ref(w, t->waits[k].counter, p->n_counters);
        amk__sb_printf(&w->sb, ", \"threshold\": %lld}", (long long)t->waits[k].threshold);
    }
    amk__sb_puts(&w->sb, "], \"params\": {");
    for (k = 0; k < t->n_params; k++) {
        const amk_param *pr = &t->params[k];
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, pr->key);
        switch (pr->type) {
        case AMK_PARAM_INT: amk__jw_i64(w, pr->i); break;
        case AMK_PARAM_REAL: amk__jw_real(w, pr->f); break;
        case AMK_PARAM_BOOL: amk__sb_puts(&w->sb, pr->i ? "true" : "false"); break;
        case AMK_PARAM_STRING: amk__jw_str(w, pr->s); break;
        case AMK_PARAM_NULL: amk__sb_puts(&w->sb, "null"); break;
        default: w->bad = 1; amk__sb_puts(&w->sb, "null"); break;
        }
    }
    amk__sb_puts(&w->sb, "}, \"sm\": ");
    if (t->sm == -1) amk__sb_puts(&w->sb, "null");
    else amk__jw_ref(w, t->sm, (int64_t)INT_MAX + 1);
    if (t->est_bytes < 0 || t->est_flops < 0) w->bad = 1;
    amk__sb_printf(&w->sb, ", \"est_bytes\": %lld, \"est_flops\": %lld, \"label\": ", (long long)t->est_bytes,
                   (long long)t->est_flops);
    amk__jw_str(w, t->label);
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_pages(amk__jw *w, const amk_program *p) {
    int i, first = 1;
    amk__sb_puts(&w->sb, "{\n    \"buffer_to_page\": {");
    for (i = 0; i < p->n_buffers && p->buffer_page; i++) {
        if (p->buffer_page[i] == -1) continue;
        amk__sb_printf(&w->sb, "%s\"%d\": ", first ? "" : ", ", i);
        amk__jw_ref(w, p->buffer_page[i], p->n_pages);
        first = 0;
    }
    amk__sb_puts(&w->sb, "},\n    \"pages\": [");
    for (i = 0; i < p->n_pages; i++) {
        const amk_page *pg = &p->pages[i];
        amk__sb_printf(&w->sb, "%s\n      {\"id\": %d, \"space\": ", i ? "," : "", i);
        amk__jw_enum(w, amk__space_names, AMK_SPACE_COUNT, pg->space);
        if (pg->nbytes < 0 || pg->live_start < -1 || pg->live_end < -1) w->bad = 1;
        amk__sb_printf(&w->sb, ", \"nbytes\": %lld, \"live_start\": %lld, \"live_end\": %lld}", (long long)pg->nbytes,
                       (long long)pg->live_start, (long long)pg->live_end);
    }
    amk__sb_puts(&w->sb, p->n_pages ? "\n    ]\n  }" : "]\n  }");
}

AMK__FN void amk__jw_config(amk__jw *w, const amk_config *c) {
    int i, j;
    amk__sb_puts(&w->sb, "{\n    \"tiling\": {");
    for (i = 0; i < c->n_tiling; i++) {
        if (i) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, c->tiling[i].archetype);
        amk__sb_putc(&w->sb, '{');
        for (j = 0; j < c->tiling[i].n_items; j++) {
            if (j) amk__sb_puts(&w->sb, ", ");
            amk__jw_key(w, c->tiling[i].items[j].key);
            amk__jw_i64(w, c->tiling[i].items[j].value);
        }
        amk__sb_putc(&w->sb, '}');
    }
    amk__sb_puts(&w->sb, "},\n    \"fusion_grouping\": [");
    for (i = 0; i < c->n_fusion; i++) {
        amk__sb_puts(&w->sb, i ? ", [" : "[");
        for (j = 0; j < c->fusion[i].n_names; j++) {
            if (j) amk__sb_puts(&w->sb, ", ");
            amk__jw_str(w, c->fusion[i].names[j]);
        }
        amk__sb_putc(&w->sb, ']');
    }
    amk__sb_puts(&w->sb, "],\n    \"sm_assignment\": ");
    if (c->sm_assignment == AMK_SM_LOAD_BALANCE) amk__sb_puts(&w->sb, "\"load_balance\"");
    else if (c->sm_assignment == AMK_SM_ROUND_ROBIN) amk__sb_puts(&w->sb, "\"round_robin\"");
    else if (c->sm_assignment == AMK_SM_EXPLICIT) {
        amk__sb_putc(&w->sb, '{');
        for (i = 0; i < c->n_explicit; i++) {
            if (c->explicit_task[i] < 0 || c->explicit_sm[i] < 0) w->bad = 1;
            amk__sb_printf(&w->sb, "%s\"%d\": %d", i ? ", " : "", c->explicit_task[i], c->explicit_sm[i]);
        }
        amk__sb_putc(&w->sb, '}');
    } else {
        w->bad = 1;
        amk__sb_puts(&w->sb, "null");
    }
    amk__sb_printf(&w->sb, ",\n    \"pipelining_depth\": %d,\n    \"page_allocation\": ", c->pipelining_depth);
    amk__jw_enum(w, amk__jl_page_alloc_names, 3, (int)c->page_allocation);
    amk__sb_printf(&w->sb, ",\n    \"threads_per_block\": %d,\n    \"smem_bytes_per_block\": %lld\n  }",
                   c->threads_per_block, (long long)c->smem_bytes_per_block);
}

AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len) {
    amk__jw w;
    amk__word *ids;
    int i;
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!p || !out) return AMK_ERR_INVALID_ARG;
    memset(&w, 0, sizeof w);
    amk__sb_puts(&w.sb, "{\n  \"ir_version\": \"" AMK_IR_VERSION "\",\n  \"abi_version\": \"" AMK_ABI_VERSION
                        "\",\n  \"meta\": {");
    for (i = 0; i < p->n_meta; i++) {
        if (i) amk__sb_puts(&w.sb, ", ");
        amk__jw_key(&w, p->meta[i].key);
        amk__jw_meta_value(&w, p->meta[i].json);
    }
    amk__sb_puts(&w.sb, "},\n  \"target\": ");
    if (p->has_target) amk__jw_target(&w, &p->target);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, ",\n  \"buffers\": [");
    for (i = 0; i < p->n_buffers; i++) {
        amk__sb_puts(&w.sb, i ? ",\n    " : "\n    ");
        amk__jw_buffer(&w, &p->buffers[i], i);
    }
    amk__sb_puts(&w.sb, p->n_buffers ? "\n  ],\n  \"counters\": [" : "],\n  \"counters\": [");
    for (i = 0; i < p->n_counters; i++) {
        const amk_counter *c = &p->counters[i];
        if (c->init < 0 || c->init > 4294967295LL) w.bad = 1;
        amk__sb_printf(&w.sb, "%s{\"id\": %d, \"init\": %lld, \"note\": ", i ? ",\n    " : "\n    ", i,
                       (long long)c->init);
        amk__jw_str(&w, c->note);
        amk__sb_putc(&w.sb, '}');
    }
    amk__sb_puts(&w.sb, p->n_counters ? "\n  ],\n  \"tasks\": [" : "],\n  \"tasks\": [");
    /* task ids must be unique and in [0, n_tasks) to load again */
    ids = (amk__word *)amk__calloc(AMK__WORDS(p->n_tasks) + 1, sizeof(amk__word));
    if (!ids) { amk__sb_free(&w.sb); return AMK_ERR_OUT_OF_MEMORY; }
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        if (t->id < 0 || t->id >= p->n_tasks || amk__bit_get(ids, (size_t)t->id)) w.bad = 1;
        else amk__bit_set(ids, (size_t)t->id);
        amk__sb_puts(&w.sb, i ? ",\n    " : "\n    ");
        amk__jw_task(&w, p, t);
    }
    amk__free(ids);
    amk__sb_puts(&w.sb, p->n_tasks ? "\n  ],\n  \"pages\": " : "],\n  \"pages\": ");
    if (p->has_pages) amk__jw_pages(&w, p);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, ",\n  \"config\": ");
    if (p->has_config) amk__jw_config(&w, &p->config);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, "\n}\n");
    if (w.sb.oom) { amk__sb_free(&w.sb); return AMK_ERR_OUT_OF_MEMORY; }
    if (w.bad) { amk__sb_free(&w.sb); return AMK_ERR_INVALID_ARG; }
    if (out_len) *out_len = w.sb.len;
    *out = w.sb.p;
    return AMK_OK;
}

AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d) {
    char *text;
    size_t len;
    amk_result r;
    amk_diag_clear(d);
    if (!p || !path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_save: NULL argument");
    r = amk_program_write_json(p, &text, &len);
    if (r == AMK_ERR_INVALID_ARG)
        return amk__fail(d, r, "the program holds a value the JSON format cannot express or would not load "
                               "(a dangling id, an unnamed enum code, a non-finite real or invalid UTF-8)");
    if (r != AMK_OK) return amk__fail(d, r, "out of memory writing the program");
    r = amk__write_file(path, text, len, d);
    amk__free(text);
    return r;
}
