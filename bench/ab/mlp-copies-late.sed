s/amk__cuda_prefetch_rows(bt, n_buffers, in, \([12]\), \([23]\), AMK_VM_PREFETCH_BYTES \/ 2);/if (in->op != AMK_OP_RMSNORM_MLP) amk__cuda_prefetch_rows(bt, n_buffers, in, \1, \2, AMK_VM_PREFETCH_BYTES \/ 2);/
/const int64_t g0 = L.n_begin \* L.K \* 2;/a\
        if (L.mlp) { const uint64_t t0_ = amk_ptx_globaltimer(); while (amk_ptx_globaltimer() - t0_ < 2500u) amk_ptx_nanosleep(100); }
