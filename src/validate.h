/* ==== >>impl_validate (stub: being written) ==== */
AMK_API amk_result amk_program_validate(const amk_program *p, amk_report *report) { AMK__UNUSED(p); if (report) memset(report, 0, sizeof *report); return AMK_ERR_UNSUPPORTED; }
AMK_API void amk_report_free(amk_report *r) { if (r) { amk__free(r->items); memset(r, 0, sizeof *r); } }
AMK_API void amk_report_format_issue(const amk_program *p, const amk_issue *is, char *buf, size_t size) { AMK__UNUSED(p); snprintf(buf, size, "%s", is->message); }
AMK_API amk_result amk_program_simulate(const amk_program *p, int *order, int *n_fired, int *stuck, int *n_stuck) { AMK__UNUSED(p); AMK__UNUSED(order); AMK__UNUSED(n_fired); AMK__UNUSED(stuck); AMK__UNUSED(n_stuck); return AMK_ERR_UNSUPPORTED; }
AMK_API int amk_program_simulate_adversarial(const amk_program *p, uint64_t seed, int n_orders, amk_diag *d) { AMK__UNUSED(p); AMK__UNUSED(seed); AMK__UNUSED(n_orders); AMK__UNUSED(d); return -1; }
AMK_API int amk_program_critical_path(const amk_program *p) { AMK__UNUSED(p); return 0; }
