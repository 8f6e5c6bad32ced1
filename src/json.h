/* ==== >>impl_json (stub: being written) ==== */
AMK__FN amk_result amk__json_parse(const char *text, size_t len, int max_depth, amk__jdoc *doc, amk_diag *d) {
    AMK__UNUSED(text); AMK__UNUSED(len); AMK__UNUSED(max_depth); doc->root = NULL; doc->arena = NULL;
    return amk__fail(d, AMK_ERR_UNSUPPORTED, "json: not yet implemented");
}
AMK__FN void amk__json_free(amk__jdoc *doc) { AMK__UNUSED(doc); }
AMK__FN const amk__jval *amk__json_get(const amk__jval *obj, const char *key) { AMK__UNUSED(obj); AMK__UNUSED(key); return NULL; }
AMK__FN void amk__json_put_string(amk__sb *sb, const char *s, size_t len) { amk__sb_putc(sb, '"'); amk__sb_putn(sb, s, len); amk__sb_putc(sb, '"'); }
AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v) { AMK__UNUSED(sb); AMK__UNUSED(v); }
AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out, amk_diag *d) { AMK__UNUSED(text); AMK__UNUSED(len); *out = NULL; return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d) { AMK__UNUSED(path); *out = NULL; return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len) { AMK__UNUSED(p); *out = NULL; if (out_len) *out_len = 0; return AMK_ERR_UNSUPPORTED; }
AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d) { AMK__UNUSED(p); AMK__UNUSED(path); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
