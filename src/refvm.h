/* ==== >>impl_refvm (stub: being written) ==== */
struct amk_refvm { int unused; };
AMK_API amk_result amk_refvm_create(const amk_program *p, amk_refvm **out, amk_diag *d) { AMK__UNUSED(p); *out = NULL; return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API void amk_refvm_free(amk_refvm *vm) { AMK__UNUSED(vm); }
AMK_API void *amk_refvm_buffer(amk_refvm *vm, int id, size_t *nbytes) { AMK__UNUSED(vm); AMK__UNUSED(id); if (nbytes) *nbytes = 0; return NULL; }
AMK_API amk_result amk_refvm_bind(amk_refvm *vm, int id, const void *data, size_t nbytes) { AMK__UNUSED(vm); AMK__UNUSED(id); AMK__UNUSED(data); AMK__UNUSED(nbytes); return AMK_ERR_UNSUPPORTED; }
AMK_API amk_result amk_refvm_run(amk_refvm *vm, const amk_refvm_opts *o, amk_diag *d) { AMK__UNUSED(vm); AMK__UNUSED(o); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
AMK_API amk_result amk_ref_exec(const amk_program *p, const amk_task *t, void *const *ins, void *const *outs, amk_diag *d) { AMK__UNUSED(p); AMK__UNUSED(t); AMK__UNUSED(ins); AMK__UNUSED(outs); return amk__fail(d, AMK_ERR_UNSUPPORTED, "not yet"); }
