/* amk_model.h - AMK's model import layer. Part of AMK (amk.h has the library's manual).

   WHAT IT DOES
     Reads the files people have: safetensors (single or sharded, with an index) and GGUF (v2, v3;
     F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL: the tensors of the
     Q2_K ... Q8_0 files llama.cpp's quantizer writes, read as stored or dequantized), with
     config.json for safetensors. amk_model_open gives one object whatever the format: the model's config
     (amk_llama_config) and its weights by HF tensor name, with GGUF's names and Q/K row order
     mapped back to HF's. Files are mapped, not read; every size read from a file is
     overflow-checked and the parsers are fuzzed (fuzz/).
   WHAT IT DOES NOT DO
     Architectures other than Llama and its kin Mistral, Qwen2 and Qwen3 (open says
     AMK_ERR_UNSUPPORTED, naming what it lacks).
   CONTENTS
     declarations >>safetensors >>gguf >>model | implementation >>impl_safetensors >>impl_gguf
     >>impl_model */
#ifndef AMK_MODEL_H
#define AMK_MODEL_H

#include "amk_refvm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>safetensors =========================================================================== */

typedef struct amk_st_tensor {
    char *name;
    int dtype;           /* amk_dtype, or -1 for a dtype AMK does not use (dtype_name says) */
    char dtype_name[16];
    int rank;
    int64_t shape[8];
    const void *data;    /* points into the mapped file */
    uint64_t nbytes;
} amk_st_tensor;

typedef struct amk_safetensors {
    amk_st_tensor *tensors; int n_tensors;
    amk_meta *metadata; int n_metadata; /* "__metadata__" pairs; json is the value as a quoted JSON string */
    void *map; size_t map_size;         /* internal */
    int owns_map;
} amk_safetensors;

/* Maps a file and parses its header. Every size and offset is checked against the file. */
AMK_API amk_result amk_safetensors_open(const char *path, amk_safetensors *out, amk_diag *d);
/* Parses from memory the caller keeps alive (for tests and fuzzing). */
AMK_API amk_result amk_safetensors_parse(const void *data, size_t size, amk_safetensors *out,
                                         amk_diag *d);
AMK_API const amk_st_tensor *amk_safetensors_find(const amk_safetensors *st, const char *name);
AMK_API void amk_safetensors_close(amk_safetensors *st);

typedef struct amk_st_entry {
    const char *name;
    int dtype;           /* amk_dtype */
    int rank;
    const int64_t *shape;
    const void *data;    /* amk_dtype_nbytes(dtype, numel) bytes */
} amk_st_entry;
/* Writes a safetensors file (tensors laid out in the given order, 8-byte aligned header). */
AMK_API amk_result amk_safetensors_write(const char *path, const amk_st_entry *entries, int n,
                                         amk_diag *d);

/* Sections whose declarations live beside their implementation (merged in later). */
/* ==== >>gguf ======================================================================================== */
/* A parsed GGUF file (REFERENCE.md §1): metadata key/values and tensor infos, with every size and
   offset checked against the file: in offset order each tensor's data is the bytes its type and
   shape imply, up to the next tensor's but for alignment padding, as llama.cpp requires (no
   overlap, no gap; bytes after the last tensor are ignored, as there). Little-endian v2 and v3 only. Tensor data and array elements
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
    AMK_GGML_Q5_1 = 7, AMK_GGML_Q8_0 = 8, AMK_GGML_Q2_K = 10, AMK_GGML_Q3_K = 11, AMK_GGML_Q4_K = 12,
    AMK_GGML_Q5_K = 13, AMK_GGML_Q6_K = 14, AMK_GGML_IQ4_NL = 20, AMK_GGML_BF16 = 30
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
   as out_dtype (F32, F16 or BF16). Types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K
   Q6_K IQ4_NL.
   src_bytes must hold the n elements' blocks. AMK_ERR_UNSUPPORTED for another type. */
AMK_API amk_result amk_gguf_dequant(uint32_t type, const void *src, uint64_t src_bytes, int64_t n,
                                    int out_dtype, void *dst, amk_diag *d);
/* The AMK dtype of a ggml block type (AMK_DTYPE_Q8_0 ... AMK_DTYPE_IQ4_NL: the same bytes), -1 for
   the others (F32, F16, BF16 and the types AMK does not read). */
AMK_API int amk_gguf_type_dtype(uint32_t type);
/* The ggml name of a type code ("Q4_K"), "?" if unknown. */
AMK_API const char *amk_gguf_type_name(uint32_t type);

/* ==== >>model ======================================================================================= */
/* The hyper-parameters of a Llama-architecture model (REFERENCE.md §1.5, §2.3, §3). */
typedef struct amk_llama_config {
    char arch[32];             /* "llama", "mistral", "qwen2" or "qwen3" (config.json's model_type, a
                                  GGUF's general.architecture: a Mistral GGUF is "llama") */
    char name[128];
    int n_layers, hidden, intermediate, n_heads, n_kv_heads, head_dim, vocab, max_pos;
    float rms_eps, rope_theta;
    int rope_llama3;           /* 1: llama3 scaling with the four fields below */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_ctx;
    int rope_type;             /* AMK_ROPE_LINEAR (rope_factor) or AMK_ROPE_YARN (rope_factor, rope_orig_ctx,
                                  beta_slow and beta_fast in rope_low/high_freq_factor), else
                                  AMK_ROPE_DEFAULT: llama3's with rope_llama3, or none */
    int tie_embeddings;        /* 1: the LM head is the embedding table */
    int bos_id, eos_ids[4], n_eos; /* bos_id -1 when unknown */
    int attention_bias, mlp_bias; /* unsupported when 1: open fails with AMK_ERR_UNSUPPORTED */
    int qkv_bias;              /* q_proj, k_proj and v_proj have biases (Qwen2; amk_llama_build then
                                  builds the step of the spec's opcodes, whose GEMV tiles add them) */
    int qk_norm;               /* q and k RMSNorm per head over head_dim, q_norm/k_norm [head_dim],
                                  before RoPE (Qwen3; the spec's step too) */
    int sliding_window;        /* Mistral's: a query sees the last sliding_window keys; 0 for all
                                  (amk_llama_build: the fused step's attention tasks take it; the
                                  spec opcodes' step keeps its context within it) */
} amk_llama_config;

/* An open model: its config and its weights, read by HF name whatever the file format. */
typedef struct amk_model amk_model;

/* Opens a model: a .gguf file (found by its magic); a .safetensors file (config.json beside it);
   a directory with config.json and model.safetensors or model.safetensors.index.json (sharded);
   or an index file. Any other path fails naming it and what it is (an empty file, a .gguf without
   the magic, a JSON file without weight_map, a directory without config.json, neither format).
   The architectures: Llama; Mistral (a Llama with a sliding window; a GGUF's "llama" with the key
   llama.attention.sliding_window); Qwen2 (a Llama with q/k/v biases) and Qwen3 (q/k RMSNorm per
   head), also as GGUF architectures "qwen2" and "qwen3".
   Checks the config (AMK_ERR_UNSUPPORTED for another architecture, Llama's attention or MLP
   biases, Qwen2's sliding window, RoPE scaling other than llama3, linear and YaRN (its defaults:
   no attention_factor, mscale or truncate false), or a hidden_act other than
   silu; AMK_ERR_PARSE for rms_norm_eps, rope_theta or
   llama3 factors not finite and positive, or a BOS/EOS id outside the vocabulary) and that every
   weight of the config exists with its shape (AMK_ERR_NOT_FOUND / AMK_ERR_MISMATCH, naming the
   tensor). Files stay mapped until amk_model_close. */
AMK_API amk_result amk_model_open(const char *path, amk_model **out, amk_diag *d);
/* Closes m and unmaps its files. NULL is fine. */
AMK_API void amk_model_close(amk_model *m);
AMK_API const amk_llama_config *amk_model_config(const amk_model *m);
AMK_API const amk_gguf *amk_model_gguf(const amk_model *m); /* NULL unless a GGUF (tokenizer uses it) */
AMK_API const char *amk_model_dir(const amk_model *m);      /* directory of the model files */
/* Weight by its HF name ("model.layers.3.self_attn.q_proj.weight", "model.embed_tokens.weight",
   "model.norm.weight", "lm_head.weight"), with HF shape [out, in] (rank 1 for norms; unused
   entries 1). For GGUF the name is mapped (REFERENCE §1.6) and the Q/K row permutation is UNDONE
   (§1.7 option (b), with n_heads for q and n_kv_heads for k) so the result equals the HF tensor;
   lm_head falls back to the embedding when tied/absent. AMK_ERR_NOT_FOUND names a missing one. */
AMK_API amk_result amk_model_tensor_shape(amk_model *m, const char *hf_name, int *rank, int64_t shape[4], amk_diag *d);
/* The dtype the weight is stored in: F32, F16 or BF16, or for a GGUF tensor in a block format
   its AMK dtype (AMK_DTYPE_Q8_0 ... AMK_DTYPE_IQ4_NL); -1 for a type AMK does not read. */
AMK_API amk_result amk_model_tensor_dtype(amk_model *m, const char *hf_name, int *dtype, amk_diag *d);
/* Converts/dequantizes into dst (dst_bytes must equal amk_dtype_nbytes(dtype, numel)) as dtype F32,
   F16 or BF16; or, for a tensor stored in a block format, as that format (its blocks copied, the
   Q/K rows un-permuted a row at a time like the rest). */
AMK_API amk_result amk_model_tensor_read(amk_model *m, const char *hf_name, int dtype, void *dst, size_t dst_bytes, amk_diag *d);


#ifdef __cplusplus
}
#endif
#endif /* AMK_MODEL_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_MODEL_IMPLEMENTATION_DONE)
#define AMK_MODEL_IMPLEMENTATION_DONE
/* ==== >>impl_safetensors: read and write safetensors files (REFERENCE.md §2.1) ================ */
/* Layout: u64 little-endian header length N, N bytes of JSON header (an object, maybe padded with
   spaces), then the data buffer. Every offset in the header is relative to the buffer's start. */

#define AMK__ST_MAX_HEADER 100000000ull /* why: the reference implementation's 100 MB header cap */
#define AMK__ST_MAX_RANK 8              /* amk_st_tensor.shape[8] */
#define AMK__ST_JSON_DEPTH 8            /* why: the header nests 3 deep (object, entry, shape) */

typedef struct amk__st_dtype_row {
    const char *name; /* safetensors spelling */
    int dtype;        /* amk_dtype, or -1 where AMK has none */
    int size;         /* bytes per element */
} amk__st_dtype_row;

static const amk__st_dtype_row amk__st_dtypes[] = {
    {"BOOL", AMK_DTYPE_BOOL, 1}, {"U8", AMK_DTYPE_U8, 1},     {"I8", AMK_DTYPE_I8, 1},
    {"I16", -1, 2},              {"U16", -1, 2},              {"F16", AMK_DTYPE_F16, 2},
    {"BF16", AMK_DTYPE_BF16, 2}, {"I32", AMK_DTYPE_I32, 4},   {"U32", -1, 4},
    {"F32", AMK_DTYPE_F32, 4},   {"F64", -1, 8},              {"I64", -1, 8},
    {"U64", -1, 8},              {"F8_E4M3", AMK_DTYPE_F8E4M3, 1}, {"F8_E5M2", AMK_DTYPE_F8E5M2, 1},
};
#define AMK__ST_N_DTYPES ((int)(sizeof amk__st_dtypes / sizeof amk__st_dtypes[0]))

AMK__FN const amk__st_dtype_row *amk__st_dtype_by_name(const char *name, size_t len) {
    int i;
    for (i = 0; i < AMK__ST_N_DTYPES; i++)
        if (strlen(amk__st_dtypes[i].name) == len && memcmp(amk__st_dtypes[i].name, name, len) == 0)
            return &amk__st_dtypes[i];
    return NULL;
}

AMK__FN const amk__st_dtype_row *amk__st_dtype_by_code(int dtype) {
    int i;
    for (i = 0; i < AMK__ST_N_DTYPES; i++)
        if (amk__st_dtypes[i].dtype >= 0 && amk__st_dtypes[i].dtype == dtype) return &amk__st_dtypes[i];
    return NULL;
}

/* A parse error at JSON value v (NULL: no location), message formatted like printf. */
AMK__FN amk_result amk__st_err(amk_diag *d, const amk__jval *v, const char *fmt, ...) {
    if (d) {
        va_list ap;
        d->result = AMK_ERR_PARSE;
        if (v) { d->line = v->line; d->col = v->col; }
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return AMK_ERR_PARSE;
}

/* A non-negative JSON integer into *out; 0 if v is anything else. */
AMK__FN int amk__st_uint(const amk__jval *v, uint64_t *out) {
    if (!v || v->type != AMK__J_INT || v->i < 0) return 0;
    *out = (uint64_t)v->i;
    return 1;
}

/* Fills t from the header entry v (named name). begin/end get the entry's data_offsets. */
AMK__FN amk_result amk__st_parse_entry(const char *name, const amk__jval *v, uint64_t buf_size,
                                       amk_st_tensor *t, uint64_t *begin, uint64_t *end,
                                       amk_diag *d) {
    const amk__jval *jd = NULL, *js = NULL, *jo = NULL;
    const amk__st_dtype_row *row;
    char shape_txt[160];
    uint64_t numel = 1, nbytes;
    int i;
    if (v->type != AMK__J_OBJECT)
        return amk__st_err(d, v, "tensor '%.200s': entry is not an object", name);
    /* why strict: the format defines exactly these three fields; anything else is not a file we
       understand, and guessing would hide a corrupt header. */
    for (i = 0; i < v->n; i++) {
        const char *k = v->keys[i];
        if (strcmp(k, "dtype") == 0 && v->key_lens[i] == 5) jd = &v->items[i];
        else if (strcmp(k, "shape") == 0 && v->key_lens[i] == 5) js = &v->items[i];
        else if (strcmp(k, "data_offsets") == 0 && v->key_lens[i] == 12) jo = &v->items[i];
        else return amk__st_err(d, &v->items[i], "tensor '%.200s': unknown field '%.64s'", name, k);
    }
    if (!jd || !js || !jo)
        return amk__st_err(d, v, "tensor '%.200s': missing field '%s'", name,
                           !jd ? "dtype" : !js ? "shape" : "data_offsets");
    if (jd->type != AMK__J_STRING) return amk__st_err(d, jd, "tensor '%.200s': dtype is not a string", name);
    row = amk__st_dtype_by_name(jd->s, jd->slen);
    if (!row) return amk__st_err(d, jd, "tensor '%.200s': unknown dtype '%.32s'", name, jd->s);
    t->dtype = row->dtype;
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", row->name);

    if (js->type != AMK__J_ARRAY) return amk__st_err(d, js, "tensor '%.200s': shape is not an array", name);
    if (js->n > AMK__ST_MAX_RANK)
        return amk__st_err(d, js, "tensor '%.200s': rank %d exceeds %d", name, js->n, AMK__ST_MAX_RANK);
    t->rank = js->n;
    for (i = 0; i < js->n; i++) {
        uint64_t dim;
        if (!amk__st_uint(&js->items[i], &dim))
            return amk__st_err(d, &js->items[i], "tensor '%.200s': shape[%d] is not an integer >= 0", name, i);
        t->shape[i] = (int64_t)dim;
    }
    amk_shape_format(shape_txt, sizeof shape_txt, t->shape, t->rank);
    for (i = 0; i < t->rank; i++)
        if (!amk__mul_u64(numel, (uint64_t)t->shape[i], &numel) || numel > (uint64_t)INT64_MAX)
            return amk__st_err(d, js, "tensor '%.200s': shape %s has too many elements", name, shape_txt);
    if (!amk__mul_u64(numel, (uint64_t)row->size, &nbytes))
        return amk__st_err(d, js, "tensor '%.200s': shape %s of %s overflows a 64-bit byte size", name,
                           shape_txt, row->name);

    if (jo->type != AMK__J_ARRAY || jo->n != 2 || !amk__st_uint(&jo->items[0], begin) ||
        !amk__st_uint(&jo->items[1], end))
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets is not [begin, end] of integers >= 0", name);
    if (*begin > *end)
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets [%llu, %llu] end before they begin",
                           name, (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > buf_size)
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets [%llu, %llu] run past the data buffer (%llu bytes)",
                           name, (unsigned long long)*begin, (unsigned long long)*end,
                           (unsigned long long)buf_size);
    if (*end - *begin != nbytes)
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets [%llu, %llu] do not match shape %s of %s (%llu bytes)",
                           name, (unsigned long long)*begin, (unsigned long long)*end, shape_txt,
                           row->name, (unsigned long long)nbytes);
    t->nbytes = nbytes;
    return AMK_OK;
}

AMK__FN amk_result amk__st_parse_metadata(const amk__jval *v, amk_safetensors *out, amk_diag *d) {
    int i;
    if (v->type != AMK__J_OBJECT) return amk__st_err(d, v, "__metadata__ is not an object");
    if (v->n == 0) return AMK_OK;
    out->metadata = (amk_meta *)amk__calloc((size_t)v->n, sizeof(amk_meta));
    if (!out->metadata) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading __metadata__");
    for (i = 0; i < v->n; i++) {
        const amk__jval *val = &v->items[i];
        amk__sb sb;
        if (val->type != AMK__J_STRING)
            return amk__st_err(d, val, "__metadata__ '%.200s' is not a string", v->keys[i]);
        if (strlen(v->keys[i]) != v->key_lens[i])
            return amk__st_err(d, val, "__metadata__ key '%.200s' contains a NUL byte", v->keys[i]);
        /* amk_meta keeps the value as canonical JSON text (a quoted string here): lossless even
           for a value that holds a NUL byte. */
        memset(&sb, 0, sizeof sb);
        amk__json_put_string(&sb, val->s, val->slen);
        out->metadata[i].key = amk__strdup(v->keys[i]);
        out->metadata[i].json = sb.p;
        out->n_metadata = i + 1;
        if (sb.oom || !sb.p || !out->metadata[i].key)
            return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading __metadata__");
    }
    return AMK_OK;
}

typedef struct amk__st_span { uint64_t begin, end; int tensor; } amk__st_span;

static int amk__st_span_cmp(const void *a, const void *b) {
    const amk__st_span *x = (const amk__st_span *)a, *y = (const amk__st_span *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->tensor - y->tensor;
}

/* Rejects two tensors whose byte ranges overlap. The format also says the buffer is fully
   covered; we accept holes (unused bytes harm nothing) but never overlaps (two tensors would
   alias). Zero-size tensors occupy nothing. spans is sorted in place. */
AMK__FN amk_result amk__st_check_overlap(const amk_safetensors *st, amk__st_span *spans, int n,
                                         amk_diag *d) {
    int i, last = -1;
    if (n > 1) qsort(spans, (size_t)n, sizeof *spans, amk__st_span_cmp);
    for (i = 0; i < n; i++) {
        if (spans[i].begin == spans[i].end) continue;
        if (last >= 0 && spans[i].begin < spans[last].end)
            return amk__st_err(d, NULL, "tensor '%.200s': data_offsets [%llu, %llu] overlap tensor '%.200s' [%llu, %llu]",
                               st->tensors[spans[i].tensor].name, (unsigned long long)spans[i].begin,
                               (unsigned long long)spans[i].end, st->tensors[spans[last].tensor].name,
                               (unsigned long long)spans[last].begin, (unsigned long long)spans[last].end);
        if (last < 0 || spans[i].end > spans[last].end) last = i;
    }
    return AMK_OK;
}

AMK_API void amk_safetensors_close(amk_safetensors *st) {
    int i;
    if (!st) return;
    for (i = 0; i < st->n_tensors; i++) amk__free(st->tensors[i].name);
    amk__free(st->tensors);
    for (i = 0; i < st->n_metadata; i++) { amk__free(st->metadata[i].key); amk__free(st->metadata[i].json); }
    amk__free(st->metadata);
    if (st->owns_map) amk__unmap_file(st->map, st->map_size);
    memset(st, 0, sizeof *st);
}

AMK_API amk_result amk_safetensors_parse(const void *data, size_t size, amk_safetensors *out,
                                         amk_diag *d) {
    const uint8_t *bytes = (const uint8_t *)data;
    uint64_t n_header = 0, buf_size;
    const uint8_t *buf;
    amk__jdoc doc;
    const amk__jval *root;
    amk__st_span *spans = NULL;
    amk_result r = AMK_OK;
    int i, n_spans = 0;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no output");
    memset(out, 0, sizeof *out);
    if (size < 8)
        return amk__st_err(d, NULL, "safetensors: %lu bytes is shorter than the 8-byte header length",
                           (unsigned long)size);
    if (!data) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no data");
    for (i = 0; i < 8; i++) n_header |= (uint64_t)bytes[i] << (8 * i);
    if (n_header > (uint64_t)(size - 8))
        return amk__st_err(d, NULL, "safetensors: header length %llu runs past the end of the file (%llu bytes)",
                           (unsigned long long)n_header, (unsigned long long)size);
    if (n_header > AMK__ST_MAX_HEADER)
        return amk__st_err(d, NULL, "safetensors: header length %llu exceeds the 100 MB limit",
                           (unsigned long long)n_header);
    if (n_header == 0 || bytes[8] != '{')
        return amk__st_err(d, NULL, "safetensors: header is not a JSON object (must start with '{')");
    buf = bytes + 8 + n_header;
    buf_size = (uint64_t)(size - 8) - n_header;

    r = amk__json_parse((const char *)bytes + 8, (size_t)n_header, AMK__ST_JSON_DEPTH, &doc, d);
    if (r != AMK_OK) {
        if (d && r == AMK_ERR_PARSE) {
            char msg[sizeof d->message];
            snprintf(msg, sizeof msg, "%s", d->message);
            amk__st_err(d, NULL, "safetensors header: %.480s", msg);
        }
        return r;
    }
    root = doc.root;
    if (!root || root->type != AMK__J_OBJECT) {
        r = amk__st_err(d, root, "safetensors: header is not a JSON object");
        goto done;
    }
    if (root->n > 0) {
        out->tensors = (amk_st_tensor *)amk__calloc((size_t)root->n, sizeof(amk_st_tensor));
        spans = (amk__st_span *)amk__calloc((size_t)root->n, sizeof(amk__st_span));
        if (!out->tensors || !spans) {
            r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading a safetensors header");
            goto done;
        }
    }
    for (i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        amk_st_tensor *t;
        uint64_t begin = 0, end = 0;
        if (strlen(key) != root->key_lens[i]) {
            r = amk__st_err(d, &root->items[i], "tensor '%.200s': name contains a NUL byte", key);
            goto done;
        }
        if (strcmp(key, "__metadata__") == 0) {
            r = amk__st_parse_metadata(&root->items[i], out, d);
            if (r != AMK_OK) goto done;
            continue;
        }
        t = &out->tensors[out->n_tensors];
        t->name = amk__strdup(key);
        if (!t->name) {
            r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading a safetensors header");
            goto done;
        }
        out->n_tensors++;
        r = amk__st_parse_entry(key, &root->items[i], buf_size, t, &begin, &end, d);
        if (r != AMK_OK) goto done;
        t->data = buf + begin;
        spans[n_spans].begin = begin;
        spans[n_spans].end = end;
        spans[n_spans].tensor = out->n_tensors - 1;
        n_spans++;
    }
    r = amk__st_check_overlap(out, spans, n_spans, d);
done:
    amk__free(spans);
    amk__json_free(&doc);
    if (r != AMK_OK) amk_safetensors_close(out);
    return r;
}

AMK_API amk_result amk_safetensors_open(const char *path, amk_safetensors *out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no output");
    memset(out, 0, sizeof *out);
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no path");
    r = amk__map_file(path, &map, &size, d);
    if (r == AMK_OK) {
        r = amk_safetensors_parse(map, size, out, d);
        if (r != AMK_OK) {
            amk__unmap_file(map, size);
            if (d) { /* the file name goes first in the message: "W.st: tensor 'x': ..." */
                char msg[sizeof d->message];
                snprintf(msg, sizeof msg, "%s", d->message);
                amk__fail(d, r, "%.200s: %.300s", path, msg);
            }
        } else {
            out->map = map;
            out->map_size = size;
            out->owns_map = 1;
        }
    }
    if (r != AMK_OK && d) snprintf(d->path, sizeof d->path, "%s", path);
    return r;
}

AMK_API const amk_st_tensor *amk_safetensors_find(const amk_safetensors *st, const char *name) {
    int i;
    if (!st || !name) return NULL;
    for (i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

static int amk__st_name_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes the 8-byte length, the header and every entry's bytes to f; 0 on a short write. */
AMK__FN int amk__st_write_all(FILE *f, const amk__sb *header, const amk_st_entry *e,
                              const uint64_t *nbytes, int n) {
    uint8_t len8[8];
    int i;
    for (i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)header->len >> (8 * i));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(header->p, 1, header->len, f) != header->len) return 0;
    for (i = 0; i < n; i++)
        if (nbytes[i] && fwrite(e[i].data, 1, (size_t)nbytes[i], f) != (size_t)nbytes[i]) return 0;
    return 1;
}

AMK_API amk_result amk_safetensors_write(const char *path, const amk_st_entry *e, int n,
                                         amk_diag *d) {
    amk__sb header, tmp;
    uint64_t *nbytes = NULL, offset = 0;
    const char **names = NULL;
    amk_result r = AMK_OK;
    FILE *f = NULL;
    int i, j;
    if (!path || n < 0 || (n > 0 && !e))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: bad path or entries");
    memset(&header, 0, sizeof header);
    memset(&tmp, 0, sizeof tmp);
    if (n > 0) {
        nbytes = (uint64_t *)amk__calloc((size_t)n, sizeof(uint64_t));
        names = (const char **)amk__calloc((size_t)n, sizeof(const char *));
        if (!nbytes || !names) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path); goto done; }
    }
    amk__sb_putc(&header, '{');
    for (i = 0; i < n; i++) {
        const amk__st_dtype_row *row = amk__st_dtype_by_code(e[i].dtype);
        int64_t numel = 1, nb;
        if (!e[i].name || strcmp(e[i].name, "__metadata__") == 0) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: entry %d has no usable name", i);
            goto done;
        }
        if (!row) {
            r = amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%.200s': dtype %s has no safetensors equivalent",
                          e[i].name, amk_dtype_name(e[i].dtype));
            goto done;
        }
        if (e[i].rank < 0 || e[i].rank > AMK__ST_MAX_RANK || (e[i].rank > 0 && !e[i].shape)) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': rank %d is outside [0, 8]", e[i].name, e[i].rank);
            goto done;
        }
        for (j = 0; j < e[i].rank; j++)
            if (!amk__mul_i64(numel, e[i].shape[j], &numel)) {
                r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': shape is negative or overflows", e[i].name);
                goto done;
            }
        nb = amk_dtype_nbytes(e[i].dtype, numel);
        if (nb < 0 || (uint64_t)nb > (uint64_t)SIZE_MAX || (nb > 0 && !e[i].data)) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': byte size overflows or data is missing", e[i].name);
            goto done;
        }
        nbytes[i] = (uint64_t)nb;
        names[i] = e[i].name;
        if (i) amk__sb_putc(&header, ',');
        amk__json_put_string(&header, e[i].name, strlen(e[i].name));
        amk__sb_printf(&header, ":{\"dtype\":\"%s\",\"shape\":[", row->name);
        for (j = 0; j < e[i].rank; j++) amk__sb_printf(&header, "%s%lld", j ? "," : "", (long long)e[i].shape[j]);
        amk__sb_printf(&header, "],\"data_offsets\":[%llu,", (unsigned long long)offset);
        if (!amk__add_u64(offset, nbytes[i], &offset)) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: total size overflows");
            goto done;
        }
        amk__sb_printf(&header, "%llu]}", (unsigned long long)offset);
    }
    amk__sb_putc(&header, '}');
    /* why: pad with spaces so the data starts 8-byte aligned (8 + header length) */
    while ((header.len & 7u) != 0 && !header.oom) amk__sb_putc(&header, ' ');
    if (header.oom) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path); goto done; }
    if ((uint64_t)header.len > AMK__ST_MAX_HEADER) {
        r = amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: header of %llu bytes exceeds the 100 MB limit",
                      (unsigned long long)header.len);
        goto done;
    }
    if (n > 1) { /* duplicate names would make the header ambiguous */
        qsort(names, (size_t)n, sizeof *names, amk__st_name_cmp);
        for (i = 1; i < n; i++)
            if (strcmp(names[i - 1], names[i]) == 0) {
                r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': name used twice", names[i]);
                goto done;
            }
    }
    /* why: write beside the target, then rename, so a failed write never leaves a half file */
    amk__sb_printf(&tmp, "%s.tmp", path);
    if (tmp.oom) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path); goto done; }
    f = fopen(tmp.p, "wb");
    if (!f) { r = amk__fail(d, AMK_ERR_IO, "cannot create '%s': %s", tmp.p, strerror(errno)); goto done; }
    if (!amk__st_write_all(f, &header, e, nbytes, n)) {
        fclose(f);
        remove(tmp.p);
        r = amk__fail(d, AMK_ERR_IO, "short write on '%s'", tmp.p);
        goto done;
    }
    if (fclose(f) != 0) {
        remove(tmp.p);
        r = amk__fail(d, AMK_ERR_IO, "cannot finish writing '%s'", tmp.p);
        goto done;
    }
#if defined(_WIN32)
    remove(path); /* why: rename does not replace an existing file there */
#endif
    if (rename(tmp.p, path) != 0) {
        r = amk__fail(d, AMK_ERR_IO, "cannot rename '%s' to '%s': %s", tmp.p, path, strerror(errno));
        remove(tmp.p);
    }
done:
    if (r != AMK_OK && d) snprintf(d->path, sizeof d->path, "%s", path);
    amk__sb_free(&header);
    amk__sb_free(&tmp);
    amk__free(nbytes);
    amk__free(names);
    return r;
}

/* ==== >>impl_gguf =================================================================================== */
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

/* The AMK dtype of a ggml block type (AMK_DTYPE_Q8_0 ... AMK_DTYPE_IQ4_NL), -1 for the others. */
AMK_API int amk_gguf_type_dtype(uint32_t type) {
    switch (type) {
    case AMK_GGML_Q8_0: return AMK_DTYPE_Q8_0;
    case AMK_GGML_Q4_0: return AMK_DTYPE_Q4_0;
    case AMK_GGML_Q4_1: return AMK_DTYPE_Q4_1;
    case AMK_GGML_Q5_0: return AMK_DTYPE_Q5_0;
    case AMK_GGML_Q5_1: return AMK_DTYPE_Q5_1;
    case AMK_GGML_Q2_K: return AMK_DTYPE_Q2_K;
    case AMK_GGML_Q3_K: return AMK_DTYPE_Q3_K;
    case AMK_GGML_Q4_K: return AMK_DTYPE_Q4_K;
    case AMK_GGML_Q5_K: return AMK_DTYPE_Q5_K;
    case AMK_GGML_Q6_K: return AMK_DTYPE_Q6_K;
    case AMK_GGML_IQ4_NL: return AMK_DTYPE_IQ4_NL;
    default: return -1;
    }
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

typedef struct amk__gguf_span { uint64_t offset; int tensor; } amk__gguf_span;

static int amk__gguf_span_cmp(const void *a, const void *b) {
    const amk__gguf_span *x = (const amk__gguf_span *)a, *y = (const amk__gguf_span *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->tensor - y->tensor;
}

/* Each tensor's data must be the bytes its type and shape imply, laid out as GGUF writers do
   (llama.cpp's reader requires the same): in offset order each tensor starts where the one before
   it ends, rounded up to the alignment. why: a tensor relabelled to a type of another size (Q8_0
   to F16, shape unchanged) would otherwise read its neighbour's bytes, or leave part of its own
   unread, with no error. Bytes after the last tensor are allowed: llama.cpp reads the data
   section and ignores them. Runs after amk__gguf_place: every tensor's data lies inside the file. */
AMK__FN amk_result amk__gguf_check_layout(const amk_gguf *g, amk_diag *d) {
    const uint64_t data_end = (uint64_t)g->size - g->data_start;
    amk__gguf_span *s;
    amk_result r = AMK_OK;
    int i;
    if (g->n_tensors == 0) return AMK_OK;
    s = (amk__gguf_span *)amk__malloc((size_t)g->n_tensors * sizeof *s);
    if (!s) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory checking %d tensors", g->n_tensors);
    for (i = 0; i < g->n_tensors; i++) {
        s[i].offset = g->tensors[i].offset;
        s[i].tensor = i;
    }
    qsort(s, (size_t)g->n_tensors, sizeof *s, amk__gguf_span_cmp);
    for (i = 0; i < g->n_tensors && r == AMK_OK; i++) {
        const amk_gguf_tensor *t = &g->tensors[s[i].tensor];
        const amk_gguf_tensor *u = i + 1 < g->n_tensors ? &g->tensors[s[i + 1].tensor] : NULL;
        const uint64_t end = t->offset + t->nbytes, next = u ? u->offset : data_end;
        char what[64];
        if (end <= next && (next - end < g->alignment || !u)) continue;
        snprintf(what, sizeof what, "%s of %lld elements", amk_gguf_type_name(t->type),
                 (long long)(t->dims[0] * t->dims[1] * t->dims[2] * t->dims[3]));
        if (end > next)
            r = amk__fail(d, AMK_ERR_PARSE, "tensor '%s': %s needs %llu bytes from offset %llu, past the start "
                          "of tensor '%s' at offset %llu (its type or shape does not match its data)", t->name,
                          what, (unsigned long long)t->nbytes, (unsigned long long)t->offset, u->name,
                          (unsigned long long)next);
        else
            r = amk__fail(d, AMK_ERR_PARSE, "tensor '%s': %s needs %llu bytes from offset %llu, but %s%s%s %llu "
                          "bytes later (its type or shape does not match its data)", t->name, what,
                          (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                          u ? "tensor '" : "the file ends", u ? u->name : "", u ? "' starts" : "",
                          (unsigned long long)(next - t->offset));
    }
    amk__free(s);
    return r;
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
    return amk__gguf_check_layout(g, d);
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

/* ---- dequantization (the block formats' decoders are amk_core.h's, amk__blk_*) -------------- */

/* Each converts nb blocks at x into nb * block-size floats at y. */
typedef amk__blk_fn amk__gguf_deq_fn;

AMK__FN void amk__gguf_deq_f32(const uint8_t *x, int64_t nb, float *y) { memcpy(y, x, (size_t)nb * 4); }
AMK__FN void amk__gguf_deq_f16(const uint8_t *x, int64_t nb, float *y) {
    int64_t i;
    for (i = 0; i < nb; i++) y[i] = amk__blk_f16(x + 2 * i);
}
AMK__FN void amk__gguf_deq_bf16(const uint8_t *x, int64_t nb, float *y) {
    int64_t i;
    for (i = 0; i < nb; i++) y[i] = amk_bf16_to_f32((uint16_t)(x[2 * i] | x[2 * i + 1] << 8));
}
AMK__FN amk__gguf_deq_fn amk__gguf_deq_for(uint32_t type) {
    switch (type) {
    case AMK_GGML_F32: return amk__gguf_deq_f32;
    case AMK_GGML_F16: return amk__gguf_deq_f16;
    case AMK_GGML_BF16: return amk__gguf_deq_bf16;
    default: {
        const int t = amk_gguf_type_dtype(type);
        return t >= 0 ? amk__blk_decoder(t) : NULL; /* the block formats: amk_core.h's decoders */
    }
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

/* ==== >>impl_model ================================================================================== */
struct amk_model {
    amk_llama_config cfg;
    char *dir;                       /* directory of the model files */
    amk_gguf *gguf;                  /* a GGUF model, else NULL */
    amk_safetensors *shards; int n_shards; /* a safetensors model */
};

/* A weight located in the files: what amk_model_tensor_read needs. */
typedef struct amk__model_src {
    uint32_t type;         /* ggml type of the stored data (F32/F16/BF16 for safetensors) */
    int rank;
    int64_t shape[4];      /* HF order, unused entries 1 */
    const void *data;
    uint64_t nbytes;
    int perm_heads;        /* GGUF attn_q/attn_k: un-permute rows within this many heads; 0 none */
} amk__model_src;

/* HF per-layer suffix -> GGUF per-layer suffix (REFERENCE §1.6); perm: 1 q (n_heads), 2 k. */
static const struct amk__model_layer_name { const char *hf, *gguf; int perm; } amk__model_layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0},
    {"self_attn.q_proj.weight", "attn_q.weight", 1},
    {"self_attn.k_proj.weight", "attn_k.weight", 2},
    {"self_attn.v_proj.weight", "attn_v.weight", 0},
    {"self_attn.o_proj.weight", "attn_output.weight", 0},
    {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
    {"mlp.up_proj.weight", "ffn_up.weight", 0},
    {"mlp.down_proj.weight", "ffn_down.weight", 0},
};
#define AMK__MODEL_N_LAYER_NAMES ((int)(sizeof amk__model_layer_names / sizeof amk__model_layer_names[0]))
/* The families' further layer tensors (Qwen2's biases, Qwen3's q/k norms): a Qwen GGUF's Q/K rows
   are as HF stores them (no permutation) */
static const struct amk__model_layer_name amk__model_layer_extra[] = {
    {"self_attn.q_proj.bias", "attn_q.bias", 0},
    {"self_attn.k_proj.bias", "attn_k.bias", 0},
    {"self_attn.v_proj.bias", "attn_v.bias", 0},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", 0},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", 0},
};
#define AMK__MODEL_N_LAYER_EXTRA ((int)(sizeof amk__model_layer_extra / sizeof amk__model_layer_extra[0]))

/* The GGUF name of an HF name into out (0 if it has none); *perm as in the table. */
AMK__FN int amk__model_gguf_name(const char *hf, char *out, size_t size, int *perm) {
    static const char *const globals[3][2] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                              {"model.norm.weight", "output_norm.weight"},
                                              {"lm_head.weight", "output.weight"}};
    const char *p;
    int i, nd = 0;
    *perm = 0;
    for (i = 0; i < 3; i++)
        if (strcmp(hf, globals[i][0]) == 0) { snprintf(out, size, "%s", globals[i][1]); return 1; }
    if (strncmp(hf, "model.layers.", 13) != 0) return 0;
    p = hf + 13;
    while (p[nd] >= '0' && p[nd] <= '9') nd++;
    /* why: 9 digits keep the layer index inside int; a leading 0 would alias another layer */
    if (nd == 0 || nd > 9 || p[nd] != '.' || (p[0] == '0' && nd > 1)) return 0;
    for (i = 0; i < AMK__MODEL_N_LAYER_NAMES + AMK__MODEL_N_LAYER_EXTRA; i++) {
        const struct amk__model_layer_name *e =
            i < AMK__MODEL_N_LAYER_NAMES ? &amk__model_layer_names[i] : &amk__model_layer_extra[i - AMK__MODEL_N_LAYER_NAMES];
        if (strcmp(p + nd + 1, e->hf) == 0) {
            snprintf(out, size, "blk.%.*s.%s", nd, p, e->gguf);
            *perm = e->perm;
            return 1;
        }
    }
    return 0;
}

/* Locates hf_name: GGUF via the name map, safetensors by name in every shard; lm_head falls back
   to the embedding. */
AMK__FN amk_result amk__model_find(const amk_model *m, const char *hf_name, amk__model_src *s,
                                   amk_diag *d) {
    int k;
    memset(s, 0, sizeof *s);
    for (k = 0; k < 4; k++) s->shape[k] = 1;
    if (!hf_name) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: tensor name is NULL");
    if (m->gguf) {
        char gname[96] = "";
        int perm;
        const amk_gguf_tensor *t = NULL;
        if (amk__model_gguf_name(hf_name, gname, sizeof gname, &perm)) {
            t = amk_gguf_find_tensor(m->gguf, gname);
            if (!t && strcmp(hf_name, "lm_head.weight") == 0)
                t = amk_gguf_find_tensor(m->gguf, "token_embd.weight");
        }
        if (!t)
            return amk__fail(d, AMK_ERR_NOT_FOUND, "model has no tensor '%s'%s%s%s", hf_name,
                             gname[0] ? " (GGUF '" : "", gname[0] ? gname : "", gname[0] ? "')" : "");
        s->type = t->type;
        s->rank = t->n_dims;
        for (k = 0; k < t->n_dims; k++) s->shape[k] = t->dims[t->n_dims - 1 - k];
        s->data = t->data;
        s->nbytes = t->nbytes;
        /* why only "llama": llama.cpp's converter permutes Llama's (and Mistral's) Q/K rows, not Qwen's */
        s->perm_heads = strcmp(m->cfg.arch, "llama") != 0 ? 0 : perm == 1 ? m->cfg.n_heads : perm == 2 ? m->cfg.n_kv_heads : 0;
        return AMK_OK;
    }
    {
        const amk_st_tensor *t = NULL;
        for (k = 0; k < m->n_shards && !t; k++) t = amk_safetensors_find(&m->shards[k], hf_name);
        if (!t && strcmp(hf_name, "lm_head.weight") == 0)
            for (k = 0; k < m->n_shards && !t; k++)
                t = amk_safetensors_find(&m->shards[k], "model.embed_tokens.weight");
        if (!t) return amk__fail(d, AMK_ERR_NOT_FOUND, "model has no tensor '%s'", hf_name);
        if (t->dtype == AMK_DTYPE_F32) s->type = AMK_GGML_F32;
        else if (t->dtype == AMK_DTYPE_F16) s->type = AMK_GGML_F16;
        else if (t->dtype == AMK_DTYPE_BF16) s->type = AMK_GGML_BF16;
        else
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, "
                             "F16 or BF16)", hf_name, t->dtype_name);
        if (t->rank > 4)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s': rank %d (at most 4)", hf_name,
                             t->rank);
        s->rank = t->rank;
        for (k = 0; k < t->rank; k++) s->shape[k] = t->shape[k];
        s->data = t->data;
        s->nbytes = t->nbytes;
        return AMK_OK;
    }
}

AMK_API amk_result amk_model_tensor_shape(amk_model *m, const char *hf_name, int *rank,
                                          int64_t shape[4], amk_diag *d) {
    amk__model_src s;
    amk_result r;
    int k;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL model");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    if (rank) *rank = s.rank;
    if (shape)
        for (k = 0; k < 4; k++) shape[k] = s.shape[k];
    return AMK_OK;
}

/* The AMK dtype of stored data of ggml type `type`: F32, F16, BF16 or a block format; -1 else. */
AMK__FN int amk__model_stored_dtype(uint32_t type) {
    return type == AMK_GGML_F32 ? AMK_DTYPE_F32 : type == AMK_GGML_F16 ? AMK_DTYPE_F16
         : type == AMK_GGML_BF16 ? AMK_DTYPE_BF16 : amk_gguf_type_dtype(type);
}

AMK_API amk_result amk_model_tensor_dtype(amk_model *m, const char *hf_name, int *dtype, amk_diag *d) {
    amk__model_src s;
    amk_result r;
    if (!m || !dtype) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL %s", m ? "dtype" : "model");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    *dtype = amk__model_stored_dtype(s.type);
    return AMK_OK;
}

AMK_API amk_result amk_model_tensor_read(amk_model *m, const char *hf_name, int dtype, void *dst,
                                         size_t dst_bytes, amk_diag *d) {
    amk__model_src s;
    amk_result r;
    int64_t numel = 1, want;
    int k, raw;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL model");
    if (!dst) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL destination for tensor '%s'", hf_name ? hf_name : "(null)");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    raw = amk_dtype_is_block(dtype) && dtype == amk__model_stored_dtype(s.type); /* its own blocks */
    if (dtype != AMK_DTYPE_F32 && dtype != AMK_DTYPE_F16 && dtype != AMK_DTYPE_BF16 && !raw)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%s': cannot read as %s (F32, F16, BF16, or the "
                         "block format it is stored in, %s)", hf_name, amk_dtype_name(dtype),
                         amk_gguf_type_name(s.type));
    for (k = 0; k < s.rank; k++)
        if (!amk__mul_i64(numel, s.shape[k], &numel))
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': element count overflows", hf_name);
    want = amk_dtype_nbytes(dtype, numel);
    if (want < 0 || (uint64_t)want != (uint64_t)dst_bytes)
        return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s': %lld elements as %s need %lld bytes, "
                         "the destination has %llu", hf_name, (long long)numel,
                         amk_dtype_name(dtype), (long long)want, (unsigned long long)dst_bytes);
    if (raw && (uint64_t)want > s.nbytes)
        return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': %llu bytes stored, %lld needed", hf_name,
                         (unsigned long long)s.nbytes, (long long)want);
    if (!s.perm_heads) {
        if (raw) memcpy(dst, s.data, (size_t)want);
        return raw ? AMK_OK : amk_gguf_dequant(s.type, s.data, s.nbytes, numel, dtype, dst, d);
    }
    {
        /* undo the converter's Q/K row permutation (REFERENCE §1.7 (b)): within each head of hd
           rows, HF row j < hd/2 is GGUF row 2j and HF row j + hd/2 is GGUF row 2j + 1 */
        int64_t rows = s.shape[0], row_len = s.shape[1], hd, row;
        uint64_t row_bytes;
        size_t out_row = (size_t)amk_dtype_nbytes(dtype, row_len);
        if (s.rank != 2 || rows % s.perm_heads != 0 || (rows / s.perm_heads) % 2 != 0)
            return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s': %lld rows do not split into %d "
                             "heads of an even size", hf_name, (long long)rows, s.perm_heads);
        hd = rows / s.perm_heads;
        row_bytes = s.nbytes / (uint64_t)rows;
        if (raw && (uint64_t)out_row != row_bytes)
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': rows of %llu stored bytes, not %llu", hf_name,
                             (unsigned long long)row_bytes, (unsigned long long)out_row);
        for (row = 0; row < rows; row++) {
            int64_t h = row / hd, j = row % hd;
            int64_t src = h * hd + (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
            if (raw) { /* the row's blocks as they are */
                memcpy((uint8_t *)dst + (size_t)row * out_row, (const uint8_t *)s.data + (uint64_t)src * row_bytes,
                       out_row);
                continue;
            }
            r = amk_gguf_dequant(s.type, (const uint8_t *)s.data + (uint64_t)src * row_bytes,
                                 row_bytes, row_len, dtype, (uint8_t *)dst + (size_t)row * out_row, d);
            if (r != AMK_OK) return r;
        }
        return AMK_OK;
    }
}

/* ---- config from GGUF metadata (REFERENCE §1.5) ----------------------------------------------- */

/* Reads an integer key into [lo, hi]; absent: *out = dflt, or an error when required. */
AMK__FN amk_result amk__model_gguf_int(const amk_gguf *g, const char *key, int required, int dflt,
                                       int lo, int hi, int *out, amk_diag *d) {
    int64_t v;
    if (amk_gguf_find_key(g, key) < 0) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the key '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (!amk_gguf_get_int(g, key, &v))
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is not an integer", key);
    if (v < lo || v > hi)
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is %lld (must be in [%d, %d])", key,
                         (long long)v, lo, hi);
    *out = (int)v;
    return AMK_OK;
}
AMK__FN amk_result amk__model_gguf_float(const amk_gguf *g, const char *key, int required,
                                         float dflt, float *out, amk_diag *d) {
    double v;
    if (amk_gguf_find_key(g, key) < 0) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the key '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (!amk_gguf_get_float(g, key, &v))
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is not a number", key);
    *out = (float)v;
    return AMK_OK;
}

AMK__FN amk_result amk__model_config_gguf(const amk_gguf *g, amk_llama_config *c, amk_diag *d) {
    const char *arch = amk_gguf_get_string(g, "general.architecture", NULL), *s;
    const amk_gguf_tensor *emb = amk_gguf_find_tensor(g, "token_embd.weight");
    amk_result r;
    int64_t ntok;
    int has_freqs = amk_gguf_find_tensor(g, "rope_freqs.weight") != NULL, i;
    static const char *const eos_keys[3] = {"tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    char key[96]; /* AMK__GK's: "<arch>.<suffix>", the architecture's own hyper-parameters */
    if (!arch) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the string 'general.architecture'");
    if (strcmp(arch, "llama") != 0 && strcmp(arch, "qwen2") != 0 && strcmp(arch, "qwen3") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "architecture '%.100s' is not supported (only "
                         "llama, qwen2 and qwen3)", arch);
    snprintf(c->arch, sizeof c->arch, "%s", arch);
#define AMK__GK(sfx) (snprintf(key, sizeof key, "%s.%s", c->arch, sfx), key)
    if ((s = amk_gguf_get_string(g, "general.name", NULL)) != NULL)
        snprintf(c->name, sizeof c->name, "%s", s);
    if ((r = amk__model_gguf_int(g, AMK__GK("block_count"), 1, 0, 1, INT_MAX, &c->n_layers, d)) ||
        (r = amk__model_gguf_int(g, AMK__GK("embedding_length"), 1, 0, 1, INT_MAX, &c->hidden, d)) ||
        (r = amk__model_gguf_int(g, AMK__GK("feed_forward_length"), 1, 0, 1, INT_MAX, &c->intermediate, d)) ||
        (r = amk__model_gguf_int(g, AMK__GK("attention.head_count"), 1, 0, 1, INT_MAX, &c->n_heads, d)) ||
        (r = amk__model_gguf_int(g, AMK__GK("attention.head_count_kv"), 0, c->n_heads, 1, INT_MAX, &c->n_kv_heads, d)) ||
        (r = amk__model_gguf_int(g, AMK__GK("context_length"), 1, 0, 1, INT_MAX, &c->max_pos, d)) ||
        (r = amk__model_gguf_float(g, AMK__GK("attention.layer_norm_rms_epsilon"), 1, 0, &c->rms_eps, d)) ||
        (r = amk__model_gguf_float(g, AMK__GK("rope.freq_base"), 0, 10000.0f, &c->rope_theta, d)))
        return r;
    /* head_dim: rope.dimension_count, else attention.key_length, else hidden / heads; a Mistral
       converted as "llama" may carry its sliding window */
    if ((r = amk__model_gguf_int(g, AMK__GK("attention.key_length"), 0, c->hidden / c->n_heads, 1,
                                 INT_MAX, &c->head_dim, d)) ||
        (r = amk__model_gguf_int(g, AMK__GK("rope.dimension_count"), 0, c->head_dim, 1, INT_MAX,
                                 &c->head_dim, d)) ||
        (strcmp(c->arch, "llama") == 0 &&
         (r = amk__model_gguf_int(g, AMK__GK("attention.sliding_window"), 0, 0, 1, INT_MAX, &c->sliding_window, d))))
        return r;
    /* vocab: llama.vocab_size, else the token list, else the embedding's rows */
    ntok = amk_gguf_array_len(g, "tokenizer.ggml.tokens", NULL);
    if (ntok < 0 && emb) ntok = emb->n_dims == 2 ? emb->dims[1] : -1;
    if (ntok > INT_MAX) ntok = -1;
    if ((r = amk__model_gguf_int(g, AMK__GK("vocab_size"), ntok < 1, (int)ntok, 1, INT_MAX, &c->vocab, d)))
        return r;
    /* RoPE scaling: llama3 (rope_freqs.weight or scaling.type "llama3"), linear, yarn */
    s = amk_gguf_get_string(g, AMK__GK("rope.scaling.type"), NULL);
    if (s && strcmp(s, "none") != 0 && strcmp(s, "llama3") != 0 && strcmp(s, "linear") != 0 && strcmp(s, "yarn") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "RoPE scaling '%.100s' is not supported (llama3, linear, "
                         "yarn)", s);
    if (s && (strcmp(s, "linear") == 0 || strcmp(s, "yarn") == 0)) {
        const int yarn = s[0] == 'y';
        float af;
        c->rope_type = yarn ? AMK_ROPE_YARN : AMK_ROPE_LINEAR;
        if ((r = amk__model_gguf_float(g, AMK__GK("rope.scaling.factor"), 1, 0, &c->rope_factor, d)) ||
            (r = amk__model_gguf_float(g, AMK__GK("rope.scaling.yarn_beta_slow"), 0, 1.0f, &c->rope_low_freq_factor, d)) ||
            (r = amk__model_gguf_float(g, AMK__GK("rope.scaling.yarn_beta_fast"), 0, 32.0f, &c->rope_high_freq_factor, d)) ||
            (r = amk__model_gguf_int(g, AMK__GK("rope.scaling.original_context_length"), 0, c->max_pos, 1, INT_MAX,
                                     &c->rope_orig_ctx, d)) ||
            (r = amk__model_gguf_float(g, AMK__GK("rope.scaling.attn_factor"), 0, 0.0f, &af, d)))
            return r;
        if (yarn && af != 0.0f && af != 1.0f)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "YaRN with rope.scaling.attn_factor %g is not supported "
                             "(only the default 0.1 ln(factor) + 1)", (double)af);
    }
    if (has_freqs || (s && strcmp(s, "llama3") == 0)) {
        static const char *const keys[3] = {"rope.scaling.factor", "rope.scaling.low_freq_factor",
                                            "rope.scaling.high_freq_factor"};
        for (i = 0; i < 3; i++)
            if (amk_gguf_find_key(g, AMK__GK(keys[i])) < 0)
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling (rope_freqs.weight) "
                                 "without the key '%s' is not supported yet", key);
        if (amk_gguf_find_key(g, AMK__GK("rope.scaling.original_context_length")) < 0)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling without the key "
                             "'%s' is not supported yet", key);
        c->rope_llama3 = 1;
        if ((r = amk__model_gguf_float(g, AMK__GK(keys[0]), 1, 0, &c->rope_factor, d)) ||
            (r = amk__model_gguf_float(g, AMK__GK(keys[1]), 1, 0, &c->rope_low_freq_factor, d)) ||
            (r = amk__model_gguf_float(g, AMK__GK(keys[2]), 1, 0, &c->rope_high_freq_factor, d)) ||
            (r = amk__model_gguf_int(g, AMK__GK("rope.scaling.original_context_length"), 1, 0, 1,
                                     INT_MAX, &c->rope_orig_ctx, d)))
            return r;
    }
    if ((r = amk__model_gguf_int(g, "tokenizer.ggml.bos_token_id", 0, -1, 0, INT_MAX, &c->bos_id, d)))
        return r;
    for (i = 0; i < 3; i++) {
        int id, k, seen = 0;
        if ((r = amk__model_gguf_int(g, eos_keys[i], 0, -1, 0, INT_MAX, &id, d))) return r;
        for (k = 0; k < c->n_eos; k++) seen |= c->eos_ids[k] == id;
        if (id >= 0 && !seen) c->eos_ids[c->n_eos++] = id;
    }
    c->tie_embeddings = amk_gguf_find_tensor(g, "output.weight") == NULL;
    /* Qwen2: q/k/v biases; Qwen3: q/k norms. A Llama's biases are refused (amk__model_check_config) */
    c->qkv_bias = strcmp(c->arch, "qwen2") == 0;
    c->qk_norm = strcmp(c->arch, "qwen3") == 0;
    c->attention_bias = !c->qkv_bias && amk_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->mlp_bias = amk_gguf_find_tensor(g, "blk.0.ffn_up.bias") != NULL;
    return AMK_OK;
#undef AMK__GK
}

/* ---- config from config.json (REFERENCE §2.3) ------------------------------------------------- */

AMK__FN amk_result amk__model_json_fail(amk_diag *d, const amk__jval *at, amk_result r,
                                        const char *fmt, const char *key) {
    if (d && at) { d->line = at->line; d->col = at->col; }
    return amk__fail(d, r, fmt, key);
}

/* An integer member in [lo, hi]; absent or null: dflt, or an error when required. */
AMK__FN amk_result amk__model_json_int(const amk__jval *o, const char *key, int required, int dflt,
                                       int lo, int hi, int *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "config.json lacks '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (v->type != AMK__J_INT)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be an integer", key);
    if (v->i < lo || v->i > hi)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' is out of range", key);
    *out = (int)v->i;
    return AMK_OK;
}
AMK__FN amk_result amk__model_json_float(const amk__jval *o, const char *key, float dflt,
                                         float *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) { *out = dflt; return AMK_OK; }
    if (v->type != AMK__J_INT && v->type != AMK__J_REAL)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be a number", key);
    if (!(v->f >= -FLT_MAX && v->f <= FLT_MAX)) { /* why: (float)1e300 is inf, which no check names */
        if (d) { d->line = v->line; d->col = v->col; }
        return amk__fail(d, AMK_ERR_PARSE, "config.json: '%s' is %g, outside a float's range", key, v->f);
    }
    *out = (float)v->f;
    return AMK_OK;
}
AMK__FN amk_result amk__model_json_bool(const amk__jval *o, const char *key, int *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) { *out = 0; return AMK_OK; }
    if (v->type != AMK__J_BOOL)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be true or false", key);
    *out = (int)v->i;
    return AMK_OK;
}
/* A string member, or NULL when absent or not a string. */
AMK__FN const char *amk__model_json_str(const amk__jval *o, const char *key) {
    const amk__jval *v = amk__json_get(o, key);
    return v && v->type == AMK__J_STRING ? v->s : NULL;
}

AMK__FN amk_result amk__model_config_json(const amk__jval *o, amk_llama_config *c, amk_diag *d) {
    const char *mt = amk__model_json_str(o, "model_type"), *s;
    const amk__jval *v, *rope;
    amk_result r;
    int i;
    if (!o || o->type != AMK__J_OBJECT)
        return amk__fail(d, AMK_ERR_PARSE, "config.json is not a JSON object");
    if (mt && strcmp(mt, "llama") != 0 && strcmp(mt, "mistral") != 0 && strcmp(mt, "qwen2") != 0 &&
        strcmp(mt, "qwen3") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "model_type '%.100s' is not supported (only "
                         "llama, mistral, qwen2 and qwen3)", mt);
    if (!mt) {
        const amk__jval *a = amk__json_get(o, "architectures");
        for (i = 0; a && a->type == AMK__J_ARRAY && i < a->n && !mt; i++)
            if (a->items[i].type == AMK__J_STRING)
                mt = strcmp(a->items[i].s, "LlamaForCausalLM") == 0     ? "llama"
                   : strcmp(a->items[i].s, "MistralForCausalLM") == 0 ? "mistral"
                   : strcmp(a->items[i].s, "Qwen2ForCausalLM") == 0   ? "qwen2"
                   : strcmp(a->items[i].s, "Qwen3ForCausalLM") == 0   ? "qwen3" : NULL;
        if (!mt)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "config.json names neither model_type 'llama', "
                             "'mistral', 'qwen2' or 'qwen3' nor the architecture LlamaForCausalLM, "
                             "MistralForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM");
    }
    snprintf(c->arch, sizeof c->arch, "%s", mt);
    /* a Mistral's window (null or absent: none); a Llama has none */
    if (strcmp(mt, "mistral") == 0 &&
        (r = amk__model_json_int(o, "sliding_window", 0, 0, 1, INT_MAX, &c->sliding_window, d)))
        return r;
    if (strcmp(mt, "qwen2") == 0 || strcmp(mt, "qwen3") == 0) { /* Qwen2: q/k/v biases always; Qwen3:
                                                                  q/k norms (its biases, attention_bias,
                                                                  Llama's four, refused below); both a
                                                                  sliding window only when switched on */
        int sw = 0;
        c->qkv_bias = strcmp(mt, "qwen2") == 0;
        c->qk_norm = strcmp(mt, "qwen3") == 0;
        if ((r = amk__model_json_bool(o, "use_sliding_window", &sw, d))) return r;
        if (sw)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "%s's sliding window (use_sliding_window true) is not "
                             "supported yet", c->qk_norm ? "Qwen3" : "Qwen2");
    }
    if ((s = amk__model_json_str(o, "_name_or_path")) != NULL) snprintf(c->name, sizeof c->name, "%s", s);
    s = amk__model_json_str(o, "hidden_act");
    if (s && strcmp(s, "silu") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "hidden_act '%.100s' is not supported (only silu)", s);
    if ((r = amk__model_json_int(o, "num_hidden_layers", 1, 0, 1, INT_MAX, &c->n_layers, d)) ||
        (r = amk__model_json_int(o, "hidden_size", 1, 0, 1, INT_MAX, &c->hidden, d)) ||
        (r = amk__model_json_int(o, "intermediate_size", 1, 0, 1, INT_MAX, &c->intermediate, d)) ||
        (r = amk__model_json_int(o, "num_attention_heads", 1, 0, 1, INT_MAX, &c->n_heads, d)) ||
        (r = amk__model_json_int(o, "num_key_value_heads", 0, c->n_heads, 1, INT_MAX, &c->n_kv_heads, d)) ||
        (r = amk__model_json_int(o, "head_dim", 0, c->hidden / c->n_heads, 1, INT_MAX, &c->head_dim, d)) ||
        (r = amk__model_json_int(o, "vocab_size", 1, 0, 1, INT_MAX, &c->vocab, d)) ||
        /* why: 2048 and 1e-6 are transformers' LlamaConfig defaults */
        (r = amk__model_json_int(o, "max_position_embeddings", 0, 2048, 1, INT_MAX, &c->max_pos, d)) ||
        (r = amk__model_json_float(o, "rms_norm_eps", 1e-6f, &c->rms_eps, d)) ||
        (r = amk__model_json_bool(o, "tie_word_embeddings", &c->tie_embeddings, d)) ||
        (r = amk__model_json_bool(o, "attention_bias", &c->attention_bias, d)) ||
        (r = amk__model_json_bool(o, "mlp_bias", &c->mlp_bias, d)) ||
        (r = amk__model_json_int(o, "bos_token_id", 0, -1, 0, INT_MAX, &c->bos_id, d)))
        return r;
    /* eos_token_id: an int, a list of up to 4, or null */
    v = amk__json_get(o, "eos_token_id");
    if (v && v->type == AMK__J_ARRAY) {
        if (v->n > 4)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "config.json: eos_token_id lists %d ids (at "
                             "most 4)", v->n);
        for (i = 0; i < v->n; i++) {
            if (v->items[i].type != AMK__J_INT || v->items[i].i < 0 || v->items[i].i > INT_MAX)
                return amk__model_json_fail(d, &v->items[i], AMK_ERR_PARSE, "config.json: '%s' "
                                            "must hold token ids", "eos_token_id");
            c->eos_ids[c->n_eos++] = (int)v->items[i].i;
        }
    } else {
        int id;
        if ((r = amk__model_json_int(o, "eos_token_id", 0, -1, 0, INT_MAX, &id, d))) return r;
        if (id >= 0) c->eos_ids[c->n_eos++] = id;
    }
    /* RoPE: rope_theta + rope_scaling, or (transformers v5) rope_parameters holding both */
    rope = amk__json_get(o, "rope_parameters");
    if (rope && rope->type != AMK__J_OBJECT && rope->type != AMK__J_NULL)
        return amk__model_json_fail(d, rope, AMK_ERR_PARSE, "config.json: '%s' must be an object",
                                    "rope_parameters");
    if (!rope || rope->type == AMK__J_NULL) {
        if ((r = amk__model_json_float(o, "rope_theta", 10000.0f, &c->rope_theta, d))) return r;
        rope = amk__json_get(o, "rope_scaling");
        if (rope && rope->type != AMK__J_OBJECT && rope->type != AMK__J_NULL)
            return amk__model_json_fail(d, rope, AMK_ERR_PARSE, "config.json: '%s' must be an "
                                        "object or null", "rope_scaling");
    } else {
        const amk__jval *t = amk__json_get(o, "rope_theta");
        if ((r = amk__model_json_float(rope, "rope_theta",
                                       t && (t->type == AMK__J_INT || t->type == AMK__J_REAL) ? (float)t->f : 10000.0f,
                                       &c->rope_theta, d)))
            return r;
    }
    if (rope && rope->type == AMK__J_OBJECT) {
        const char *rt = amk__model_json_str(rope, "rope_type");
        if (!rt) rt = amk__model_json_str(rope, "type");
        if (rt && strcmp(rt, "llama3") == 0) {
            static const char *const need[4] = {"factor", "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings"};
            for (i = 0; i < 4; i++)
                if (!amk__json_get(rope, need[i]))
                    return amk__fail(d, AMK_ERR_PARSE, "config.json: llama3 rope scaling lacks '%s'",
                                     need[i]);
            c->rope_llama3 = 1;
            if ((r = amk__model_json_float(rope, "factor", 0, &c->rope_factor, d)) ||
                (r = amk__model_json_float(rope, "low_freq_factor", 0, &c->rope_low_freq_factor, d)) ||
                (r = amk__model_json_float(rope, "high_freq_factor", 0, &c->rope_high_freq_factor, d)) ||
                (r = amk__model_json_int(rope, "original_max_position_embeddings", 1, 0, 1, INT_MAX,
                                         &c->rope_orig_ctx, d)))
                return r;
        } else if (rt && (strcmp(rt, "linear") == 0 || strcmp(rt, "yarn") == 0)) {
            const int yarn = rt[0] == 'y';
            float af = 0.0f, prf = 1.0f;
            int trunc = 1;
            c->rope_type = yarn ? AMK_ROPE_YARN : AMK_ROPE_LINEAR;
            if ((r = amk__model_json_float(rope, "factor", 0, &c->rope_factor, d)) ||
                (r = amk__model_json_float(rope, "beta_slow", 1.0f, &c->rope_low_freq_factor, d)) ||
                (r = amk__model_json_float(rope, "beta_fast", 32.0f, &c->rope_high_freq_factor, d)) ||
                (r = amk__model_json_int(rope, "original_max_position_embeddings", 0, c->max_pos, 1, INT_MAX,
                                         &c->rope_orig_ctx, d)) ||
                (r = amk__model_json_float(rope, "attention_factor", 0.0f, &af, d)) ||
                (r = amk__model_json_float(o, "partial_rotary_factor", 1.0f, &prf, d)))
                return r;
            if (amk__json_get(rope, "truncate") && (r = amk__model_json_bool(rope, "truncate", &trunc, d))) return r;
            if (yarn && c->rope_factor == 0.0f && c->rope_orig_ctx > 0) /* HF: the ratio of the contexts */
                c->rope_factor = (float)c->max_pos / (float)c->rope_orig_ctx;
            if (yarn && (af != 0.0f || amk__json_get(rope, "mscale") || amk__json_get(rope, "mscale_all_dim") ||
                         !trunc))
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "YaRN with attention_factor, mscale, mscale_all_dim or "
                                 "truncate false is not supported (only its defaults)");
            if (prf != 1.0f)
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "partial_rotary_factor %g is not supported", (double)prf);
        } else if (rt && strcmp(rt, "default") != 0) {
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "RoPE scaling '%.100s' is not supported (llama3, linear, "
                             "yarn)", rt);
        }
    }
    return AMK_OK;
}

/* Rejects configs the Llama path cannot run or whose numbers are inconsistent. */
AMK__FN amk_result amk__model_check_config(const amk_llama_config *c, amk_diag *d) {
    if (c->attention_bias || c->mlp_bias)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "%s biases are not supported",
                         c->attention_bias ? "attention" : "MLP");
    if (c->n_heads % c->n_kv_heads != 0)
        return amk__fail(d, AMK_ERR_PARSE, "%d heads do not split into %d KV heads", c->n_heads,
                         c->n_kv_heads);
    if (c->head_dim < 2 || c->head_dim % 2 != 0)
        return amk__fail(d, AMK_ERR_PARSE, "head_dim %d is not a positive even number (RoPE "
                         "rotates pairs)", c->head_dim);
    /* why here: the step's validator requires these finite and positive, and a config should
       fail as a bad file (naming the field), not later as a rejected program */
    if (!(c->rms_eps > 0.0f && c->rms_eps <= FLT_MAX))
        return amk__fail(d, AMK_ERR_PARSE, "rms_norm_eps %g must be positive and finite", (double)c->rms_eps);
    if (!(c->rope_theta > 0.0f && c->rope_theta <= FLT_MAX))
        return amk__fail(d, AMK_ERR_PARSE, "rope_theta %g must be positive and finite", (double)c->rope_theta);
    if (c->rope_type != AMK_ROPE_DEFAULT &&
        !(c->rope_factor > 0.0f && c->rope_factor <= FLT_MAX &&
          (c->rope_type == AMK_ROPE_LINEAR || (c->rope_low_freq_factor > 0.0f && c->rope_high_freq_factor > c->rope_low_freq_factor &&
                                                c->rope_high_freq_factor <= FLT_MAX && c->rope_orig_ctx >= 1))))
        return amk__fail(d, AMK_ERR_PARSE, "%s RoPE scaling needs a finite factor > 0%s (factor %g, beta_slow %g, "
                         "beta_fast %g, original_max_position_embeddings %d)",
                         c->rope_type == AMK_ROPE_YARN ? "yarn" : "linear",
                         c->rope_type == AMK_ROPE_YARN ? ", finite beta_fast > beta_slow > 0 and an original context >= 1" : "",
                         (double)c->rope_factor, (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor,
                         c->rope_orig_ctx);
    if (c->rope_llama3 && !(c->rope_factor > 0.0f && c->rope_factor <= FLT_MAX && c->rope_low_freq_factor > 0.0f &&
                            c->rope_high_freq_factor > c->rope_low_freq_factor &&
                            c->rope_high_freq_factor <= FLT_MAX && c->rope_orig_ctx >= 1))
        return amk__fail(d, AMK_ERR_PARSE, "llama3 RoPE scaling needs a finite factor > 0, finite "
                         "high_freq_factor > low_freq_factor > 0 and original_max_position_embeddings >= 1 "
                         "(factor %g, low %g, high %g, %d)", (double)c->rope_factor,
                         (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor, c->rope_orig_ctx);
    { /* the special tokens index the embedding: an id past its rows would read outside it */
        int k;
        if (c->bos_id >= c->vocab)
            return amk__fail(d, AMK_ERR_PARSE, "bos_token_id %d is outside the vocabulary of %d tokens",
                             c->bos_id, c->vocab);
        for (k = 0; k < c->n_eos; k++)
            if (c->eos_ids[k] < 0 || c->eos_ids[k] >= c->vocab)
                return amk__fail(d, AMK_ERR_PARSE, "eos_token_id %d is outside the vocabulary of %d tokens",
                                 c->eos_ids[k], c->vocab);
    }
    return AMK_OK;
}

/* Checks that weight name exists with HF shape [rows] (cols 0) or [rows, cols] and a storage type
   the reader converts. */
AMK__FN amk_result amk__model_expect(const amk_model *m, const char *name, int64_t rows,
                                     int64_t cols, amk_diag *d) {
    amk__model_src s;
    amk_result r = amk__model_find(m, name, &s, d);
    char want[48], got[48];
    if (r != AMK_OK) return r;
    if (s.rank != (cols ? 2 : 1) || s.shape[0] != rows || (cols && s.shape[1] != cols)) {
        if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)rows);
        if (s.rank == 2) snprintf(got, sizeof got, "[%lld, %lld]", (long long)s.shape[0], (long long)s.shape[1]);
        else snprintf(got, sizeof got, "[%lld, ...] (rank %d)", (long long)s.shape[0], s.rank);
        return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s' has shape %s; the config implies %s",
                         name, got, want);
    }
    if (!amk__gguf_deq_for(s.type))
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s' is stored as %s, which cannot be "
                         "dequantized yet", name, amk_gguf_type_name(s.type));
    return AMK_OK;
}

/* Every weight the config implies must exist with its HF shape. */
AMK__FN amk_result amk__model_check_weights(const amk_model *m, amk_diag *d) {
    const amk_llama_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    /* [rows, cols] per entry of amk__model_layer_names, cols 0 for a vector */
    const int64_t shapes[AMK__MODEL_N_LAYER_NAMES][2] = {
        {c->hidden, 0}, {q, c->hidden}, {kv, c->hidden}, {kv, c->hidden}, {c->hidden, q},
        {c->hidden, 0}, {c->intermediate, c->hidden}, {c->intermediate, c->hidden},
        {c->hidden, c->intermediate}};
    char name[96];
    int layer, i;
    amk_result r;
    static const char *const proj[3] = {"q_proj", "k_proj", "v_proj"};
    if ((r = amk__model_expect(m, "model.embed_tokens.weight", c->vocab, c->hidden, d)) ||
        (r = amk__model_expect(m, "model.norm.weight", c->hidden, 0, d)) ||
        (r = amk__model_expect(m, "lm_head.weight", c->vocab, c->hidden, d)))
        return r;
    for (layer = 0; layer < c->n_layers; layer++) {
        for (i = 0; i < AMK__MODEL_N_LAYER_NAMES; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", layer, amk__model_layer_names[i].hf);
            if ((r = amk__model_expect(m, name, shapes[i][0], shapes[i][1], d))) return r;
        }
        for (i = 0; i < 3 && c->qkv_bias; i++) { /* Qwen2's biases: [rows] */
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.bias", layer, proj[i]);
            if ((r = amk__model_expect(m, name, i ? kv : q, 0, d))) return r;
        }
        for (i = 0; i < 2 && c->qk_norm; i++) { /* Qwen3's q_norm and k_norm: [head_dim] */
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s_norm.weight", layer, i ? "k" : "q");
            if ((r = amk__model_expect(m, name, c->head_dim, 0, d))) return r;
        }
    }
    return AMK_OK;
}

/* ---- opening ---------------------------------------------------------------------------------- */

AMK__FN char *amk__model_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)amk__malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}
AMK__FN char *amk__model_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
#ifdef _WIN32
    const char *bs = strrchr(path, '\\');
    if (bs && (!slash || bs > slash)) slash = bs;
#endif
    if (!slash) return amk__strdup(".");
    if (slash == path) return amk__strdup("/");
    return amk__strndup(path, (size_t)(slash - path));
}
AMK__FN int amk__model_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}
AMK__FN int amk__model_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Adds one more shard slot to m and opens path into it. */
AMK__FN amk_result amk__model_add_shard(amk_model *m, const char *path, amk_diag *d) {
    amk_safetensors *ns;
    amk_result r;
    ns = (amk_safetensors *)amk__realloc(m->shards, (size_t)(m->n_shards + 1) * sizeof *ns);
    if (!ns) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory opening '%s'", path);
    m->shards = ns;
    r = amk_safetensors_open(path, &m->shards[m->n_shards], d);
    if (r == AMK_OK) m->n_shards++;
    return r;
}

/* What amk_model_open accepts, for messages that name a path it does not. */
#define AMK__MODEL_EXPECTED "a .gguf file, a .safetensors file (or its index) with config.json beside it, " \
                            "or a directory with config.json and safetensors"

/* Opens every shard an index's weight_map names (each once) and checks each entry is there. */
AMK__FN amk_result amk__model_open_index(amk_model *m, const char *index_path, amk_diag *d) {
    char *text = NULL;
    size_t len;
    amk__jdoc doc;
    const amk__jval *map;
    const char **files = NULL;
    int n_files = 0, i, k;
    amk_result r = amk__read_file(index_path, &text, &len, d);
    if (r != AMK_OK) return r;
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) {
        amk__free(text);
        if (d) {
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s':%d:%d: %s", index_path, d->line, d->col, msg);
            snprintf(d->path, sizeof d->path, "%s", index_path);
        }
        return r;
    }
    map = amk__json_get(doc.root, "weight_map");
    if (!map || map->type != AMK__J_OBJECT || map->n == 0) {
        r = amk__fail(d, AMK_ERR_PARSE, "'%s': not a safetensors index (no weight_map object; expected %s)",
                      index_path, AMK__MODEL_EXPECTED);
        goto done;
    }
    files = (const char **)amk__calloc((size_t)map->n, sizeof *files);
    if (!files) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); goto done; }
    for (i = 0; i < map->n && r == AMK_OK; i++) {
        const amk__jval *f = &map->items[i];
        char *p;
        if (f->type != AMK__J_STRING || f->slen == 0 || strlen(f->s) != f->slen || f->s[0] == '/' ||
            strstr(f->s, "..")) {
            r = amk__fail(d, AMK_ERR_PARSE, "'%s': weight_map['%.100s'] is not a plain file name",
                          index_path, map->keys[i]);
            break;
        }
        for (k = 0; k < n_files && strcmp(files[k], f->s) != 0; k++) {}
        if (k < n_files) continue;
        files[n_files++] = f->s;
        if (!(p = amk__model_join(m->dir, f->s))) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); break; }
        r = amk__model_add_shard(m, p, d);
        amk__free(p);
    }
    /* every entry must be in the shard the index names */
    for (i = 0; i < map->n && r == AMK_OK; i++) {
        for (k = 0; k < n_files && strcmp(files[k], map->items[i].s) != 0; k++) {}
        if (!amk_safetensors_find(&m->shards[k], map->keys[i]))
            r = amk__fail(d, AMK_ERR_NOT_FOUND, "'%s' maps tensor '%.150s' to '%.150s', which does "
                          "not hold it", index_path, map->keys[i], files[k]);
    }
done:
    amk__free(files);
    amk__json_free(&doc);
    amk__free(text);
    return r;
}

/* Reads dir/config.json into m->cfg. */
AMK__FN amk_result amk__model_read_config(amk_model *m, amk_diag *d) {
    char *path = amk__model_join(m->dir, "config.json"), *text = NULL;
    size_t len;
    amk__jdoc doc;
    amk_result r;
    if (!path) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    r = amk__read_file(path, &text, &len, d);
    if (r == AMK_OK) {
        r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
        if (r == AMK_OK) {
            r = amk__model_config_json(doc.root, &m->cfg, d);
            amk__json_free(&doc);
        }
        amk__free(text);
    }
    if (r != AMK_OK && d) {
        char msg[sizeof d->message];
        memcpy(msg, d->message, sizeof msg);
        amk__fail(d, r, "'%s': %s", path, msg);
        snprintf(d->path, sizeof d->path, "%s", path);
    }
    amk__free(path);
    return r;
}

/* 1 when path is a directory (POSIX stat; elsewhere 0, and a directory fails as a file would). */
AMK__FN int amk__model_is_dir(const char *path) {
#if !defined(_WIN32)
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
#else
    AMK__UNUSED(path);
    return 0;
#endif
}

AMK__FN amk_result amk__model_open_files(amk_model *m, const char *path, amk_diag *d) {
    char *p = amk__model_join(path, "config.json");
    unsigned char head[9];
    size_t n_head;
    FILE *f;
    amk_result r;
    int is_dir, has_config;
    if (!p) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    has_config = amk__model_exists(p); /* why portable: a directory is a path with config.json in it */
    amk__free(p);
    is_dir = has_config || amk__model_is_dir(path);
    if (is_dir && !has_config)
        return amk__fail(d, AMK_ERR_IO, "'%s': a directory without config.json (expected %s)", path,
                         AMK__MODEL_EXPECTED);
    if (is_dir) {
        if (!(m->dir = amk__strdup(path))) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if ((r = amk__model_read_config(m, d)) != AMK_OK) return r;
        if (!(p = amk__model_join(path, "model.safetensors.index.json")))
            return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if (amk__model_exists(p)) {
            r = amk__model_open_index(m, p, d);
        } else {
            amk__free(p);
            if (!(p = amk__model_join(path, "model.safetensors")))
                return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
            r = amk__model_add_shard(m, p, d);
        }
        amk__free(p);
        return r;
    }
    if (!(f = fopen(path, "rb")))
        return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    n_head = fread(head, 1, sizeof head, f);
    fclose(f);
    if (!(m->dir = amk__model_dirname(path))) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    /* what the file is: by its first bytes (GGUF's magic; safetensors' 8-byte header length then
       '{') and its name, so the message names the file and what is wrong with it rather than a
       config.json it never needed (a .safetensors file's own errors come from its parser) */
    if (n_head == 0)
        return amk__fail(d, AMK_ERR_PARSE, "'%s': empty file (expected %s)", path, AMK__MODEL_EXPECTED);
    if (n_head >= 4 && memcmp(head, "GGUF", 4) == 0) {
        if ((r = amk_gguf_open(path, &m->gguf, d)) != AMK_OK) return r;
        if ((r = amk__model_config_gguf(m->gguf, &m->cfg, d)) != AMK_OK && d) {
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s': %s", path, msg);
        }
        return r;
    }
    if (amk__model_ends_with(path, ".gguf")) {
        uint32_t magic = 0;
        size_t k;
        for (k = 0; k < 4 && k < n_head; k++) magic |= (uint32_t)head[k] << (8 * k);
        return amk__fail(d, AMK_ERR_PARSE, "'%s': not a GGUF file (magic 0x%08x, expected 'GGUF')", path, magic);
    }
    if (amk__model_ends_with(path, ".json")) {
        /* an index first: a JSON file that is not one says so, not that config.json is missing */
        if ((r = amk__model_open_index(m, path, d)) != AMK_OK) return r;
        return amk__model_read_config(m, d);
    }
    if (!amk__model_ends_with(path, ".safetensors") && (n_head < 9 || head[8] != '{'))
        return amk__fail(d, AMK_ERR_PARSE, "'%s': neither GGUF (no 'GGUF' magic) nor safetensors (no JSON "
                         "header); expected %s", path, AMK__MODEL_EXPECTED);
    if ((r = amk__model_read_config(m, d)) != AMK_OK) return r;
    return amk__model_add_shard(m, path, d);
}

AMK_API amk_result amk_model_open(const char *path, amk_model **out, amk_diag *d) {
    amk_model *m;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_model_open: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_model_open: path is NULL");
    m = (amk_model *)amk__calloc(1, sizeof *m);
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    m->cfg.bos_id = -1;
    r = amk__model_open_files(m, path, d);
    if (r == AMK_OK) {
        r = amk__model_check_config(&m->cfg, d);
        if (r == AMK_OK) r = amk__model_check_weights(m, d);
        if (r != AMK_OK && d) { /* the files parsed: name the model in what they lack */
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s': %s", path, msg);
            snprintf(d->path, sizeof d->path, "%s", path);
        }
    }
    if (r == AMK_OK && !m->gguf && !m->cfg.tie_embeddings) {
        /* an untied config without lm_head reads the embedding, as tied models do */
        int k, has = 0;
        for (k = 0; k < m->n_shards; k++) has |= amk_safetensors_find(&m->shards[k], "lm_head.weight") != NULL;
        m->cfg.tie_embeddings = !has;
    }
    if (r != AMK_OK) { amk_model_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API void amk_model_close(amk_model *m) {
    int k;
    if (!m) return;
    amk_gguf_close(m->gguf);
    for (k = 0; k < m->n_shards; k++) amk_safetensors_close(&m->shards[k]);
    amk__free(m->shards);
    amk__free(m->dir);
    amk__free(m);
}

AMK_API const amk_llama_config *amk_model_config(const amk_model *m) { return m ? &m->cfg : NULL; }
AMK_API const amk_gguf *amk_model_gguf(const amk_model *m) { return m ? m->gguf : NULL; }
AMK_API const char *amk_model_dir(const amk_model *m) { return m ? m->dir : NULL; }

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */
