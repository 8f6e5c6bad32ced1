/const int64_t g0 = L.n_begin \* L.K \* 2;/a\
        if (L.mlp) { const uint64_t t0_ = amk_ptx_globaltimer(); while (amk_ptx_globaltimer() - t0_ < 2500u) amk_ptx_nanosleep(100); }
