s/(const char \*)W->ptr + g0, (uint32_t)L.rb/(const char *)W->ptr + (L.mlp ? 0 : g0), (uint32_t)L.rb/
s/(const char \*)Wu->ptr + g0/(const char *)Wu->ptr/
s/amk_rows_src(c, L.n_begin), (uint32_t)L.wsb/amk_rows_src(c, 0), (uint32_t)L.wsb/
