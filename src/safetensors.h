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

/* "[3, 4]" ("[]" for rank 0) into buf, truncated if it does not fit. */
AMK__FN void amk__st_fmt_shape(char *buf, size_t size, const int64_t *shape, int rank) {
    size_t len;
    int i;
    if (!size) return;
    len = (size_t)snprintf(buf, size, "[");
    for (i = 0; i < rank && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < size) snprintf(buf + len, size - len, "]");
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
    amk__st_fmt_shape(shape_txt, sizeof shape_txt, t->shape, t->rank);
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
