/amk_ptx_bulk_copy_weights(gs + L.rb, (const char \*)Wu->ptr + g0/i\
            { const uint64_t t0_ = amk_ptx_globaltimer(); while (amk_ptx_globaltimer() - t0_ < 3000u) amk_ptx_nanosleep(100); }
/amk_ptx_bulk_copy_weights((char \*)smem + L.wso, amk_rows_src/i\
            { const uint64_t t0_ = amk_ptx_globaltimer(); while (amk_ptx_globaltimer() - t0_ < 3000u) amk_ptx_nanosleep(100); }
