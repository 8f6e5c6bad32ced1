/* The canonical codes, caps and versions of spec §1.1, §7 and §8. If any drifts, this test (and
   so `make test`) fails: the numbers below are copied from the spec, not from amk_ir.h. */
#include <stddef.h>
#include "../amk.h"
#include "amk_test.h"

typedef struct { const char *name; int code; } named_code;

static void check_table(const named_code *t, int n, int (*from_name)(const char *),
                        const char *(*to_name)(int)) {
    int i;
    for (i = 0; i < n; i++) {
        CHECK_EQ_INT(from_name(t[i].name), t[i].code);
        CHECK_STR(to_name(t[i].code), t[i].name);
    }
}

static void test_dtype_codes(void) {
    static const named_code t[] = {{"F32", 0}, {"F16", 1}, {"BF16", 2}, {"F8E4M3", 3},
        {"F8E5M2", 4}, {"I32", 5}, {"I8", 6}, {"I4", 7}, {"U8", 8}, {"BOOL", 9},
        /* AMK's own: GGUF's block formats */
        {"Q8_0", 10}, {"Q4_0", 11}, {"Q4_1", 12}, {"Q5_0", 13}, {"Q5_1", 14}, {"Q2_K", 15}, {"Q3_K", 16},
        {"Q4_K", 17}, {"Q5_K", 18}, {"Q6_K", 19}, {"IQ4_NL", 20}};
    /* elements and bytes a block, ggml's (GGML_QUANT_SIZES) */
    static const int blocks[11][2] = {{32, 34}, {32, 18}, {32, 20}, {32, 22}, {32, 24}, {256, 84}, {256, 110},
                                      {256, 144}, {256, 176}, {256, 210}, {32, 18}};
    int i, bytes;
    check_table(t, 21, amk_dtype_from_name, amk_dtype_name);
    CHECK_EQ_INT(AMK_DTYPE_COUNT, 21);
    for (i = 0; i < 11; i++) {
        CHECK(amk_dtype_is_block(10 + i) && amk_dtype_bits(10 + i) == 0 && !amk_dtype_is_float(10 + i));
        CHECK(amk_dtype_block(10 + i, &bytes) == blocks[i][0] && bytes == blocks[i][1]);
        CHECK(AMK_BLOCK_ELEMS(10 + i) == blocks[i][0] && AMK_BLOCK_BYTES(10 + i) == blocks[i][1]); /* the device's table */
        CHECK_EQ_INT(amk_dtype_nbytes(10 + i, 2 * blocks[i][0]), 2 * blocks[i][1]);
        CHECK_EQ_INT(amk_dtype_nbytes(10 + i, blocks[i][0] + 1), 2 * blocks[i][1]); /* the blocks that hold them */
    }
    CHECK(!amk_dtype_is_block(AMK_DTYPE_BOOL) && !amk_dtype_is_block(21) && amk_dtype_block(AMK_DTYPE_F32, &bytes) == 0 && bytes == 0);
    CHECK(AMK_BLOCK_ELEMS(AMK_DTYPE_BOOL) == 0 && AMK_BLOCK_BYTES(AMK_DTYPE_F32) == 0 && AMK_BLOCK_ELEMS(21) == 0);
    { /* the f16 scale and min offsets, ggml's block_* layouts */
        static const int d_off[11] = {0, 0, 0, 0, 0, 80, 108, 0, 0, 208, 0}, m_off[11] = {-1, -1, 2, -1, 2, 82, -1, 2, 2, -1, -1};
        for (i = 0; i < 11; i++) CHECK(AMK_BLOCK_D_OFF(10 + i) == d_off[i] && AMK_BLOCK_M_OFF(10 + i) == m_off[i]);
    }
    CHECK_EQ_INT(amk_dtype_nbytes(AMK_DTYPE_Q8_0, INT64_MAX), -1); /* 2^58 blocks of 34 bytes overflow */
    { /* an element of a block format loads through its block (inside nbytes), and nothing stores */
        unsigned char q8[34] = {0x00, 0x3C}; /* d = 1.0 (f16 0x3C00) */
        q8[2 + 31] = (unsigned char)-5;
        CHECK(amk_dtype_load_f32(q8, sizeof q8, AMK_DTYPE_Q8_0, 31) == -5.0f);
        CHECK(amk_dtype_load_f32(q8, sizeof q8, AMK_DTYPE_Q8_0, 32) == 0.0f); /* its block is not there */
        CHECK(amk_dtype_load_f32(q8, sizeof q8 - 1, AMK_DTYPE_Q8_0, 0) == 0.0f);
        CHECK(amk_dtype_store_f32(q8, sizeof q8, AMK_DTYPE_Q8_0, 0, 1.0f) == 0 && q8[2] == 0);
        CHECK(amk_dtype_store_i64(q8, sizeof q8, AMK_DTYPE_Q8_0, 0, 1) == 0 && q8[2] == 0);
    }
    CHECK_EQ_INT(amk_dtype_bits(AMK_DTYPE_I4), 4);
    CHECK_EQ_INT(amk_dtype_nbytes(AMK_DTYPE_I4, 3), 2); /* ceil for packed sub-byte types */
    CHECK_EQ_INT(amk_dtype_nbytes(AMK_DTYPE_BF16, 3), 6);
    CHECK_EQ_INT(amk_dtype_from_name("f32"), -1);       /* names are case-sensitive */
}

static void test_space_and_kind_codes(void) {
    static const named_code s[] = {{"HBM", 0}, {"GLOBAL_SCRATCH", 1}, {"SMEM", 2}, {"REGISTER", 3}};
    static const named_code k[] = {{"WEIGHT", 0}, {"ACTIVATION", 1}, {"KV_CACHE", 2},
        {"IO_INPUT", 3}, {"IO_OUTPUT", 4}, {"CONST", 5}};
    check_table(s, 4, amk_space_from_name, amk_space_name);
    check_table(k, 6, amk_kind_from_name, amk_kind_name);
}

static void test_opcodes(void) {
    static const named_code t[] = {{"NOP", 0}, {"COPY", 1}, {"EMBED", 2}, {"RMSNORM", 3},
        {"LAYERNORM", 4}, {"GEMV_TILE", 5}, {"GEMM_TILE", 6}, {"ATTENTION_TILE", 7}, {"ROPE", 8},
        {"SILU_MUL", 9}, {"GELU", 10}, {"ADD", 11}, {"MUL", 12}, {"DEQUANT", 13},
        {"SOFTMAX", 14}, {"ALLREDUCE_SHARD", 15}, {"KV_APPEND", 16}, {"SAMPLE_ARGMAX", 17},
        {"ATTENTION_COMBINE", 18}};
    check_table(t, 19, amk_op_from_name, amk_op_name);
    CHECK_EQ_INT(AMK_OP_RESERVED_FUSED, 19);     /* taken by another implementation */
    CHECK(amk_op_spec_get(19) == NULL);           /* never defined here */
    CHECK_EQ_INT(amk_op_from_name("FUSED"), -1);
    CHECK_STR(amk_op_name(19), "?");
    /* AMK's own opcodes, appended from 20 (DESIGN.md "Compatibility"); codes are frozen too */
    CHECK_EQ_INT(AMK_OP_RMSNORM_GEMV, 20);
    CHECK_EQ_INT(AMK_OP_RMSNORM_SWIGLU, 21);
    CHECK_EQ_INT(AMK_OP_ATTENTION_DECODE, 22);
    CHECK_EQ_INT(AMK_OP_ARGMAX_PARTIAL, 23);
    CHECK_EQ_INT(AMK_OP_ARGMAX_COMBINE, 24);
    CHECK_EQ_INT(AMK_OP_RMSNORM_MLP, 25);
    CHECK_EQ_INT(AMK_OP_FILL, 26);
    CHECK_EQ_INT(AMK_OP_ATTENTION_O, 27);
    CHECK_EQ_INT(AMK_OP_BIAS_ADD, 28);
    CHECK_EQ_INT(AMK_OP_RMSNORM_GEMV_ROPE, 29);
    CHECK_EQ_INT(AMK_OP_RMSNORM_GEMV_KV, 30);
    CHECK_EQ_INT(AMK_OP_RMSNORM_GEMV_ROPE_KV, 31);
    CHECK_EQ_INT(AMK_OP_RMSNORM_GEMV_ARGMAX, 32);
    CHECK_EQ_INT(AMK_OP_RMSNORM_MLP_FOLD, 33);
    CHECK_EQ_INT(AMK_OP_ATTENTION_O_PRENORM, 34);
    CHECK_EQ_INT(AMK_OP_ATTENTION_PREFILL, 35);
    CHECK_EQ_INT(AMK_OP_COUNT, 36);
    CHECK_EQ_INT(amk_op_from_name("RMSNORM_GEMV"), 20);
    CHECK_EQ_INT(amk_op_from_name("RMSNORM_SWIGLU"), 21);
    CHECK_EQ_INT(amk_op_from_name("ATTENTION_DECODE"), 22);
    CHECK_EQ_INT(amk_op_from_name("ARGMAX_PARTIAL"), 23);
    CHECK_EQ_INT(amk_op_from_name("ARGMAX_COMBINE"), 24);
    CHECK_EQ_INT(amk_op_from_name("RMSNORM_MLP"), 25);
    CHECK_EQ_INT(amk_op_from_name("FILL"), 26);
    CHECK_EQ_INT(amk_op_from_name("ATTENTION_O"), 27);
    CHECK_EQ_INT(amk_op_from_name("BIAS_ADD"), 28);
    CHECK_STR(amk_op_name(22), "ATTENTION_DECODE");
    CHECK_STR(amk_op_name(24), "ARGMAX_COMBINE");
    CHECK_STR(amk_op_name(27), "ATTENTION_O");
    CHECK_STR(amk_op_name(28), "BIAS_ADD");
    CHECK_STR(amk_op_name(34), "ATTENTION_O_PRENORM");
    CHECK_EQ_INT(amk_op_from_name("RMSNORM_GEMV_ROPE_KV"), 31);
    CHECK_STR(amk_op_name(35), "ATTENTION_PREFILL");
    CHECK(amk_op_spec_get(36) == NULL);
    { /* the device runs each variant as its base op with the form's bits (the device ABI) */
        static const int want[6][2] = {{AMK_OP_RMSNORM_GEMV, 1}, {AMK_OP_RMSNORM_GEMV, 2}, {AMK_OP_RMSNORM_GEMV, 3},
                                       {AMK_OP_RMSNORM_GEMV, 4}, {AMK_OP_RMSNORM_MLP, 1}, {AMK_OP_ATTENTION_O, 4}};
        uint32_t bits = 99;
        int k;
        for (k = 0; k < 6; k++) {
            CHECK_EQ_INT(amk_op_device(29 + k, &bits), want[k][0]);
            CHECK_EQ_INT((int)bits, want[k][1]);
            CHECK_EQ_INT(amk_op_variant(want[k][0], (uint32_t)want[k][1]), 29 + k);
        }
        CHECK_EQ_INT(amk_op_device(AMK_OP_ATTENTION_O, &bits), AMK_OP_ATTENTION_O);
        CHECK_EQ_INT((int)bits, 0);
        CHECK_EQ_INT(amk_op_device(-1, NULL), -1);
    }
    /* the write column: RMSNORM_MLP adds into every output, ATTENTION_O into its first only */
    CHECK(amk_op_accumulates(AMK_OP_RMSNORM_MLP, 0) && amk_op_accumulates(AMK_OP_RMSNORM_MLP, 1));
    CHECK(amk_op_accumulates(AMK_OP_ATTENTION_O, 0) && !amk_op_accumulates(AMK_OP_ATTENTION_O, 1));
    CHECK(!amk_op_accumulates(AMK_OP_ADD, 0) && !amk_op_accumulates(AMK_OP_KV_APPEND, 0));
    CHECK(!amk_op_accumulates(19, 0) && !amk_op_accumulates(-1, 0));
    CHECK_EQ_INT(amk_op_spec_get(AMK_OP_KV_APPEND)->write, AMK_WRITE_INPLACE);
    CHECK_EQ_INT(AMK_GEMV_FLAG_ROPE, 1);
    CHECK_EQ_INT(AMK_GEMV_FLAG_KV_ROW, 2);
    CHECK_EQ_INT(AMK_GEMV_FLAG_ARGMAX, 4);
    CHECK_EQ_INT(AMK_MLP_FLAG_FOLD, 1);
    CHECK_EQ_INT(AMK_ATTN_FLAG_PRENORM, 4);
}

static void test_registry_arity(void) {
    /* spec §7 table: min inputs, max inputs (-1 variadic), outputs */
    static const int ar[19][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 1}, {2, 2, 1}, {2, 3, 1},
        {2, 3, 1}, {2, 3, 1}, {3, 4, 1}, {2, 2, 1}, {2, 2, 1}, {1, 1, 1}, {2, 2, 1}, {1, 2, 1},
        {2, 3, 1}, {1, 1, 1}, {1, 8, 1}, {2, 2, 1}, {1, 1, 1}, {2, 8, 1}};
    int op;
    for (op = 0; op < 19; op++) {
        const amk_op_spec *s = amk_op_spec_get(op);
        CHECK(s != NULL);
        if (!s) continue;
        CHECK_EQ_INT(s->min_inputs, ar[op][0]);
        CHECK_EQ_INT(s->max_inputs, ar[op][1]);
        CHECK_EQ_INT(s->n_outputs, ar[op][2]);
    }
}

static void test_caps_and_versions(void) {
    CHECK_EQ_INT(AMK_MAX_INPUTS, 8);
    CHECK_EQ_INT(AMK_MAX_OUTPUTS, 4);
    CHECK_EQ_INT(AMK_MAX_WAITS, 8);
    CHECK_EQ_INT(AMK_MAX_RANK, 4);
    CHECK_STR(AMK_IR_VERSION, "0.2.0");
    CHECK_STR(AMK_ABI_VERSION, "0.2");
    CHECK_EQ_INT(AMK_ABI_VERSION_MAJOR, 0);
    CHECK_EQ_INT(AMK_ABI_VERSION_MINOR, 2);
    /* the on-device PODs: fixed sizes so host and device agree without CUDA headers */
    CHECK_EQ_INT(sizeof(amk_params_t), 18 * 4 + 8 * 4 + 4 * 4); /* + x_q8, k_off, K_tile and a reserved word */
    CHECK_EQ_INT(offsetof(amk_params_t, k_off), 18 * 4 + 8 * 4 + 4);
    CHECK_EQ_INT(sizeof(amk_buffer_t), 8 + 8 + 16 + 32 + 32);
    CHECK_EQ_INT(sizeof(amk_instruction_t) % 8, 0);
    /* AMK's instruction layout (the spec's fields, then the runtime's L2 prefetch ranges and a
       reserved word): host and device images built apart must agree on it */
    CHECK_EQ_INT(offsetof(amk_instruction_t, params), 144);
    CHECK_EQ_INT(offsetof(amk_instruction_t, prefetch_addr), 264);
    CHECK_EQ_INT(offsetof(amk_instruction_t, form), 300);
    CHECK_EQ_INT(sizeof(amk_instruction_t), 304);
    /* the VM fetches a context with one bulk copy: 16-byte multiples, descriptors 16-aligned */
    CHECK_EQ_INT(sizeof(amk_vm_ctx_t) % 16, 0);
    CHECK_EQ_INT(offsetof(amk_vm_ctx_t, in) % 16, 0);
    CHECK_EQ_INT(offsetof(amk_vm_ctx_t, index), sizeof(amk_instruction_t) + 12 * sizeof(amk_buffer_t));
    CHECK_EQ_INT(offsetof(amk_program_t, contexts) % 8, 0);
}

static void test_conversions(void) {
    CHECK_EQ_INT(amk_f32_to_f16(1.0f), 0x3C00);
    CHECK_EQ_INT(amk_f32_to_f16(65504.0f), 0x7BFF);
    CHECK_EQ_INT(amk_f32_to_f16(65520.0f), 0x7C00);      /* rounds to infinity */
    CHECK_EQ_INT(amk_f32_to_f16(5.9604644775390625e-8f), 0x0001); /* smallest subnormal */
    CHECK_EQ_INT(amk_f32_to_f16(2.98023223876953125e-8f), 0x0000); /* half of it: ties to even */
    CHECK_EQ_INT(amk_f32_to_bf16(1.0f), 0x3F80);
    CHECK_EQ_INT(amk_f32_to_bf16(1.00390625f), 0x3F80);  /* exact tie rounds to even */
    CHECK_EQ_INT(amk_f32_to_bf16(1.01171875f), 0x3F82);  /* tie 0x3F81.8 rounds up to even */
    CHECK_NEAR(amk_f8e4m3_to_f32(0x7E), 448.0, 0);
    CHECK_EQ_INT(amk_f32_to_f8e4m3(1000.0f), 0x7E);      /* saturates: E4M3FN has no inf */
    CHECK_NEAR(amk_f8e4m3_to_f32(0x01), 0.001953125, 0); /* 2^-9 */
    CHECK_NEAR(amk_f8e5m2_to_f32(0x7B), 57344.0, 0);
    CHECK_EQ_INT(amk_f32_to_f8e5m2(1e6f), 0x7C);         /* overflows to infinity */
    {
        int i, bad = 0;
        for (i = 0; i < 65536; i++) { /* every finite f16 survives f16 -> f32 -> f16 */
            float f = amk_f16_to_f32((uint16_t)i);
            if (f == f && amk_f32_to_f16(f) != (uint16_t)i) bad++;
        }
        CHECK_EQ_INT(bad, 0);
        for (i = 0; i < 256; i++) {
            float f = amk_f8e4m3_to_f32((uint8_t)i), g = amk_f8e5m2_to_f32((uint8_t)i);
            if (f == f && amk_f32_to_f8e4m3(f) != (uint8_t)i) bad++;
            if (g == g && fabsf(g) <= 57344.0f && amk_f32_to_f8e5m2(g) != (uint8_t)i) bad++;
        }
        CHECK_EQ_INT(bad, 0);
    }
}

/* amk_add_i64 / amk_mul_i64: sizes only (negative operands refused), overflow refused, out kept. */
static void test_checked_sizes(void) {
    int64_t o = 77;
    CHECK_EQ_INT(amk_add_i64(2, 3, &o), 1);
    CHECK_EQ_INT(o, 5);
    CHECK_EQ_INT(amk_add_i64(INT64_MAX, 1, &o), 0);
    CHECK_EQ_INT(amk_add_i64(-1, 1, &o), 0);
    CHECK_EQ_INT(o, 5); /* untouched on failure */
    CHECK_EQ_INT(amk_add_i64(INT64_MAX - 1, 1, &o), 1);
    CHECK_EQ_INT(o, INT64_MAX);
    CHECK_EQ_INT(amk_mul_i64(INT64_MAX / 2, 2, &o), 1);
    CHECK_EQ_INT(o, INT64_MAX - 1);
    CHECK_EQ_INT(amk_mul_i64(INT64_MAX / 2 + 1, 2, &o), 0);
    CHECK_EQ_INT(amk_mul_i64(0, INT64_MAX, &o), 1);
    CHECK_EQ_INT(o, 0);
    CHECK_EQ_INT(amk_mul_i64(-1, 0, &o), 0);
    CHECK_EQ_INT(amk_add_i64(1, 2, NULL), 1); /* the check alone */
    CHECK_EQ_INT(amk_mul_i64(INT64_MAX, 2, NULL), 0);
}

/* amk_dtype_load_* / amk_dtype_store_*: the backends' element encodings, bounded by nbytes. */
static void test_element_access(void) {
    uint8_t buf[16];
    float nan = (float)NAN;
    memset(buf, 0xAA, sizeof buf);
    /* F32, 3 elements in 12 bytes: the 4th is outside and the guard bytes stay */
    CHECK_EQ_INT(amk_dtype_store_f32(buf, 12, AMK_DTYPE_F32, 2, 1.5f), 1);
    CHECK_NEAR(amk_dtype_load_f32(buf, 12, AMK_DTYPE_F32, 2), 1.5, 0);
    CHECK_EQ_INT(amk_dtype_store_f32(buf, 12, AMK_DTYPE_F32, 3, 2.0f), 0);
    CHECK_EQ_INT(buf[12], 0xAA);
    CHECK_NEAR(amk_dtype_load_f32(buf, 12, AMK_DTYPE_F32, 3), 0, 0);
    CHECK_EQ_INT(amk_dtype_store_f32(buf, 12, AMK_DTYPE_F32, 0, -2.7f), 1);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 12, AMK_DTYPE_F32, 0), -2); /* truncates toward zero */
    CHECK_EQ_INT(amk_dtype_store_f32(buf, 12, AMK_DTYPE_F32, 1, nan), 1);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 12, AMK_DTYPE_F32, 1), 0);  /* NaN reads 0 */
    /* BF16 rounds to nearest even */
    CHECK_EQ_INT(amk_dtype_store_f32(buf, 2, AMK_DTYPE_BF16, 0, 1.00390625f), 1);
    CHECK_NEAR(amk_dtype_load_f32(buf, 2, AMK_DTYPE_BF16, 0), 1.0, 0);
    /* I4: two a byte, low nibble first, stored q + 8; saturates to [-8, 7] */
    memset(buf, 0, sizeof buf);
    CHECK_EQ_INT(amk_dtype_store_f32(buf, 2, AMK_DTYPE_I4, 0, 100.0f), 1);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 2, AMK_DTYPE_I4, 1, -3), 1);
    CHECK_EQ_INT(buf[0], 0x5F);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 2, AMK_DTYPE_I4, 1), -3);
    CHECK_NEAR(amk_dtype_load_f32(buf, 2, AMK_DTYPE_I4, 0), 7, 0);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 2, AMK_DTYPE_I4, 3, 1), 1);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 2, AMK_DTYPE_I4, 4, 1), 0);
    CHECK_EQ_INT(buf[2], 0);
    /* I32 integers are exact, and saturate */
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 8, AMK_DTYPE_I32, 1, 16777217), 1);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 8, AMK_DTYPE_I32, 1), 16777217);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 8, AMK_DTYPE_I32, 0, INT64_MAX), 1);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 8, AMK_DTYPE_I32, 0), INT32_MAX);
    /* refusals: NULL base, unknown dtype, negative or huge index */
    CHECK_EQ_INT(amk_dtype_store_f32(NULL, 8, AMK_DTYPE_F32, 0, 1.0f), 0);
    CHECK_NEAR(amk_dtype_load_f32(NULL, 8, AMK_DTYPE_F32, 0), 0, 0);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 16, 99, 0, 1), 0);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 16, 99, 0), 0);
    CHECK_EQ_INT(amk_dtype_load_i64(buf, 8, AMK_DTYPE_I32, -1), 0);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 8, AMK_DTYPE_I32, INT64_MAX, 1), 0);
    CHECK_EQ_INT(amk_dtype_store_i64(buf, 8, AMK_DTYPE_I32, INT64_MAX / 2, 1), 0);
}

/* amk_rng_*: xoshiro256** seeded through splitmix64. The values are the algorithm's (checked
   against an independent model of it), so amk run --random's fills cannot drift unnoticed. */
static void test_rng(void) {
    amk_rng r, copy;
    int i, bad = 0;
    amk_rng_seed(&r, 1);
    CHECK(amk_rng_next_u64(&r) == 0xb3f2af6d0fc710c5ull);
    CHECK(amk_rng_next_u64(&r) == 0x853b559647364ceaull);
    CHECK(amk_rng_next_u64(&r) == 0x92f89756082a4514ull);
    amk_rng_seed(&r, 42);
    copy = r;
    CHECK_NEAR(amk_rng_uniform_sym(&r), -0.8322740793228149, 0);
    CHECK_NEAR(amk_rng_uniform_sym(&r), -0.24203956127166748, 0);
    CHECK_EQ_INT(amk_rng_below(&copy, 10), 2); /* a copied state continues the same stream */
    CHECK_EQ_INT(amk_rng_below(&copy, 10), 2);
    CHECK_EQ_INT(amk_rng_below(&copy, 10), 9);
    for (i = 0; i < 10000; i++) {
        float u = amk_rng_uniform_sym(&r);
        bad += !(u >= -1.0f && u < 1.0f) + (amk_rng_below(&r, 7) >= 7);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(amk_rng_below(&r, 0), 0);
    amk_rng_seed(NULL, 1); /* NULL: no-op, zeros */
    CHECK(amk_rng_next_u64(NULL) == 0);
    CHECK_EQ_INT(amk_rng_below(NULL, 10), 0);
    CHECK_NEAR(amk_rng_uniform_sym(NULL), 0, 0);
}

/* amk_shape_format: "[3, 4]", "[]", truncation that stays NUL-terminated. */
static void test_shape_format(void) {
    static const int64_t shape[3] = {3, 4, -1};
    char buf[32];
    amk_shape_format(buf, sizeof buf, shape, 2);
    CHECK_STR(buf, "[3, 4]");
    amk_shape_format(buf, sizeof buf, shape, 3);
    CHECK_STR(buf, "[3, 4, -1]");
    amk_shape_format(buf, sizeof buf, shape, 0);
    CHECK_STR(buf, "[]");
    amk_shape_format(buf, sizeof buf, NULL, 2);
    CHECK_STR(buf, "[]");
    amk_shape_format(buf, 5, shape, 3);
    CHECK_STR(buf, "[3, ");
    strcpy(buf, "keep");
    amk_shape_format(buf, 0, shape, 2);
    CHECK_STR(buf, "keep");
    amk_shape_format(NULL, 8, shape, 2); /* nothing, no crash */
}

int main(void) {
    RUN(test_dtype_codes);
    RUN(test_space_and_kind_codes);
    RUN(test_opcodes);
    RUN(test_registry_arity);
    RUN(test_caps_and_versions);
    RUN(test_conversions);
    RUN(test_checked_sizes);
    RUN(test_element_access);
    RUN(test_rng);
    RUN(test_shape_format);
    TEST_SUMMARY();
}
