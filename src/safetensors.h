/* ==== >>impl_safetensors (stub: being written) ==== */
AMK_API amk_result amk_safetensors_open(const char *path, amk_safetensors *out, amk_diag *d) { AMK__UNUSED(path); memset(out, 0, sizeof *out); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API amk_result amk_safetensors_parse(const void *data, size_t size, amk_safetensors *out, amk_diag *d) { AMK__UNUSED(data); AMK__UNUSED(size); memset(out, 0, sizeof *out); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API const amk_st_tensor *amk_safetensors_find(const amk_safetensors *st, const char *name) { AMK__UNUSED(st); AMK__UNUSED(name); return NULL; }
AMK_API void amk_safetensors_close(amk_safetensors *st) { AMK__UNUSED(st); }
AMK_API amk_result amk_safetensors_write(const char *path, const amk_st_entry *e, int n, amk_diag *d) { AMK__UNUSED(path); AMK__UNUSED(e); AMK__UNUSED(n); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
