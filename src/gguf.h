/* ==== >>gguf: GGUF v2/v3 reader and ggml block dequantization ================================= */
/* Included twice from amk.h: once with AMK__PART_DECL defined (public declarations, inside
   extern "C"), once with AMK__PART_IMPL defined (the implementation). */
#ifdef AMK__PART_DECL

/* A parsed GGUF file (REFERENCE.md §1): metadata key/values and tensor infos, with every size and
   offset checked against the file. Little-endian v2 and v3 only. Tensor data and array elements
   point into the file's bytes, which must stay alive (open maps the file and owns the mapping). */
typedef struct amk_gguf amk_gguf;

/* GGUF metadata value types (the u32 codes of the file). */
typedef enum amk_gguf_value_type {
    AMK_GGUF_UINT8 = 0, AMK_GGUF_INT8 = 1, AMK_GGUF_UINT16 = 2, AMK_GGUF_INT16 = 3,
    AMK_GGUF_UINT32 = 4, AMK_GGUF_INT32 = 5, AMK_GGUF_FLOAT32 = 6, AMK_GGUF_BOOL = 7,
    AMK_GGUF_STRING = 8, AMK_GGUF_ARRAY = 9, AMK_GGUF_UINT64 = 10, AMK_GGUF_INT64 = 11,
    AMK_GGUF_FLOAT64 = 12
} amk_gguf_value_type;

/* ggml tensor type codes that amk_gguf_dequant converts (others are sized and listed, not read). */
typedef enum amk_ggml_type {
    AMK_GGML_F32 = 0, AMK_GGML_F16 = 1, AMK_GGML_Q4_0 = 2, AMK_GGML_Q4_1 = 3, AMK_GGML_Q5_0 = 6,
    AMK_GGML_Q5_1 = 7, AMK_GGML_Q8_0 = 8, AMK_GGML_Q4_K = 12, AMK_GGML_Q6_K = 14, AMK_GGML_BF16 = 30
} amk_ggml_type;

typedef struct amk_gguf_tensor {
    const char *name;       /* NUL-terminated copy */
    uint32_t type;          /* ggml_type code */
    int n_dims;             /* 1..4 */
    int64_t dims[4];        /* GGUF order: dims[0] is the contiguous axis (ne[0]); unused ones 1 */
    uint64_t offset;        /* from the start of the data section */
    const void *data;       /* into the mapped file */
    uint64_t nbytes;
} amk_gguf_tensor;

/* Maps the file at path and parses it (errors name the file). Close with amk_gguf_close. */
AMK_API amk_result amk_gguf_open(const char *path, amk_gguf **out, amk_diag *d);
/* Parses size bytes at data; the caller keeps data alive until amk_gguf_close. */
AMK_API amk_result amk_gguf_parse(const void *data, size_t size, amk_gguf **out, amk_diag *d);
/* Frees g (and unmaps the file if open mapped it). NULL is fine. */
AMK_API void amk_gguf_close(amk_gguf *g);
AMK_API uint32_t amk_gguf_version(const amk_gguf *g);
/* Tensors in file order; tensor_at returns NULL out of range, find_tensor NULL if absent. */
AMK_API int amk_gguf_n_tensors(const amk_gguf *g);
AMK_API const amk_gguf_tensor *amk_gguf_tensor_at(const amk_gguf *g, int i);
AMK_API const amk_gguf_tensor *amk_gguf_find_tensor(const amk_gguf *g, const char *name);
/* Metadata in file order. Keys are NUL-terminated copies owned by g. */
AMK_API int amk_gguf_n_kv(const amk_gguf *g);
AMK_API const char *amk_gguf_kv_key(const amk_gguf *g, int i);
AMK_API int amk_gguf_find_key(const amk_gguf *g, const char *key);            /* index or -1 */
AMK_API uint32_t amk_gguf_kv_type(const amk_gguf *g, int i);                  /* 0..12 */
/* Scalars; any integer type converts (range-checked into int64); return 1 if found and
   convertible, else 0 and *out untouched. get_float also takes integers; get_bool only BOOL. */
AMK_API int amk_gguf_get_int(const amk_gguf *g, const char *key, int64_t *out);
AMK_API int amk_gguf_get_float(const amk_gguf *g, const char *key, double *out); /* ints too */
AMK_API int amk_gguf_get_bool(const amk_gguf *g, const char *key, int *out);
/* A STRING value: a NUL-terminated copy owned by g (it may hold NUL bytes: use len), or NULL. */
AMK_API const char *amk_gguf_get_string(const amk_gguf *g, const char *key, size_t *len);
/* Arrays: O(1) element access. array_len gives the count and element type, or -1 if key is not
   an array. Element getters return 0 / NULL for an index out of range or a type that does not
   convert (array_int: integer and bool elements; array_float: those and floats). Arrays of
   arrays are parsed and checked, but their elements are not accessible. */
AMK_API int64_t amk_gguf_array_len(const amk_gguf *g, const char *key, uint32_t *elem_type);
AMK_API const char *amk_gguf_array_string(const amk_gguf *g, const char *key, int64_t i, size_t *len); /* NOT NUL-terminated: use len */
AMK_API int amk_gguf_array_int(const amk_gguf *g, const char *key, int64_t i, int64_t *out);
AMK_API int amk_gguf_array_float(const amk_gguf *g, const char *key, int64_t i, double *out);
/* Dequantizes n elements (n a multiple of the block size) of ggml type `type` from src into dst
   as out_dtype (F32, F16 or BF16). Types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q6_K.
   src_bytes must hold the n elements' blocks. AMK_ERR_UNSUPPORTED for another type. */
AMK_API amk_result amk_gguf_dequant(uint32_t type, const void *src, uint64_t src_bytes, int64_t n,
                                    int out_dtype, void *dst, amk_diag *d);
/* The ggml name of a type code ("Q4_K"), "?" if unknown. */
AMK_API const char *amk_gguf_type_name(uint32_t type);

#endif /* AMK__PART_DECL */

#ifdef AMK__PART_IMPL

#define AMK__GGUF_MAGIC 0x46554747u  /* "GGUF" read as a little-endian u32 */
#define AMK__GGUF_MAX_DEPTH 4        /* why: real files nest arrays at most 1 deep; bounds recursion */
#define AMK__GGUF_DEFAULT_ALIGN 32   /* why: the GGUF spec's default when general.alignment is absent */
/* why: 4096 floats (16 KB of stack) hold a whole number of blocks of every type and amortise the
   per-chunk calls of dequantization */
#define AMK__GGUF_CHUNK 4096

/* ---- ggml type table: name, elements per block, bytes per block (gguf-py GGML_QUANT_SIZES) ---- */

typedef struct amk__ggml_traits { const char *name; uint32_t blck, tsize; } amk__ggml_traits;

static const amk__ggml_traits amk__ggml_types[] = {
    {"F32", 1, 4}, {"F16", 1, 2}, {"Q4_0", 32, 18}, {"Q4_1", 32, 20}, {NULL, 0, 0}, {NULL, 0, 0},
    {"Q5_0", 32, 22}, {"Q5_1", 32, 24}, {"Q8_0", 32, 34}, {"Q8_1", 32, 40}, {"Q2_K", 256, 84},
    {"Q3_K", 256, 110}, {"Q4_K", 256, 144}, {"Q5_K", 256, 176}, {"Q6_K", 256, 210},
    {"Q8_K", 256, 292}, {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98},
    {"IQ1_S", 256, 50}, {"IQ4_NL", 32, 18}, {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},
    {"IQ4_XS", 256, 136}, {"I8", 1, 1}, {"I16", 1, 2}, {"I32", 1, 4}, {"I64", 1, 8},
    {"F64", 1, 8}, {"IQ1_M", 256, 56}, {"BF16", 1, 2}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0},
    {"TQ1_0", 256, 54}, {"TQ2_0", 256, 66}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0},
    {"MXFP4", 32, 17}, {"NVFP4", 64, 36}, {"Q1_0", 128, 18},
};
#define AMK__GGML_N_TYPES (sizeof amk__ggml_types / sizeof amk__ggml_types[0])

AMK__FN const amk__ggml_traits *amk__ggml_type_traits(uint32_t type) {
    if (type >= AMK__GGML_N_TYPES || !amk__ggml_types[type].name) return NULL;
    return &amk__ggml_types[type];
}

AMK_API const char *amk_gguf_type_name(uint32_t type) {
    const amk__ggml_traits *t = amk__ggml_type_traits(type);
    return t ? t->name : "?";
}

/* ---- the parsed file ----------------------------------------------------------------------- */

typedef struct amk__gguf_kv {
    char *key; size_t key_len;   /* NUL-terminated copy */
    uint32_t type;               /* amk_gguf_value_type */
    int64_t ival; int ival_ok;   /* integer and bool scalars (ival_ok 0: a u64 above INT64_MAX) */
    double fval;                 /* every numeric scalar */
    char *str; size_t str_len;   /* STRING: NUL-terminated copy */
    uint32_t elem_type;          /* ARRAY */
    int64_t count;
    const uint8_t *elems;        /* ARRAY: the first element, in the file */
    uint64_t *str_off;           /* ARRAY of STRING: [count] offset from elems of each u64 length */
} amk__gguf_kv;

/* Open-addressing hash from a name to an index (keys and tensor names); names point at copies
   owned by the amk_gguf. */
typedef struct amk__gguf_slot { const char *name; size_t len; int idx; } amk__gguf_slot;
typedef struct amk__gguf_index { amk__gguf_slot *slots; size_t mask; } amk__gguf_index;

struct amk_gguf {
    const uint8_t *data; size_t size;
    void *map; size_t map_size;  /* owned mapping (amk_gguf_open), else NULL */
    uint32_t version;
    uint64_t alignment, data_start;
    amk__gguf_kv *kvs; int n_kvs;
    amk_gguf_tensor *tensors; int n_tensors;
    amk__gguf_index kv_index, tensor_index;
};

static const uint8_t amk__gguf_vsize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const amk__gguf_vnames[13] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32",
    "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};

AMK__FN uint64_t amk__gguf_hash(const char *s, size_t n) {
    uint64_t h = 14695981039346656037ull; /* why: FNV-1a 64-bit offset basis and prime */
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* Sized for n names at most half full, so probing always ends at an empty slot. */
AMK__FN int amk__gguf_index_init(amk__gguf_index *ix, int n) {
    size_t cap = 16, i;
    while (cap < (size_t)n * 2) cap *= 2;
    ix->slots = (amk__gguf_slot *)amk__malloc(cap * sizeof(amk__gguf_slot));
    if (!ix->slots) return 0;
    for (i = 0; i < cap; i++) ix->slots[i].idx = -1;
    ix->mask = cap - 1;
    return 1;
}

/* The index of name, or -1 when absent; then with insert >= 0 it is added under that index (name
   must stay alive). */
AMK__FN int amk__gguf_index_find(const amk__gguf_index *ix, const char *name, size_t len,
                                 int insert) {
    size_t h;
    if (!ix->slots) return -1;
    for (h = (size_t)amk__gguf_hash(name, len) & ix->mask;; h = (h + 1) & ix->mask) {
        amk__gguf_slot *s = &ix->slots[h];
        if (s->idx < 0) {
            if (insert >= 0) { s->name = name; s->len = len; s->idx = insert; }
            return -1;
        }
        if (s->len == len && memcmp(s->name, name, len) == 0) return s->idx;
    }
}

AMK__FN int amk__gguf_is_int(uint32_t t) {
    return t <= AMK_GGUF_INT32 || t == AMK_GGUF_UINT64 || t == AMK_GGUF_INT64;
}
AMK__FN int amk__gguf_is_num(uint32_t t) {
    return amk__gguf_is_int(t) || t == AMK_GGUF_FLOAT32 || t == AMK_GGUF_FLOAT64;
}

/* ---- bounds-checked reader ------------------------------------------------------------------- */

typedef struct amk__gguf_rd { const uint8_t *p; size_t size, pos; amk_diag *d; } amk__gguf_rd;

AMK__FN size_t amk__gguf_left(const amk__gguf_rd *r) { return r->size - r->pos; }

AMK__FN amk_result amk__gguf_short(amk__gguf_rd *r, const char *what, uint64_t need) {
    return amk__fail(r->d, AMK_ERR_PARSE, "%s needs %llu bytes at offset %llu but the file ends "
                     "there (size %llu)", what, (unsigned long long)need,
                     (unsigned long long)r->pos, (unsigned long long)r->size);
}

AMK__FN amk_result amk__gguf_u32(amk__gguf_rd *r, const char *what, uint32_t *v) {
    *v = 0;
    if (amk__gguf_left(r) < 4) return amk__gguf_short(r, what, 4);
    *v = (uint32_t)r->p[r->pos] | (uint32_t)r->p[r->pos + 1] << 8 |
         (uint32_t)r->p[r->pos + 2] << 16 | (uint32_t)r->p[r->pos + 3] << 24;
    r->pos += 4;
    return AMK_OK;
}
AMK__FN uint64_t amk__gguf_le64(const uint8_t *b) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}
AMK__FN amk_result amk__gguf_u64(amk__gguf_rd *r, const char *what, uint64_t *v) {
    *v = 0;
    if (amk__gguf_left(r) < 8) return amk__gguf_short(r, what, 8);
    *v = amk__gguf_le64(r->p + r->pos);
    r->pos += 8;
    return AMK_OK;
}
/* A gguf string (u64 length + bytes): *s points into the file. */
AMK__FN amk_result amk__gguf_str(amk__gguf_rd *r, const char *what, const char **s, size_t *len) {
    uint64_t n;
    amk_result res = amk__gguf_u64(r, what, &n);
    if (res) return res;
    if (n > amk__gguf_left(r))
        return amk__fail(r->d, AMK_ERR_PARSE, "%s: string length %llu at offset %llu runs past "
                         "the end of the file (size %llu)", what, (unsigned long long)n,
                         (unsigned long long)(r->pos - 8), (unsigned long long)r->size);
    *s = (const char *)r->p + r->pos;
    *len = (size_t)n;
    r->pos += (size_t)n;
    return AMK_OK;
}

/* Decodes one fixed-size scalar of type t at b. */
AMK__FN void amk__gguf_scalar(uint32_t t, const uint8_t *b, int64_t *iv, int *iv_ok, double *fv) {
    uint64_t u = 0;
    int i;
    for (i = amk__gguf_vsize[t] - 1; i >= 0; i--) u = u << 8 | b[i];
    *iv_ok = 1;
    switch (t) {
    case AMK_GGUF_INT8: *iv = (int8_t)u; break;
    case AMK_GGUF_INT16: *iv = (int16_t)u; break;
    case AMK_GGUF_INT32: *iv = (int32_t)(uint32_t)u; break;
    case AMK_GGUF_INT64: *iv = (int64_t)u; break;
    case AMK_GGUF_UINT64: *iv = (int64_t)u; *iv_ok = u <= (uint64_t)INT64_MAX; break;
    case AMK_GGUF_FLOAT32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, 4);
        *iv = 0; *iv_ok = 0; *fv = f;
        return;
    }
    case AMK_GGUF_FLOAT64: *iv = 0; *iv_ok = 0; memcpy(fv, &u, 8); return;
    default: *iv = (int64_t)u; break; /* UINT8/16/32, BOOL */
    }
    *fv = t == AMK_GGUF_UINT64 ? (double)u : (double)*iv;
}

/* Walks one array (elem type + count + elements) at r, checking every length. depth counts the
   enclosing arrays. With kv non-NULL (a top-level array) it records where the elements are. */
AMK__FN amk_result amk__gguf_array(amk__gguf_rd *r, const char *key, int depth, amk__gguf_kv *kv) {
    uint32_t et;
    uint64_t count, i;
    amk_result res;
    if (depth > AMK__GGUF_MAX_DEPTH)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': arrays nested deeper than %d", key,
                         AMK__GGUF_MAX_DEPTH);
    if ((res = amk__gguf_u32(r, "array element type", &et)) != AMK_OK ||
        (res = amk__gguf_u64(r, "array length", &count)) != AMK_OK)
        return res;
    if (et > AMK_GGUF_FLOAT64)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': unknown array element type %u", key, et);
    /* why: check the count against the bytes left before looping or allocating; a string needs
       its 8-byte length, a nested array 12 bytes of header */
    {
        uint64_t min = et == AMK_GGUF_STRING ? 8 : et == AMK_GGUF_ARRAY ? 12 : amk__gguf_vsize[et];
        if (count > amk__gguf_left(r) / min)
            return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': array of %llu %s elements at offset "
                             "%llu runs past the end of the file (size %llu)", key,
                             (unsigned long long)count, amk__gguf_vnames[et],
                             (unsigned long long)r->pos, (unsigned long long)r->size);
    }
    if (kv) {
        kv->elem_type = et;
        kv->count = (int64_t)count;
        kv->elems = r->p + r->pos;
    }
    if (et == AMK_GGUF_STRING) {
        if (kv && !(kv->str_off = (uint64_t *)amk__malloc((size_t)count * sizeof(uint64_t))))
            return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "key '%s': out of memory", key);
        for (i = 0; i < count; i++) {
            const char *s;
            size_t n;
            if (kv) kv->str_off[i] = (uint64_t)(r->p + r->pos - kv->elems);
            if ((res = amk__gguf_str(r, key, &s, &n)) != AMK_OK) return res;
        }
    } else if (et == AMK_GGUF_ARRAY) {
        for (i = 0; i < count; i++)
            if ((res = amk__gguf_array(r, key, depth + 1, NULL)) != AMK_OK) return res;
    } else {
        if (et == AMK_GGUF_BOOL)
            for (i = 0; i < count; i++)
                if (r->p[r->pos + i] > 1)
                    return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': bool element %llu is %u "
                                     "(must be 0 or 1)", key, (unsigned long long)i,
                                     r->p[r->pos + i]);
        r->pos += (size_t)count * amk__gguf_vsize[et];
    }
    return AMK_OK;
}

AMK__FN amk_result amk__gguf_kv_parse(amk__gguf_rd *r, amk_gguf *g, int idx) {
    amk__gguf_kv *kv = &g->kvs[idx];
    const char *s;
    size_t n;
    amk_result res;
    if ((res = amk__gguf_str(r, "metadata key", &s, &n)) != AMK_OK) return res;
    if (!(kv->key = amk__strndup(s, n)))
        return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading metadata");
    kv->key_len = n;
    g->n_kvs = idx + 1; /* why: from here on close frees this entry */
    if (amk__gguf_index_find(&g->kv_index, kv->key, n, idx) >= 0)
        return amk__fail(r->d, AMK_ERR_PARSE, "duplicate metadata key '%s'", kv->key);
    if ((res = amk__gguf_u32(r, kv->key, &kv->type)) != AMK_OK) return res;
    if (kv->type > AMK_GGUF_FLOAT64)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': unknown value type %u", kv->key,
                         kv->type);
    if (kv->type == AMK_GGUF_STRING) {
        if ((res = amk__gguf_str(r, kv->key, &s, &n)) != AMK_OK) return res;
        if (!(kv->str = amk__strndup(s, n)))
            return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "key '%s': out of memory", kv->key);
        kv->str_len = n;
        return AMK_OK;
    }
    if (kv->type == AMK_GGUF_ARRAY) return amk__gguf_array(r, kv->key, 1, kv);
    if (amk__gguf_left(r) < amk__gguf_vsize[kv->type])
        return amk__gguf_short(r, kv->key, amk__gguf_vsize[kv->type]);
    amk__gguf_scalar(kv->type, r->p + r->pos, &kv->ival, &kv->ival_ok, &kv->fval);
    if (kv->type == AMK_GGUF_BOOL && kv->ival > 1)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': bool value %d (must be 0 or 1)", kv->key,
                         (int)kv->ival);
    r->pos += amk__gguf_vsize[kv->type];
    return AMK_OK;
}

AMK__FN amk_result amk__gguf_tensor_parse(amk__gguf_rd *r, amk_gguf *g, int idx) {
    amk_gguf_tensor *t = &g->tensors[idx];
    const amk__ggml_traits *tr;
    const char *s;
    size_t n;
    uint32_t nd;
    uint64_t v;
    int64_t numel = 1, blocks;
    int k;
    amk_result res;
    if ((res = amk__gguf_str(r, "tensor name", &s, &n)) != AMK_OK) return res;
    if (memchr(s, 0, n))
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor %d: name holds a NUL byte", idx);
    if (!(t->name = amk__strndup(s, n)))
        return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading tensor infos");
    g->n_tensors = idx + 1; /* why: from here on close frees this entry */
    if (amk__gguf_index_find(&g->tensor_index, t->name, n, idx) >= 0)
        return amk__fail(r->d, AMK_ERR_PARSE, "duplicate tensor name '%s'", t->name);
    if ((res = amk__gguf_u32(r, t->name, &nd)) != AMK_OK) return res;
    if (nd < 1 || nd > 4)
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': %u dimensions (must be 1..4)",
                         t->name, nd);
    t->n_dims = (int)nd;
    for (k = 0; k < 4; k++) t->dims[k] = 1;
    for (k = 0; k < (int)nd; k++) {
        if ((res = amk__gguf_u64(r, t->name, &v)) != AMK_OK) return res;
        if (v < 1 || v > (uint64_t)INT64_MAX)
            return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': dimension %d is %llu (must be "
                             ">= 1)", t->name, k, (unsigned long long)v);
        t->dims[k] = (int64_t)v;
        if (!amk__mul_i64(numel, t->dims[k], &numel))
            return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': element count overflows",
                             t->name);
    }
    if ((res = amk__gguf_u32(r, t->name, &t->type)) != AMK_OK ||
        (res = amk__gguf_u64(r, t->name, &t->offset)) != AMK_OK)
        return res;
    if (!(tr = amk__ggml_type_traits(t->type)))
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': unknown ggml type code %u", t->name,
                         t->type);
    if (t->dims[0] % tr->blck != 0)
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': row length %lld is not a multiple "
                         "of the %s block size %u", t->name, (long long)t->dims[0], tr->name,
                         tr->blck);
    blocks = numel / tr->blck;
    if (!amk__mul_u64((uint64_t)blocks, tr->tsize, &t->nbytes))
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': byte size overflows", t->name);
    return AMK_OK;
}

/* Places every tensor in the data section once the header's end is known. */
AMK__FN amk_result amk__gguf_place(amk_gguf *g, amk_diag *d) {
    int i;
    for (i = 0; i < g->n_tensors; i++) {
        amk_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (t->offset % g->alignment != 0)
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': offset %llu is not a multiple of the "
                             "alignment %llu", t->name, (unsigned long long)t->offset,
                             (unsigned long long)g->alignment);
        if (!amk__add_u64(g->data_start, t->offset, &start) ||
            !amk__add_u64(start, t->nbytes, &end) || end > (uint64_t)g->size)
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': data [offset %llu, %llu bytes] runs "
                             "past the end of the file (size %llu)", t->name,
                             (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                             (unsigned long long)g->size);
        t->data = g->data + start;
    }
    return AMK_OK;
}

AMK__FN amk_result amk__gguf_parse_all(amk_gguf *g, amk_diag *d) {
    amk__gguf_rd rd;
    uint32_t magic;
    uint64_t n_tensors, n_kv, pad;
    int i, ai;
    amk_result res;
    rd.p = g->data; rd.size = g->size; rd.pos = 0; rd.d = d;
    if ((res = amk__gguf_u32(&rd, "magic", &magic)) != AMK_OK) return res;
    if (magic != AMK__GGUF_MAGIC)
        return amk__fail(d, AMK_ERR_PARSE, "not a GGUF file (magic 0x%08x, expected 'GGUF')",
                         magic);
    if ((res = amk__gguf_u32(&rd, "version", &g->version)) != AMK_OK) return res;
    if (g->version == 1)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "GGUF version 1 is not supported (v2 and v3 are)");
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version, sw = (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
        if (sw >= 1 && sw <= 3)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "big-endian GGUF (version %u byte-swapped) "
                             "is not supported; only little-endian files are", sw);
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "GGUF version %u is not supported (v2 and v3 "
                         "are)", v);
    }
    if ((res = amk__gguf_u64(&rd, "tensor count", &n_tensors)) != AMK_OK ||
        (res = amk__gguf_u64(&rd, "metadata count", &n_kv)) != AMK_OK)
        return res;
    /* why: a kv needs >= 13 bytes (8 key length, 4 type, 1 value), a tensor info >= 32
       (8 name length, 4 n_dims, 8 dim, 4 type, 8 offset): check before allocating */
    if (n_kv > amk__gguf_left(&rd) / 13 || n_kv > (uint64_t)INT_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "metadata count %llu does not fit in the file (size "
                         "%llu)", (unsigned long long)n_kv, (unsigned long long)g->size);
    if (n_tensors > (amk__gguf_left(&rd) - n_kv * 13) / 32 || n_tensors > (uint64_t)INT_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "tensor count %llu does not fit in the file (size "
                         "%llu)", (unsigned long long)n_tensors, (unsigned long long)g->size);
    g->kvs = (amk__gguf_kv *)amk__calloc((size_t)n_kv, sizeof(amk__gguf_kv));
    g->tensors = (amk_gguf_tensor *)amk__calloc((size_t)n_tensors, sizeof(amk_gguf_tensor));
    if (!g->kvs || !g->tensors || !amk__gguf_index_init(&g->kv_index, (int)n_kv) ||
        !amk__gguf_index_init(&g->tensor_index, (int)n_tensors))
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory for %llu keys and %llu tensors",
                         (unsigned long long)n_kv, (unsigned long long)n_tensors);
    for (i = 0; i < (int)n_kv; i++)
        if ((res = amk__gguf_kv_parse(&rd, g, i)) != AMK_OK) return res;
    g->alignment = AMK__GGUF_DEFAULT_ALIGN;
    ai = amk_gguf_find_key(g, "general.alignment");
    if (ai >= 0) {
        const amk__gguf_kv *kv = &g->kvs[ai];
        if (!amk__gguf_is_int(kv->type) || !kv->ival_ok || kv->ival < 8 || kv->ival % 8 != 0)
            return amk__fail(d, AMK_ERR_PARSE, "general.alignment must be an integer multiple of "
                             "8 (got type %s, value %lld)", amk__gguf_vnames[kv->type],
                             (long long)kv->ival);
        g->alignment = (uint64_t)kv->ival;
    }
    for (i = 0; i < (int)n_tensors; i++)
        if ((res = amk__gguf_tensor_parse(&rd, g, i)) != AMK_OK) return res;
    pad = (g->alignment - (uint64_t)rd.pos % g->alignment) % g->alignment;
    if (!amk__add_u64((uint64_t)rd.pos, pad, &g->data_start))
        return amk__fail(d, AMK_ERR_PARSE, "data section start overflows");
    return amk__gguf_place(g, d);
}

AMK_API amk_result amk_gguf_parse(const void *data, size_t size, amk_gguf **out, amk_diag *d) {
    amk_gguf *g;
    amk_result res;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_parse: out is NULL");
    *out = NULL;
    if (!data && size) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_parse: data is NULL");
    g = (amk_gguf *)amk__calloc(1, sizeof *g);
    if (!g) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    g->data = (const uint8_t *)data;
    g->size = size;
    res = amk__gguf_parse_all(g, d);
    if (res != AMK_OK) { amk_gguf_close(g); return res; }
    *out = g;
    return AMK_OK;
}

AMK_API amk_result amk_gguf_open(const char *path, amk_gguf **out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result res;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_open: path is NULL");
    if ((res = amk__map_file(path, &map, &size, d)) != AMK_OK) return res;
    res = amk_gguf_parse(map, size, out, d);
    if (res != AMK_OK) {
        amk__unmap_file(map, size);
        if (d) {
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, res, "'%s': %s", path, msg);
            snprintf(d->path, sizeof d->path, "%s", path);
        }
        return res;
    }
    (*out)->map = map;
    (*out)->map_size = size;
    return AMK_OK;
}

AMK_API void amk_gguf_close(amk_gguf *g) {
    int i;
    if (!g) return;
    for (i = 0; i < g->n_kvs; i++) {
        amk__free(g->kvs[i].key);
        amk__free(g->kvs[i].str);
        amk__free(g->kvs[i].str_off);
    }
    for (i = 0; i < g->n_tensors; i++) amk__free((void *)g->tensors[i].name);
    amk__free(g->kvs);
    amk__free(g->tensors);
    amk__free(g->kv_index.slots);
    amk__free(g->tensor_index.slots);
    amk__unmap_file(g->map, g->map_size);
    amk__free(g);
}

/* ---- accessors ------------------------------------------------------------------------------- */

AMK_API uint32_t amk_gguf_version(const amk_gguf *g) { return g ? g->version : 0; }
AMK_API int amk_gguf_n_tensors(const amk_gguf *g) { return g ? g->n_tensors : 0; }
AMK_API const amk_gguf_tensor *amk_gguf_tensor_at(const amk_gguf *g, int i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
AMK_API const amk_gguf_tensor *amk_gguf_find_tensor(const amk_gguf *g, const char *name) {
    int i;
    if (!g || !name) return NULL;
    i = amk__gguf_index_find(&g->tensor_index, name, strlen(name), -1);
    return i >= 0 ? &g->tensors[i] : NULL;
}
AMK_API int amk_gguf_n_kv(const amk_gguf *g) { return g ? g->n_kvs : 0; }
AMK_API const char *amk_gguf_kv_key(const amk_gguf *g, int i) {
    return g && i >= 0 && i < g->n_kvs ? g->kvs[i].key : NULL;
}
AMK_API int amk_gguf_find_key(const amk_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return amk__gguf_index_find(&g->kv_index, key, strlen(key), -1);
}
AMK_API uint32_t amk_gguf_kv_type(const amk_gguf *g, int i) {
    return g && i >= 0 && i < g->n_kvs ? g->kvs[i].type : 0;
}

AMK__FN const amk__gguf_kv *amk__gguf_kv_get(const amk_gguf *g, const char *key) {
    int i = amk_gguf_find_key(g, key);
    return i >= 0 ? &g->kvs[i] : NULL;
}

AMK_API int amk_gguf_get_int(const amk_gguf *g, const char *key, int64_t *out) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || !amk__gguf_is_int(kv->type) || !kv->ival_ok) return 0;
    if (out) *out = kv->ival;
    return 1;
}
AMK_API int amk_gguf_get_float(const amk_gguf *g, const char *key, double *out) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || !amk__gguf_is_num(kv->type)) return 0;
    if (out) *out = kv->fval;
    return 1;
}
AMK_API int amk_gguf_get_bool(const amk_gguf *g, const char *key, int *out) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_BOOL) return 0;
    if (out) *out = (int)kv->ival;
    return 1;
}
AMK_API const char *amk_gguf_get_string(const amk_gguf *g, const char *key, size_t *len) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_STRING) return NULL;
    if (len) *len = kv->str_len;
    return kv->str;
}

AMK_API int64_t amk_gguf_array_len(const amk_gguf *g, const char *key, uint32_t *elem_type) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_ARRAY) return -1;
    if (elem_type) *elem_type = kv->elem_type;
    return kv->count;
}
/* The array kv for key when i is a valid index, else NULL. */
AMK__FN const amk__gguf_kv *amk__gguf_elem(const amk_gguf *g, const char *key, int64_t i) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_ARRAY || i < 0 || i >= kv->count) return NULL;
    return kv;
}
AMK_API const char *amk_gguf_array_string(const amk_gguf *g, const char *key, int64_t i,
                                          size_t *len) {
    const amk__gguf_kv *kv = amk__gguf_elem(g, key, i);
    const uint8_t *at;
    if (!kv || kv->elem_type != AMK_GGUF_STRING) return NULL;
    at = kv->elems + kv->str_off[i];
    if (len) *len = (size_t)amk__gguf_le64(at);
    return (const char *)at + 8;
}
AMK_API int amk_gguf_array_int(const amk_gguf *g, const char *key, int64_t i, int64_t *out) {
    const amk__gguf_kv *kv = amk__gguf_elem(g, key, i);
    int64_t iv;
    int ok;
    double fv;
    if (!kv || !(amk__gguf_is_int(kv->elem_type) || kv->elem_type == AMK_GGUF_BOOL)) return 0;
    amk__gguf_scalar(kv->elem_type, kv->elems + (size_t)i * amk__gguf_vsize[kv->elem_type], &iv,
                     &ok, &fv);
    if (!ok) return 0;
    if (out) *out = iv;
    return 1;
}
AMK_API int amk_gguf_array_float(const amk_gguf *g, const char *key, int64_t i, double *out) {
    const amk__gguf_kv *kv = amk__gguf_elem(g, key, i);
    int64_t iv;
    int ok;
    double fv;
    if (!kv || !(amk__gguf_is_num(kv->elem_type) || kv->elem_type == AMK_GGUF_BOOL)) return 0;
    amk__gguf_scalar(kv->elem_type, kv->elems + (size_t)i * amk__gguf_vsize[kv->elem_type], &iv,
                     &ok, &fv);
    if (out) *out = fv;
    return 1;
}

/* ---- dequantization (REFERENCE.md §1.4; ggml-quants.c dequantize_row_*) ---------------------- */

/* Each converts nb blocks at x into nb * block-size floats at y. */
typedef void (*amk__gguf_deq_fn)(const uint8_t *x, int64_t nb, float *y);

AMK__FN float amk__gguf_f16(const uint8_t *b) { return amk_f16_to_f32((uint16_t)(b[0] | b[1] << 8)); }

AMK__FN void amk__gguf_deq_f32(const uint8_t *x, int64_t nb, float *y) { memcpy(y, x, (size_t)nb * 4); }
AMK__FN void amk__gguf_deq_f16(const uint8_t *x, int64_t nb, float *y) {
    int64_t i;
    for (i = 0; i < nb; i++) y[i] = amk__gguf_f16(x + 2 * i);
}
AMK__FN void amk__gguf_deq_bf16(const uint8_t *x, int64_t nb, float *y) {
    int64_t i;
    for (i = 0; i < nb; i++) y[i] = amk_bf16_to_f32((uint16_t)(x[2 * i] | x[2 * i + 1] << 8));
}
/* Q8_0: [d f16][qs int8 x32]; y = qs*d */
AMK__FN void amk__gguf_deq_q8_0(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 34, y += 32) {
        float d = amk__gguf_f16(x);
        for (j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * d;
    }
}
/* Q4_0: [d f16][qs u8 x16]; low nibbles are y[0..15], high nibbles y[16..31]; y = (q-8)*d */
AMK__FN void amk__gguf_deq_q4_0(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 18, y += 32) {
        float d = amk__gguf_f16(x);
        const uint8_t *qs = x + 2;
        for (j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}
/* Q4_1: [d f16][m f16][qs u8 x16]; y = q*d + m */
AMK__FN void amk__gguf_deq_q4_1(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 20, y += 32) {
        float d = amk__gguf_f16(x), m = amk__gguf_f16(x + 2);
        const uint8_t *qs = x + 4;
        for (j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}
/* Q5_0 / Q5_1: [d f16]([m f16])[qh u32: bit j = 5th bit of y[j]][qs u8 x16 as Q4_0] */
AMK__FN void amk__gguf_deq_q5(const uint8_t *x, int64_t nb, float *y, int has_m) {
    int64_t b;
    int j;
    const int bsize = has_m ? 24 : 22, hoff = has_m ? 4 : 2;
    for (b = 0; b < nb; b++, x += bsize, y += 32) {
        float d = amk__gguf_f16(x), m = has_m ? amk__gguf_f16(x + 2) : 0.0f;
        uint32_t qh = (uint32_t)x[hoff] | (uint32_t)x[hoff + 1] << 8 | (uint32_t)x[hoff + 2] << 16 |
                      (uint32_t)x[hoff + 3] << 24;
        const uint8_t *qs = x + hoff + 4;
        const int off = has_m ? 0 : 16;
        for (j = 0; j < 16; j++) {
            int q0 = (int)((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - off;
            int q1 = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - off;
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}
AMK__FN void amk__gguf_deq_q5_0(const uint8_t *x, int64_t nb, float *y) { amk__gguf_deq_q5(x, nb, y, 0); }
AMK__FN void amk__gguf_deq_q5_1(const uint8_t *x, int64_t nb, float *y) { amk__gguf_deq_q5(x, nb, y, 1); }

/* Q4_K: [d f16][dmin f16][scales 12: 8 packed 6-bit (scale, min) pairs][qs 128]. Chunk c of 64
   outputs: low nibbles of qs[32c..] with sub-block 2c, high nibbles with 2c+1; y = d*sc*q - dmin*m */
AMK__FN void amk__gguf_deq_q4_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int c, l;
    for (b = 0; b < nb; b++, x += 144) {
        float d = amk__gguf_f16(x), dmin = amk__gguf_f16(x + 2);
        const uint8_t *sc = x + 4, *q = x + 16;
        for (c = 0; c < 4; c++, q += 32) {
            int j;
            float dd[2], mm[2];
            for (j = 0; j < 2; j++) {
                int s = 2 * c + j, scale, min;
                if (s < 4) {
                    scale = sc[s] & 63;
                    min = sc[s + 4] & 63;
                } else {
                    scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
                    min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
                }
                dd[j] = d * (float)scale;
                mm[j] = dmin * (float)min;
            }
            for (l = 0; l < 32; l++) *y++ = dd[0] * (float)(q[l] & 0xF) - mm[0];
            for (l = 0; l < 32; l++) *y++ = dd[1] * (float)(q[l] >> 4) - mm[1];
        }
    }
}
/* Q6_K: [ql 128][qh 64][scales int8 x16][d f16]; two halves of 128 outputs, q in 0..63 minus 32 */
AMK__FN void amk__gguf_deq_q6_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int n, l;
    for (b = 0; b < nb; b++, x += 210) {
        float d = amk__gguf_f16(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

AMK__FN amk__gguf_deq_fn amk__gguf_deq_for(uint32_t type) {
    switch (type) {
    case AMK_GGML_F32: return amk__gguf_deq_f32;
    case AMK_GGML_F16: return amk__gguf_deq_f16;
    case AMK_GGML_BF16: return amk__gguf_deq_bf16;
    case AMK_GGML_Q8_0: return amk__gguf_deq_q8_0;
    case AMK_GGML_Q4_0: return amk__gguf_deq_q4_0;
    case AMK_GGML_Q4_1: return amk__gguf_deq_q4_1;
    case AMK_GGML_Q5_0: return amk__gguf_deq_q5_0;
    case AMK_GGML_Q5_1: return amk__gguf_deq_q5_1;
    case AMK_GGML_Q4_K: return amk__gguf_deq_q4_k;
    case AMK_GGML_Q6_K: return amk__gguf_deq_q6_k;
    default: return NULL;
    }
}

AMK_API amk_result amk_gguf_dequant(uint32_t type, const void *src, uint64_t src_bytes, int64_t n,
                                    int out_dtype, void *dst, amk_diag *d) {
    float tmp[AMK__GGUF_CHUNK];
    const amk__ggml_traits *tr = amk__ggml_type_traits(type);
    amk__gguf_deq_fn fn = amk__gguf_deq_for(type);
    const uint8_t *x = (const uint8_t *)src;
    uint8_t *out = (uint8_t *)dst;
    int64_t done, need;
    if (!fn || !tr)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "cannot dequantize ggml type %s (code %u)",
                         amk_gguf_type_name(type), type);
    if (out_dtype != AMK_DTYPE_F32 && out_dtype != AMK_DTYPE_F16 && out_dtype != AMK_DTYPE_BF16)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: output dtype %s (must be F32, F16 "
                         "or BF16)", amk_dtype_name(out_dtype));
    if (n < 0 || n % tr->blck != 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: %lld elements is not a multiple of "
                         "the %s block size %u", (long long)n, tr->name, tr->blck);
    if (!amk__mul_i64(n / tr->blck, tr->tsize, &need) || (uint64_t)need > src_bytes)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: %lld %s elements need more than "
                         "the %llu source bytes", (long long)n, tr->name,
                         (unsigned long long)src_bytes);
    if (n && (!src || !dst)) return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: NULL buffer");
    for (done = 0; done < n;) {
        int64_t m = n - done < AMK__GGUF_CHUNK ? n - done : AMK__GGUF_CHUNK, j;
        fn(x, m / tr->blck, tmp);
        x += m / tr->blck * tr->tsize;
        if (out_dtype == AMK_DTYPE_F32) {
            memcpy(out, tmp, (size_t)m * 4);
            out += m * 4;
        } else if (out_dtype == AMK_DTYPE_F16) {
            for (j = 0; j < m; j++, out += 2) {
                uint16_t h = amk_f32_to_f16(tmp[j]);
                memcpy(out, &h, 2);
            }
        } else {
            for (j = 0; j < m; j++, out += 2) {
                uint16_t h = amk_f32_to_bf16(tmp[j]);
                memcpy(out, &h, 2);
            }
        }
        done += m;
    }
    return AMK_OK;
}

#endif /* AMK__PART_IMPL */
