/* ==== >>impl_lower (stub: being written) ==== */
AMK_API amk_result amk_program_lower(amk_program *p, const amk_config *c, const amk_target *t, amk_diag *d) { AMK__UNUSED(p); AMK__UNUSED(c); AMK__UNUSED(t); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
