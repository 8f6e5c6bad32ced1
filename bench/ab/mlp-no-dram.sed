s/amk__cuda_prefetch_rows(bt, n_buffers, in, \([12]\), \([23]\), AMK_VM_PREFETCH_BYTES \/ 2);/if (in->op != AMK_OP_RMSNORM_MLP) amk__cuda_prefetch_rows(bt, n_buffers, in, \1, \2, AMK_VM_PREFETCH_BYTES \/ 2);/
s/(const char \*)W->ptr + g0, (uint32_t)L.rb/(const char *)W->ptr + (L.mlp ? 0 : g0), (uint32_t)L.rb/
s/(const char \*)Wu->ptr + g0/(const char *)Wu->ptr/
s/amk_rows_src(c, L.n_begin), (uint32_t)L.wsb/amk_rows_src(c, 0), (uint32_t)L.wsb/
