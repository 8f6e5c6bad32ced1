/* amk.h - AMK, an LLM megakernel runtime for plain C: the host side. Version 0.1.0.

   USAGE
     #define AMK_IMPLEMENTATION      in exactly one .c (or .cpp) file, then
     #include "amk.h"               (include it first there: it asks for POSIX before any system
                                     header). Everywhere else include it without the define.
     amk_ir.h must sit beside this file; amk_vm.cuh and amk_ops.cuh are the device side (built
     into a cubin by `make device`, handed to the runtime as bytes).

   WHAT IT DOES
     - Holds a megakernel program (the IR of IR_SPEC.md: buffers, counters, tasks), reads and
       writes it as the spec's JSON, proves it deadlock- and race-free (validate: every check has a
       stable id, AMK_CHECKS), runs the counter simulations, lowers it onto SMs (SM assignment,
       per-SM queues, page allocation) and runs it with real numerics on the CPU reference VM,
       the oracle every other backend is tested against.
     - Reads models: GGUF (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K) and
       safetensors (single or sharded) with config.json; byte-level BPE tokenizers from GGUF or
       tokenizer.json; builds a Llama decode step as a program; generates text (amk_llm_*).
     - Runs programs on NVIDIA Hopper GPUs through the driver API (libcuda opened at run time:
       without a driver every other feature still works and amk_cuda_create says
       AMK_ERR_NO_DRIVER).
   WHAT IT DOES NOT DO (yet)
     Prefill in one launch (prompts go through the decode step token by token), batch > 1,
     SentencePiece tokenizers, architectures other than Llama, a warp-specialised weight
     loader on the GPU (see bench/RESULTS.md for where the time goes).

   CONTENTS (search for the tag)
     declarations: >>config >>api >>ir >>json >>validate >>lower >>refvm >>safetensors >>gguf
                   >>model >>tokenizer >>cuda >>llama
     implementation: >>impl_common >>impl_program >>impl_json >>impl_opshape >>impl_validate
                   >>impl_lower >>impl_refvm >>impl_safetensors >>impl_gguf >>impl_model
                   >>impl_tokenizer >>impl_cuda >>impl_llama

   CONFIG
     | macro                   | default                | where                                 |
     | AMK_MALLOC/REALLOC/FREE | malloc/realloc/free    | before the implementation; all or none|
     | AMK_API                 | extern (static with AMK_STATIC) | anywhere before the include  |
     | AMK_JSON_MAX_DEPTH      | 64                     | before the implementation             |
     | AMK_CUDA_LIBRARY (env)  | libcuda.so.1           | the environment, at run time          |

   ERRORS
     Every fallible call returns amk_result (AMK_OK = 0) and, when the caller passes one, fills a
     caller-owned amk_diag with a message, the JSON line:col and path, the validator check id and
     the task or buffer concerned, the CUDA error name and the JIT log. The library never prints,
     never exits, never aborts on input.

   MEMORY
     A program owns everything it points to; amk_program_free releases it all. Strings returned
     to the caller (amk_program_write_json) are freed with amk_free. Model files are mapped, not
     read; the GPU runtime allocates one device arena per program, planned then allocated once.

   THREADING
     No global mutable state. Distinct objects may be used from distinct threads; one object must
     not be used from two threads at once.

   LICENSE: MIT, at the end of this file. */
#ifndef AMK_H
#define AMK_H

/* why: mmap/fstat are POSIX; under -std=c99 glibc hides them unless asked before the first system
   header. Include amk.h first in the implementation file, or define _POSIX_C_SOURCE yourself. */
#if defined(AMK_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>
#include "amk_ir.h"

/* ==== >>config ================================================================================ */
#ifndef AMK_API
#ifdef AMK_STATIC
#define AMK_API static
#else
#define AMK_API extern
#endif
#endif

#define AMK_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>api: results and diagnostics ========================================================== */

typedef enum amk_result {
    AMK_OK = 0,
    AMK_ERR_INVALID_ARG,   /* a caller passed a NULL or out-of-range argument */
    AMK_ERR_OUT_OF_MEMORY, /* an allocation failed */
    AMK_ERR_IO,            /* a file could not be opened, read, mapped or written */
    AMK_ERR_PARSE,         /* malformed input: JSON, safetensors, GGUF, ... (diag has where) */
    AMK_ERR_VERSION,       /* ir_version major mismatch */
    AMK_ERR_REJECTED,      /* validate rejected the program (diag/report has every reason) */
    AMK_ERR_STUCK,         /* a counter walk could not make progress (deadlock) */
    AMK_ERR_RUNTIME,       /* a value met at run time is out of range (a token id, a position) */
    AMK_ERR_NOT_FOUND,     /* a named tensor or entry is missing */
    AMK_ERR_MISMATCH,      /* a tensor's dtype or shape does not match its buffer */
    AMK_ERR_UNSUPPORTED,   /* valid input this build cannot handle */
    AMK_ERR_NO_DRIVER,     /* no CUDA driver on this machine */
    AMK_ERR_CUDA,          /* a CUDA driver call failed (diag has the error name) */
    AMK_ERR_TIMEOUT,       /* a launch exceeded its timeout and was aborted */
    AMK_RESULT_COUNT
} amk_result;

/* A short English description of a result code; never NULL. */
AMK_API const char *amk_result_str(amk_result r);

/* Caller-owned diagnostic filled by fallible calls (pass NULL to skip). Fields that do not apply
   are -1 (ids) or 0/empty. */
typedef struct amk_diag {
    amk_result result;
    char check[32];  /* validator check id ("RACE_READ", ...) or "" */
    int task;        /* task index in program order, -1 if none */
    int buffer;      /* buffer id, -1 if none */
    int counter;     /* counter id, -1 if none */
    int line, col;   /* 1-based location in JSON text, 0 if none */
    char path[192];  /* JSON path like /tasks/17/waits/0, or a file name, "" if none */
    char message[512];
    char cuda_error[64];
    char jit_log[2048];
} amk_diag;

/* Resets every field of d to "nothing to report". */
AMK_API void amk_diag_clear(amk_diag *d);

/* Frees memory the library returned to the caller (JSON text, ...). NULL is fine. */
AMK_API void amk_free(void *ptr);

/* ==== >>ir: the program data model (spec §1) ================================================== */

/* dtype helpers. Names are the spec's ("F32", "BF16", ...). */
AMK_API const char *amk_dtype_name(int dtype);           /* "?" for an unknown code */
AMK_API int amk_dtype_from_name(const char *name);       /* -1 if unknown */
AMK_API int amk_dtype_bits(int dtype);                   /* 4 for I4, 0 if unknown */
AMK_API int64_t amk_dtype_nbytes(int dtype, int64_t n);  /* ceil(n*bits/8); -1 on overflow */
AMK_API int amk_dtype_is_float(int dtype);               /* F32, F16, BF16, F8* */
AMK_API int amk_dtype_is_int(int dtype);                 /* I32, I8, I4, U8, BOOL */
AMK_API const char *amk_kind_name(int kind);
AMK_API int amk_kind_from_name(const char *name);
AMK_API const char *amk_space_name(int space);
AMK_API int amk_space_from_name(const char *name);
AMK_API const char *amk_op_name(int op);
AMK_API int amk_op_from_name(const char *name);

/* Scalar conversions shared by every backend (round to nearest even; NaN stays NaN; F8E4M3 has
   no infinity and saturates to +-448; F8E5M2 overflows to infinity). */
AMK_API float amk_f16_to_f32(uint16_t h);
AMK_API uint16_t amk_f32_to_f16(float f);
AMK_API float amk_bf16_to_f32(uint16_t h);
AMK_API uint16_t amk_f32_to_bf16(float f);
AMK_API float amk_f8e4m3_to_f32(uint8_t v);
AMK_API uint8_t amk_f32_to_f8e4m3(float f);
AMK_API float amk_f8e5m2_to_f32(uint8_t v);
AMK_API uint8_t amk_f32_to_f8e5m2(float f);

/* Param value types. Known keys have a fixed type (AMK_PARAM_FIELDS); unknown keys keep what the
   JSON had and only draw a warning. */
typedef enum amk_param_type {
    AMK_PARAM_INT = 0,  /* i */
    AMK_PARAM_REAL = 1, /* f */
    AMK_PARAM_BOOL = 2, /* b */
    AMK_PARAM_STRING = 3,
    AMK_PARAM_NULL = 4
} amk_param_type;

typedef struct amk_param {
    char *key;
    amk_param_type type;
    int64_t i;  /* INT, BOOL (0/1) */
    double f;   /* REAL */
    char *s;    /* STRING */
} amk_param;

/* The known param keys and their marshalled types ('i' = int32, 'f' = real). X(name, type). */
#define AMK_PARAM_FIELDS(X) \
    X(hidden, 'i') X(K, 'i') X(N_tile, 'i') X(n_off, 'i') X(M_tile, 'i') X(m_off, 'i') \
    X(head_dim, 'i') X(kv_start, 'i') X(kv_len, 'i') X(n_heads, 'i') X(n_kv_heads, 'i') \
    X(qdtype, 'i') X(group, 'i') X(pos, 'i') X(flags, 'i') X(dim, 'i') X(rope_orig_ctx, 'i') X(part, 'i') \
    X(eps, 'f') X(scale, 'f') X(theta, 'f') X(rope_factor, 'f') X(rope_low_freq_factor, 'f') \
    X(rope_high_freq_factor, 'f')

/* One row of OP_REGISTRY (spec §7): arity and the params that make the op correct. */
typedef struct amk_op_spec {
    const char *name;
    int min_inputs, max_inputs, n_outputs; /* -1 = variadic (still capped by the ABI) */
    const char *required[12];              /* NULL-terminated param keys */
    const char *note;
} amk_op_spec;
/* The registry row for op, or NULL if op is not a defined opcode. */
AMK_API const amk_op_spec *amk_op_spec_get(int op);

typedef struct amk_buffer {
    int id;           /* == its index in amk_program.buffers */
    char *name;
    int kind;         /* amk_buffer_kind */
    int dtype;        /* amk_dtype */
    int rank;         /* 0..AMK_MAX_RANK */
    int64_t shape[AMK_MAX_RANK];
    int space;        /* amk_memspace */
    char *source;     /* state-dict key for WEIGHT/CONST, NULL = none */
} amk_buffer;

typedef struct amk_counter {
    int id;           /* == its index in amk_program.counters */
    int64_t init;     /* must be 0 (validate); kept wide so a bad value can be reported */
    char *note;
} amk_counter;

typedef struct amk_wait {
    int counter;
    int64_t threshold; /* wide so out-of-range values reach validate */
} amk_wait;

typedef struct amk_task {
    int id;           /* unique; tasks are kept in list order (the per-SM queue order) */
    int op;           /* amk_opcode, or any other int for an unknown op (validate rejects) */
    char *op_name;    /* the JSON name when op is unknown, else NULL */
    int *inputs;   int n_inputs;   /* buffer ids read */
    int *outputs;  int n_outputs;  /* buffer ids written */
    int out_counter;               /* incremented once on completion */
    amk_wait *waits; int n_waits;
    amk_param *params; int n_params;
    int sm;           /* assigned SM, -1 = unassigned */
    int64_t est_bytes, est_flops;
    char *label;
} amk_task;

/* GpuTarget (spec §5.1): a GPU described as data. */
typedef struct amk_target {
    char name[64];
    int sm_arch, num_sms;
    int64_t smem_bytes_per_sm, smem_bytes_per_block_optin, regs_per_sm;
    int max_threads_per_sm, max_regs_per_thread;
    int64_t l2_bytes, hbm_bytes;
    double hbm_bandwidth_gbs, fp16_tflops, clock_ghz;
    int supports_cooperative, wddm_tdr;
    char note[128];
} amk_target;

/* Fills t with a built-in target ("h100", "h200"); AMK_ERR_NOT_FOUND otherwise. */
AMK_API amk_result amk_target_builtin(const char *name, amk_target *t);

typedef enum amk_sm_assignment {
    AMK_SM_LOAD_BALANCE = 0, /* by est_bytes, greedy least-loaded (spec default) */
    AMK_SM_ROUND_ROBIN = 1,
    AMK_SM_EXPLICIT = 2      /* {task_id: sm} in explicit_task / explicit_sm */
} amk_sm_assignment;

typedef enum amk_page_allocation {
    AMK_PAGES_GRAPH_COLOR = 0, /* reuse a page when live ranges are ordered (spec default) */
    AMK_PAGES_LINEAR = 1,      /* one page per activation */
    AMK_PAGES_NONE = 2         /* no pages */
} amk_page_allocation;

typedef struct amk_tile_param { char *key; int64_t value; } amk_tile_param;
typedef struct amk_tiling { char *archetype; amk_tile_param *items; int n_items; } amk_tiling;
typedef struct amk_fusion_group { char **names; int n_names; } amk_fusion_group;

/* ScheduleConfig (spec §5): the search point a lowering realises. */
typedef struct amk_config {
    amk_tiling *tiling; int n_tiling;
    amk_fusion_group *fusion; int n_fusion;
    amk_sm_assignment sm_assignment;
    int *explicit_task; int *explicit_sm; int n_explicit; /* for AMK_SM_EXPLICIT */
    int pipelining_depth;       /* default 2. The CUDA runtime: 0 = the VM issues no L2 prefetches of
                                   weights; any other value = its fixed scheme (AMK_VM_PREFETCH_BYTES
                                   while an instruction waits, AMK_VM_AHEAD_BYTES ahead of the head,
                                   amk_ir.h), not a look-ahead of that many instructions. The ops'
                                   own staging into shared memory is unaffected */
    amk_page_allocation page_allocation;
    int threads_per_block;      /* default 256 */
    int64_t smem_bytes_per_block; /* default 0 */
} amk_config;

/* Fills c with the spec defaults (owns no memory). */
AMK_API void amk_config_default(amk_config *c);

typedef struct amk_page {
    int id;           /* == its index */
    int space;        /* amk_memspace */
    int64_t nbytes;
    int64_t live_start, live_end; /* positions in task-list order, -1 = unknown */
} amk_page;

/* meta: a JSON object kept as (key, canonical JSON text of the value) pairs, in order. */
typedef struct amk_meta { char *key; char *json; } amk_meta;

typedef struct amk_program {
    amk_meta *meta; int n_meta;
    int has_target;  amk_target target;
    amk_buffer *buffers; int n_buffers;
    amk_counter *counters; int n_counters;
    amk_task *tasks; int n_tasks;
    int has_pages;   amk_page *pages; int n_pages;
    int *buffer_page;           /* [n_buffers] page id or -1; NULL when !has_pages */
    int has_config;  amk_config config;
    amk_result build_error;     /* sticky: first failure of a builder call, AMK_OK if none */
    int cap_buffers, cap_counters, cap_tasks, cap_meta; /* internal growth */
    int id_cache_max, id_cache_n; /* internal: max task id while n_tasks == id_cache_n */
} amk_program;

/* ---- building programs in code. Each add returns the new id (task: its index), or -1 and sets
   p->build_error (bad argument or out of memory). Strings are copied. */
AMK_API amk_program *amk_program_create(void);
AMK_API void amk_program_free(amk_program *p);
AMK_API int amk_program_add_buffer(amk_program *p, const char *name, amk_buffer_kind kind,
                                   amk_dtype dtype, int rank, const int64_t *shape,
                                   amk_memspace space, const char *source);
AMK_API int amk_program_add_counter(amk_program *p, const char *note);
AMK_API int amk_program_add_task(amk_program *p, int op, const int *inputs, int n_inputs,
                                 const int *outputs, int n_outputs, int out_counter,
                                 const char *label);
AMK_API amk_result amk_task_add_wait(amk_program *p, int task, int counter, int64_t threshold);
AMK_API amk_result amk_task_set_int(amk_program *p, int task, const char *key, int64_t v);
AMK_API amk_result amk_task_set_real(amk_program *p, int task, const char *key, double v);
/* The param of a task by key, or NULL. */
AMK_API const amk_param *amk_task_param(const amk_task *t, const char *key);
/* Sets meta[key] to a JSON string value (replacing an existing key). */
AMK_API amk_result amk_program_set_meta_string(amk_program *p, const char *key, const char *v);
/* The string value of meta[key], or NULL if absent or not a string. Points into p. */
AMK_API const char *amk_program_meta_string(const amk_program *p, const char *key, char *buf,
                                            size_t buf_size);
AMK_API amk_result amk_program_set_target(amk_program *p, const amk_target *t);
/* A deep copy of p (NULL on out of memory). */
AMK_API amk_program *amk_program_clone(const amk_program *p);
/* Index of the task with this id, or -1. */
AMK_API int amk_program_task_index(const amk_program *p, int task_id);
/* The index of the buffer named name, or -1. */
AMK_API int amk_program_find_buffer(const amk_program *p, const char *name);
/* Element count of a buffer; -1 on overflow. */
AMK_API int64_t amk_buffer_numel(const amk_buffer *b);
/* Sum of the bytes of the WEIGHT and CONST buffers some task reads (the bandwidth floor's
   numerator; a folded step keeps the Q/K/V weights its W_cat replaces, read by no task); -1 on
   overflow or out of memory. */
AMK_API int64_t amk_program_weight_bytes(const amk_program *p);
/* Marshals a task's params (with defaults filled) into the device POD. */
AMK_API void amk_task_marshal_params(const amk_task *t, amk_params_t *out);

/* ==== >>json: the on-disk format (spec §6) ==================================================== */

/* Parses text (not necessarily NUL-terminated). Strict: a wrong type anywhere, a duplicate or out
   of range id, a major ir_version mismatch is an error with line:col and JSON path in d. Unknown
   fields in target, config and at top level are dropped; elsewhere they are errors. */
AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out,
                                         amk_diag *d);
AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d);
/* Canonical JSON (byte-stable: write(read(write(p))) == write(p)). *out is freed with amk_free. */
AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len);
AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d);

/* ==== >>validate: spec §3 and IR_SPEC_NOTES =================================================== */

/* Every check, with its stable id and severity (E = error, W = warning). Tests assert these ids. */
#define AMK_CHECKS(X) \
    X(REF_BUFFER,          'E', "a task names a buffer id that does not exist") \
    X(REF_COUNTER,         'E', "a task names a counter id that does not exist") \
    X(OP_UNKNOWN,          'E', "the opcode is not in the registry") \
    X(OP_ARITY,            'E', "input or output count outside the opcode's registry arity") \
    X(OP_UNSUPPORTED,      'E', "a form of the opcode this implementation does not run") \
    X(ABI_CAP,             'E', "more inputs, outputs or waits than the ABI holds (8/4/8)") \
    X(PARAM_MISSING,       'E', "a required param of the opcode is missing") \
    X(PARAM_TYPE,          'E', "a known param has the wrong type (int32 or real)") \
    X(PARAM_VALUE,         'E', "a param value is out of its range") \
    X(PARAM_UNKNOWN,       'W', "a param key no opcode knows (it will not marshal)") \
    X(BUFFER_SHAPE,        'E', "a buffer shape is negative, too large, or of rank > 4") \
    X(BUFFER_ENUM,         'E', "a buffer kind, dtype or space code is out of range") \
    X(OP_SHAPE,            'E', "buffer shapes do not fit the opcode") \
    X(OP_DTYPE,            'E', "a buffer dtype cannot serve the opcode") \
    X(COUNTER_INIT,        'E', "a counter init is not 0") \
    X(TASK_ID,             'E', "task ids are not unique") \
    X(WAIT_UNSATISFIABLE,  'E', "a wait threshold is < 1 or above the counter's producer count") \
    X(WAIT_PARTIAL_JOIN,   'E', "a wait on a shared counter does not wait for all producers") \
    X(WAIT_SELF,           'E', "a task waits on its own out_counter") \
    X(CYCLE,               'E', "the producer-consumer graph has a cycle") \
    X(SM_RANGE,            'E', "an assigned SM is outside [0, target.num_sms)") \
    X(SM_MIXED,            'E', "some tasks have an SM and others do not") \
    X(SM_QUEUE_ORDER,      'E', "a task precedes its own producer in one SM's queue") \
    X(SM_QUEUE_DEADLOCK,   'E', "queue order plus dependencies form a cycle across SMs") \
    X(RACE_READ,           'E', "a read is not ordered after every writer of the buffer") \
    X(READ_UNWRITTEN,      'E', "a transient buffer is read but nothing writes it") \
    X(RACE_KV,             'E', "a KV cache is read unordered with its KV_APPEND") \
    X(RACE_WAW,            'E', "two writers of one buffer may clobber each other") \
    X(WRITE_READONLY,      'E', "a task writes a WEIGHT, CONST or IO_INPUT buffer") \
    X(ONCHIP_SM,           'E', "an SMEM/REGISTER buffer is used on more than one SM") \
    X(ONCHIP_UNASSIGNED,   'W', "an SMEM/REGISTER buffer is used by tasks not yet on an SM") \
    X(PAGE_REF,            'E', "the page table names a missing page or buffer, or mis-sizes") \
    X(PAGE_ALIAS,          'E', "two buffers share a page with unordered live ranges") \
    X(OUTPUT_UNREACHED,    'E', "an IO_OUTPUT buffer is never written") \
    X(CONFIG_VALUE,        'E', "a ScheduleConfig value is out of range for the target") \
    X(NAME_DUP,            'W', "two buffers share a name (binding by name is ambiguous)") \
    X(GPU_LABEL,           'W', "meta.gpu differs from target.name") \
    X(BUILD_ERROR,         'E', "a builder call failed, so the program is incomplete")

typedef enum amk_check {
#define AMK__CHECK_ENUM(id, sev, msg) AMK_CHECK_##id,
    AMK_CHECKS(AMK__CHECK_ENUM)
#undef AMK__CHECK_ENUM
    AMK_CHECK_COUNT
} amk_check;

AMK_API const char *amk_check_id(amk_check c);          /* "RACE_READ" */
AMK_API const char *amk_check_description(amk_check c);
AMK_API int amk_check_is_error(amk_check c);

typedef struct amk_issue {
    amk_check check;
    int is_error;     /* 1 error, 0 warning */
    int task;         /* task index or -1 */
    int buffer;       /* buffer id or -1 */
    int counter;      /* counter id or -1 */
    char message[256];
} amk_issue;

typedef struct amk_report {
    amk_issue *items; int n_items, cap_items;
    int n_errors, n_warnings;
    int truncated;          /* 1 if more issues were found than were kept */
} amk_report;

/* Checks everything of spec §3 and IR_SPEC_NOTES, records every failure and continues. Returns
   AMK_OK when accepted (warnings allowed), AMK_ERR_REJECTED when any error was found,
   AMK_ERR_OUT_OF_MEMORY if it could not finish. report may be NULL; else free it with
   amk_report_free. Never aborts on a malformed program. */
AMK_API amk_result amk_program_validate(const amk_program *p, amk_report *report);
AMK_API void amk_report_free(amk_report *r);
/* Writes the report as one line per issue ("error RACE_READ task 3 'x': ...") into buf. */
AMK_API void amk_report_format_issue(const amk_program *p, const amk_issue *is, char *buf,
                                     size_t size);

/* Static counter simulation (spec §3.4): fires tasks in list order whenever ready. order gets the
   fired task indices (may be NULL), stuck gets the tasks never fired (may be NULL); both sized
   n_tasks. Returns AMK_OK if all fired, AMK_ERR_STUCK otherwise. */
AMK_API amk_result amk_program_simulate(const amk_program *p, int *order, int *n_fired,
                                        int *stuck, int *n_stuck);
/* Adversarial simulation: n_orders random interleavings of ready tasks (seeded), each checked so
   every transient read follows its writers. Returns the number of violations found (0 = none),
   or -1 on out of memory; the first is described in d. */
AMK_API int amk_program_simulate_adversarial(const amk_program *p, uint64_t seed, int n_orders,
                                             amk_diag *d);

/* Longest dependency chain in tasks (0 for an empty or cyclic program). */
AMK_API int amk_program_critical_path(const amk_program *p);

/* ==== >>lower: ScheduleConfig -> assigned, ordered, paged program ============================= */

/* Lowers p in place for target t under config c: assigns every task an SM, reorders the task list
   into a stable topological order (so every per-SM queue is a linear extension of the DAG),
   allocates pages for activations, stores c and t in p, then validates. Returns AMK_ERR_REJECTED
   (with the first error in d) if the result does not validate; p is then lowered but unusable. */
AMK_API amk_result amk_program_lower(amk_program *p, const amk_config *c, const amk_target *t,
                                     amk_diag *d);

/* ==== >>refvm: the reference VM (the conformance oracle) ====================================== */

typedef struct amk_refvm amk_refvm;

/* Validates p (refusing a rejected program with AMK_ERR_REJECTED) and allocates host memory for
   every buffer (paged activations share their page). Every buffer starts zeroed. p must outlive
   the VM and must not change shape while it lives; params may change between runs. */
AMK_API amk_result amk_refvm_create(const amk_program *p, amk_refvm **out, amk_diag *d);
AMK_API void amk_refvm_free(amk_refvm *vm);
/* The VM's storage of a buffer (its dtype's bytes, row-major), or NULL for a bad id. */
AMK_API void *amk_refvm_buffer(amk_refvm *vm, int buffer_id, size_t *nbytes);
/* Makes a read-only buffer (WEIGHT, CONST, IO_INPUT) read from caller memory instead of a copy.
   data must hold the buffer's nbytes and outlive the VM (or a later bind). */
AMK_API amk_result amk_refvm_bind(amk_refvm *vm, int buffer_id, const void *data, size_t nbytes);

typedef struct amk_refvm_opts {
    uint64_t seed;        /* 0: fire ready tasks in list order; else a seeded random order */
} amk_refvm_opts;

/* One forward pass: counters reset to 0, then the counter-driven walk. AMK_ERR_STUCK if no task
   is ready while some have not fired; AMK_ERR_RUNTIME for an out-of-range id or position. */
AMK_API amk_result amk_refvm_run(amk_refvm *vm, const amk_refvm_opts *opts, amk_diag *d);

/* Runs one task's numerics on explicit storage: ins[i] and outs[i] point at buffer memory of
   the task's inputs/outputs (in-place KV_APPEND: outs[0] == ins[1]). The building block of the
   VM, exposed for tests. */
AMK_API amk_result amk_ref_exec(const amk_program *p, const amk_task *t, void *const *ins,
                                void *const *outs, amk_diag *d);

/* ==== >>safetensors =========================================================================== */

typedef struct amk_st_tensor {
    char *name;
    int dtype;           /* amk_dtype, or -1 for a dtype AMK does not use (dtype_name says) */
    char dtype_name[16];
    int rank;
    int64_t shape[8];
    const void *data;    /* points into the mapped file */
    uint64_t nbytes;
} amk_st_tensor;

typedef struct amk_safetensors {
    amk_st_tensor *tensors; int n_tensors;
    amk_meta *metadata; int n_metadata; /* "__metadata__" pairs; json is the value as a quoted JSON string */
    void *map; size_t map_size;         /* internal */
    int owns_map;
} amk_safetensors;

/* Maps a file and parses its header. Every size and offset is checked against the file. */
AMK_API amk_result amk_safetensors_open(const char *path, amk_safetensors *out, amk_diag *d);
/* Parses from memory the caller keeps alive (for tests and fuzzing). */
AMK_API amk_result amk_safetensors_parse(const void *data, size_t size, amk_safetensors *out,
                                         amk_diag *d);
AMK_API const amk_st_tensor *amk_safetensors_find(const amk_safetensors *st, const char *name);
AMK_API void amk_safetensors_close(amk_safetensors *st);

typedef struct amk_st_entry {
    const char *name;
    int dtype;           /* amk_dtype */
    int rank;
    const int64_t *shape;
    const void *data;    /* amk_dtype_nbytes(dtype, numel) bytes */
} amk_st_entry;
/* Writes a safetensors file (tensors laid out in the given order, 8-byte aligned header). */
AMK_API amk_result amk_safetensors_write(const char *path, const amk_st_entry *entries, int n,
                                         amk_diag *d);

/* Sections whose declarations live beside their implementation (merged in later). */
/* ==== >>gguf ======================================================================================== */
/* A parsed GGUF file (REFERENCE.md §1): metadata key/values and tensor infos, with every size and
   offset checked against the file. Little-endian v2 and v3 only. Tensor data and array elements
   point into the file's bytes, which must stay alive (open maps the file and owns the mapping). */
typedef struct amk_gguf amk_gguf;

/* GGUF metadata value types (the u32 codes of the file). */
typedef enum amk_gguf_value_type {
    AMK_GGUF_UINT8 = 0, AMK_GGUF_INT8 = 1, AMK_GGUF_UINT16 = 2, AMK_GGUF_INT16 = 3,
    AMK_GGUF_UINT32 = 4, AMK_GGUF_INT32 = 5, AMK_GGUF_FLOAT32 = 6, AMK_GGUF_BOOL = 7,
    AMK_GGUF_STRING = 8, AMK_GGUF_ARRAY = 9, AMK_GGUF_UINT64 = 10, AMK_GGUF_INT64 = 11,
    AMK_GGUF_FLOAT64 = 12
} amk_gguf_value_type;

/* ggml tensor type codes that amk_gguf_dequant converts (others are sized and listed, not read). */
typedef enum amk_ggml_type {
    AMK_GGML_F32 = 0, AMK_GGML_F16 = 1, AMK_GGML_Q4_0 = 2, AMK_GGML_Q4_1 = 3, AMK_GGML_Q5_0 = 6,
    AMK_GGML_Q5_1 = 7, AMK_GGML_Q8_0 = 8, AMK_GGML_Q4_K = 12, AMK_GGML_Q6_K = 14, AMK_GGML_BF16 = 30
} amk_ggml_type;

typedef struct amk_gguf_tensor {
    const char *name;       /* NUL-terminated copy */
    uint32_t type;          /* ggml_type code */
    int n_dims;             /* 1..4 */
    int64_t dims[4];        /* GGUF order: dims[0] is the contiguous axis (ne[0]); unused ones 1 */
    uint64_t offset;        /* from the start of the data section */
    const void *data;       /* into the mapped file */
    uint64_t nbytes;
} amk_gguf_tensor;

/* Maps the file at path and parses it (errors name the file). Close with amk_gguf_close. */
AMK_API amk_result amk_gguf_open(const char *path, amk_gguf **out, amk_diag *d);
/* Parses size bytes at data; the caller keeps data alive until amk_gguf_close. */
AMK_API amk_result amk_gguf_parse(const void *data, size_t size, amk_gguf **out, amk_diag *d);
/* Frees g (and unmaps the file if open mapped it). NULL is fine. */
AMK_API void amk_gguf_close(amk_gguf *g);
AMK_API uint32_t amk_gguf_version(const amk_gguf *g);
/* Tensors in file order; tensor_at returns NULL out of range, find_tensor NULL if absent. */
AMK_API int amk_gguf_n_tensors(const amk_gguf *g);
AMK_API const amk_gguf_tensor *amk_gguf_tensor_at(const amk_gguf *g, int i);
AMK_API const amk_gguf_tensor *amk_gguf_find_tensor(const amk_gguf *g, const char *name);
/* Metadata in file order. Keys are NUL-terminated copies owned by g. */
AMK_API int amk_gguf_n_kv(const amk_gguf *g);
AMK_API const char *amk_gguf_kv_key(const amk_gguf *g, int i);
AMK_API int amk_gguf_find_key(const amk_gguf *g, const char *key);            /* index or -1 */
AMK_API uint32_t amk_gguf_kv_type(const amk_gguf *g, int i);                  /* 0..12 */
/* Scalars; any integer type converts (range-checked into int64); return 1 if found and
   convertible, else 0 and *out untouched. get_float also takes integers; get_bool only BOOL. */
AMK_API int amk_gguf_get_int(const amk_gguf *g, const char *key, int64_t *out);
AMK_API int amk_gguf_get_float(const amk_gguf *g, const char *key, double *out); /* ints too */
AMK_API int amk_gguf_get_bool(const amk_gguf *g, const char *key, int *out);
/* A STRING value: a NUL-terminated copy owned by g (it may hold NUL bytes: use len), or NULL. */
AMK_API const char *amk_gguf_get_string(const amk_gguf *g, const char *key, size_t *len);
/* Arrays: O(1) element access. array_len gives the count and element type, or -1 if key is not
   an array. Element getters return 0 / NULL for an index out of range or a type that does not
   convert (array_int: integer and bool elements; array_float: those and floats). Arrays of
   arrays are parsed and checked, but their elements are not accessible. */
AMK_API int64_t amk_gguf_array_len(const amk_gguf *g, const char *key, uint32_t *elem_type);
AMK_API const char *amk_gguf_array_string(const amk_gguf *g, const char *key, int64_t i, size_t *len); /* NOT NUL-terminated: use len */
AMK_API int amk_gguf_array_int(const amk_gguf *g, const char *key, int64_t i, int64_t *out);
AMK_API int amk_gguf_array_float(const amk_gguf *g, const char *key, int64_t i, double *out);
/* Dequantizes n elements (n a multiple of the block size) of ggml type `type` from src into dst
   as out_dtype (F32, F16 or BF16). Types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q6_K.
   src_bytes must hold the n elements' blocks. AMK_ERR_UNSUPPORTED for another type. */
AMK_API amk_result amk_gguf_dequant(uint32_t type, const void *src, uint64_t src_bytes, int64_t n,
                                    int out_dtype, void *dst, amk_diag *d);
/* The ggml name of a type code ("Q4_K"), "?" if unknown. */
AMK_API const char *amk_gguf_type_name(uint32_t type);

/* ==== >>model ======================================================================================= */
/* The hyper-parameters of a Llama-architecture model (REFERENCE.md §1.5, §2.3, §3). */
typedef struct amk_llama_config {
    char arch[32];             /* "llama" */
    char name[128];
    int n_layers, hidden, intermediate, n_heads, n_kv_heads, head_dim, vocab, max_pos;
    float rms_eps, rope_theta;
    int rope_llama3;           /* 1: llama3 scaling with the four fields below */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_ctx;
    int tie_embeddings;        /* 1: the LM head is the embedding table */
    int bos_id, eos_ids[4], n_eos; /* bos_id -1 when unknown */
    int attention_bias, mlp_bias; /* unsupported when 1: open fails with AMK_ERR_UNSUPPORTED */
} amk_llama_config;

/* An open model: its config and its weights, read by HF name whatever the file format. */
typedef struct amk_model amk_model;

/* Opens a model: a .gguf file (found by its magic); a .safetensors file (config.json beside it);
   a directory with config.json and model.safetensors or model.safetensors.index.json (sharded);
   or an index file. Checks the config (AMK_ERR_UNSUPPORTED for another architecture, biases,
   RoPE scaling other than llama3, or a hidden_act other than silu) and that every weight of the
   config exists with its shape (AMK_ERR_NOT_FOUND / AMK_ERR_MISMATCH, naming the tensor). Files
   stay mapped until amk_model_close. */
AMK_API amk_result amk_model_open(const char *path, amk_model **out, amk_diag *d);
/* Closes m and unmaps its files. NULL is fine. */
AMK_API void amk_model_close(amk_model *m);
AMK_API const amk_llama_config *amk_model_config(const amk_model *m);
AMK_API const amk_gguf *amk_model_gguf(const amk_model *m); /* NULL unless a GGUF (tokenizer uses it) */
AMK_API const char *amk_model_dir(const amk_model *m);      /* directory of the model files */
/* Weight by its HF name ("model.layers.3.self_attn.q_proj.weight", "model.embed_tokens.weight",
   "model.norm.weight", "lm_head.weight"), with HF shape [out, in] (rank 1 for norms; unused
   entries 1). For GGUF the name is mapped (REFERENCE §1.6) and the Q/K row permutation is UNDONE
   (§1.7 option (b), with n_heads for q and n_kv_heads for k) so the result equals the HF tensor;
   lm_head falls back to the embedding when tied/absent. AMK_ERR_NOT_FOUND names a missing one. */
AMK_API amk_result amk_model_tensor_shape(amk_model *m, const char *hf_name, int *rank, int64_t shape[4], amk_diag *d);
/* Converts/dequantizes into dst (dst_bytes must equal numel * dtype size) as dtype F32, F16 or BF16. */
AMK_API amk_result amk_model_tensor_read(amk_model *m, const char *hf_name, int dtype, void *dst, size_t dst_bytes, amk_diag *d);

/* ==== >>tokenizer =================================================================================== */
/* A byte-level BPE tokenizer (REFERENCE.md §3.2): text -> special tokens matched verbatim ->
   pre-tokenizer pieces -> bytes in GPT-2's byte alphabet -> BPE merges -> ids. Built from a GGUF
   file, an HF tokenizer.json, or a format-neutral spec. Immutable once built: one tokenizer may be
   used from many threads at once. Encoding keeps no cache. Letters, digits and spaces are
   classified by Unicode 16 (the >>unicode_tables block), as HF tokenizers' regex engine does; the output
   matches HF tokenizers id for id on SmolLM2 (tests/test_tokenizer.c).
   What it does NOT do: SentencePiece ("llama" GGUF vocabularies), normalizers, BPE dropout,
   other pre-tokenizer regexes than the three below. */
typedef struct amk_tokenizer amk_tokenizer;

/* The pre-tokenizer: how text is cut into pieces before BPE. */
typedef enum amk_pretok {
    AMK_PRETOK_SMOLLM = 0, /* every \p{N} alone, then the GPT-2 regex (HF Digits + ByteLevel) */
    AMK_PRETOK_LLAMA3 = 1, /* the Llama-3 regex (case-insensitive contractions, \p{N}{1,3}) */
    AMK_PRETOK_GPT2 = 2    /* the GPT-2 regex alone (HF ByteLevel with use_regex) */
} amk_pretok;

/* Everything a byte-level BPE needs, format-neutral. Strings are copied by amk_tokenizer_create. */
typedef struct amk_tokenizer_spec {
    int n_tokens;
    const char *const *tokens;   /* [n_tokens] id -> string in GPT-2's byte alphabet (specials: text) */
    const size_t *token_lens;    /* [n_tokens] byte lengths, or NULL: tokens are NUL-terminated */
    const int *token_types;      /* [n_tokens] GGUF token_type (3 control, 4 user-defined: matched
                                    verbatim in text, decoded as their text), or NULL: no specials */
    int n_merges;
    const char *const *merges;   /* [n_merges] "A B" in rank order (split at the first space after
                                    the first byte, as llama.cpp does) */
    const size_t *merge_lens;    /* [n_merges] or NULL: NUL-terminated */
    amk_pretok pretok;
    int bos_id, eos_id;          /* -1 when none */
    int add_bos;                 /* encode adds bos_id when asked for the default (add_bos < 0) */
    int ignore_merges;           /* a whole piece that is a vocab token is used directly (Llama-3) */
} amk_tokenizer_spec;

/* Builds a tokenizer. Every merge's parts and result must be vocab tokens (AMK_ERR_PARSE naming the
   merge otherwise, as HF does). Duplicate token strings: the lowest id wins. Byte values with no
   token in the vocab are dropped by encode (SmolLM2 lacks 21, e.g. 0x04 and 0xF5-0xFF), as HF does
   when there is no unk token. */
AMK_API amk_result amk_tokenizer_create(const amk_tokenizer_spec *s, amk_tokenizer **out,
                                        amk_diag *d);
/* From a GGUF's tokenizer.ggml.* keys: model must be "gpt2" (else AMK_ERR_UNSUPPORTED); pre
   "smollm" -> SMOLLM, "llama-bpe"/"llama3"/"llama-v3" -> LLAMA3 with ignore_merges, "gpt2" or
   "default" (or absent) -> GPT2, anything else AMK_ERR_UNSUPPORTED naming it. g may be closed
   after this returns. */
AMK_API amk_result amk_tokenizer_from_gguf(const amk_gguf *g, amk_tokenizer **out, amk_diag *d);
/* From an HF tokenizer.json (model BPE; pre_tokenizer ByteLevel, Digits+ByteLevel or the Llama-3
   Split+ByteLevel; no normalizer). bos/eos/add_bos come from tokenizer_config.json in the same
   folder when it exists (bos_token, eos_token, add_bos_token), else from a TemplateProcessing
   post-processor that starts with a special token (then add_bos = 1), else none. */
AMK_API amk_result amk_tokenizer_from_json(const char *path, amk_tokenizer **out, amk_diag *d);
/* The same from memory: json is tokenizer.json's text, config tokenizer_config.json's or NULL. */
AMK_API amk_result amk_tokenizer_from_json_text(const char *json, size_t json_len,
                                                const char *config, size_t config_len,
                                                amk_tokenizer **out, amk_diag *d);
AMK_API void amk_tokenizer_free(amk_tokenizer *t);
/* The tokenizer of an opened model: a GGUF's own keys, else tokenizer.json in the model's
   directory (amk_tokenizer_from_gguf / amk_tokenizer_from_json). */
AMK_API amk_result amk_tokenizer_from_model(const amk_model *m, amk_tokenizer **out, amk_diag *d);

/* Encodes len bytes of UTF-8 text: special tokens (like <|im_start|>) are matched verbatim first,
   longest at the leftmost position. add_bos: 1 prepends BOS (if the tokenizer has one), 0 does
   not, -1 follows the tokenizer's own add_bos. Writes up to cap ids and returns how many the full
   encoding has (call again with a bigger buffer if that is > cap), or -1 on a bad argument, out of
   memory or more than INT_MAX ids. Invalid UTF-8 is no error: its bytes go through the byte
   alphabet like any other (each invalid byte is a character of its own, neither letter, digit
   nor space, for the pre-tokenizer). */
AMK_API int amk_tokenizer_encode(const amk_tokenizer *t, const char *text, size_t len, int add_bos,
                                 int *ids, int cap);
/* Writes the bytes of token id (a special: its text) to buf; returns the count written, or -1 for
   a bad id or when they do not fit in cap (nothing is written then). Not NUL-terminated. Tokens may
   end inside a UTF-8 character: concatenate the bytes of a sequence before printing. */
AMK_API int amk_tokenizer_decode(const amk_tokenizer *t, int id, char *buf, size_t cap);
/* The bytes of token id without copying (points into t), or NULL for a bad id. */
AMK_API const char *amk_tokenizer_token_bytes(const amk_tokenizer *t, int id, size_t *len);
AMK_API int amk_tokenizer_n_vocab(const amk_tokenizer *t);
AMK_API int amk_tokenizer_bos(const amk_tokenizer *t);      /* -1 if none */
AMK_API int amk_tokenizer_eos(const amk_tokenizer *t);      /* -1 if none */
AMK_API int amk_tokenizer_add_bos(const amk_tokenizer *t);  /* the default of encode's add_bos */
AMK_API amk_pretok amk_tokenizer_pretok(const amk_tokenizer *t);
/* 1 if id is a special token (matched verbatim, decoded as its text), else 0. */
AMK_API int amk_tokenizer_is_special(const amk_tokenizer *t, int id);
/* The id of an exact vocab string in the byte alphabet ("Ġthe") or of a special's text, or -1. */
AMK_API int amk_tokenizer_token_id(const amk_tokenizer *t, const char *text);
/* The id of the one-byte token for byte value b (0..255), or -1 if the vocab has none. */
AMK_API int amk_tokenizer_byte_token(const amk_tokenizer *t, int b);
/* Runs a pre-tokenizer alone (no special tokens): writes the end offset of each piece into ends
   (up to cap) and returns the number of pieces, or -1 on a bad argument or more than INT_MAX. */
AMK_API int amk_tokenizer_pretokenize(amk_pretok p, const char *text, size_t len, size_t *ends,
                                      int cap);
/* The ChatML prompt of SmolLM2 (REFERENCE §3.1) for one user turn, ending with
   "<|im_start|>assistant\n". system NULL gives the default system prompt; "" an empty one. Writes
   a NUL-terminated prefix into buf (cap bytes) and returns the length of the whole prompt (like
   snprintf), or -1 if t is given and has no <|im_start|> token, or user is NULL. t may be NULL. */
AMK_API int amk_tokenizer_chat_prompt(const amk_tokenizer *t, const char *system, const char *user,
                                      char *buf, size_t cap);

/* ==== >>cuda ======================================================================================== */
/* A validated, lowered program resolved onto one GPU: the device VM image (amk_vm.cuh compiled
   to a cubin, fatbin or PTX) loaded, ONE device arena holding every buffer, counter and table,
   and the launch parameters checked (cooperative occupancy, shared memory). libcuda is opened
   with dlopen at create time, so programs that include amk.h build and run on machines without
   CUDA; there amk_cuda_create returns AMK_ERR_NO_DRIVER. The environment variable
   AMK_CUDA_LIBRARY, when set, names the driver library to open instead of libcuda.so.1.
   Uses device 0 and its primary context (the one the CUDA runtime shares). Not thread-safe: one
   amk_cuda at a time per thread. */
typedef struct amk_cuda amk_cuda;

/* A device image set: several builds of the VM from the same source in one blob, of which
   amk_cuda_create loads the one that suits the program. `make device` embeds one
   (amk_device_cubin in amk_device_image.h): the full build, and the general build, compiled
   without the small-model forms (AMK_LEAN, AMK_ATTN_LEAN, AMK_RING 0: every task takes the general
   paths). why two: the VM is one function at the register cap, and code a program never runs
   still moves the code it does run (bench/NOTES.md session "images": without the small-model
   forms Llama-3.2-1B's step is ~1% shorter). Either build runs any valid program; the choice is
   speed only. Layout (little-endian): "AMKIMGS1", u32 count (1..AMK_IMAGE_SET_MAX), u32 0, then
   count entries {u32 kind (amk_image_kind), u32 0, u64 offset, u64 size}, each image at offset
   from the blob's start, inside it. A blob that does not start with the magic is one image
   (cubin, fatbin or PTX) and is loaded as it is. */
#define AMK_IMAGE_SET_MAX 8
typedef enum amk_image_kind {
    AMK_IMAGE_FULL = 0,          /* every path */
    AMK_IMAGE_GENERAL = 1,       /* no small-model forms */
    AMK_IMAGE_FULL_CHAIN = 2,    /* the full build's chained-steps kernel (amk_vm_chain; amk_cuda_set_chain) */
    AMK_IMAGE_GENERAL_CHAIN = 3  /* the general build's */
} amk_image_kind;
/* 1 if blob (size bytes) starts with the image set's magic, else 0. */
AMK_API int amk_image_set_is(const void *blob, size_t size);
/* Finds the image of kind in the set blob: *image and *image_size point into blob. Errors:
   PARSE (not a well-formed set: the count, an entry outside the blob), NOT_FOUND (no image of
   that kind; entries of kinds this build does not know are skipped), INVALID_ARG (NULL). */
AMK_API amk_result amk_image_set_find(const void *blob, size_t size, amk_image_kind kind, const void **image,
                                      size_t *image_size, amk_diag *d);

/* Validates p (a rejected program is refused with AMK_ERR_REJECTED and the first error in d),
   requires every task to have an SM (lower it first), loads image (image_size bytes; PTX need
   not be NUL-terminated; a JIT/ptxas error log lands in d->jit_log), sizes dynamic shared memory
   (config smem_bytes_per_block; with 0, what the tasks' fastest paths stage, at most the device's
   opt-in maximum, so the rest of each SM's shared memory/L1 array stays L1), checks that grid =
   the target's SM count co-schedules (cooperative launch), allocates the arena once, zeroes it (every buffer
   starts zeroed, as in the reference VM) and uploads the tables. threads_per_block comes from
   the program's config (default 256), capped at the VM's 512. p may be freed afterwards.
   image may be an image set (above): the general build when the set has one and no task of p
   could take a small-model form (amk_cuda_wants_full), else the full build; the environment
   variable AMK_CUDA_IMAGE=full or =general forces one (amk_cuda_info.image_kind says which).
   Errors: NO_DRIVER, CUDA (d->cuda_error has the name), UNSUPPORTED (a shape the VM cannot run
   on this device, e.g. head_dim > 256), REJECTED, INVALID_ARG, OUT_OF_MEMORY. */
AMK_API amk_result amk_cuda_create(const amk_program *p, const void *image, size_t image_size,
                                   amk_cuda **out, amk_diag *d);
/* Copies nbytes (exactly the buffer's size in its dtype, else AMK_ERR_MISMATCH) between host
   memory and a buffer's device storage. Synchronous. Weights, KV caches and inputs go up with
   upload; anything can come back with download (a paged activation reads its page). */
AMK_API amk_result amk_cuda_upload(amk_cuda *c, int buffer_id, const void *host, size_t nbytes,
                                   amk_diag *d);
AMK_API amk_result amk_cuda_download(amk_cuda *c, int buffer_id, void *host, size_t nbytes,
                                     amk_diag *d);
/* Re-marshals every task's params from p (the same program, whose params changed: pos, kv_len,
   kv_start per decode step) and uploads the changed contexts. p must have the same tasks
   (ops, buffers, counters, waits, SMs) as at create (else AMK_ERR_MISMATCH); every task's shapes
   and params are re-checked (AMK_ERR_REJECTED with the op check's message). */
AMK_API amk_result amk_cuda_update_params(amk_cuda *c, const amk_program *p, amk_diag *d);
/* The same for the listed tasks only (indices into p->tasks): a decode loop changes a few params
   per step (pos, kv_len), and re-checking every task costs more than the step itself. */
AMK_API amk_result amk_cuda_update_task_params(amk_cuda *c, const amk_program *p, const int *tasks,
                                               int n_tasks, amk_diag *d);
/* One forward pass: zero the counters, cooperative launch, wait. Past timeout_ms (<= 0: 10 s)
   the abort flag is raised, the kernel leaves within microseconds, and the result is
   AMK_ERR_TIMEOUT with the SMs that had not finished, the task each was at and the counter it
   waited on in d (d->task, d->counter: the first of them); the context stays usable. A device
   run-time error (a token id or position out of range) gives AMK_ERR_RUNTIME naming the task.
   A fault of the kernel itself gives AMK_ERR_CUDA (the context is then lost: free c). */
AMK_API amk_result amk_cuda_run(amk_cuda *c, double timeout_ms, amk_diag *d);
/* A buffer's whole contents to copy in before a run (amk_cuda_in) or out after it (amk_cuda_out). */
typedef struct amk_cuda_in { int buffer_id; const void *host; size_t nbytes; } amk_cuda_in;
typedef struct amk_cuda_out { int buffer_id; void *host; size_t nbytes; } amk_cuda_out;
/* amk_cuda_upload of each in[i], amk_cuda_run, then amk_cuda_download of each out[i], with one
   wait for the device instead of one per copy: the copies go through pinned staging memory on
   the launch's stream (a decode loop's token, position and next token; the staging grows to the
   largest call's total and is kept). The out[] buffers are written only when the run succeeded.
   Errors: those of the three calls; an argument is checked before anything is copied. */
AMK_API amk_result amk_cuda_run_io(amk_cuda *c, const amk_cuda_in *in, int n_in, const amk_cuda_out *out,
                                   int n_out, double timeout_ms, amk_diag *d);

/* Chained greedy decode: n_steps decode steps in one launch, the device feeding each step's next
   token to the next step (no launch and no host round trip between tokens). token_buf and
   pos_buf: the program's IO_INPUT token and position (one I32 each); next_buf: the buffer a task
   of the program writes the step's next token to (one I32, an IO_OUTPUT or ACTIVATION). Between steps every SM finishes the step, then the SM that runs next_buf's writer
   copies the token and advances the position, then the SMs go on (amk_ir.h, amk_vm_chain_t; the
   program itself is the one step the IR describes). n_steps in [1, AMK_CUDA_MAX_CHAIN]; ch NULL or
   n_steps 1 turns chaining off. The kernel is a build of its own (amk_vm.cuh with AMK_VM_CHAIN 1),
   found in the image set beside the build c loaded (amk_cuda_info.can_chain). Errors: INVALID_ARG
   (a buffer of the wrong kind, dtype or size, no task writes next_buf, n_steps out of range),
   UNSUPPORTED (no chained-steps kernel), OUT_OF_MEMORY, CUDA. */
#define AMK_CUDA_MAX_CHAIN 4096
typedef struct amk_cuda_chain { int token_buf, pos_buf, next_buf, n_steps; } amk_cuda_chain;
AMK_API amk_result amk_cuda_set_chain(amk_cuda *c, const amk_cuda_chain *ch, amk_diag *d);
/* One chained launch: step s reads token (s = 0) or step s - 1's next token, at position pos + s;
   tokens[s] gets step s's next token (n_steps entries). The other outputs (the logits) hold the
   last step's; KV cache rows pos .. pos + n_steps - 1 are written; the token and position inputs
   end holding the last step's. The watchdog covers the launch (timeout_ms <= 0: 10 s a step).
   Errors: INVALID_ARG (no chain set, pos + n_steps - 1 past INT32_MAX), those of amk_cuda_run. */
AMK_API amk_result amk_cuda_run_chain(amk_cuda *c, int32_t token, int32_t pos, int32_t *tokens, double timeout_ms,
                                      amk_diag *d);

/* Per-instruction timing (globaltimer, ns resolution 32 on H100). Off by default; when on, each
   run records, for every task, when its SM reached it, when its waits were met and when it was
   done; the cost is three timer reads and one 40-byte store per task. */
AMK_API void amk_cuda_set_timing(amk_cuda *c, int on);
typedef struct amk_cuda_timing_record {
    int task;             /* task index in program order */
    int op;               /* amk_opcode */
    int sm;               /* the program SM (queue) that ran it */
    int hw_sm;            /* the hardware SM the block landed on */
    int done;             /* 0: not reached in the last run (aborted) */
    double wait_us;       /* from reaching it (its context in shared memory) to its waits met: the
                             op's setup (ops that split it off, amk_ops.cuh >>go) and the waits */
    double start_us, end_us; /* the op's run after its waits, from the earliest record of the launch */
    double mark_us[AMK_VM_MARKS_N]; /* points inside the op, us after start_us; 0 = none (only an
                             image built with AMK_VM_MARKS 1, a diagnostic, records them: amk_ir.h) */
} amk_cuda_timing_record;
/* Copies min(cap, n_tasks) records of the last run (timing must have been on) into records;
   *n_out gets the count. Record i is task i. */
AMK_API amk_result amk_cuda_timing(amk_cuda *c, amk_cuda_timing_record *records, int cap,
                                   int *n_out, amk_diag *d);

/* Measures the device's streaming read bandwidth in the same process: a read-only kernel
   (amk_bw_read: 16-byte no-allocate loads, 8 in flight a thread, an XOR reduction so nothing is
   optimised away) over a scratch buffer of `bytes` bytes, allocated and freed inside and raised to
   4x the device's L2 when smaller (so L2 hits do not count). Each configuration (one block of 1024
   threads per SM, and as many blocks as fit) runs `iters` times after 2 warm-up launches, timed with
   CUDA events; *gbs gets the best configuration's median in GB/s (1e9 bytes/s, bytes read only).
   *copy_gbs (may be NULL): the same for a device-to-device copy kernel (amk_bw_copy, first half
   of the scratch into the second), counting bytes read + written. iters in [1, 10000].
   Errors: INVALID_ARG, UNSUPPORTED (an image without the kernels), CUDA (out of device memory). */
AMK_API amk_result amk_cuda_read_bandwidth(amk_cuda *c, size_t bytes, int iters, double *gbs,
                                           double *copy_gbs, amk_diag *d);
/* Fills a buffer on the device with seeded uniform values in [-scale, scale) in its dtype (float
   dtypes; integer dtypes get values in [0, (int)scale)), without a host copy: the random-weight
   benchmark uses it for 16 GB of weights. Same (seed, buffer) -> same values on every run.
   Element i's value depends only on (seed, buffer_id, i): splitmix64 bits, 24 of them for a
   float u in [0, 1), v = (2u - 1) * scale, rounded toward zero into the dtype (so never +scale).
   Float dtypes need a finite scale >= 0; integer dtypes a scale >= 1, whose integer part is
   capped at the dtype's count of non-negative values (I8 128, U8 256, I4 8 (stored q + 8), BOOL
   2, I32 2^31 - 1). Synchronous. Errors: INVALID_ARG (bad id or scale), UNSUPPORTED, CUDA. */
AMK_API amk_result amk_cuda_fill_random(amk_cuda *c, int buffer_id, uint64_t seed, float scale,
                                        amk_diag *d);
/* Fills a buffer with one value (norm weights get 1.0), rounded and saturated into the dtype as
   amk_cuda_upload of amk__store_f32's encoding would be. Synchronous. */
AMK_API amk_result amk_cuda_fill_value(amk_cuda *c, int buffer_id, float value, amk_diag *d);
/* Median wall time of n launches of the loaded program (each: the next counter epoch, cooperative
   launch, completion), timed with CUDA events around each launch on the stream, after `warmup`
   launches; per-launch times into times_us when not NULL (n entries). The timed span is the
   kernel, with the counters' memset when a launch needs one (the first, one after a failed launch,
   one every 2^30: amk_program_t.epoch); the status copy and host polling are outside it. Every
   launch is checked as amk_cuda_run checks it (10 s watchdog) and the first failure is returned. An even
   n gives the mean of the two middle times. n in [1, 100000], warmup in [0, 100000]. With a chain
   set (amk_cuda_set_chain) each launch is a chained one of n_steps steps, its token and position
   inputs first restored (outside the timed span) to the last amk_cuda_run_chain's start
   (INVALID_ARG if none ran since the chain was set). */
AMK_API amk_result amk_cuda_time_runs(amk_cuda *c, int warmup, int n, double *median_us,
                                      double *times_us, amk_diag *d);

typedef struct amk_cuda_info {
    char device_name[128];
    int cc_major, cc_minor;
    int driver_version;     /* e.g. 13000 */
    int device_sms;         /* SMs on the device */
    int grid;               /* blocks launched: the program's SM count */
    int threads;            /* threads per block */
    int regs_per_thread;    /* of the loaded kernel */
    int64_t smem_bytes;     /* dynamic shared memory per block */
    int64_t arena_bytes;    /* the one device allocation */
    int image_kind;         /* amk_image_kind of the build loaded (AMK_IMAGE_FULL for a single image) */
    int can_chain;          /* 1 when the image set has that build's chained-steps kernel and it co-schedules */
} amk_cuda_info;
/* 1 when a task of p could take one of the VM's small-model forms (an RMSNORM_GEMV or
   RMSNORM_MLP tile with short rows, an ATTENTION_O task), so the full build serves it best. */
AMK_API int amk_cuda_wants_full(const amk_program *p);
AMK_API void amk_cuda_get_info(const amk_cuda *c, amk_cuda_info *info);

/* Releases everything (NULL is fine). */
AMK_API void amk_cuda_free(amk_cuda *c);

/* ==== >>llama ======================================================================================= */
/* How the decode step is built. */
/* KV cache rows a decode step gets when the caller does not say (at most the model's context). */
#define AMK_LLAMA_DEFAULT_MAX_SEQ 4096

typedef struct amk_llama_build_opts {
    int max_seq;      /* KV cache rows (the longest context); 0 = min(config max_pos, AMK_LLAMA_DEFAULT_MAX_SEQ) */
    int weight_dtype; /* dtype of the matrices and the embedding: F32 (default), BF16 or F16 */
    int act_dtype;    /* activations and KV cache: F32 (default), BF16 or F16 */
    int num_sms;      /* tiles are sized so each of this many SMs moves the same weight bytes */
    int kv_splits;    /* attention tiles along the KV length, 1..8 (merged by ATTENTION_COMBINE);
                         0 (default) = ceil(max_seq / 512), at most 8 */
    int spec_ops;     /* 1: only the spec's opcodes 0..18 (a program any implementation runs);
                         0 (default): AMK's opcodes 20..27, fewer dependent steps a layer */
    int mlp_accum;    /* with AMK's opcodes: 1 the MLP is one step (RMSNORM_MLP tiles adding their
                         share of down into an F32 residual that a FILL zeroes), 0 two (gate/up
                         tiles, then down tiles); -1 (default) AMK's choice (AMK_LLAMA_MLP_ACCUM) */
    int attn_o;       /* with AMK's opcodes and one KV split: 1 attention and the O projection are
                         one step (ATTENTION_O tasks, each a kv head's attention and a few rows of
                         O, adding into an F32 h that a FILL zeroes), 0 two (ATTENTION_DECODE, then
                         O tiles); -1 (default) AMK's choice (AMK_LLAMA_ATTN_O) */
    int qkv_fold;     /* with ATTENTION_O and the one-step MLP: 1 each layer's MLP tiles also add up
                         the next layer's raw Q/K/V projections (RMSNORM_MLP's FOLD: a derived weight
                         W_cat a layer, which amk_llm computes when it loads), so every layer after
                         the first is two dependent steps: PRENORM ATTENTION_O tasks (norm scale,
                         RoPE, the cache row themselves), then the MLP tiles; 0 no; -1 (default)
                         AMK's choice (AMK_LLAMA_QKV_FOLD). Where the step cannot fold it does not */
} amk_llama_build_opts;

#ifndef AMK_LLAMA_MLP_ACCUM
/* what mlp_accum = -1 means: 1 where a tile's rows of W_downT stage in shared memory before its
   wait (AMK_ROWS_STAGE_MAX bytes: SmolLM2-135M's 14 KB, not Llama-3.2-1B's 256 KB), 0 never,
   2 always. why: with larger shares the one-step MLP read down's weights at a fraction of the
   GEMV's pace (bench/RESULTS.md run 146: 1B +17%, 8B +22%; transposed, runs 149 and 151: 1B
   +26-28%, 8B +33%); SmolLM2 gains 3.6% (run 153) */
#define AMK_LLAMA_MLP_ACCUM 1
#endif

#ifndef AMK_LLAMA_ATTN_O
/* what attn_o = -1 means: 1 where the step has one KV split and the MLP in one step (an F32
   residual), and a task's rows of W_oT stage in shared memory (AMK_ROWS_STAGE_MAX), 0 never, 2
   wherever the step has one KV split. why short contexts only: each of ~one task an SM recomputes
   its kv head's attention, whose K/V reads grow with the context */
#define AMK_LLAMA_ATTN_O 1
#endif
#ifndef AMK_LLAMA_QKV_FOLD
/* what qkv_fold = -1 means: 0 never, 1 with BF16 weights where the step has ATTENTION_O and the SM
   sets, 2 wherever the step has ATTENTION_O (and the one-step MLP). why 1: SmolLM2's bf16 step
   0.390 -> 0.372 ms (medians of 5 rotated rounds, bench/RESULTS.md run 291): a layer is two
   dependent steps, 11.0 -> 10.8 us with its hops, although the attention task takes 4.4 us against
   3.3 and the MLP tile 3.2 against 2.5. Only BF16: the GPU takes FOLD only in the lean MLP tile,
   which stages bf16 rows of W_cat (an F32 step, the golden check's, does not fold by default) */
#define AMK_LLAMA_QKV_FOLD 1
#endif
#ifndef AMK_LLAMA_SM_SETS
/* with ATTENTION_O: 1 puts each layer on two SM sets (meta "sm_sets", amk_llama_build_lowered):
   set Y runs the Q/K/V tiles and then the ATTENTION_O tasks (AMK_LLAMA_SETS_ATTN_ROWS rows of
   W_oT each, one an SM), set Z (the other SMs) the MLP tiles, so no step after an accumulating one
   (attention + O, the MLP) runs on the SMs that just accumulated; 0 lets the lowering place every
   task. why: an SM that has just added its share into a residual has its next wait met ~0.7 us
   after idle SMs do (1.4 on the SM that finished last), whatever it has in flight (neither a
   bulk reduction nor its next rows' copies moved it: bench/RESULTS.md runs 223-224), and with
   the MLP tiles on the SMs that ran attention, the last attention tasks' SMs ran the last MLP
   tiles. SmolLM2: 36 SMs for 35 Q/K/V tiles of 28 rows and 36 tasks, 96 for MLP tiles of 16 rows;
   the step 3.6% faster, the MLP's start spread 1.2 -> 0.3 us (run 225). AMK_LLAMA_SETS_ALTERNATE
   refines it: two attention sets, so the attention does not follow the Q/K/V tiles on their SMs */
#define AMK_LLAMA_SM_SETS 1
#endif
#ifndef AMK_LLAMA_HEAD_ARGMAX
/* with AMK's opcodes: 1 the LM-head tiles also write their (max, index) pairs (RMSNORM_GEMV's
   ARGMAX flag) and one ARGMAX_COMBINE follows them; 0 an ARGMAX_PARTIAL phase over slices of the
   logits between them. why 1: the head's tail (its last end to the step's end) 7.7 -> 4.4 us on
   SmolLM2, 8.2 -> 4.3 on Llama-3.2-1B (bench/RESULTS.md runs 235-236); with 0 the step is slower
   by 0.4-0.9% on SmolLM2, 0.3-0.4% on 1B, 0.1-0.2% on 8B (run 244) */
#define AMK_LLAMA_HEAD_ARGMAX 1
#endif
#ifndef AMK_LLAMA_SETS_ALTERNATE
/* with the sets: 1 alternates the ATTENTION_O tasks between two disjoint sets of Y SMs from layer
   to layer (A0 = SMs 0 .. Y-1, A1 = Y .. 2Y-1; layer l's attention on A(l % 2), its Q/K/V tiles on
   A((l + 1) % 2), its MLP tiles on the other SMs), so that no task runs on an SM that worked in
   the phase just before it: with one set Y the attention tasks follow the Q/K/V tiles on the
   same SMs and start ~0.3-0.45 us after those on idle SMs (bench/RESULTS.md runs 282, 284,
   `phases.py --starts`). SmolLM2: every attention task starts on an idle SM (0.83 us after its
   inputs, not 1.28), layer 11.9 -> 11.3 us, the step 0.409 -> 0.394 ms (run 287). Needs
   2Y < the SMs (the FILLs go to SMs of neither set). */
#define AMK_LLAMA_SETS_ALTERNATE 1
#endif
#ifndef AMK_LLAMA_SETS_ATTN_ROWS
#define AMK_LLAMA_SETS_ATTN_ROWS 16 /* with the sets: an ATTENTION_O task's rows of W_oT (SmolLM2: 36 tasks) */
#endif
#ifndef AMK_LLAMA_MLP_MAX_ROWS
#define AMK_LLAMA_MLP_MAX_ROWS 16 /* with the sets: the most rows an MLP tile may have (the lean form's, a row a warp) */
#endif
#ifndef AMK_LLAMA_ATTN_O_MIN_ROWS
/* an ATTENTION_O task's rows of W_oT: at least this many (else one task an SM). why 8: with the
   lean form, SmolLM2's 72 tasks of 8 rows make the step 1.5% faster than 117 of 5 (bench/RESULTS.md
   run 204): each task is 0.4 us longer, but the MLP tiles, 60 of them on SMs left idle, are 0.6
   us shorter (4.13 -> 3.55). 16 (36 tasks, no lean form) was 3% slower (run 166) */
#define AMK_LLAMA_ATTN_O_MIN_ROWS 8
#endif

/* Defaults: max_seq 0 (auto), F32 weights and activations, 132 SMs (H100), KV splits 0 (auto),
   fused, mlp_accum -1, attn_o -1 and qkv_fold -1 (auto). */
AMK_API void amk_llama_build_opts_default(amk_llama_build_opts *o);

/* A named shape with its real hyper-parameters: "llama3-8b", "llama3.2-1b", "smollm2-135m". */
AMK_API amk_result amk_llama_config_preset(const char *name, amk_llama_config *cfg);
/* A config from an HF config.json alone (no weights needed): the random-weight mode uses it. */
AMK_API amk_result amk_llama_config_load_json(const char *path, amk_llama_config *cfg, amk_diag *d);

/* Builds the decode step of cfg (one token at position pos, KV cache persisted across steps).
   Fused (the default), six dependent steps a layer (five without COMBINE): RMSNORM_GEMV tiles
   for Q, K and V (norm, interleaved RoPE, K and V stored straight into the cache row pos);
   ATTENTION_DECODE per kv head and KV split; ATTENTION_COMBINE (with more than one split); O
   tiles (GEMV_TILE, the residual as bias); RMSNORM_SWIGLU tiles for gate/up; down tiles
   (residual as bias). With o->mlp_accum (see there; by default for SmolLM2-sized shapes) the
   last two are one step: RMSNORM_MLP tiles adding into the next residual (F32), which a FILL
   beside attention zeroes (the O tiles wait for it); down_proj is then a [I, H] buffer (meta
   down_proj "transposed": amk_llm transposes the HF weight). With o->attn_o (see there; by
   default with the one-step MLP at one KV split) attention and O are one step too: ATTENTION_O
   tasks, each its kv head's attention and a few rows of W_oT (o_proj as [q_rows, H], meta o_proj
   "transposed"), adding into h (F32), which a FILL beside the layer before's attention zeroes
   (layer 0's at the start). With o->qkv_fold as well (see there; meta qkv_fold "1") layers 1..L-1
   have no Q/K/V tiles: layer i's MLP tiles (RMSNORM_MLP with AMK_MLP_FLAG_FOLD; not the last
   layer's) also add the next layer's raw projections into qkv.i (F32 [1, F], F = q_rows +
   2*kv_rows; a FILL beside the attention zeroes it) through W_cat.i (a WEIGHT [I + H, F] of the
   weight dtype, source "amk.qkv_fold.<i>", which amk_llm derives from the layer's down_proj and
   the next layer's q/k/v_proj and input_layernorm), and layer i+1's ATTENTION_O tasks are PRENORM
   (AMK_ATTN_FLAG_PRENORM) on qkv.i and x.(i+1), waiting for all of layer i's MLP tiles, the first
   of each kv head storing the cache row; the FILLs beside them wait for what they wait for. The
   head is RMSNORM_GEMV LM-head
   tiles, ARGMAX_PARTIAL tasks over slices of about 1024 logits (at most one an SM) and
   ARGMAX_COMBINE. Q and K rows are in interleaved pair
   order (meta["qk_rows"] = "interleaved"): amk_llm permutes the HF weights when it loads them.
   With o->spec_ops: EMBED; per layer RMSNORM, Q/K/V GEMV tiles, ROPE, KV_APPEND, split-KV
   ATTENTION_TILE and ATTENTION_COMBINE, O tiles, ADD, RMSNORM, gate/up tiles, SILU_MUL, down
   tiles, ADD; final RMSNORM, LM-head tiles, SAMPLE_ARGMAX
   (HF row order; amk_llama_set_pos updates the per-step params). Buffers: IO_INPUT "token" and
   "pos" (I32 [1]); WEIGHT buffers whose source is the HF tensor name (the LM head reads the
   embedding when tied); KV_CACHE "k_cache.L"/"v_cache.L" [max_seq, n_kv_heads, head_dim];
   IO_OUTPUT "logits" (F32 [1, vocab]) and "next_token" (I32 [1], the argmax). The program is not
   lowered yet (no SMs, no pages): amk_program_lower does that. meta["kv_window"] holds the rows
   per KV split. */
AMK_API amk_result amk_llama_build(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                   amk_program **out, amk_diag *d);

/* amk_llama_build, then amk_program_lower onto o->num_sms SMs with the decode schedule AMK runs
   (load_balance, graph_color pages, 512 threads per block): the program amk_llm executes. */
AMK_API amk_result amk_llama_build_lowered(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                           amk_program **out, amk_diag *d);

/* Sets the per-step params of a built step for position pos: KV_APPEND pos, and each
   ATTENTION_TILE's kv_len so the windows cover rows [0, pos] (the spec_ops step; the fused step
   has no per-step params). AMK_ERR_RUNTIME if pos is outside the KV cache. (The "pos" input
   buffer is the caller's to write.) */
AMK_API amk_result amk_llama_set_pos(amk_program *p, int pos, amk_diag *d);

typedef enum amk_backend {
    AMK_BACKEND_AUTO = 0, /* the GPU when there is one, else the reference VM */
    AMK_BACKEND_CPU = 1,  /* the reference VM */
    AMK_BACKEND_CUDA = 2  /* the megakernel; fails without a GPU */
} amk_backend;

typedef struct amk_llm_opts {
    amk_llama_build_opts build;
    amk_backend backend;
    uint64_t random_seed; /* amk_llm_open_random: the weights' seed */
    /* The device VM image (amk_vm.cuh built by `make device`: a cubin, fatbin or PTX). Without one
       AUTO runs on the reference VM and CUDA fails. */
    const void *device_image;
    size_t device_image_size;
    double timeout_ms;    /* per GPU step; <= 0: 10 s */
    /* Called while weights load (what: "weights", done/total in bytes; then for a folded step,
       what: "fold", done/total in rows of W_fold computed: amk_llama_build's qkv_fold). May be NULL. */
    void (*progress)(void *user, const char *what, uint64_t done, uint64_t total);
    void *progress_user;
} amk_llm_opts;

/* A model ready to run: its config, its decode-step program, its weights on a backend, and its
   tokenizer (NULL for random weights). */
typedef struct amk_llm amk_llm;

AMK_API void amk_llm_opts_default(amk_llm_opts *o);
/* Opens a model file (see amk_model_open), builds, lowers and loads its decode step. */
AMK_API amk_result amk_llm_open(const char *model_path, const amk_llm_opts *o, amk_llm **out,
                                amk_diag *d);
/* The same from a model the caller already opened and its tokenizer (tok may be NULL: then it
   is made from the model). Takes both over, also on failure: the caller frees neither. */
AMK_API amk_result amk_llm_open_model(amk_model *model, amk_tokenizer *tok, const amk_llm_opts *o,
                                      amk_llm **out, amk_diag *d);
/* The same program with random weights (uniform, scaled by 1/sqrt(fan-in); norms 1). */
AMK_API amk_result amk_llm_open_random(const amk_llama_config *cfg, const amk_llm_opts *o,
                                       amk_llm **out, amk_diag *d);
AMK_API void amk_llm_close(amk_llm *m);
AMK_API const amk_llama_config *amk_llm_config(const amk_llm *m);
AMK_API const amk_program *amk_llm_program(const amk_llm *m);
AMK_API const amk_tokenizer *amk_llm_tokenizer(const amk_llm *m);
AMK_API int amk_llm_max_seq(const amk_llm *m);
AMK_API const char *amk_llm_backend_name(const amk_llm *m); /* "cpu" or "cuda" */
/* Runs one decode step: token at position pos. *logits (logits may be NULL) points at vocab
   floats owned by m, valid until the next step; with logits NULL the GPU backend does not copy
   them back (a greedy loop asks for argmax alone). *argmax (may be NULL) gets the greedy token.
   Positions must be fed in order from 0 (the KV cache holds the earlier ones). */
AMK_API amk_result amk_llm_step(amk_llm *m, int token, int pos, const float **logits, int *argmax,
                                amk_diag *d);
/* Greedy decode of n tokens in order from token at position pos: tokens[i] gets the greedy token
   of the step at position pos + i, whose input is token (i = 0) or tokens[i - 1] (so tokens[n -
   1] has not been fed). On the GPU backend the n steps run in one launch (amk_cuda_run_chain: no
   host round trip between them); else amk_llm_step a step. n in [1, AMK_CUDA_MAX_CHAIN]; pos + n
   must fit the KV cache (AMK_ERR_RUNTIME, as amk_llm_step). */
AMK_API amk_result amk_llm_generate(amk_llm *m, int token, int pos, int n, int *tokens, amk_diag *d);
/* The GPU backend's runtime (NULL on the reference VM): for timing and the timeline. */
AMK_API amk_cuda *amk_llm_cuda(amk_llm *m);
/* Zeroes the KV cache (a new conversation). */
AMK_API amk_result amk_llm_reset(amk_llm *m, amk_diag *d);

/* Sampling: temperature 0 is greedy; else softmax(logits / temperature) restricted to the top_k
   most likely (0 = all) and the smallest set whose probability reaches top_p (1 = all). */
typedef struct amk_sampler {
    float temperature;
    int top_k;
    float top_p;
    uint64_t state[4];
    int *scratch_idx; float *scratch_p; int scratch_n; /* internal */
} amk_sampler;
AMK_API void amk_sampler_init(amk_sampler *s, float temperature, int top_k, float top_p,
                              uint64_t seed);
AMK_API int amk_sampler_sample(amk_sampler *s, const float *logits, int n);
AMK_API void amk_sampler_free(amk_sampler *s);

#ifdef __cplusplus
}
#endif
#endif /* AMK_H */

/* ============================================================================================== */
/*                                       IMPLEMENTATION                                            */
/* ============================================================================================== */
#if defined(AMK_IMPLEMENTATION) && !defined(AMK_IMPLEMENTATION_DONE)
#define AMK_IMPLEMENTATION_DONE
/* ==== >>impl_common: allocation, diagnostics, checked sizes, strings, dtypes, files ========== */
/* (part of amk.h's implementation; included once from amk.h) */

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <stdarg.h>
#include <math.h>
#include <limits.h>
#include <errno.h>
#include <float.h>
#if !defined(_WIN32)
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#endif

#if defined(AMK_MALLOC) && defined(AMK_FREE) && defined(AMK_REALLOC)
/* all three given */
#elif !defined(AMK_MALLOC) && !defined(AMK_FREE) && !defined(AMK_REALLOC)
#define AMK_MALLOC(sz) malloc(sz)
#define AMK_REALLOC(p, sz) realloc(p, sz)
#define AMK_FREE(p) free(p)
#else
#error "Define all of AMK_MALLOC, AMK_REALLOC and AMK_FREE, or none of them."
#endif

#ifndef AMK_JSON_MAX_DEPTH
#define AMK_JSON_MAX_DEPTH 64 /* why: programs nest 5 deep; 64 leaves room and bounds the stack */
#endif

#define AMK__UNUSED(x) ((void)(x))
/* Internal functions: static, and not an error when a build leaves one unused. */
#if defined(__GNUC__) || defined(__clang__)
#define AMK__FN static __attribute__((unused))
#else
#define AMK__FN static
#endif
#ifdef __cplusplus
#define AMK__RESTRICT __restrict /* why: C++ has no restrict; GCC, Clang and MSVC take __restrict */
#else
#define AMK__RESTRICT restrict
#endif

/* ---- allocation ------------------------------------------------------------------------------ */

AMK__FN void *amk__malloc(size_t n) { return AMK_MALLOC(n ? n : 1); }
AMK__FN void *amk__calloc(size_t count, size_t size) {
    void *p;
    if (size && count > SIZE_MAX / size) return NULL;
    p = amk__malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}
AMK__FN void *amk__realloc(void *p, size_t n) { return AMK_REALLOC(p, n ? n : 1); }
AMK__FN void amk__free(void *p) { if (p) AMK_FREE(p); }

AMK_API void amk_free(void *ptr) { amk__free(ptr); }

AMK__FN char *amk__strndup(const char *s, size_t n) {
    char *r = (char *)amk__malloc(n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n);
    r[n] = 0;
    return r;
}
AMK__FN char *amk__strdup(const char *s) { return s ? amk__strndup(s, strlen(s)) : NULL; }

/* Grows *items (element size elem) so it holds at least need elements; 0 on failure. */
AMK__FN int amk__grow(void **items, int *cap, int need, size_t elem) {
    int ncap;
    void *np;
    if (need <= *cap) return 1;
    if (need < 0 || need > INT_MAX / 2) return 0;
    ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    if ((size_t)ncap > SIZE_MAX / elem) return 0;
    np = amk__realloc(*items, (size_t)ncap * elem);
    if (!np) return 0;
    *items = np;
    *cap = ncap;
    return 1;
}

/* ---- checked arithmetic: every size read from a file goes through these ---------------------- */

AMK__FN int amk__mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > INT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}
AMK__FN int amk__add_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}
AMK__FN int amk__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}
AMK__FN int amk__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a > UINT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}

/* ---- diagnostics ----------------------------------------------------------------------------- */

AMK_API void amk_diag_clear(amk_diag *d) {
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->task = d->buffer = d->counter = -1;
}

/* Sets d's result and message (printf format) and returns r, so callers write
   `return amk__fail(d, AMK_ERR_PARSE, "...", ...);`. Keeps location fields already set. */
AMK__FN amk_result amk__fail(amk_diag *d, amk_result r, const char *fmt, ...) {
    if (d) {
        va_list ap;
        d->result = r;
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return r;
}

static const char *const amk__result_strs[AMK_RESULT_COUNT] = {
    "ok",
    "invalid argument",
    "out of memory",
    "i/o error",
    "malformed input",
    "unsupported format version",
    "program rejected by validation",
    "counter walk stuck (deadlock)",
    "value out of range at run time",
    "not found",
    "dtype or shape mismatch",
    "unsupported",
    "no CUDA driver",
    "CUDA error",
    "timeout",
};

AMK_API const char *amk_result_str(amk_result r) {
    if ((int)r < 0 || r >= AMK_RESULT_COUNT) return "unknown result";
    return amk__result_strs[r];
}

/* ---- string builder ---------------------------------------------------------------------------- */

typedef struct amk__sb {
    char *p;
    size_t len, cap;
    int oom; /* sticky: an append failed */
} amk__sb;

AMK__FN int amk__sb_reserve(amk__sb *sb, size_t extra) {
    size_t need, ncap;
    char *np;
    if (sb->oom) return 0;
    if (extra > SIZE_MAX - sb->len - 1) { sb->oom = 1; return 0; }
    need = sb->len + extra + 1;
    if (need <= sb->cap) return 1;
    ncap = sb->cap ? sb->cap : 256;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) { ncap = need; break; }
        ncap *= 2;
    }
    np = (char *)amk__realloc(sb->p, ncap);
    if (!np) { sb->oom = 1; return 0; }
    sb->p = np;
    sb->cap = ncap;
    return 1;
}
AMK__FN void amk__sb_putn(amk__sb *sb, const char *s, size_t n) {
    if (!amk__sb_reserve(sb, n)) return;
    if (n) memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = 0;
}
AMK__FN void amk__sb_puts(amk__sb *sb, const char *s) { amk__sb_putn(sb, s, strlen(s)); }
AMK__FN void amk__sb_putc(amk__sb *sb, char c) { amk__sb_putn(sb, &c, 1); }
AMK__FN void amk__sb_printf(amk__sb *sb, const char *fmt, ...) {
    char small[256];
    int n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) { sb->oom = 1; return; }
    if ((size_t)n < sizeof small) { amk__sb_putn(sb, small, (size_t)n); return; }
    if (!amk__sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->p + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}
AMK__FN void amk__sb_free(amk__sb *sb) { amk__free(sb->p); memset(sb, 0, sizeof *sb); }

/* Shortest decimal that reads back as exactly v, spelled as Python's repr writes floats (1e-06,
   0.1, 100000.0, 1e+300, -0.0): always with a '.' or an exponent, so it reads back as a real, not
   an integer. why: byte-stable JSON round trips, and programs identical to the spec's own output.
   A non-finite v gives "null" (JSON has no such numbers; writers refuse them before this). */
AMK__FN void amk__fmt_double(char *out, size_t size, double v) {
    char tmp[40], dig[24], probe[48];
    int prec, nd = 0, e10 = 0, decpt, i, neg = 0;
    size_t o = 0;
    if (!(v <= DBL_MAX && v >= -DBL_MAX)) { snprintf(out, size, "null"); return; }
    for (prec = 1; prec <= 17; prec++) {
        const char *c, *e;
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        neg = tmp[0] == '-';
        e = strchr(tmp, 'e');
        if (!e) break; /* cannot happen for a finite value */
        nd = 0;
        for (c = tmp; c < e; c++)
            if (*c >= '0' && *c <= '9') dig[nd++] = *c;
        e10 = atoi(e + 1);
        dig[nd] = 0;
        snprintf(probe, sizeof probe, "%s%se%d", neg ? "-" : "", dig, e10 - (nd - 1));
        if (strtod(probe, NULL) == v) break;
    }
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    decpt = e10 + 1; /* v = 0.dig * 10^decpt */
    if (neg) tmp[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        tmp[o++] = dig[0];
        if (nd > 1) { tmp[o++] = '.'; for (i = 1; i < nd; i++) tmp[o++] = dig[i]; }
        snprintf(tmp + o, sizeof tmp - o, "e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
    } else if (decpt <= 0) {
        tmp[o++] = '0'; tmp[o++] = '.';
        for (i = 0; i < -decpt; i++) tmp[o++] = '0';
        for (i = 0; i < nd; i++) tmp[o++] = dig[i];
        tmp[o] = 0;
    } else {
        for (i = 0; i < decpt; i++) tmp[o++] = i < nd ? dig[i] : '0';
        tmp[o++] = '.';
        if (nd <= decpt) tmp[o++] = '0';
        for (i = decpt; i < nd; i++) tmp[o++] = dig[i];
        tmp[o] = 0;
    }
    snprintf(out, size, "%s", tmp);
}

/* ---- files ----------------------------------------------------------------------------------- */

/* Reads a whole file into a NUL-terminated heap buffer. */
AMK__FN amk_result amk__read_file(const char *path, char **data, size_t *size, amk_diag *d) {
    FILE *f;
    long n;
    char *buf;
    *data = NULL;
    *size = 0;
    f = fopen(path, "rb");
    if (!f) return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
#if !defined(_WIN32)
    { /* why: fopen succeeds on a directory, whose ftell is LONG_MAX */
        struct stat st;
        if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
            fclose(f);
            return amk__fail(d, AMK_ERR_IO, "'%s' is not a regular file", path);
        }
    }
#endif
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return amk__fail(d, AMK_ERR_IO, "cannot size '%s' (not a regular file?)", path);
    }
    buf = (char *)amk__malloc((size_t)n + 1);
    if (!buf) { fclose(f); return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path); }
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        amk__free(buf);
        fclose(f);
        return amk__fail(d, AMK_ERR_IO, "short read on '%s'", path);
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    *size = (size_t)n;
    return AMK_OK;
}

AMK__FN amk_result amk__write_file(const char *path, const void *data, size_t size, amk_diag *d) {
    FILE *f = fopen(path, "wb");
    if (!f) return amk__fail(d, AMK_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return amk__fail(d, AMK_ERR_IO, "short write on '%s'", path);
    }
    if (fclose(f) != 0) return amk__fail(d, AMK_ERR_IO, "cannot finish writing '%s'", path);
    return AMK_OK;
}

/* Maps a file read-only (falls back to reading it where mmap is unavailable). *owned tells how to
   release it: amk__unmap_file. */
AMK__FN amk_result amk__map_file(const char *path, void **map, size_t *size, amk_diag *d) {
#if !defined(_WIN32)
    struct stat st;
    void *m;
    int fd = open(path, O_RDONLY);
    *map = NULL;
    *size = 0;
    if (fd < 0) return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return amk__fail(d, AMK_ERR_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) { close(fd); *map = NULL; *size = 0; return AMK_OK; }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return amk__fail(d, AMK_ERR_IO, "'%s' is too large to map", path);
    }
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return amk__fail(d, AMK_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    *map = m;
    *size = (size_t)st.st_size;
    return AMK_OK;
#else
    char *data;
    amk_result r = amk__read_file(path, &data, size, d);
    *map = data;
    return r;
#endif
}
AMK__FN void amk__unmap_file(void *map, size_t size) {
#if !defined(_WIN32)
    if (map && size) munmap(map, size);
#else
    AMK__UNUSED(size);
    amk__free(map);
#endif
}

/* ---- enum names (spec §1.1, canonical order) --------------------------------------------------- */

static const char *const amk__dtype_names[AMK_DTYPE_COUNT] = {
    "F32", "F16", "BF16", "F8E4M3", "F8E5M2", "I32", "I8", "I4", "U8", "BOOL"};
static const int amk__dtype_bits_tab[AMK_DTYPE_COUNT] = {32, 16, 16, 8, 8, 32, 8, 4, 8, 8};
static const char *const amk__kind_names[AMK_KIND_COUNT] = {
    "WEIGHT", "ACTIVATION", "KV_CACHE", "IO_INPUT", "IO_OUTPUT", "CONST"};
static const char *const amk__space_names[AMK_SPACE_COUNT] = {
    "HBM", "GLOBAL_SCRATCH", "SMEM", "REGISTER"};

AMK__FN int amk__name_lookup(const char *const *names, int n, const char *name) {
    int i;
    if (!name) return -1;
    for (i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

AMK_API const char *amk_dtype_name(int t) { return t >= 0 && t < AMK_DTYPE_COUNT ? amk__dtype_names[t] : "?"; }
AMK_API int amk_dtype_from_name(const char *n) { return amk__name_lookup(amk__dtype_names, AMK_DTYPE_COUNT, n); }
AMK_API int amk_dtype_bits(int t) { return t >= 0 && t < AMK_DTYPE_COUNT ? amk__dtype_bits_tab[t] : 0; }
AMK_API int64_t amk_dtype_nbytes(int t, int64_t n) {
    int64_t bits;
    if (n < 0 || !amk__mul_i64(n, amk_dtype_bits(t), &bits) || bits > INT64_MAX - 7) return -1;
    return (bits + 7) / 8;
}
AMK_API int amk_dtype_is_float(int t) { return t >= AMK_DTYPE_F32 && t <= AMK_DTYPE_F8E5M2; }
AMK_API int amk_dtype_is_int(int t) { return t >= AMK_DTYPE_I32 && t <= AMK_DTYPE_BOOL; }
AMK_API const char *amk_kind_name(int k) { return k >= 0 && k < AMK_KIND_COUNT ? amk__kind_names[k] : "?"; }
AMK_API int amk_kind_from_name(const char *n) { return amk__name_lookup(amk__kind_names, AMK_KIND_COUNT, n); }
AMK_API const char *amk_space_name(int s) { return s >= 0 && s < AMK_SPACE_COUNT ? amk__space_names[s] : "?"; }
AMK_API int amk_space_from_name(const char *n) { return amk__name_lookup(amk__space_names, AMK_SPACE_COUNT, n); }

/* ---- scalar dtype conversions ----------------------------------------------------------------- */

AMK__FN uint32_t amk__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AMK__FN float amk__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

AMK_API float amk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return amk__bits_f32(sign | 0x7F800000u | (man << 13));
    return amk__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

AMK_API uint16_t amk_f32_to_f16(float f) {
    uint32_t u = amk__f32_bits(f), sign = (u >> 16) & 0x8000u, absu = u & 0x7FFFFFFFu;
    if (absu > 0x7F800000u) return (uint16_t)(sign | 0x7E00u); /* NaN */
    if (absu >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65520: inf */
    if (absu < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        float a = amk__bits_f32(absu);
        /* why: a * 2^24 then round-to-nearest-even gives the subnormal mantissa exactly */
        float scaled = a * 16777216.0f;
        uint32_t m = (uint32_t)scaled;
        float frac = scaled - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    } else {
        uint32_t e = (absu >> 23) - 112, man = absu & 0x7FFFFFu;
        uint32_t h = (e << 10) | (man >> 13), rest = man & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
}

AMK_API float amk_bf16_to_f32(uint16_t h) { return amk__bits_f32((uint32_t)h << 16); }
AMK_API uint16_t amk_f32_to_bf16(float f) {
    uint32_t u = amk__f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Generic minifloat decode: 1 sign, ebits exponent, mbits mantissa, bias. */
AMK__FN float amk__minifloat_to_f32(uint32_t v, int ebits, int mbits, int bias) {
    uint32_t sign = v >> (ebits + mbits), exp = (v >> mbits) & ((1u << ebits) - 1u);
    uint32_t man = v & ((1u << mbits) - 1u);
    float r;
    if (exp == 0) r = ldexpf((float)man, 1 - bias - mbits);
    else r = ldexpf((float)(man | (1u << mbits)), (int)exp - bias - mbits);
    return sign ? -r : r;
}

AMK_API float amk_f8e4m3_to_f32(uint8_t v) {
    if ((v & 0x7Fu) == 0x7Fu) return amk__bits_f32(0x7FC00000u | ((uint32_t)(v & 0x80u) << 24));
    return amk__minifloat_to_f32(v, 4, 3, 7);
}
AMK_API float amk_f8e5m2_to_f32(uint8_t v) {
    uint32_t exp = (v >> 2) & 0x1Fu;
    if (exp == 31) { /* inf or NaN, like f16 */
        return amk_f16_to_f32((uint16_t)((uint16_t)v << 8));
    }
    return amk__minifloat_to_f32(v, 5, 2, 15);
}

/* Round-to-nearest-even encode of a finite |f| into a minifloat magnitude; max_code is the largest
   finite code; overflow gives overflow_code. */
AMK__FN uint32_t amk__f32_to_minifloat(float f, int ebits, int mbits, int bias, uint32_t max_code,
                                      uint32_t overflow_code) {
    uint32_t sign = f < 0.0f || (f == 0.0f && (amk__f32_bits(f) >> 31)) ? 1u : 0u;
    double a = fabs((double)f), best_err = -1.0;
    uint32_t lo = 0, hi = max_code, code;
    /* why: the codes of a minifloat are monotonic in value, so binary search finds the two
       neighbours of a; ties go to the even code (round to nearest even). */
    double maxv = (double)amk__minifloat_to_f32(max_code, ebits, mbits, bias);
    double ulp_top = maxv - (double)amk__minifloat_to_f32(max_code - 1u, ebits, mbits, bias);
    if (a >= maxv + ulp_top / 2) return (sign << (ebits + mbits)) | overflow_code;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1u) / 2u;
        if ((double)amk__minifloat_to_f32(mid, ebits, mbits, bias) <= a) lo = mid;
        else hi = mid - 1u;
    }
    code = lo;
    if (code < max_code) {
        double v0 = (double)amk__minifloat_to_f32(code, ebits, mbits, bias);
        double v1 = (double)amk__minifloat_to_f32(code + 1u, ebits, mbits, bias);
        double e0 = a - v0, e1 = v1 - a;
        if (e1 < e0 || (e1 == e0 && (code & 1u))) code++;
    }
    AMK__UNUSED(best_err);
    return (sign << (ebits + mbits)) | code;
}

AMK_API uint8_t amk_f32_to_f8e4m3(float f) {
    if (f != f) return 0x7Fu;
    /* why: E4M3FN has no infinity; the largest finite value 448 is code 0x7E; saturate */
    return (uint8_t)amk__f32_to_minifloat(f, 4, 3, 7, 0x7Eu, 0x7Eu);
}
AMK_API uint8_t amk_f32_to_f8e5m2(float f) {
    if (f != f) return 0x7Fu;
    return (uint8_t)amk__f32_to_minifloat(f, 5, 2, 15, 0x7Bu, 0x7Cu); /* 57344 max, then inf */
}

/* Reads element i of a buffer of dtype t as float (integers convert exactly up to 2^24). */
AMK__FN float amk__load_f32(const void *base, int t, int64_t i) {
    const uint8_t *b = (const uint8_t *)base;
    switch (t) {
    case AMK_DTYPE_F32: { float v; memcpy(&v, b + 4 * i, 4); return v; }
    case AMK_DTYPE_F16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return amk_f16_to_f32(h); }
    case AMK_DTYPE_BF16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return amk_bf16_to_f32(h); }
    case AMK_DTYPE_F8E4M3: return amk_f8e4m3_to_f32(b[i]);
    case AMK_DTYPE_F8E5M2: return amk_f8e5m2_to_f32(b[i]);
    case AMK_DTYPE_I32: { int32_t v; memcpy(&v, b + 4 * i, 4); return (float)v; }
    case AMK_DTYPE_I8: return (float)(int8_t)b[i];
    case AMK_DTYPE_I4: { /* stored q + 8 (IR_SPEC_NOTES), element 2k in the low nibble */
        uint8_t byte = b[i >> 1];
        int q = (int)((i & 1) ? (byte >> 4) : (byte & 15)) - 8;
        return (float)q;
    }
    case AMK_DTYPE_U8: return (float)b[i];
    case AMK_DTYPE_BOOL: return b[i] ? 1.0f : 0.0f;
    default: return 0.0f;
    }
}

/* Reads element i as an integer (floats truncate toward zero; NaN reads as 0). */
AMK__FN int64_t amk__load_i64(const void *base, int t, int64_t i) {
    const uint8_t *b = (const uint8_t *)base;
    if (t == AMK_DTYPE_I32) { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    if (t == AMK_DTYPE_I8) return (int8_t)b[i];
    if (t == AMK_DTYPE_U8 || t == AMK_DTYPE_BOOL) return b[i];
    {
        float f = amk__load_f32(base, t, i);
        if (f != f) return 0;
        if (f >= 9.2e18f) return INT64_MAX;
        if (f <= -9.2e18f) return INT64_MIN;
        return (int64_t)f;
    }
}

AMK__FN int32_t amk__sat_i32(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return (int32_t)lrint(v);
}

/* Writes v as element i of a buffer of dtype t (integers round to nearest and saturate). */
AMK__FN void amk__store_f32(void *base, int t, int64_t i, float v) {
    uint8_t *b = (uint8_t *)base;
    switch (t) {
    case AMK_DTYPE_F32: memcpy(b + 4 * i, &v, 4); break;
    case AMK_DTYPE_F16: { uint16_t h = amk_f32_to_f16(v); memcpy(b + 2 * i, &h, 2); break; }
    case AMK_DTYPE_BF16: { uint16_t h = amk_f32_to_bf16(v); memcpy(b + 2 * i, &h, 2); break; }
    case AMK_DTYPE_F8E4M3: b[i] = amk_f32_to_f8e4m3(v); break;
    case AMK_DTYPE_F8E5M2: b[i] = amk_f32_to_f8e5m2(v); break;
    case AMK_DTYPE_I32: { int32_t x = amk__sat_i32(v, -2147483648.0, 2147483647.0); memcpy(b + 4 * i, &x, 4); break; }
    case AMK_DTYPE_I8: b[i] = (uint8_t)(int8_t)amk__sat_i32(v, -128, 127); break;
    case AMK_DTYPE_I4: {
        uint8_t q = (uint8_t)(amk__sat_i32(v, -8, 7) + 8), *p = b + (i >> 1);
        *p = (i & 1) ? (uint8_t)((*p & 0x0Fu) | (q << 4)) : (uint8_t)((*p & 0xF0u) | q);
        break;
    }
    case AMK_DTYPE_U8: b[i] = (uint8_t)amk__sat_i32(v, 0, 255); break;
    case AMK_DTYPE_BOOL: b[i] = v != 0.0f; break;
    default: break;
    }
}

/* Writes an integer exactly (for ids and argmax results). */
AMK__FN void amk__store_i64(void *base, int t, int64_t i, int64_t v) {
    uint8_t *b = (uint8_t *)base;
    if (t == AMK_DTYPE_I32) {
        int32_t x = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
        memcpy(b + 4 * i, &x, 4);
    } else {
        amk__store_f32(base, t, i, (float)v);
    }
}

/* ---- random numbers: splitmix64 (seeding) + xoshiro256** ---------------------------------------- */

typedef struct amk__rng { uint64_t s[4]; } amk__rng;

AMK__FN uint64_t amk__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
AMK__FN void amk__rng_seed(amk__rng *r, uint64_t seed) {
    int i;
    for (i = 0; i < 4; i++) r->s[i] = amk__splitmix64(&seed);
}
AMK__FN uint64_t amk__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
AMK__FN uint64_t amk__rng_u64(amk__rng *r) {
    uint64_t *s = r->s, res = amk__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = amk__rotl(s[3], 45);
    return res;
}
/* Uniform in [0, n) for n >= 1. */
AMK__FN uint64_t amk__rng_below(amk__rng *r, uint64_t n) { return n ? amk__rng_u64(r) % n : 0; }
/* Uniform float in [-1, 1). */
AMK__FN float amk__rng_sym(amk__rng *r) {
    return (float)((double)(amk__rng_u64(r) >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* ---- bit sets --------------------------------------------------------------------------------- */

typedef uint64_t amk__word;
#define AMK__WORDS(n) (((size_t)(n) + 63) / 64)
AMK__FN int amk__bit_get(const amk__word *b, size_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1u); }
AMK__FN void amk__bit_set(amk__word *b, size_t i) { b[i >> 6] |= (amk__word)1 << (i & 63); }

/* ---- UTF-8 (shared by the JSON parser and the tokenizer) ----------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..avail), 0 if invalid (overlong, surrogate, above
   U+10FFFF, bad or missing continuation byte). RFC 3629 table 4. */
AMK__FN int amk__utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    int n, i;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)n > avail) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

AMK__FN size_t amk__utf8_put(unsigned char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- internal JSON DOM (implemented in >>impl_json; shared by every parser of the library) ----- */

typedef enum amk__jtype {
    AMK__J_NULL = 0, AMK__J_BOOL, AMK__J_INT, AMK__J_REAL, AMK__J_STRING, AMK__J_ARRAY, AMK__J_OBJECT
} amk__jtype;

typedef struct amk__jval amk__jval;
struct amk__jval {
    amk__jtype type;
    int line, col;          /* where the value starts, 1-based */
    int big;                /* an integer literal outside int64: type is REAL, f is its value */
    int64_t i;              /* INT value; BOOL 0/1 */
    double f;               /* REAL value (also set for INT) */
    const char *s;          /* STRING: decoded UTF-8, NUL-terminated (may hold \0: use slen) */
    size_t slen;
    int n;                  /* ARRAY / OBJECT: number of children */
    amk__jval *items;       /* ARRAY elements, OBJECT values, in document order */
    const char **keys;      /* OBJECT keys (decoded, NUL-terminated), in document order */
    size_t *key_lens;
};

typedef struct amk__jdoc {
    amk__jval *root;
    void *arena;            /* internal */
} amk__jdoc;

/* Parses len bytes of strict RFC 8259 JSON (UTF-8 checked, no comments, no trailing commas,
   duplicate object keys rejected, nesting deeper than max_depth rejected). Memory is bounded by a
   small multiple of len. On error d gets line:col and a message. */
AMK__FN amk_result amk__json_parse(const char *text, size_t len, int max_depth, amk__jdoc *doc,
                                  amk_diag *d);
AMK__FN void amk__json_free(amk__jdoc *doc);
/* The value of key in an object (first match), or NULL (also for a non-object). */
static const amk__jval *amk__json_get(const amk__jval *obj, const char *key);
/* Appends s as a quoted, escaped JSON string. */
AMK__FN void amk__json_put_string(amk__sb *sb, const char *s, size_t len);
/* Appends the canonical compact JSON of v (used to keep meta values). */
AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v);

/* ==== >>impl_program: registry, checks table, targets, building programs in code ============== */

/* OP_REGISTRY (spec §7). GEMV_TILE/GEMM_TILE also take a 4th input (zeros) when qdtype is set:
   validate handles that form (IR_SPEC_NOTES, weight-only quantized GEMV). */
static const amk_op_spec amk__op_specs[AMK_OP_COUNT] = {
    {"NOP", 0, 0, 0, {NULL}, "no-op"},
    {"COPY", 1, 1, 1, {NULL}, "out = x (cast)"},
    {"EMBED", 2, 2, 1, {"hidden", NULL}, "[ids, table[V,H]] -> gathered rows"},
    {"RMSNORM", 2, 2, 1, {"eps", "hidden", NULL}, "x*rsqrt(mean(x^2)+eps)*w"},
    {"LAYERNORM", 2, 3, 1, {"eps", "hidden", NULL}, "LayerNorm(x, w[, b])"},
    {"GEMV_TILE", 2, 3, 1, {"K", "N_tile", "n_off", NULL}, "out[..,n_off:n_off+N_tile] = x @ W[n_off:..].T"},
    {"GEMM_TILE", 2, 3, 1, {"M_tile", "K", "N_tile", "n_off", NULL}, "tiled GEMM (prefill/batch)"},
    {"ATTENTION_TILE", 3, 4, 1, {"head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", NULL}, "GQA attention over a KV window"},
    {"ROPE", 2, 2, 1, {"head_dim", "theta", NULL}, "rotate-half rotary embedding"},
    {"SILU_MUL", 2, 2, 1, {NULL}, "silu(gate)*up"},
    {"GELU", 1, 1, 1, {NULL}, "exact GELU"},
    {"ADD", 2, 2, 1, {NULL}, "a + b"},
    {"MUL", 1, 2, 1, {NULL}, "a * b, or a * scale"},
    {"DEQUANT", 2, 3, 1, {"qdtype", "group", NULL}, "int4/int8 + scales -> fp"},
    {"SOFTMAX", 1, 1, 1, {NULL}, "softmax over dim"},
    {"ALLREDUCE_SHARD", 1, 8, 1, {NULL}, "sum of shards"},
    {"KV_APPEND", 2, 2, 1, {"pos", NULL}, "write row pos of the KV cache"},
    {"SAMPLE_ARGMAX", 1, 1, 1, {NULL}, "greedy argmax over the last axis"},
    {"ATTENTION_COMBINE", 2, 8, 1, {"head_dim", NULL}, "merge flash partials (acc, m, l)"},
    {NULL, 0, 0, 0, {NULL}, NULL}, /* 19: another implementation's FUSED; never defined here */
    {"RMSNORM_GEMV", 3, 4, -1, {"eps", "K", "N_tile", "n_off", NULL},
     "tile of rmsnorm(x) @ W.T (+ RoPE, KV row; + its argmax pair: a 2nd output)"},
    {"RMSNORM_SWIGLU", 4, 4, 1, {"eps", "K", "N_tile", "n_off", NULL}, "tile of silu(xn @ Wg.T) * (xn @ Wu.T)"},
    {"ATTENTION_DECODE", 4, 4, 1, {"head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", "n_off", "N_tile"},
     "attention of kv heads [n_off, n_off+N_tile) over rows up to pos"},
    {"ARGMAX_PARTIAL", 1, 1, 1, {"N_tile", "n_off", "part", NULL}, "(max, first index) of a column range, per row"},
    {"ARGMAX_COMBINE", 1, 1, 1, {NULL}, "index of the best (max, index) partial, per row"},
    {"RMSNORM_MLP", 5, 7, -1, {"eps", "K", "N_tile", "n_off", NULL},
     "out += (silu(xn @ Wg[tile].T) * (xn @ Wu[tile].T)) @ W_downT[tile] (+ resid); accumulates "
     "(flag FOLD: W_cat its 6th input, and a 2nd output qkv += its share of the folded projections)"},
    {"FILL", 0, 0, 1, {NULL}, "out = scale everywhere"},
    {"ATTENTION_O", 5, 7, -1,
     {"head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", "n_off", "N_tile", "m_off", "M_tile", NULL},
     "out += attention(kv heads [n_off, n_off+N_tile))[m_off:+M_tile] @ W_oT[m_off:+M_tile] (+ resid); accumulates "
     "(flag PRENORM: q/k/v from raw projections and x's rms; with outputs 2 and 3, the caches, k/v into row pos)"},
};

AMK_API const amk_op_spec *amk_op_spec_get(int op) {
    return op >= 0 && op < AMK_OP_COUNT && amk__op_specs[op].name ? &amk__op_specs[op] : NULL;
}
AMK_API const char *amk_op_name(int op) { return amk_op_spec_get(op) ? amk__op_specs[op].name : "?"; }
AMK_API int amk_op_from_name(const char *name) {
    int i;
    if (!name) return -1;
    for (i = 0; i < AMK_OP_COUNT; i++)
        if (amk__op_specs[i].name && strcmp(amk__op_specs[i].name, name) == 0) return i;
    return -1;
}

/* The marshalled type of a known param key ('i' or 'f'), or 0 for an unknown key. */
AMK__FN char amk__param_field_type(const char *key) {
#define AMK__PF(name, ty) if (strcmp(key, #name) == 0) return ty;
    AMK_PARAM_FIELDS(AMK__PF)
#undef AMK__PF
    return 0;
}

/* ---- checks table ------------------------------------------------------------------------------ */

static const char *const amk__check_ids[AMK_CHECK_COUNT] = {
#define AMK__CK(id, sev, msg) #id,
    AMK_CHECKS(AMK__CK)
#undef AMK__CK
};
static const char amk__check_sev[AMK_CHECK_COUNT] = {
#define AMK__CK(id, sev, msg) sev,
    AMK_CHECKS(AMK__CK)
#undef AMK__CK
};
static const char *const amk__check_msgs[AMK_CHECK_COUNT] = {
#define AMK__CK(id, sev, msg) msg,
    AMK_CHECKS(AMK__CK)
#undef AMK__CK
};
AMK_API const char *amk_check_id(amk_check c) { return (int)c >= 0 && c < AMK_CHECK_COUNT ? amk__check_ids[c] : "?"; }
AMK_API const char *amk_check_description(amk_check c) { return (int)c >= 0 && c < AMK_CHECK_COUNT ? amk__check_msgs[c] : "?"; }
AMK_API int amk_check_is_error(amk_check c) { return (int)c >= 0 && c < AMK_CHECK_COUNT && amk__check_sev[c] == 'E'; }

/* ---- targets (spec §5.1) ------------------------------------------------------------------------ */

AMK_API amk_result amk_target_builtin(const char *name, amk_target *t) {
    int h200;
    if (!name || !t) return AMK_ERR_INVALID_ARG;
    h200 = strcmp(name, "h200") == 0;
    if (!h200 && strcmp(name, "h100") != 0) return AMK_ERR_NOT_FOUND;
    /* why: SXM datasheet values; the H200 is the same Hopper die with more, faster HBM.
       232448 B is the sm_90 dynamic shared-memory opt-in cap. */
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", h200 ? "h200" : "h100");
    t->sm_arch = 90; t->num_sms = 132;
    t->smem_bytes_per_sm = 233472; t->smem_bytes_per_block_optin = 232448;
    t->regs_per_sm = 65536; t->max_threads_per_sm = 2048; t->max_regs_per_thread = 255;
    t->l2_bytes = 52428800;
    t->hbm_bytes = h200 ? 151397597184LL : 85899345920LL;
    t->hbm_bandwidth_gbs = h200 ? 4800.0 : 3350.0;
    t->fp16_tflops = 989.4; t->clock_ghz = 1.98;
    t->supports_cooperative = 1; t->wddm_tdr = 0;
    snprintf(t->note, sizeof t->note, "datasheet values");
    return AMK_OK;
}

AMK_API void amk_config_default(amk_config *c) {
    memset(c, 0, sizeof *c);
    c->sm_assignment = AMK_SM_LOAD_BALANCE;
    c->pipelining_depth = 2;
    c->page_allocation = AMK_PAGES_GRAPH_COLOR;
    c->threads_per_block = 256;
    c->smem_bytes_per_block = 0;
}

AMK__FN void amk__config_free(amk_config *c) {
    int i, j;
    for (i = 0; i < c->n_tiling; i++) {
        for (j = 0; j < c->tiling[i].n_items; j++) amk__free(c->tiling[i].items[j].key);
        amk__free(c->tiling[i].items);
        amk__free(c->tiling[i].archetype);
    }
    amk__free(c->tiling);
    for (i = 0; i < c->n_fusion; i++) {
        for (j = 0; j < c->fusion[i].n_names; j++) amk__free(c->fusion[i].names[j]);
        amk__free(c->fusion[i].names);
    }
    amk__free(c->fusion);
    amk__free(c->explicit_task);
    amk__free(c->explicit_sm);
    amk_config_default(c);
}

/* Deep copy of a config; 0 on out of memory (dst then holds a partial copy to free). */
AMK__FN int amk__config_copy(amk_config *dst, const amk_config *src) {
    int i, j;
    *dst = *src;
    dst->tiling = NULL; dst->n_tiling = 0;
    dst->fusion = NULL; dst->n_fusion = 0;
    dst->explicit_task = dst->explicit_sm = NULL; dst->n_explicit = 0;
    if (src->n_tiling) {
        dst->tiling = (amk_tiling *)amk__calloc((size_t)src->n_tiling, sizeof(amk_tiling));
        if (!dst->tiling) return 0;
        for (i = 0; i < src->n_tiling; i++) {
            amk_tiling *t = &dst->tiling[i];
            dst->n_tiling = i + 1;
            t->archetype = amk__strdup(src->tiling[i].archetype);
            if (!t->archetype) return 0;
            if (src->tiling[i].n_items) {
                t->items = (amk_tile_param *)amk__calloc((size_t)src->tiling[i].n_items, sizeof(amk_tile_param));
                if (!t->items) return 0;
                for (j = 0; j < src->tiling[i].n_items; j++) {
                    t->n_items = j + 1;
                    t->items[j].value = src->tiling[i].items[j].value;
                    t->items[j].key = amk__strdup(src->tiling[i].items[j].key);
                    if (!t->items[j].key) return 0;
                }
            }
        }
    }
    if (src->n_fusion) {
        dst->fusion = (amk_fusion_group *)amk__calloc((size_t)src->n_fusion, sizeof(amk_fusion_group));
        if (!dst->fusion) return 0;
        for (i = 0; i < src->n_fusion; i++) {
            amk_fusion_group *g = &dst->fusion[i];
            dst->n_fusion = i + 1;
            if (src->fusion[i].n_names) {
                g->names = (char **)amk__calloc((size_t)src->fusion[i].n_names, sizeof(char *));
                if (!g->names) return 0;
                for (j = 0; j < src->fusion[i].n_names; j++) {
                    g->n_names = j + 1;
                    g->names[j] = amk__strdup(src->fusion[i].names[j]);
                    if (!g->names[j]) return 0;
                }
            }
        }
    }
    if (src->n_explicit) {
        dst->explicit_task = (int *)amk__calloc((size_t)src->n_explicit, sizeof(int));
        dst->explicit_sm = (int *)amk__calloc((size_t)src->n_explicit, sizeof(int));
        if (!dst->explicit_task || !dst->explicit_sm) return 0;
        memcpy(dst->explicit_task, src->explicit_task, (size_t)src->n_explicit * sizeof(int));
        memcpy(dst->explicit_sm, src->explicit_sm, (size_t)src->n_explicit * sizeof(int));
        dst->n_explicit = src->n_explicit;
    }
    return 1;
}

/* ---- programs ------------------------------------------------------------------------------------ */

AMK_API amk_program *amk_program_create(void) {
    amk_program *p = (amk_program *)amk__calloc(1, sizeof(amk_program));
    if (p) amk_config_default(&p->config);
    return p;
}

AMK__FN void amk__task_free(amk_task *t) {
    int i;
    amk__free(t->op_name);
    amk__free(t->inputs);
    amk__free(t->outputs);
    amk__free(t->waits);
    for (i = 0; i < t->n_params; i++) {
        amk__free(t->params[i].key);
        amk__free(t->params[i].s);
    }
    amk__free(t->params);
    amk__free(t->label);
    memset(t, 0, sizeof *t);
}

AMK_API void amk_program_free(amk_program *p) {
    int i;
    if (!p) return;
    for (i = 0; i < p->n_meta; i++) { amk__free(p->meta[i].key); amk__free(p->meta[i].json); }
    amk__free(p->meta);
    for (i = 0; i < p->n_buffers; i++) { amk__free(p->buffers[i].name); amk__free(p->buffers[i].source); }
    amk__free(p->buffers);
    for (i = 0; i < p->n_counters; i++) amk__free(p->counters[i].note);
    amk__free(p->counters);
    for (i = 0; i < p->n_tasks; i++) amk__task_free(&p->tasks[i]);
    amk__free(p->tasks);
    amk__free(p->pages);
    amk__free(p->buffer_page);
    amk__config_free(&p->config);
    amk__free(p);
}

AMK__FN int amk__build_fail(amk_program *p, amk_result r) {
    if (p && p->build_error == AMK_OK) p->build_error = r;
    return -1;
}

AMK_API int amk_program_add_buffer(amk_program *p, const char *name, amk_buffer_kind kind,
                                   amk_dtype dtype, int rank, const int64_t *shape,
                                   amk_memspace space, const char *source) {
    amk_buffer *b;
    int i;
    if (!p) return -1;
    if (!name || rank < 0 || rank > AMK_MAX_RANK || (rank && !shape))
        return amk__build_fail(p, AMK_ERR_INVALID_ARG);
    if (!amk__grow((void **)&p->buffers, &p->cap_buffers, p->n_buffers + 1, sizeof(amk_buffer)))
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    b = &p->buffers[p->n_buffers];
    memset(b, 0, sizeof *b);
    b->id = p->n_buffers;
    b->kind = (int)kind;
    b->dtype = (int)dtype;
    b->rank = rank;
    for (i = 0; i < rank; i++) b->shape[i] = shape[i];
    b->space = (int)space;
    b->name = amk__strdup(name);
    b->source = source ? amk__strdup(source) : NULL;
    if (!b->name || (source && !b->source)) {
        amk__free(b->name);
        amk__free(b->source);
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    }
    if (p->has_pages && p->buffer_page) { /* keep the page table sized n_buffers */
        int *np = (int *)amk__realloc(p->buffer_page, (size_t)(p->n_buffers + 1) * sizeof(int));
        if (!np) { amk__free(b->name); amk__free(b->source); return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); }
        p->buffer_page = np;
        np[p->n_buffers] = -1;
    }
    return p->n_buffers++;
}

AMK_API int amk_program_add_counter(amk_program *p, const char *note) {
    amk_counter *c;
    if (!p) return -1;
    if (!amk__grow((void **)&p->counters, &p->cap_counters, p->n_counters + 1, sizeof(amk_counter)))
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    c = &p->counters[p->n_counters];
    memset(c, 0, sizeof *c);
    c->id = p->n_counters;
    c->note = amk__strdup(note ? note : "");
    if (!c->note) return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    return p->n_counters++;
}

AMK__FN int *amk__dup_ints(const int *src, int n) {
    int *r;
    if (n <= 0) return NULL;
    r = (int *)amk__malloc((size_t)n * sizeof(int));
    if (r) memcpy(r, src, (size_t)n * sizeof(int));
    return r;
}

AMK_API int amk_program_add_task(amk_program *p, int op, const int *inputs, int n_inputs,
                                 const int *outputs, int n_outputs, int out_counter,
                                 const char *label) {
    amk_task *t;
    int i, max_id = -1;
    if (!p) return -1;
    if (n_inputs < 0 || n_outputs < 0 || (n_inputs && !inputs) || (n_outputs && !outputs))
        return amk__build_fail(p, AMK_ERR_INVALID_ARG);
    if (!amk__grow((void **)&p->tasks, &p->cap_tasks, p->n_tasks + 1, sizeof(amk_task)))
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    if (p->n_tasks > 0 && p->id_cache_n == p->n_tasks) {
        max_id = p->id_cache_max; /* why: a rescan per add made building 20k tasks quadratic */
    } else {
        for (i = 0; i < p->n_tasks; i++)
            if (p->tasks[i].id > max_id) max_id = p->tasks[i].id;
    }
    t = &p->tasks[p->n_tasks];
    memset(t, 0, sizeof *t);
    t->id = max_id + 1; /* why: unique even after the list was reordered by lowering */
    t->op = op;
    t->inputs = amk__dup_ints(inputs, n_inputs);
    t->outputs = amk__dup_ints(outputs, n_outputs);
    t->n_inputs = n_inputs;
    t->n_outputs = n_outputs;
    t->out_counter = out_counter;
    t->sm = -1;
    t->label = amk__strdup(label ? label : "");
    if ((n_inputs && !t->inputs) || (n_outputs && !t->outputs) || !t->label) {
        amk__task_free(t);
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    }
    p->id_cache_max = t->id;
    p->id_cache_n = ++p->n_tasks;
    return p->n_tasks - 1;
}

AMK_API amk_result amk_task_add_wait(amk_program *p, int task, int counter, int64_t threshold) {
    amk_task *t;
    amk_wait *nw;
    if (!p || task < 0 || task >= p->n_tasks) { amk__build_fail(p, AMK_ERR_INVALID_ARG); return AMK_ERR_INVALID_ARG; }
    t = &p->tasks[task];
    nw = (amk_wait *)amk__realloc(t->waits, (size_t)(t->n_waits + 1) * sizeof(amk_wait));
    if (!nw) { amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); return AMK_ERR_OUT_OF_MEMORY; }
    t->waits = nw;
    nw[t->n_waits].counter = counter;
    nw[t->n_waits].threshold = threshold;
    t->n_waits++;
    return AMK_OK;
}

/* The param slot for key in t, created if absent; NULL on out of memory. */
AMK__FN amk_param *amk__task_param_slot(amk_task *t, const char *key) {
    int i;
    amk_param *np;
    for (i = 0; i < t->n_params; i++)
        if (strcmp(t->params[i].key, key) == 0) {
            amk__free(t->params[i].s);
            t->params[i].s = NULL;
            return &t->params[i];
        }
    np = (amk_param *)amk__realloc(t->params, (size_t)(t->n_params + 1) * sizeof(amk_param));
    if (!np) return NULL;
    t->params = np;
    memset(&np[t->n_params], 0, sizeof(amk_param));
    np[t->n_params].key = amk__strdup(key);
    if (!np[t->n_params].key) return NULL;
    return &np[t->n_params++];
}

AMK_API amk_result amk_task_set_int(amk_program *p, int task, const char *key, int64_t v) {
    amk_param *s;
    if (!p || !key || task < 0 || task >= p->n_tasks) { amk__build_fail(p, AMK_ERR_INVALID_ARG); return AMK_ERR_INVALID_ARG; }
    s = amk__task_param_slot(&p->tasks[task], key);
    if (!s) { amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); return AMK_ERR_OUT_OF_MEMORY; }
    s->type = AMK_PARAM_INT;
    s->i = v;
    s->f = (double)v;
    return AMK_OK;
}

AMK_API amk_result amk_task_set_real(amk_program *p, int task, const char *key, double v) {
    amk_param *s;
    if (!p || !key || task < 0 || task >= p->n_tasks) { amk__build_fail(p, AMK_ERR_INVALID_ARG); return AMK_ERR_INVALID_ARG; }
    s = amk__task_param_slot(&p->tasks[task], key);
    if (!s) { amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); return AMK_ERR_OUT_OF_MEMORY; }
    s->type = AMK_PARAM_REAL;
    s->f = v;
    s->i = 0;
    return AMK_OK;
}

AMK_API const amk_param *amk_task_param(const amk_task *t, const char *key) {
    int i;
    if (!t || !key) return NULL;
    for (i = 0; i < t->n_params; i++)
        if (strcmp(t->params[i].key, key) == 0) return &t->params[i];
    return NULL;
}

AMK_API amk_result amk_program_set_meta_string(amk_program *p, const char *key, const char *v) {
    amk__sb sb;
    int i;
    if (!p || !key || !v) return AMK_ERR_INVALID_ARG;
    memset(&sb, 0, sizeof sb);
    amk__json_put_string(&sb, v, strlen(v));
    if (sb.oom) { amk__sb_free(&sb); return AMK_ERR_OUT_OF_MEMORY; }
    for (i = 0; i < p->n_meta; i++)
        if (strcmp(p->meta[i].key, key) == 0) {
            amk__free(p->meta[i].json);
            p->meta[i].json = sb.p;
            return AMK_OK;
        }
    if (!amk__grow((void **)&p->meta, &p->cap_meta, p->n_meta + 1, sizeof(amk_meta))) {
        amk__sb_free(&sb);
        return AMK_ERR_OUT_OF_MEMORY;
    }
    p->meta[p->n_meta].key = amk__strdup(key);
    if (!p->meta[p->n_meta].key) { amk__sb_free(&sb); return AMK_ERR_OUT_OF_MEMORY; }
    p->meta[p->n_meta].json = sb.p;
    p->n_meta++;
    return AMK_OK;
}

AMK_API const char *amk_program_meta_string(const amk_program *p, const char *key, char *buf,
                                            size_t buf_size) {
    int i;
    amk__jdoc doc;
    const char *r = NULL;
    if (!p || !key || !buf || !buf_size) return NULL;
    for (i = 0; i < p->n_meta; i++) {
        if (strcmp(p->meta[i].key, key) != 0) continue;
        if (amk__json_parse(p->meta[i].json, strlen(p->meta[i].json), 4, &doc, NULL) != AMK_OK) return NULL;
        if (doc.root->type == AMK__J_STRING) {
            snprintf(buf, buf_size, "%s", doc.root->s);
            r = buf;
        }
        amk__json_free(&doc);
        return r;
    }
    return NULL;
}

AMK_API amk_result amk_program_set_target(amk_program *p, const amk_target *t) {
    if (!p || !t) return AMK_ERR_INVALID_ARG;
    p->target = *t;
    p->has_target = 1;
    return AMK_OK;
}

AMK_API int amk_program_find_buffer(const amk_program *p, const char *name) {
    int i;
    if (!p || !name) return -1;
    for (i = 0; i < p->n_buffers; i++)
        if (strcmp(p->buffers[i].name, name) == 0) return i;
    return -1;
}

AMK_API int amk_program_task_index(const amk_program *p, int task_id) {
    int i;
    if (!p) return -1;
    for (i = 0; i < p->n_tasks; i++)
        if (p->tasks[i].id == task_id) return i;
    return -1;
}

AMK_API int64_t amk_buffer_numel(const amk_buffer *b) {
    int64_t n = 1;
    int i;
    if (!b || b->rank < 0 || b->rank > AMK_MAX_RANK) return -1;
    for (i = 0; i < b->rank; i++)
        if (!amk__mul_i64(n, b->shape[i], &n)) return -1;
    return n;
}

/* Bytes of a buffer in its dtype; -1 on overflow or a bad shape. */
AMK__FN int64_t amk__buffer_nbytes(const amk_buffer *b) {
    int64_t n = amk_buffer_numel(b);
    return n < 0 ? -1 : amk_dtype_nbytes(b->dtype, n);
}

AMK_API int64_t amk_program_weight_bytes(const amk_program *p) {
    int64_t total = 0, nb;
    int i, j;
    unsigned char *read; /* [n_buffers] some task reads it */
    if (!p || p->n_buffers <= 0) return 0;
    if (!(read = (unsigned char *)amk__calloc((size_t)p->n_buffers, 1))) return -1;
    for (i = 0; i < p->n_tasks; i++)
        for (j = 0; p->tasks && p->tasks[i].inputs && j < p->tasks[i].n_inputs; j++)
            if (p->tasks[i].inputs[j] >= 0 && p->tasks[i].inputs[j] < p->n_buffers) read[p->tasks[i].inputs[j]] = 1;
    for (i = 0; i < p->n_buffers; i++) {
        const amk_buffer *b = &p->buffers[i];
        if ((b->kind != AMK_KIND_WEIGHT && b->kind != AMK_KIND_CONST) || !read[i]) continue;
        nb = amk__buffer_nbytes(b);
        if (nb < 0 || !amk__add_i64(total, nb, &total)) { total = -1; break; }
    }
    amk__free(read);
    return total;
}

/* Param as int / real with a default (no type checking: validate did that). */
AMK__FN int64_t amk__param_i(const amk_task *t, const char *key, int64_t dflt) {
    const amk_param *pr = amk_task_param(t, key);
    if (!pr) return dflt;
    if (pr->type == AMK_PARAM_INT || pr->type == AMK_PARAM_BOOL) return pr->i;
    if (pr->type == AMK_PARAM_REAL) return (int64_t)pr->f;
    return dflt;
}
AMK__FN double amk__param_f(const amk_task *t, const char *key, double dflt) {
    const amk_param *pr = amk_task_param(t, key);
    if (!pr) return dflt;
    if (pr->type == AMK_PARAM_REAL) return pr->f;
    if (pr->type == AMK_PARAM_INT) return (double)pr->i;
    return dflt;
}

AMK_API void amk_task_marshal_params(const amk_task *t, amk_params_t *o) {
    memset(o, 0, sizeof *o);
#define AMK__MI(name, dflt) o->name = (int32_t)amk__param_i(t, #name, dflt)
#define AMK__MF(name, dflt) o->name = (float)amk__param_f(t, #name, dflt)
    AMK__MI(hidden, 0); AMK__MI(K, 0); AMK__MI(N_tile, 0); AMK__MI(n_off, 0);
    AMK__MI(M_tile, 0); AMK__MI(m_off, 0); AMK__MI(head_dim, 0); AMK__MI(kv_start, 0);
    AMK__MI(kv_len, 0); AMK__MI(n_heads, 0); AMK__MI(n_kv_heads, 0);
    AMK__MI(qdtype, -1);          /* -1: weights are not quantized */
    AMK__MI(group, o->K);         /* IR_SPEC_NOTES: group defaults to K */
    AMK__MI(pos, 0); AMK__MI(flags, 0);
    AMK__MI(dim, -1);             /* SOFTMAX: the last axis */
    AMK__MI(rope_orig_ctx, 0); AMK__MI(part, 0);
    AMK__MF(eps, 0.0); AMK__MF(scale, 1.0); AMK__MF(theta, 10000.0);
    AMK__MF(rope_factor, 0.0);    /* 0: no llama3 RoPE scaling */
    AMK__MF(rope_low_freq_factor, 1.0); AMK__MF(rope_high_freq_factor, 4.0);
#undef AMK__MI
#undef AMK__MF
}

AMK__FN int amk__param_copy(amk_param *dst, const amk_param *src) {
    *dst = *src;
    dst->key = amk__strdup(src->key);
    dst->s = src->s ? amk__strdup(src->s) : NULL;
    return dst->key && (!src->s || dst->s);
}

AMK_API amk_program *amk_program_clone(const amk_program *src) {
    amk_program *p;
    int i, j;
    if (!src) return NULL;
    p = amk_program_create();
    if (!p) return NULL;
    for (i = 0; i < src->n_meta; i++) {
        if (!amk__grow((void **)&p->meta, &p->cap_meta, i + 1, sizeof(amk_meta))) goto oom;
        p->meta[i].key = amk__strdup(src->meta[i].key);
        p->meta[i].json = amk__strdup(src->meta[i].json);
        p->n_meta = i + 1;
        if (!p->meta[i].key || !p->meta[i].json) goto oom;
    }
    p->has_target = src->has_target;
    p->target = src->target;
    for (i = 0; i < src->n_buffers; i++) {
        const amk_buffer *b = &src->buffers[i];
        if (amk_program_add_buffer(p, b->name, (amk_buffer_kind)b->kind, (amk_dtype)b->dtype,
                                   b->rank, b->shape, (amk_memspace)b->space, b->source) < 0) goto oom;
    }
    for (i = 0; i < src->n_counters; i++) {
        if (amk_program_add_counter(p, src->counters[i].note) < 0) goto oom;
        p->counters[i].init = src->counters[i].init;
    }
    for (i = 0; i < src->n_tasks; i++) {
        const amk_task *s = &src->tasks[i];
        amk_task *t;
        if (amk_program_add_task(p, s->op, s->inputs, s->n_inputs, s->outputs, s->n_outputs,
                                 s->out_counter, s->label) < 0) goto oom;
        t = &p->tasks[i];
        t->id = s->id;
        if (t->id > p->id_cache_max) p->id_cache_max = t->id;
        t->sm = s->sm;
        t->est_bytes = s->est_bytes;
        t->est_flops = s->est_flops;
        if (s->op_name && !(t->op_name = amk__strdup(s->op_name))) goto oom;
        if (s->n_waits) {
            t->waits = (amk_wait *)amk__malloc((size_t)s->n_waits * sizeof(amk_wait));
            if (!t->waits) goto oom;
            memcpy(t->waits, s->waits, (size_t)s->n_waits * sizeof(amk_wait));
            t->n_waits = s->n_waits;
        }
        if (s->n_params) {
            t->params = (amk_param *)amk__calloc((size_t)s->n_params, sizeof(amk_param));
            if (!t->params) goto oom;
            for (j = 0; j < s->n_params; j++) {
                t->n_params = j + 1;
                if (!amk__param_copy(&t->params[j], &s->params[j])) goto oom;
            }
        }
    }
    if (src->has_pages) {
        p->has_pages = 1;
        p->n_pages = src->n_pages;
        if (src->n_pages) {
            p->pages = (amk_page *)amk__malloc((size_t)src->n_pages * sizeof(amk_page));
            if (!p->pages) goto oom;
            memcpy(p->pages, src->pages, (size_t)src->n_pages * sizeof(amk_page));
        }
        p->buffer_page = (int *)amk__malloc((size_t)(src->n_buffers ? src->n_buffers : 1) * sizeof(int));
        if (!p->buffer_page) goto oom;
        for (i = 0; i < src->n_buffers; i++) p->buffer_page[i] = src->buffer_page ? src->buffer_page[i] : -1;
    }
    p->has_config = src->has_config;
    amk__config_free(&p->config);
    if (!amk__config_copy(&p->config, &src->config)) goto oom;
    p->build_error = src->build_error;
    return p;
oom:
    amk_program_free(p);
    return NULL;
}

/* ==== >>impl_json: the strict JSON DOM and the program file format (spec §6) ================== */
/* (part of amk.h's implementation; included once from amk.h)

   The DOM parser is iterative: open containers live on an explicit frame stack (at most
   max_depth deep) and finished values on a slot stack; when a container closes, its children are
   copied into one arena block. So the C stack never grows with the input, and memory is a few
   arena blocks proportional to the input length, not one malloc per node. */

/* ---- arena ----------------------------------------------------------------------------------- */

typedef struct amk__jblock {
    struct amk__jblock *next;
    size_t used, cap;
} amk__jblock;

/* why: 16 keeps every carved object (pointers, int64, double) aligned like malloc's own result */
#define AMK__JALIGN 16
#define AMK__JHDR ((sizeof(amk__jblock) + AMK__JALIGN - 1) / AMK__JALIGN * AMK__JALIGN)
#define AMK__JBLOCK_MIN ((size_t)1 << 16) /* why: 64 KiB amortises malloc; small docs use one */
#define AMK__JBLOCK_MAX ((size_t)1 << 22) /* why: 4 MiB caps the unused tail of the last block */

/* n bytes from the arena, 16-aligned; NULL on out of memory. */
AMK__FN void *amk__jarena_alloc(amk__jblock **head, size_t n) {
    amk__jblock *b = *head;
    void *r;
    if (n > SIZE_MAX - AMK__JHDR - AMK__JALIGN) return NULL;
    n = (n + AMK__JALIGN - 1) / AMK__JALIGN * AMK__JALIGN;
    if (!b || b->cap - b->used < n) {
        /* blocks double up to the cap; an allocation larger than that gets a block of its own */
        size_t cap = !b ? AMK__JBLOCK_MIN : b->cap >= AMK__JBLOCK_MAX / 2 ? AMK__JBLOCK_MAX : b->cap * 2;
        if (cap < n) cap = n;
        b = (amk__jblock *)amk__malloc(AMK__JHDR + cap);
        if (!b) return NULL;
        b->next = *head;
        b->used = 0;
        b->cap = cap;
        *head = b;
    }
    r = (char *)b + AMK__JHDR + b->used;
    b->used += n;
    return r;
}

AMK__FN void amk__jarena_free(amk__jblock *b) {
    while (b) {
        amk__jblock *next = b->next;
        amk__free(b);
        b = next;
    }
}

/* ---- parser state ------------------------------------------------------------------------------ */

/* A finished value waiting for its container to close, with its key when the container is an
   object. */
typedef struct amk__jslot {
    amk__jval v;
    const char *key;
    size_t key_len;
    int key_line, key_col;
} amk__jslot;

/* An open container. key* is the member key read last (objects), waiting for its value. */
typedef struct amk__jframe {
    int is_object;
    int in_value;       /* a child value is being read (so an error path names it) */
    int start;          /* first slot of this container's children */
    int line, col;
    const char *key;
    size_t key_len;
    int key_line, key_col;
} amk__jframe;

typedef struct amk__jp {
    const unsigned char *s;
    size_t len, pos;
    int line;
    size_t line_start;  /* offset of the first byte of the current line */
    int max_depth;
    amk__jblock *arena;
    amk__jslot *slots; int n_slots, cap_slots;
    amk__jframe *frames; int n_frames, cap_frames;
    amk_diag *d;
} amk__jp;

AMK__FN int amk__jp_col(const amk__jp *p, size_t pos) {
    size_t c = pos - p->line_start + 1;
    return c > (size_t)INT_MAX ? INT_MAX : (int)c;
}

/* Appends one JSON Pointer segment (RFC 6901: '~' -> "~0", '/' -> "~1") to path[size]; a path
   that does not fit is cut short. */
AMK__FN void amk__jpath_put(char *path, size_t size, const char *seg, size_t n) {
    size_t len = strlen(path), i;
    if (len + 1 >= size) return;
    path[len++] = '/';
    for (i = 0; i < n && len + 2 < size; i++) {
        char c = seg[i];
        if (c == '~' || c == '/') { path[len++] = '~'; path[len++] = c == '~' ? '0' : '1'; }
        else path[len++] = c ? c : '?';
    }
    path[len] = 0;
}
AMK__FN void amk__jpath_put_index(char *path, size_t size, int64_t i) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)i);
    amk__jpath_put(path, size, num, strlen(num));
}

/* Reports a parse error at line:col with a printf message; returns AMK_ERR_PARSE. d->path gets
   the JSON path of the value being read, from the open containers. */
AMK__FN amk_result amk__jp_fail_at(amk__jp *p, int line, int col, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    int i;
    if (!p->d) return AMK_ERR_PARSE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->d->line = line;
    p->d->col = col;
    p->d->path[0] = 0;
    for (i = 0; i < p->n_frames && p->frames[i].in_value; i++) {
        const amk__jframe *f = &p->frames[i];
        if (f->is_object) {
            amk__jpath_put(p->d->path, sizeof p->d->path, f->key, f->key_len);
        } else {
            int next = i + 1 < p->n_frames ? p->frames[i + 1].start : p->n_slots;
            amk__jpath_put_index(p->d->path, sizeof p->d->path, next - f->start);
        }
    }
    return amk__fail(p->d, AMK_ERR_PARSE, "%s", msg);
}
#define AMK__JP_FAIL(p, pos, ...) amk__jp_fail_at((p), (p)->line, amk__jp_col((p), (pos)), __VA_ARGS__)

AMK__FN amk_result amk__jp_oom(amk__jp *p) {
    if (p->d) { p->d->line = p->line; p->d->col = amk__jp_col(p, p->pos); }
    return amk__fail(p->d, AMK_ERR_OUT_OF_MEMORY, "out of memory parsing JSON");
}

AMK__FN amk_result amk__jp_eof(amk__jp *p) { return AMK__JP_FAIL(p, p->len, "unexpected end of input"); }

/* Describes the byte at pos for a message: 'x' for printable ASCII, else its hex code. */
AMK__FN void amk__jp_describe(const amk__jp *p, size_t pos, char *buf, size_t size) {
    unsigned c = p->s[pos];
    if (c >= 0x20 && c < 0x7F) snprintf(buf, size, "character '%c'", (char)c);
    else snprintf(buf, size, "byte 0x%02X", c);
}

AMK__FN void amk__jp_ws(amk__jp *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c == '\n') {
            if (p->line < INT_MAX) p->line++;
            p->line_start = p->pos + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        p->pos++;
    }
}

AMK__FN int amk__jp_hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        unsigned c = s[i], h;
        if (c >= '0' && c <= '9') h = c - '0';
        else if (c >= 'a' && c <= 'f') h = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') h = c - 'A' + 10;
        else return 0;
        v = v * 16 + h;
    }
    *out = v;
    return 1;
}


/* Parses the string starting at the '"' at p->pos into a NUL-terminated arena copy. */
AMK__FN amk_result amk__jp_string(amk__jp *p, const char **out, size_t *out_len) {
    const unsigned char *s = p->s;
    size_t q = p->pos + 1, span;
    unsigned char *o, *w;
    /* why: the decoded text is never longer than the raw text up to the closing quote, so one
       exact-size allocation suffices; this scan only sizes it, the loop below validates. */
    while (q < p->len && s[q] != '"') q += s[q] == '\\' ? 2 : 1;
    span = (q < p->len ? q : p->len) - p->pos;
    w = o = (unsigned char *)amk__jarena_alloc(&p->arena, span + 1);
    if (!o) return amk__jp_oom(p);
    q = p->pos + 1;
    for (;;) {
        unsigned c;
        if (q >= p->len) return AMK__JP_FAIL(p, p->len, "unexpected end of input in a string");
        c = s[q];
        if (c == '"') break;
        if (c < 0x20) return AMK__JP_FAIL(p, q, "control character 0x%02X in a string (must be escaped)", c);
        if (c == '\\') {
            unsigned cp;
            if (q + 1 >= p->len) return AMK__JP_FAIL(p, p->len, "unexpected end of input in a string");
            switch (s[q + 1]) {
            case '"': *w++ = '"'; q += 2; continue;
            case '\\': *w++ = '\\'; q += 2; continue;
            case '/': *w++ = '/'; q += 2; continue;
            case 'b': *w++ = '\b'; q += 2; continue;
            case 'f': *w++ = '\f'; q += 2; continue;
            case 'n': *w++ = '\n'; q += 2; continue;
            case 'r': *w++ = '\r'; q += 2; continue;
            case 't': *w++ = '\t'; q += 2; continue;
            case 'u': break;
            default: {
                char what[32];
                amk__jp_describe(p, q + 1, what, sizeof what);
                return AMK__JP_FAIL(p, q, "invalid escape: backslash followed by %s", what);
            }
            }
            if (p->len - q < 6 || !amk__jp_hex4(s + q + 2, &cp))
                return AMK__JP_FAIL(p, q, "\\u must be followed by 4 hex digits");
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return AMK__JP_FAIL(p, q, "lone low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->len - q < 12 || s[q + 6] != '\\' || s[q + 7] != 'u' || !amk__jp_hex4(s + q + 8, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return AMK__JP_FAIL(p, q, "lone high surrogate \\u%04X (a low surrogate escape must follow)", cp);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
            }
            w += amk__utf8_put(w, cp);
            q += 6;
        } else if (c < 0x80) {
            *w++ = (unsigned char)c;
            q++;
        } else {
            int n = amk__utf8_seq_len(s + q, p->len - q);
            if (!n) return AMK__JP_FAIL(p, q, "invalid UTF-8 in a string");
            memcpy(w, s + q, (size_t)n);
            w += n;
            q += (size_t)n;
        }
    }
    *w = 0;
    *out = (const char *)o;
    *out_len = (size_t)(w - o);
    p->pos = q + 1;
    return AMK_OK;
}

/* Converts the number text s[start..end) (already checked against the JSON grammar) to a double
   independently of the process locale: the '.' is removed and the exponent adjusted, so strtod
   only sees digits and an exponent ("12.5e3" -> "125e2"). 0 if it overflows to infinity. */
AMK__FN int amk__jp_number_value(const unsigned char *s, size_t start, size_t end, double *out) {
    char small[96], *buf = small;
    size_t i = start, n = 0, cap = end - start + 32;
    int64_t exp10 = 0, n_frac = 0, e = 0;
    int eneg = 0, ok;
    double v;
    if (cap > sizeof small) {
        buf = (char *)amk__malloc(cap);
        if (!buf) return -1;
    }
    if (s[i] == '-') buf[n++] = s[i++];
    while (i < end && s[i] >= '0' && s[i] <= '9') buf[n++] = (char)s[i++];
    if (i < end && s[i] == '.') {
        i++;
        while (i < end && s[i] >= '0' && s[i] <= '9') {
            buf[n++] = (char)s[i++];
            n_frac++;
        }
    }
    if (i < end && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < end && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        /* why: saturate; past 10^9 the value is 0 or infinity unless the mantissa itself is
           about a gigabyte of digits */
        while (i < end) {
            if (e < 1000000000) e = e * 10 + (s[i] - '0');
            i++;
        }
    }
    exp10 = (eneg ? -e : e) - n_frac;
    snprintf(buf + n, cap - n, "e%lld", (long long)exp10);
    v = strtod(buf, NULL);
    ok = v <= DBL_MAX && v >= -DBL_MAX;
    if (buf != small) amk__free(buf);
    *out = v;
    return ok;
}

/* Whether the text at pos spells NaN or Infinity (for a precise message). */
AMK__FN int amk__jp_is_nonfinite(const amk__jp *p, size_t pos) {
    size_t avail = p->len - pos;
    return (avail >= 3 && memcmp(p->s + pos, "NaN", 3) == 0) ||
           (avail >= 8 && memcmp(p->s + pos, "Infinity", 8) == 0);
}

/* Parses the number at p->pos into v (INT when integral and within int64, else REAL). */
AMK__FN amk_result amk__jp_number(amk__jp *p, amk__jval *v) {
    const unsigned char *s = p->s;
    size_t start = p->pos, i = p->pos;
    int neg = 0, integral = 1, overflow = 0, cv;
    int64_t acc = 0;
    if (s[i] == '-') { neg = 1; i++; }
    if (i >= p->len) return amk__jp_eof(p);
    if (s[i] == '0') {
        i++;
        if (i < p->len && s[i] >= '0' && s[i] <= '9')
            return AMK__JP_FAIL(p, start, "leading zeros are not allowed in a number");
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < p->len && s[i] >= '0' && s[i] <= '9') {
            int dg = s[i] - '0';
            if (!overflow) {
                /* accumulate negatives toward INT64_MIN so -9223372036854775808 is an INT */
                if (neg) {
                    if (acc < INT64_MIN / 10 || (acc == INT64_MIN / 10 && dg > 8)) overflow = 1;
                    else acc = acc * 10 - dg;
                } else {
                    if (acc > INT64_MAX / 10 || (acc == INT64_MAX / 10 && dg > 7)) overflow = 1;
                    else acc = acc * 10 + dg;
                }
            }
            i++;
        }
    } else {
        char what[32];
        if (amk__jp_is_nonfinite(p, i)) return AMK__JP_FAIL(p, start, "Infinity and NaN are not valid JSON numbers");
        amk__jp_describe(p, i, what, sizeof what);
        return AMK__JP_FAIL(p, i, "expected a digit after '-', found %s", what);
    }
    if (i < p->len && s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len) return amk__jp_eof(p);
        if (s[i] < '0' || s[i] > '9') return AMK__JP_FAIL(p, i, "expected a digit after '.' in a number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len) return amk__jp_eof(p);
        if (s[i] < '0' || s[i] > '9') return AMK__JP_FAIL(p, i, "expected a digit in the exponent of a number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (integral && !overflow) {
        v->type = AMK__J_INT;
        v->i = acc;
        v->f = (double)acc;
        p->pos = i;
        return AMK_OK;
    }
    cv = amk__jp_number_value(s, start, i, &v->f);
    if (cv < 0) return amk__jp_oom(p);
    if (!cv) return AMK__JP_FAIL(p, start, "number out of range of a double");
    v->type = AMK__J_REAL;
    v->big = integral; /* an integer literal outside int64 */
    p->pos = i;
    return AMK_OK;
}

AMK__FN amk_result amk__jp_literal(amk__jp *p, const char *word, size_t n) {
    size_t avail = p->len - p->pos;
    if (memcmp(p->s + p->pos, word, avail < n ? avail : n) != 0)
        return AMK__JP_FAIL(p, p->pos, "invalid literal (expected %s)", word);
    if (avail < n) return amk__jp_eof(p);
    p->pos += n;
    return AMK_OK;
}

/* Parses a scalar value at p->pos (not at end of input). */
AMK__FN amk_result amk__jp_scalar(amk__jp *p, amk__jval *v) {
    unsigned c = p->s[p->pos];
    char what[32];
    switch (c) {
    case '"':
        v->type = AMK__J_STRING;
        return amk__jp_string(p, &v->s, &v->slen);
    case 't': v->type = AMK__J_BOOL; v->i = 1; return amk__jp_literal(p, "true", 4);
    case 'f': v->type = AMK__J_BOOL; v->i = 0; return amk__jp_literal(p, "false", 5);
    case 'n': v->type = AMK__J_NULL; return amk__jp_literal(p, "null", 4);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return amk__jp_number(p, v);
        if (amk__jp_is_nonfinite(p, p->pos))
            return AMK__JP_FAIL(p, p->pos, "Infinity and NaN are not valid JSON numbers");
        if (c == 0xEF && p->len - p->pos >= 3 && p->s[p->pos + 1] == 0xBB && p->s[p->pos + 2] == 0xBF)
            return AMK__JP_FAIL(p, p->pos, "a UTF-8 byte order mark is not allowed");
        if (c == '/') return AMK__JP_FAIL(p, p->pos, "comments are not allowed in JSON");
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected a value, found %s", what);
    }
}

/* Reads `"key" :` of an object member into the top frame. */
AMK__FN amk_result amk__jp_key(amk__jp *p, int after_comma) {
    amk__jframe *f = &p->frames[p->n_frames - 1];
    amk_result r;
    char what[32];
    amk__jp_ws(p);
    if (p->pos >= p->len) return amk__jp_eof(p);
    if (p->s[p->pos] != '"') {
        if (after_comma && p->s[p->pos] == '}') return AMK__JP_FAIL(p, p->pos, "trailing comma before '}'");
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected a string key, found %s", what);
    }
    f->key_line = p->line;
    f->key_col = amk__jp_col(p, p->pos);
    r = amk__jp_string(p, &f->key, &f->key_len);
    if (r != AMK_OK) return r;
    f->in_value = 1;
    amk__jp_ws(p);
    if (p->pos >= p->len) return amk__jp_eof(p);
    if (p->s[p->pos] != ':') {
        amk__jp_describe(p, p->pos, what, sizeof what);
        return AMK__JP_FAIL(p, p->pos, "expected ':' after an object key, found %s", what);
    }
    p->pos++;
    return AMK_OK;
}

typedef struct amk__jkey { const char *s; size_t len; int idx; } amk__jkey;

AMK__FN int amk__jkey_cmp(const void *a, const void *b) {
    const amk__jkey *x = (const amk__jkey *)a, *y = (const amk__jkey *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->s, y->s, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Index (in document order) of the first member whose key repeats an earlier one, -1 if none,
   -2 on out of memory. O(n log n): tokenizer.json has objects with 50k keys. */
AMK__FN int amk__jp_find_dup(const amk__jslot *m, int n) {
    amk__jkey *k;
    int i, j, first = -1;
    if (n <= 8) { /* why: pairwise is cheaper than sorting for the objects programs are made of */
        for (i = 1; i < n; i++)
            for (j = 0; j < i; j++)
                if (m[i].key_len == m[j].key_len && memcmp(m[i].key, m[j].key, m[i].key_len) == 0) return i;
        return -1;
    }
    k = (amk__jkey *)amk__malloc((size_t)n * sizeof(amk__jkey));
    if (!k) return -2;
    for (i = 0; i < n; i++) { k[i].s = m[i].key; k[i].len = m[i].key_len; k[i].idx = i; }
    qsort(k, (size_t)n, sizeof(amk__jkey), amk__jkey_cmp);
    for (i = 1; i < n; i++)
        if (k[i].len == k[i - 1].len && memcmp(k[i].s, k[i - 1].s, k[i].len) == 0 && (first < 0 || k[i].idx < first))
            first = k[i].idx;
    amk__free(k);
    return first;
}

/* Closes the top container: moves its children from the slot stack into the arena. */
AMK__FN amk_result amk__jp_close(amk__jp *p, amk__jval *v) {
    amk__jframe *f = &p->frames[p->n_frames - 1];
    int n = p->n_slots - f->start, i;
    amk__jslot *m = n ? p->slots + f->start : NULL;
    memset(v, 0, sizeof *v);
    v->type = f->is_object ? AMK__J_OBJECT : AMK__J_ARRAY;
    v->line = f->line;
    v->col = f->col;
    v->n = n;
    if (n) {
        v->items = (amk__jval *)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(amk__jval));
        if (!v->items) return amk__jp_oom(p);
        for (i = 0; i < n; i++) v->items[i] = m[i].v;
    }
    if (f->is_object && n) {
        int dup = amk__jp_find_dup(m, n);
        if (dup == -2) return amk__jp_oom(p);
        if (dup >= 0) {
            char name[48]; /* why: enough to recognise a key; longer ones end in "..." */
            size_t k, kn = m[dup].key_len < sizeof name - 1 ? m[dup].key_len : sizeof name - 1;
            for (k = 0; k < kn; k++) {
                unsigned char c = (unsigned char)m[dup].key[k];
                name[k] = (char)(c < 0x20 || c == 0x7F ? '?' : c);
            }
            name[kn] = 0;
            f->key = m[dup].key; /* the error path names the duplicate member */
            f->key_len = m[dup].key_len;
            f->in_value = 1;
            return amk__jp_fail_at(p, m[dup].key_line, m[dup].key_col, "duplicate key \"%s%s\"", name,
                                   kn < m[dup].key_len ? "..." : "");
        }
        v->keys = (const char **)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(const char *));
        v->key_lens = (size_t *)amk__jarena_alloc(&p->arena, (size_t)n * sizeof(size_t));
        if (!v->keys || !v->key_lens) return amk__jp_oom(p);
        for (i = 0; i < n; i++) { v->keys[i] = m[i].key; v->key_lens[i] = m[i].key_len; }
    }
    p->n_slots = f->start;
    p->n_frames--;
    return AMK_OK;
}

/* The whole document: values, then after each value either the end of its container, a comma,
   or (at top level) the end of input. */
AMK__FN amk_result amk__jp_run(amk__jp *p, amk__jval *root) {
    amk_result r;
    for (;;) {
        amk__jval v;
        unsigned c;
        memset(&v, 0, sizeof v);
        amk__jp_ws(p);
        if (p->pos >= p->len) return amk__jp_eof(p);
        c = p->s[p->pos];
        v.line = p->line;
        v.col = amk__jp_col(p, p->pos);
        if (c == '[' || c == '{') {
            amk__jframe *f;
            if (p->n_frames >= p->max_depth)
                return AMK__JP_FAIL(p, p->pos, "nesting deeper than %d", p->max_depth);
            if (!amk__grow((void **)&p->frames, &p->cap_frames, p->n_frames + 1, sizeof(amk__jframe)))
                return amk__jp_oom(p);
            f = &p->frames[p->n_frames++];
            memset(f, 0, sizeof *f);
            f->is_object = c == '{';
            f->start = p->n_slots;
            f->line = v.line;
            f->col = v.col;
            p->pos++;
            amk__jp_ws(p);
            if (p->pos < p->len && p->s[p->pos] == (c == '{' ? '}' : ']')) {
                p->pos++;
                r = amk__jp_close(p, &v);
                if (r != AMK_OK) return r;
            } else {
                f->in_value = !f->is_object;
                if (f->is_object && (r = amk__jp_key(p, 0)) != AMK_OK) return r;
                continue;
            }
        } else {
            r = amk__jp_scalar(p, &v);
            if (r != AMK_OK) return r;
        }
        /* v is complete: hand it to its container, closing containers as they end */
        for (;;) {
            amk__jframe *f;
            amk__jslot *sl;
            char what[32];
            if (p->n_frames == 0) {
                amk__jp_ws(p);
                if (p->pos < p->len) {
                    amk__jp_describe(p, p->pos, what, sizeof what);
                    return AMK__JP_FAIL(p, p->pos, "unexpected %s after the JSON value", what);
                }
                *root = v;
                return AMK_OK;
            }
            f = &p->frames[p->n_frames - 1];
            if (!amk__grow((void **)&p->slots, &p->cap_slots, p->n_slots + 1, sizeof(amk__jslot)))
                return amk__jp_oom(p);
            sl = &p->slots[p->n_slots++];
            sl->v = v;
            sl->key = f->key;
            sl->key_len = f->key_len;
            sl->key_line = f->key_line;
            sl->key_col = f->key_col;
            f->in_value = 0;
            amk__jp_ws(p);
            if (p->pos >= p->len) return amk__jp_eof(p);
            c = p->s[p->pos];
            if (c == ',') {
                p->pos++;
                if (f->is_object) {
                    if ((r = amk__jp_key(p, 1)) != AMK_OK) return r;
                } else {
                    amk__jp_ws(p);
                    if (p->pos < p->len && p->s[p->pos] == ']')
                        return AMK__JP_FAIL(p, p->pos, "trailing comma before ']'");
                    f->in_value = 1;
                }
                break;
            }
            if (c != (f->is_object ? '}' : ']')) {
                amk__jp_describe(p, p->pos, what, sizeof what);
                return AMK__JP_FAIL(p, p->pos, "expected ',' or '%c' after %s, found %s", f->is_object ? '}' : ']',
                                    f->is_object ? "object member" : "array element", what);
            }
            p->pos++;
            if ((r = amk__jp_close(p, &v)) != AMK_OK) return r;
        }
    }
}

AMK__FN amk_result amk__json_parse(const char *text, size_t len, int max_depth, amk__jdoc *doc,
                                  amk_diag *d) {
    amk__jp p;
    amk__jval root;
    amk_result r;
    doc->root = NULL;
    doc->arena = NULL;
    if (!text && len) return amk__fail(d, AMK_ERR_INVALID_ARG, "JSON text is NULL");
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)(text ? text : "");
    p.len = len;
    p.line = 1;
    p.max_depth = max_depth < 0 ? 0 : max_depth;
    p.d = d;
    memset(&root, 0, sizeof root);
    r = amk__jp_run(&p, &root);
    amk__free(p.slots);
    amk__free(p.frames);
    if (r == AMK_OK) {
        doc->root = (amk__jval *)amk__jarena_alloc(&p.arena, sizeof(amk__jval));
        if (!doc->root) r = amk__jp_oom(&p);
        else *doc->root = root;
    }
    if (r != AMK_OK) {
        amk__jarena_free(p.arena);
        doc->root = NULL;
        return r;
    }
    doc->arena = p.arena;
    return AMK_OK;
}

AMK__FN void amk__json_free(amk__jdoc *doc) {
    if (!doc) return;
    amk__jarena_free((amk__jblock *)doc->arena);
    doc->arena = NULL;
    doc->root = NULL;
}

AMK__FN const amk__jval *amk__json_get(const amk__jval *obj, const char *key) {
    size_t n;
    int i;
    if (!obj || obj->type != AMK__J_OBJECT || !key) return NULL;
    n = strlen(key);
    for (i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
    return NULL;
}

AMK__FN void amk__json_put_string(amk__sb *sb, const char *s, size_t len) {
    size_t i, run = 0;
    amk__sb_putc(sb, '"');
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\t') esc = "\\t";
        else if (c == '\r') esc = "\\r";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        if (!esc) { run++; continue; }
        if (run) amk__sb_putn(sb, s + i - run, run); /* the plain bytes before this one */
        run = 0;
        amk__sb_puts(sb, esc);
    }
    if (run) amk__sb_putn(sb, s + len - run, run);
    amk__sb_putc(sb, '"');
}


/* Writes v as JSON; spaced puts ", " and ": " between items (the program file's style),
   otherwise the output is compact. */
AMK__FN void amk__json_put_value_sep(amk__sb *sb, const amk__jval *v, int spaced) {
    const char *comma = spaced ? ", " : ",", *colon = spaced ? ": " : ":";
    char num[40];
    int i;
    switch (v->type) {
    case AMK__J_NULL: amk__sb_puts(sb, "null"); break;
    case AMK__J_BOOL: amk__sb_puts(sb, v->i ? "true" : "false"); break;
    case AMK__J_INT: amk__sb_printf(sb, "%lld", (long long)v->i); break;
    case AMK__J_REAL: amk__fmt_double(num, sizeof num, v->f); amk__sb_puts(sb, num); break;
    case AMK__J_STRING: amk__json_put_string(sb, v->s, v->slen); break;
    case AMK__J_ARRAY:
        amk__sb_putc(sb, '[');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_puts(sb, comma);
            amk__json_put_value_sep(sb, &v->items[i], spaced);
        }
        amk__sb_putc(sb, ']');
        break;
    case AMK__J_OBJECT:
        amk__sb_putc(sb, '{');
        for (i = 0; i < v->n; i++) {
            if (i) amk__sb_puts(sb, comma);
            amk__json_put_string(sb, v->keys[i], v->key_lens[i]);
            amk__sb_puts(sb, colon);
            amk__json_put_value_sep(sb, &v->items[i], spaced);
        }
        amk__sb_putc(sb, '}');
        break;
    }
}

AMK__FN void amk__json_put_value(amk__sb *sb, const amk__jval *v) { amk__json_put_value_sep(sb, v, 0); }

/* ==== program JSON (spec §6) =================================================================== */

/* why: 2^24 buffers, counters, tasks or pages is far beyond any model (Llama-3-70B lowers to about
   10^5 tasks) and keeps every count comfortably inside int. */
#define AMK__JSON_MAX_ITEMS (1 << 24)

/* Loader state: the diag and the JSON path of the value being read. */
typedef struct amk__jl {
    amk_diag *d;
    char path[sizeof(((amk_diag *)0)->path)];
} amk__jl;

AMK__FN size_t amk__jl_key(amk__jl *L, const char *key) {
    size_t old = strlen(L->path);
    amk__jpath_put(L->path, sizeof L->path, key, strlen(key));
    return old;
}
AMK__FN size_t amk__jl_idx(amk__jl *L, int64_t i) {
    size_t old = strlen(L->path);
    amk__jpath_put_index(L->path, sizeof L->path, i);
    return old;
}
AMK__FN void amk__jl_pop(amk__jl *L, size_t old) { L->path[old] = 0; }
/* Extends the path with the key of member i of obj. */
AMK__FN size_t amk__jl_member_key(amk__jl *L, const amk__jval *obj, int i) {
    size_t old = strlen(L->path);
    amk__jpath_put(L->path, sizeof L->path, obj->keys[i], obj->key_lens[i]);
    return old;
}

/* Reports an error about value `at` (its line:col) at the current path. */
AMK__FN amk_result amk__jl_fail(amk__jl *L, const amk__jval *at, amk_result r, const char *fmt, ...) {
    char msg[sizeof(((amk_diag *)0)->message)];
    va_list ap;
    if (!L->d) return r;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->d->line = at ? at->line : 0;
    L->d->col = at ? at->col : 0;
    memcpy(L->d->path, L->path, sizeof L->path);
    return amk__fail(L->d, r, "%s", msg);
}

AMK__FN amk_result amk__jl_oom(amk__jl *L, const amk__jval *at) {
    return amk__jl_fail(L, at, AMK_ERR_OUT_OF_MEMORY, "out of memory loading the program");
}

AMK__FN const char *amk__jl_tname(const amk__jval *v) {
    switch (v->type) {
    case AMK__J_NULL: return "null";
    case AMK__J_BOOL: return "a boolean";
    case AMK__J_INT: return "an integer";
    case AMK__J_REAL: return v->big ? "an integer outside int64" : "a real number";
    case AMK__J_STRING: return "a string";
    case AMK__J_ARRAY: return "an array";
    default: return "an object";
    }
}

AMK__FN amk_result amk__jl_type(amk__jl *L, const amk__jval *v, amk__jtype t, const char *what) {
    if (v->type == t) return AMK_OK;
    return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected %s, found %s", what, amk__jl_tname(v));
}

/* An integer in [lo, hi] (a bool, a real such as 2.0 or a string is never an integer). */
AMK__FN amk_result amk__jl_int_value(amk__jl *L, const amk__jval *v, int64_t lo, int64_t hi, int64_t *out) {
    amk_result r = amk__jl_type(L, v, AMK__J_INT, "an integer");
    if (r != AMK_OK) return r;
    if (v->i < lo || v->i > hi)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected an integer in [%lld, %lld], found %lld",
                            (long long)lo, (long long)hi, (long long)v->i);
    *out = v->i;
    return AMK_OK;
}

/* Looks up obj[key] and extends the path with key. NULL when absent: an error if required (the
   caller then returns *r), otherwise the path is restored. */
AMK__FN const amk__jval *amk__jl_member(amk__jl *L, const amk__jval *obj, const char *key, int required,
                                      size_t *old, amk_result *r) {
    const amk__jval *v = amk__json_get(obj, key);
    *old = amk__jl_key(L, key);
    *r = AMK_OK;
    if (v) return v;
    if (required) *r = amk__jl_fail(L, obj, AMK_ERR_PARSE, "missing required key \"%s\"", key);
    else amk__jl_pop(L, *old);
    return NULL;
}

/* obj[key] as an integer in [lo, hi]; *out keeps its value when an optional key is absent. */
AMK__FN amk_result amk__jl_int(amk__jl *L, const amk__jval *obj, const char *key, int required, int64_t lo,
                              int64_t hi, int64_t *out) {
    size_t old;
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_int_value(L, v, lo, hi, out)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    return AMK_OK;
}
AMK__FN amk_result amk__jl_int32(amk__jl *L, const amk__jval *obj, const char *key, int required, int64_t lo,
                                int64_t hi, int *out) {
    int64_t v = *out;
    amk_result r = amk__jl_int(L, obj, key, required, lo, hi, &v);
    *out = (int)v;
    return r;
}

/* A string value without embedded NUL (the library keeps C strings). */
AMK__FN amk_result amk__jl_str_value(amk__jl *L, const amk__jval *v) {
    amk_result r = amk__jl_type(L, v, AMK__J_STRING, "a string");
    if (r != AMK_OK) return r;
    if (strlen(v->s) != v->slen) return amk__jl_fail(L, v, AMK_ERR_PARSE, "a string here must not contain \\u0000");
    return AMK_OK;
}

/* A heap copy of the key of member i of obj (keys become C strings, so no embedded NUL). */
AMK__FN amk_result amk__jl_key_copy(amk__jl *L, const amk__jval *obj, int i, char **out) {
    if (strlen(obj->keys[i]) != obj->key_lens[i])
        return amk__jl_fail(L, &obj->items[i], AMK_ERR_PARSE, "a key here must not contain \\u0000");
    if (!(*out = amk__strndup(obj->keys[i], obj->key_lens[i]))) return amk__jl_oom(L, obj);
    return AMK_OK;
}

/* obj[key] as a new heap string (nullable: JSON null gives NULL). *out keeps its value when an
   optional key is absent; a replaced value is freed. */
AMK__FN amk_result amk__jl_str(amk__jl *L, const amk__jval *obj, const char *key, int required, int nullable,
                              char **out) {
    size_t old;
    amk_result r;
    char *s = NULL;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if (!(nullable && v->type == AMK__J_NULL)) {
        if (v->type != AMK__J_STRING)
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected a string%s, found %s", nullable ? " or null" : "",
                                amk__jl_tname(v));
        if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
        if (!(s = amk__strndup(v->s, v->slen))) return amk__jl_oom(L, v);
    }
    amk__free(*out);
    *out = s;
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* obj[key] as one of names[0..n) (an enum by name); *out keeps its value when absent. */
AMK__FN amk_result amk__jl_enum(amk__jl *L, const amk__jval *obj, const char *key, int required,
                               const char *const *names, int n, int *out) {
    size_t old;
    amk_result r;
    int i;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
    for (i = 0; i < n; i++)
        if (strcmp(names[i], v->s) == 0) {
            *out = i;
            amk__jl_pop(L, old);
            return AMK_OK;
        }
    {
        char expect[160] = "";
        for (i = 0; i < n; i++) {
            size_t len = strlen(expect);
            snprintf(expect + len, sizeof expect - len, "%s%s", i ? ", " : "", names[i]);
        }
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "unknown %s \"%.64s\" (expected one of %s)", key, v->s, expect);
    }
}

/* Fails on a member of obj whose key is not in keys (NULL-terminated). */
AMK__FN amk_result amk__jl_known(amk__jl *L, const amk__jval *obj, const char *const *keys, const char *what) {
    int i, k;
    for (i = 0; i < obj->n; i++) {
        for (k = 0; keys[k]; k++)
            if (strlen(keys[k]) == obj->key_lens[i] && memcmp(keys[k], obj->keys[i], obj->key_lens[i]) == 0) break;
        if (!keys[k]) {
            amk__jl_member_key(L, obj, i);
            return amk__jl_fail(L, &obj->items[i], AMK_ERR_PARSE, "unknown key \"%.64s\" in %s", obj->keys[i], what);
        }
    }
    return AMK_OK;
}

/* Reads obj["id"] as a unique id in [0, n) (seen marks the ids taken). */
AMK__FN amk_result amk__jl_id(amk__jl *L, const amk__jval *obj, int n, amk__word *seen, const char *what,
                             int *out) {
    size_t old;
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, "id", 1, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer")) != AMK_OK) return r;
    if (v->i < 0 || v->i >= n)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "%s id %lld is out of range: ids are 0..%d", what, (long long)v->i,
                            n - 1);
    if (amk__bit_get(seen, (size_t)v->i))
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "duplicate %s id %lld", what, (long long)v->i);
    amk__bit_set(seen, (size_t)v->i);
    *out = (int)v->i;
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* Checks an array's length against the cap and allocates n zeroed elements (NULL for n == 0). */
AMK__FN amk_result amk__jl_alloc(amk__jl *L, const amk__jval *arr, const char *what, size_t elem, void **out) {
    *out = NULL;
    if (arr->n > AMK__JSON_MAX_ITEMS)
        return amk__jl_fail(L, arr, AMK_ERR_PARSE, "too many %s (%d, the limit is %d)", what, arr->n,
                            AMK__JSON_MAX_ITEMS);
    if (arr->n && !(*out = amk__calloc((size_t)arr->n, elem))) return amk__jl_oom(L, arr);
    return AMK_OK;
}

/* One of the program's id-keyed tables (buffers, counters, tasks, pages): its arr->n elements
   allocated into *out, and *seen a zeroed bit per id (amk__jl_id marks them). */
AMK__FN amk_result amk__jl_table(amk__jl *L, const amk__jval *arr, const char *what, size_t elem, void **out,
                                amk__word **seen) {
    amk_result r;
    *seen = NULL;
    if ((r = amk__jl_alloc(L, arr, what, elem, out)) != AMK_OK) return r;
    if (!(*seen = (amk__word *)amk__calloc(AMK__WORDS(arr->n) + 1, sizeof(amk__word)))) return amk__jl_oom(L, arr);
    return AMK_OK;
}

/* An array of ids, each in [0, n) (what names them in messages). */
AMK__FN amk_result amk__jl_refs(amk__jl *L, const amk__jval *obj, const char *key, int n, const char *what,
                               int **out, int *n_out) {
    size_t old, old2;
    amk_result r;
    int i;
    const amk__jval *v = amk__jl_member(L, obj, key, 1, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of ids")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, what, sizeof(int), (void **)out)) != AMK_OK) return r;
    *n_out = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *e = &v->items[i];
        old2 = amk__jl_idx(L, i);
        if ((r = amk__jl_type(L, e, AMK__J_INT, "an integer id")) != AMK_OK) return r;
        if (e->i < 0 || e->i >= n)
            return amk__jl_fail(L, e, AMK_ERR_PARSE, "%s id %lld does not exist (there are %d)", what,
                                (long long)e->i, n);
        (*out)[i] = (int)e->i;
        amk__jl_pop(L, old2);
    }
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* A decimal object key naming an id in [0, n) ("0", "17"; no sign, no leading zeros). */
AMK__FN int amk__jl_key_id(const char *s, size_t len, int64_t n, int64_t *out) {
    int64_t v = 0;
    size_t i;
    /* why: 10 digits exceed every id bound (2^31) without overflowing int64 */
    if (len == 0 || len > 10 || (len > 1 && s[0] == '0')) return 0;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v >= n) return 0;
    *out = v;
    return 1;
}

static const char *const amk__jl_buffer_keys[] = {"id", "name", "kind", "dtype", "shape", "space", "source", NULL};
static const char *const amk__jl_counter_keys[] = {"id", "init", "note", NULL};
static const char *const amk__jl_task_keys[] = {"id", "op", "inputs", "outputs", "out_counter", "waits", "params",
                                               "sm", "est_bytes", "est_flops", "label", NULL};
static const char *const amk__jl_wait_keys[] = {"counter", "threshold", NULL};
static const char *const amk__jl_pages_keys[] = {"buffer_to_page", "pages", NULL};
static const char *const amk__jl_page_keys[] = {"id", "space", "nbytes", "live_start", "live_end", NULL};

AMK__FN amk_result amk__jl_buffers(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i, k;
    r = amk__jl_table(L, arr, "buffers", sizeof(amk_buffer), (void **)&p->buffers, &seen);
    if (p->buffers) p->n_buffers = p->cap_buffers = arr->n;
    if (r != AMK_OK) return r;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i], *shape;
        size_t old = amk__jl_idx(L, i), old2;
        amk_buffer *b;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a buffer object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_buffer_keys, "a buffer")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "buffer", &id)) != AMK_OK) break;
        b = &p->buffers[id];
        b->id = id;
        b->space = AMK_SPACE_HBM;
        if ((r = amk__jl_str(L, e, "name", 1, 0, &b->name)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "kind", 1, amk__kind_names, AMK_KIND_COUNT, &b->kind)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "dtype", 1, amk__dtype_names, AMK_DTYPE_COUNT, &b->dtype)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "space", 0, amk__space_names, AMK_SPACE_COUNT, &b->space)) != AMK_OK) break;
        if ((r = amk__jl_str(L, e, "source", 0, 1, &b->source)) != AMK_OK) break;
        if (!(shape = amk__jl_member(L, e, "shape", 1, &old2, &r))) break;
        if ((r = amk__jl_type(L, shape, AMK__J_ARRAY, "a shape array")) != AMK_OK) break;
        if (shape->n > AMK_MAX_RANK) {
            r = amk__jl_fail(L, shape, AMK_ERR_PARSE, "rank %d is above the maximum %d", shape->n, AMK_MAX_RANK);
            break;
        }
        b->rank = shape->n;
        for (k = 0; k < shape->n && r == AMK_OK; k++) {
            size_t old3 = amk__jl_idx(L, k);
            r = amk__jl_int_value(L, &shape->items[k], 0, INT64_MAX, &b->shape[k]);
            if (r == AMK_OK) amk__jl_pop(L, old3);
        }
        if (r != AMK_OK) break;
        if (amk__buffer_nbytes(b) < 0) {
            r = amk__jl_fail(L, shape, AMK_ERR_PARSE, "the shape's element or byte count overflows int64");
            break;
        }
        amk__jl_pop(L, old2);
        amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_counters(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i;
    r = amk__jl_table(L, arr, "counters", sizeof(amk_counter), (void **)&p->counters, &seen);
    if (p->counters) p->n_counters = p->cap_counters = arr->n;
    if (r != AMK_OK) return r;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i];
        size_t old = amk__jl_idx(L, i);
        amk_counter *c;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a counter object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_counter_keys, "a counter")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "counter", &id)) != AMK_OK) break;
        c = &p->counters[id];
        c->id = id;
        /* why: a counter is a uint32 on the device (amk_counter_t) */
        if ((r = amk__jl_int(L, e, "init", 0, 0, 4294967295LL, &c->init)) != AMK_OK) break;
        if ((r = amk__jl_str(L, e, "note", 0, 0, &c->note)) != AMK_OK) break;
        if (!c->note && !(c->note = amk__strdup(""))) { r = amk__jl_oom(L, e); break; }
        amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_params(amk__jl *L, const amk__jval *obj, amk_task *t) {
    amk_result r;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a params object")) != AMK_OK) return r;
    if (!obj->n) return AMK_OK;
    if (!(t->params = (amk_param *)amk__calloc((size_t)obj->n, sizeof(amk_param)))) return amk__jl_oom(L, obj);
    t->n_params = obj->n;
    for (i = 0; i < obj->n; i++) {
        const amk__jval *v = &obj->items[i];
        amk_param *pr = &t->params[i];
        size_t old = amk__jl_member_key(L, obj, i);
        if ((r = amk__jl_key_copy(L, obj, i, &pr->key)) != AMK_OK) return r;
        switch (v->type) {
        case AMK__J_INT: pr->type = AMK_PARAM_INT; pr->i = v->i; pr->f = (double)v->i; break;
        case AMK__J_REAL:
            if (v->big) return amk__jl_fail(L, v, AMK_ERR_PARSE, "integer param outside int64");
            pr->type = AMK_PARAM_REAL; pr->f = v->f; break;
        case AMK__J_BOOL: pr->type = AMK_PARAM_BOOL; pr->i = v->i; break;
        case AMK__J_NULL: pr->type = AMK_PARAM_NULL; break;
        case AMK__J_STRING:
            if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
            pr->type = AMK_PARAM_STRING;
            if (!(pr->s = amk__strndup(v->s, v->slen))) return amk__jl_oom(L, v);
            break;
        default:
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "a param must be a number, boolean, string or null, found %s",
                                amk__jl_tname(v));
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

AMK__FN amk_result amk__jl_task(amk__jl *L, const amk__jval *e, amk_program *p, amk__word *seen, amk_task *t) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    char *op = NULL;
    int i;
    t->sm = -1;
    if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a task object")) != AMK_OK) return r;
    if ((r = amk__jl_known(L, e, amk__jl_task_keys, "a task")) != AMK_OK) return r;
    if ((r = amk__jl_id(L, e, p->n_tasks, seen, "task", &t->id)) != AMK_OK) return r;
    if ((r = amk__jl_str(L, e, "op", 1, 0, &op)) != AMK_OK) return r;
    t->op = amk_op_from_name(op);
    if (t->op < 0) t->op_name = op; /* validate rejects it (OP_UNKNOWN) */
    else amk__free(op);
    if ((r = amk__jl_refs(L, e, "inputs", p->n_buffers, "buffer", &t->inputs, &t->n_inputs)) != AMK_OK) return r;
    if ((r = amk__jl_refs(L, e, "outputs", p->n_buffers, "buffer", &t->outputs, &t->n_outputs)) != AMK_OK) return r;
    if (!(v = amk__jl_member(L, e, "out_counter", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer counter id")) != AMK_OK) return r;
    if (v->i < 0 || v->i >= p->n_counters)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "counter id %lld does not exist (there are %d)", (long long)v->i,
                            p->n_counters);
    t->out_counter = (int)v->i;
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, e, "waits", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of waits")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, v, "waits", sizeof(amk_wait), (void **)&t->waits)) != AMK_OK) return r;
        t->n_waits = v->n;
        for (i = 0; i < v->n; i++) {
            const amk__jval *w = &v->items[i], *c;
            size_t old2 = amk__jl_idx(L, i), old3;
            if ((r = amk__jl_type(L, w, AMK__J_OBJECT, "a wait object {counter, threshold}")) != AMK_OK) return r;
            if ((r = amk__jl_known(L, w, amk__jl_wait_keys, "a wait")) != AMK_OK) return r;
            if (!(c = amk__jl_member(L, w, "counter", 1, &old3, &r))) return r;
            if ((r = amk__jl_type(L, c, AMK__J_INT, "an integer counter id")) != AMK_OK) return r;
            if (c->i < 0 || c->i >= p->n_counters)
                return amk__jl_fail(L, c, AMK_ERR_PARSE, "counter id %lld does not exist (there are %d)",
                                    (long long)c->i, p->n_counters);
            t->waits[i].counter = (int)c->i;
            amk__jl_pop(L, old3);
            /* any int64: validate checks the range (WAIT_UNSATISFIABLE) */
            r = amk__jl_int(L, w, "threshold", 1, INT64_MIN, INT64_MAX, &t->waits[i].threshold);
            if (r != AMK_OK) return r;
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    } else if (r != AMK_OK) {
        return r;
    }
    if ((v = amk__jl_member(L, e, "params", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_params(L, v, t)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, e, "sm", 0, &old, &r)) != NULL) {
        if (v->type != AMK__J_NULL) {
            int64_t sm;
            if (v->type == AMK__J_INT && v->i < 0)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "sm %lld is negative (use null for unassigned)",
                                    (long long)v->i);
            if ((r = amk__jl_int_value(L, v, 0, INT_MAX, &sm)) != AMK_OK) return r;
            t->sm = (int)sm;
        }
        amk__jl_pop(L, old);
    }
    if ((r = amk__jl_int(L, e, "est_bytes", 0, 0, INT64_MAX, &t->est_bytes)) != AMK_OK) return r;
    if ((r = amk__jl_int(L, e, "est_flops", 0, 0, INT64_MAX, &t->est_flops)) != AMK_OK) return r;
    if ((r = amk__jl_str(L, e, "label", 0, 0, &t->label)) != AMK_OK) return r;
    if (!t->label && !(t->label = amk__strdup(""))) return amk__jl_oom(L, e);
    return AMK_OK;
}

AMK__FN amk_result amk__jl_tasks(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i;
    r = amk__jl_table(L, arr, "tasks", sizeof(amk_task), (void **)&p->tasks, &seen);
    if (p->tasks) p->n_tasks = p->cap_tasks = arr->n;
    if (r != AMK_OK) return r;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        size_t old = amk__jl_idx(L, i);
        if ((r = amk__jl_task(L, &arr->items[i], p, seen, &p->tasks[i])) == AMK_OK) amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_pages(amk__jl *L, const amk__jval *obj, amk_program *p) {
    const amk__jval *arr, *map;
    amk__word *seen;
    amk_result r;
    size_t old;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a page allocation object or null")) != AMK_OK) return r;
    if ((r = amk__jl_known(L, obj, amk__jl_pages_keys, "the page allocation")) != AMK_OK) return r;
    if (!(arr = amk__jl_member(L, obj, "pages", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, arr, AMK__J_ARRAY, "an array of pages")) != AMK_OK) return r;
    r = amk__jl_table(L, arr, "pages", sizeof(amk_page), (void **)&p->pages, &seen);
    if (p->pages) p->n_pages = arr->n;
    if (r != AMK_OK) return r;
    p->has_pages = 1;
    if (!(p->buffer_page = (int *)amk__malloc((size_t)p->n_buffers * sizeof(int)))) { amk__free(seen); return amk__jl_oom(L, obj); }
    for (i = 0; i < p->n_buffers; i++) p->buffer_page[i] = -1;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i];
        size_t old2 = amk__jl_idx(L, i);
        amk_page *pg;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a page object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_page_keys, "a page")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "page", &id)) != AMK_OK) break;
        pg = &p->pages[id];
        pg->id = id;
        pg->live_start = pg->live_end = -1;
        if ((r = amk__jl_enum(L, e, "space", 1, amk__space_names, AMK_SPACE_COUNT, &pg->space)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "nbytes", 1, 0, INT64_MAX, &pg->nbytes)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "live_start", 0, -1, INT64_MAX, &pg->live_start)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "live_end", 0, -1, INT64_MAX, &pg->live_end)) != AMK_OK) break;
        amk__jl_pop(L, old2);
    }
    amk__free(seen);
    if (r != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(map = amk__jl_member(L, obj, "buffer_to_page", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, map, AMK__J_OBJECT, "an object {buffer id: page id}")) != AMK_OK) return r;
    for (i = 0; i < map->n; i++) {
        const amk__jval *v = &map->items[i];
        size_t old2 = amk__jl_member_key(L, map, i);
        int64_t b, pg;
        if (!amk__jl_key_id(map->keys[i], map->key_lens[i], p->n_buffers, &b))
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "key \"%.32s\" is not the decimal id of a buffer (there are %d)",
                                map->keys[i], p->n_buffers);
        if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer page id")) != AMK_OK) return r;
        pg = v->i;
        if (pg < 0 || pg >= p->n_pages)
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "page id %lld does not exist (there are %d)", (long long)pg,
                                p->n_pages);
        p->buffer_page[b] = (int)pg;
        amk__jl_pop(L, old2);
    }
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* amk_target's fields in spec order (§5.1): one table drives both reading and writing.
   Types: 's' char array, 'i' int, 'l' int64_t, 'f' double, 'b' int written as true/false. */
typedef struct amk__jfield {
    const char *name;
    char type;
    size_t offset, size;
} amk__jfield;

#define AMK__JT(name, type) {#name, type, offsetof(amk_target, name), sizeof(((amk_target *)0)->name)}
static const amk__jfield amk__jl_target_fields[] = {
    AMK__JT(name, 's'), AMK__JT(sm_arch, 'i'), AMK__JT(num_sms, 'i'), AMK__JT(smem_bytes_per_sm, 'l'),
    AMK__JT(smem_bytes_per_block_optin, 'l'), AMK__JT(regs_per_sm, 'l'), AMK__JT(max_threads_per_sm, 'i'),
    AMK__JT(max_regs_per_thread, 'i'), AMK__JT(l2_bytes, 'l'), AMK__JT(hbm_bytes, 'l'),
    AMK__JT(hbm_bandwidth_gbs, 'f'), AMK__JT(fp16_tflops, 'f'), AMK__JT(clock_ghz, 'f'),
    AMK__JT(supports_cooperative, 'b'), AMK__JT(wddm_tdr, 'b'), AMK__JT(note, 's')};
#undef AMK__JT
#define AMK__JT_COUNT ((int)(sizeof amk__jl_target_fields / sizeof amk__jl_target_fields[0]))

/* Missing fields are 0 or ""; unknown fields are dropped (forward compatibility, spec §6). */
AMK__FN amk_result amk__jl_target(amk__jl *L, const amk__jval *obj, amk_target *t) {
    amk_result r;
    int k;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a target object or null")) != AMK_OK) return r;
    memset(t, 0, sizeof *t);
    for (k = 0; k < AMK__JT_COUNT; k++) {
        const amk__jfield *f = &amk__jl_target_fields[k];
        const amk__jval *v = amk__json_get(obj, f->name);
        char *dst = (char *)t + f->offset;
        size_t old;
        int64_t iv;
        if (!v) continue;
        old = amk__jl_key(L, f->name);
        switch (f->type) {
        case 's':
            if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
            if (v->slen >= f->size)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "%s is longer than %d bytes", f->name, (int)f->size - 1);
            memcpy(dst, v->s, v->slen + 1);
            break;
        case 'i':
            if ((r = amk__jl_int_value(L, v, INT_MIN, INT_MAX, &iv)) != AMK_OK) return r;
            *(int *)(void *)dst = (int)iv;
            break;
        case 'l':
            if ((r = amk__jl_int_value(L, v, INT64_MIN, INT64_MAX, (int64_t *)(void *)dst)) != AMK_OK) return r;
            break;
        case 'f':
            if (v->type != AMK__J_INT && v->type != AMK__J_REAL)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected a number, found %s", amk__jl_tname(v));
            *(double *)(void *)dst = v->f;
            break;
        default:
            if ((r = amk__jl_type(L, v, AMK__J_BOOL, "true or false")) != AMK_OK) return r;
            *(int *)(void *)dst = (int)v->i;
            break;
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

static const char *const amk__jl_page_alloc_names[] = {"graph_color", "linear", "none"};

/* config.tiling: {archetype: {key: int}}. */
AMK__FN amk_result amk__jl_tiling(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i, j;
    if ((r = amk__jl_type(L, v, AMK__J_OBJECT, "an object {archetype: {key: int}}")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, "tiling archetypes", sizeof(amk_tiling), (void **)&c->tiling)) != AMK_OK) return r;
    c->n_tiling = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *a = &v->items[i];
        amk_tiling *t = &c->tiling[i];
        size_t old = amk__jl_member_key(L, v, i);
        if ((r = amk__jl_key_copy(L, v, i, &t->archetype)) != AMK_OK) return r;
        if ((r = amk__jl_type(L, a, AMK__J_OBJECT, "an object {key: int}")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, a, "tile params", sizeof(amk_tile_param), (void **)&t->items)) != AMK_OK) return r;
        t->n_items = a->n;
        for (j = 0; j < a->n; j++) {
            size_t old2 = amk__jl_member_key(L, a, j);
            if ((r = amk__jl_key_copy(L, a, j, &t->items[j].key)) != AMK_OK) return r;
            r = amk__jl_int_value(L, &a->items[j], INT64_MIN, INT64_MAX, &t->items[j].value);
            if (r != AMK_OK) return r;
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* config.fusion_grouping: [[op name, ...], ...]. */
AMK__FN amk_result amk__jl_fusion(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i, j;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of arrays of op names")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, "fusion groups", sizeof(amk_fusion_group), (void **)&c->fusion)) != AMK_OK) return r;
    c->n_fusion = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *g = &v->items[i];
        amk_fusion_group *fg = &c->fusion[i];
        size_t old = amk__jl_idx(L, i);
        if ((r = amk__jl_type(L, g, AMK__J_ARRAY, "an array of op names")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, g, "op names", sizeof(char *), (void **)&fg->names)) != AMK_OK) return r;
        fg->n_names = g->n;
        for (j = 0; j < g->n; j++) {
            size_t old2 = amk__jl_idx(L, j);
            if ((r = amk__jl_str_value(L, &g->items[j])) != AMK_OK) return r;
            if (!(fg->names[j] = amk__strndup(g->items[j].s, g->items[j].slen))) return amk__jl_oom(L, g);
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* config.sm_assignment: "load_balance", "round_robin" or {"<task id>": sm} (spec §5). */
AMK__FN amk_result amk__jl_sm_assignment(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i;
    if (v->type == AMK__J_STRING && strcmp(v->s, "load_balance") == 0 && v->slen == 12) {
        c->sm_assignment = AMK_SM_LOAD_BALANCE;
        return AMK_OK;
    }
    if (v->type == AMK__J_STRING && strcmp(v->s, "round_robin") == 0 && v->slen == 11) {
        c->sm_assignment = AMK_SM_ROUND_ROBIN;
        return AMK_OK;
    }
    if (v->type != AMK__J_OBJECT)
        return amk__jl_fail(L, v, AMK_ERR_PARSE,
                            "expected \"round_robin\", \"load_balance\" or an object {task id: sm}, found %s",
                            v->type == AMK__J_STRING ? "another string" : amk__jl_tname(v));
    c->sm_assignment = AMK_SM_EXPLICIT;
    if ((r = amk__jl_alloc(L, v, "sm_assignment entries", sizeof(int), (void **)&c->explicit_task)) != AMK_OK ||
        (r = amk__jl_alloc(L, v, "sm_assignment entries", sizeof(int), (void **)&c->explicit_sm)) != AMK_OK)
        return r;
    c->n_explicit = v->n;
    for (i = 0; i < v->n; i++) {
        size_t old = amk__jl_member_key(L, v, i);
        int64_t task, sm;
        if (!amk__jl_key_id(v->keys[i], v->key_lens[i], INT_MAX, &task))
            return amk__jl_fail(L, &v->items[i], AMK_ERR_PARSE, "key \"%.32s\" is not a decimal task id", v->keys[i]);
        if ((r = amk__jl_int_value(L, &v->items[i], 0, INT_MAX, &sm)) != AMK_OK) return r;
        c->explicit_task[i] = (int)task;
        c->explicit_sm[i] = (int)sm;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* Missing fields keep amk_config_default's values; unknown fields are dropped. */
AMK__FN amk_result amk__jl_config(amk__jl *L, const amk__jval *obj, amk_config *c) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    int pa = (int)c->page_allocation;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a config object or null")) != AMK_OK) return r;
    if ((v = amk__jl_member(L, obj, "tiling", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_tiling(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, obj, "fusion_grouping", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_fusion(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, obj, "sm_assignment", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_sm_assignment(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    r = amk__jl_int32(L, obj, "pipelining_depth", 0, INT_MIN, INT_MAX, &c->pipelining_depth);
    if (r != AMK_OK) return r;
    if ((r = amk__jl_enum(L, obj, "page_allocation", 0, amk__jl_page_alloc_names, 3, &pa)) != AMK_OK) return r;
    c->page_allocation = (amk_page_allocation)pa;
    r = amk__jl_int32(L, obj, "threads_per_block", 0, INT_MIN, INT_MAX, &c->threads_per_block);
    if (r != AMK_OK) return r;
    return amk__jl_int(L, obj, "smem_bytes_per_block", 0, INT64_MIN, INT64_MAX, &c->smem_bytes_per_block);
}

AMK__FN amk_result amk__jl_meta(amk__jl *L, const amk__jval *obj, amk_program *p) {
    amk_result r;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a meta object")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, obj, "meta keys", sizeof(amk_meta), (void **)&p->meta)) != AMK_OK) return r;
    p->n_meta = p->cap_meta = obj->n;
    for (i = 0; i < obj->n; i++) {
        amk__sb sb;
        size_t old = amk__jl_member_key(L, obj, i);
        if ((r = amk__jl_key_copy(L, obj, i, &p->meta[i].key)) != AMK_OK) return r;
        memset(&sb, 0, sizeof sb);
        amk__json_put_value(&sb, &obj->items[i]);
        if (sb.oom) { amk__sb_free(&sb); return amk__jl_oom(L, obj); }
        p->meta[i].json = sb.p;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* "MAJOR.MINOR.PATCH", each 1-9 decimal digits; 0 if malformed. */
AMK__FN int amk__jl_version(const char *s, size_t len, long *major) {
    size_t i = 0;
    int part;
    long v[3];
    for (part = 0; part < 3; part++) {
        size_t start = i;
        v[part] = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 9) v[part] = v[part] * 10 + (s[i++] - '0');
        if (i == start) return 0;
        if (part < 2) {
            if (i >= len || s[i] != '.') return 0;
            i++;
        }
    }
    if (i != len) return 0;
    *major = v[0];
    return 1;
}

/* An optional member that may be null (= absent): returns it with the path extended, or NULL. */
AMK__FN const amk__jval *amk__jl_nullable(amk__jl *L, const amk__jval *obj, const char *key, size_t *old) {
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, key, 0, old, &r);
    if (v && v->type == AMK__J_NULL) { amk__jl_pop(L, *old); return NULL; }
    return v;
}

AMK__FN amk_result amk__jl_program(amk__jl *L, const amk__jval *root, amk_program *p) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    long major = 0;
    if (root->type != AMK__J_OBJECT)
        return amk__jl_fail(L, root, AMK_ERR_PARSE, "the top level must be a program object, found %s",
                            amk__jl_tname(root));
    /* the version first: a newer major may change everything after it */
    if (!(v = amk__jl_member(L, root, "ir_version", 1, &old, &r))) return r;
    if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
    if (!amk__jl_version(v->s, v->slen, &major))
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "ir_version \"%.32s\" is not of the form MAJOR.MINOR.PATCH", v->s);
    if (major != AMK_IR_VERSION_MAJOR)
        return amk__jl_fail(L, v, AMK_ERR_VERSION, "ir_version %.32s is not supported (this is %s)", v->s,
                            AMK_IR_VERSION);
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, root, "abi_version", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_type(L, v, AMK__J_STRING, "a string")) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if (!(v = amk__jl_member(L, root, "buffers", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of buffers")) != AMK_OK) return r;
    if ((r = amk__jl_buffers(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(v = amk__jl_member(L, root, "counters", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of counters")) != AMK_OK) return r;
    if ((r = amk__jl_counters(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(v = amk__jl_member(L, root, "tasks", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of tasks")) != AMK_OK) return r;
    if ((r = amk__jl_tasks(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, root, "meta", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_meta(L, v, p)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "target", &old)) != NULL) {
        if ((r = amk__jl_target(L, v, &p->target)) != AMK_OK) return r;
        p->has_target = 1;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "pages", &old)) != NULL) {
        if ((r = amk__jl_pages(L, v, p)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "config", &old)) != NULL) {
        if ((r = amk__jl_config(L, v, &p->config)) != AMK_OK) return r;
        p->has_config = 1;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out, amk_diag *d) {
    amk__jdoc doc;
    amk__jl L;
    amk_program *p;
    amk_result r;
    amk_diag_clear(d);
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_json: out is NULL");
    *out = NULL;
    if (!text && len) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_json: text is NULL");
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) return r;
    if (!(p = amk_program_create())) {
        amk__json_free(&doc);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory loading the program");
    }
    memset(&L, 0, sizeof L);
    L.d = d;
    r = amk__jl_program(&L, doc.root, p);
    amk__json_free(&doc);
    if (r != AMK_OK) {
        amk_program_free(p);
        return r;
    }
    *out = p;
    return AMK_OK;
}

AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result r;
    amk_diag_clear(d);
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_file: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_file: path is NULL");
    /* why: mapping refuses what is not a regular file (a directory, a FIFO) before sizing it */
    if ((r = amk__map_file(path, &map, &size, d)) != AMK_OK) return r;
    r = amk_program_load_json((const char *)map, size, out, d);
    amk__unmap_file(map, size);
    if (r != AMK_OK && d) { /* prefix the message with file:line:col (the path stays JSON) */
        char prefix[128];
        size_t pl, ml = strlen(d->message);
        if (d->line) snprintf(prefix, sizeof prefix, "%s:%d:%d: ", path, d->line, d->col);
        else snprintf(prefix, sizeof prefix, "%s: ", path);
        pl = strlen(prefix);
        if (pl + ml + 1 > sizeof d->message) ml = sizeof d->message - pl - 1;
        memmove(d->message + pl, d->message, ml);
        memcpy(d->message, prefix, pl);
        d->message[pl + ml] = 0;
    }
    return r;
}

/* ---- writing ------------------------------------------------------------------------------------ */

/* Writer state. bad is set when p holds something the loader would refuse (a dangling id, an
   enum code without a name, a non-finite real, invalid UTF-8): the writer then fails rather than
   emit a file that does not load. */
typedef struct amk__jw {
    amk__sb sb;
    int bad;
} amk__jw;

AMK__FN void amk__jw_str(amk__jw *w, const char *s) {
    size_t i = 0, n;
    if (!s) s = "";
    n = strlen(s);
    while (i < n) {
        int k = amk__utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k) { w->bad = 1; break; }
        i += (size_t)k;
    }
    amk__json_put_string(&w->sb, s, n);
}

AMK__FN void amk__jw_real(amk__jw *w, double v) {
    char num[40];
    if (!(v <= DBL_MAX && v >= -DBL_MAX)) w->bad = 1;
    amk__fmt_double(num, sizeof num, v);
    amk__sb_puts(&w->sb, num);
}

AMK__FN void amk__jw_i64(amk__jw *w, int64_t v) { amk__sb_printf(&w->sb, "%lld", (long long)v); }

/* A name from a table, or bad for a code outside it. */
AMK__FN void amk__jw_enum(amk__jw *w, const char *const *names, int n, int code) {
    if (code < 0 || code >= n) { w->bad = 1; amk__sb_puts(&w->sb, "null"); return; }
    amk__jw_str(w, names[code]);
}

/* An id that must lie in [0, n). */
AMK__FN void amk__jw_ref(amk__jw *w, int64_t id, int64_t n) {
    if (id < 0 || id >= n) w->bad = 1;
    amk__jw_i64(w, id);
}

AMK__FN void amk__jw_key(amk__jw *w, const char *key) {
    amk__jw_str(w, key);
    amk__sb_puts(&w->sb, ": ");
}

/* A stored meta value, re-read so the file always holds canonical JSON. */
AMK__FN void amk__jw_meta_value(amk__jw *w, const char *json) {
    amk__jdoc doc;
    if (!json || amk__json_parse(json, strlen(json), AMK_JSON_MAX_DEPTH, &doc, NULL) != AMK_OK) {
        w->bad = 1;
        amk__sb_puts(&w->sb, "null");
        return;
    }
    amk__json_put_value_sep(&w->sb, doc.root, 1);
    amk__json_free(&doc);
}

AMK__FN void amk__jw_target(amk__jw *w, const amk_target *t) {
    int k;
    amk__sb_putc(&w->sb, '{');
    for (k = 0; k < AMK__JT_COUNT; k++) {
        const amk__jfield *f = &amk__jl_target_fields[k];
        const char *src = (const char *)t + f->offset;
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, f->name);
        switch (f->type) {
        case 's':
            if (!memchr(src, 0, f->size)) { w->bad = 1; amk__sb_puts(&w->sb, "\"\""); }
            else amk__jw_str(w, src);
            break;
        case 'i': amk__jw_i64(w, *(const int *)(const void *)src); break;
        case 'l': amk__jw_i64(w, *(const int64_t *)(const void *)src); break;
        case 'f': amk__jw_real(w, *(const double *)(const void *)src); break;
        default: amk__sb_puts(&w->sb, *(const int *)(const void *)src ? "true" : "false"); break;
        }
    }
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_buffer(amk__jw *w, const amk_buffer *b, int id) {
    int k;
    amk__sb_printf(&w->sb, "{\"id\": %d, \"name\": ", id);
    amk__jw_str(w, b->name);
    amk__sb_puts(&w->sb, ", \"kind\": ");
    amk__jw_enum(w, amk__kind_names, AMK_KIND_COUNT, b->kind);
    amk__sb_puts(&w->sb, ", \"dtype\": ");
    amk__jw_enum(w, amk__dtype_names, AMK_DTYPE_COUNT, b->dtype);
    amk__sb_puts(&w->sb, ", \"shape\": [");
    if (b->rank < 0 || b->rank > AMK_MAX_RANK || amk__buffer_nbytes(b) < 0) w->bad = 1;
    for (k = 0; k < b->rank && k < AMK_MAX_RANK; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_i64(w, b->shape[k]);
    }
    amk__sb_puts(&w->sb, "], \"space\": ");
    amk__jw_enum(w, amk__space_names, AMK_SPACE_COUNT, b->space);
    amk__sb_puts(&w->sb, ", \"source\": ");
    if (b->source) amk__jw_str(w, b->source);
    else amk__sb_puts(&w->sb, "null");
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_task(amk__jw *w, const amk_program *p, const amk_task *t) {
    int k;
    amk__sb_printf(&w->sb, "{\"id\": %d, \"op\": ", t->id);
    if (amk_op_spec_get(t->op)) amk__jw_str(w, amk_op_name(t->op));
    else if (t->op_name) amk__jw_str(w, t->op_name);
    else { w->bad = 1; amk__sb_puts(&w->sb, "null"); }
    amk__sb_puts(&w->sb, ", \"inputs\": [");
    for (k = 0; k < t->n_inputs; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_ref(w, t->inputs[k], p->n_buffers);
    }
    amk__sb_puts(&w->sb, "], \"outputs\": [");
    for (k = 0; k < t->n_outputs; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_ref(w, t->outputs[k], p->n_buffers);
    }
    amk__sb_puts(&w->sb, "], \"out_counter\": ");
    amk__jw_ref(w, t->out_counter, p->n_counters);
    amk__sb_puts(&w->sb, ", \"waits\": [");
    for (k = 0; k < t->n_waits; k++) {
        amk__sb_puts(&w->sb, k ? ", {\"counter\": " : "{\"counter\": ");
        amk__jw_ref(w, t->waits[k].counter, p->n_counters);
        amk__sb_printf(&w->sb, ", \"threshold\": %lld}", (long long)t->waits[k].threshold);
    }
    amk__sb_puts(&w->sb, "], \"params\": {");
    for (k = 0; k < t->n_params; k++) {
        const amk_param *pr = &t->params[k];
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, pr->key);
        switch (pr->type) {
        case AMK_PARAM_INT: amk__jw_i64(w, pr->i); break;
        case AMK_PARAM_REAL: amk__jw_real(w, pr->f); break;
        case AMK_PARAM_BOOL: amk__sb_puts(&w->sb, pr->i ? "true" : "false"); break;
        case AMK_PARAM_STRING: amk__jw_str(w, pr->s); break;
        case AMK_PARAM_NULL: amk__sb_puts(&w->sb, "null"); break;
        default: w->bad = 1; amk__sb_puts(&w->sb, "null"); break;
        }
    }
    amk__sb_puts(&w->sb, "}, \"sm\": ");
    if (t->sm == -1) amk__sb_puts(&w->sb, "null");
    else amk__jw_ref(w, t->sm, (int64_t)INT_MAX + 1);
    if (t->est_bytes < 0 || t->est_flops < 0) w->bad = 1;
    amk__sb_printf(&w->sb, ", \"est_bytes\": %lld, \"est_flops\": %lld, \"label\": ", (long long)t->est_bytes,
                   (long long)t->est_flops);
    amk__jw_str(w, t->label);
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_pages(amk__jw *w, const amk_program *p) {
    int i, first = 1;
    amk__sb_puts(&w->sb, "{\n    \"buffer_to_page\": {");
    for (i = 0; i < p->n_buffers && p->buffer_page; i++) {
        if (p->buffer_page[i] == -1) continue;
        amk__sb_printf(&w->sb, "%s\"%d\": ", first ? "" : ", ", i);
        amk__jw_ref(w, p->buffer_page[i], p->n_pages);
        first = 0;
    }
    amk__sb_puts(&w->sb, "},\n    \"pages\": [");
    for (i = 0; i < p->n_pages; i++) {
        const amk_page *pg = &p->pages[i];
        amk__sb_printf(&w->sb, "%s\n      {\"id\": %d, \"space\": ", i ? "," : "", i);
        amk__jw_enum(w, amk__space_names, AMK_SPACE_COUNT, pg->space);
        if (pg->nbytes < 0 || pg->live_start < -1 || pg->live_end < -1) w->bad = 1;
        amk__sb_printf(&w->sb, ", \"nbytes\": %lld, \"live_start\": %lld, \"live_end\": %lld}", (long long)pg->nbytes,
                       (long long)pg->live_start, (long long)pg->live_end);
    }
    amk__sb_puts(&w->sb, p->n_pages ? "\n    ]\n  }" : "]\n  }");
}

AMK__FN void amk__jw_config(amk__jw *w, const amk_config *c) {
    int i, j;
    amk__sb_puts(&w->sb, "{\n    \"tiling\": {");
    for (i = 0; i < c->n_tiling; i++) {
        if (i) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, c->tiling[i].archetype);
        amk__sb_putc(&w->sb, '{');
        for (j = 0; j < c->tiling[i].n_items; j++) {
            if (j) amk__sb_puts(&w->sb, ", ");
            amk__jw_key(w, c->tiling[i].items[j].key);
            amk__jw_i64(w, c->tiling[i].items[j].value);
        }
        amk__sb_putc(&w->sb, '}');
    }
    amk__sb_puts(&w->sb, "},\n    \"fusion_grouping\": [");
    for (i = 0; i < c->n_fusion; i++) {
        amk__sb_puts(&w->sb, i ? ", [" : "[");
        for (j = 0; j < c->fusion[i].n_names; j++) {
            if (j) amk__sb_puts(&w->sb, ", ");
            amk__jw_str(w, c->fusion[i].names[j]);
        }
        amk__sb_putc(&w->sb, ']');
    }
    amk__sb_puts(&w->sb, "],\n    \"sm_assignment\": ");
    if (c->sm_assignment == AMK_SM_LOAD_BALANCE) amk__sb_puts(&w->sb, "\"load_balance\"");
    else if (c->sm_assignment == AMK_SM_ROUND_ROBIN) amk__sb_puts(&w->sb, "\"round_robin\"");
    else if (c->sm_assignment == AMK_SM_EXPLICIT) {
        amk__sb_putc(&w->sb, '{');
        for (i = 0; i < c->n_explicit; i++) {
            if (c->explicit_task[i] < 0 || c->explicit_sm[i] < 0) w->bad = 1;
            amk__sb_printf(&w->sb, "%s\"%d\": %d", i ? ", " : "", c->explicit_task[i], c->explicit_sm[i]);
        }
        amk__sb_putc(&w->sb, '}');
    } else {
        w->bad = 1;
        amk__sb_puts(&w->sb, "null");
    }
    amk__sb_printf(&w->sb, ",\n    \"pipelining_depth\": %d,\n    \"page_allocation\": ", c->pipelining_depth);
    amk__jw_enum(w, amk__jl_page_alloc_names, 3, (int)c->page_allocation);
    amk__sb_printf(&w->sb, ",\n    \"threads_per_block\": %d,\n    \"smem_bytes_per_block\": %lld\n  }",
                   c->threads_per_block, (long long)c->smem_bytes_per_block);
}

AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len) {
    amk__jw w;
    amk__word *ids;
    int i;
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!p || !out) return AMK_ERR_INVALID_ARG;
    memset(&w, 0, sizeof w);
    amk__sb_puts(&w.sb, "{\n  \"ir_version\": \"" AMK_IR_VERSION "\",\n  \"abi_version\": \"" AMK_ABI_VERSION
                        "\",\n  \"meta\": {");
    for (i = 0; i < p->n_meta; i++) {
        if (i) amk__sb_puts(&w.sb, ", ");
        amk__jw_key(&w, p->meta[i].key);
        amk__jw_meta_value(&w, p->meta[i].json);
    }
    amk__sb_puts(&w.sb, "},\n  \"target\": ");
    if (p->has_target) amk__jw_target(&w, &p->target);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, ",\n  \"buffers\": [");
    for (i = 0; i < p->n_buffers; i++) {
        amk__sb_puts(&w.sb, i ? ",\n    " : "\n    ");
        amk__jw_buffer(&w, &p->buffers[i], i);
    }
    amk__sb_puts(&w.sb, p->n_buffers ? "\n  ],\n  \"counters\": [" : "],\n  \"counters\": [");
    for (i = 0; i < p->n_counters; i++) {
        const amk_counter *c = &p->counters[i];
        if (c->init < 0 || c->init > 4294967295LL) w.bad = 1;
        amk__sb_printf(&w.sb, "%s{\"id\": %d, \"init\": %lld, \"note\": ", i ? ",\n    " : "\n    ", i,
                       (long long)c->init);
        amk__jw_str(&w, c->note);
        amk__sb_putc(&w.sb, '}');
    }
    amk__sb_puts(&w.sb, p->n_counters ? "\n  ],\n  \"tasks\": [" : "],\n  \"tasks\": [");
    /* task ids must be unique and in [0, n_tasks) to load again */
    ids = (amk__word *)amk__calloc(AMK__WORDS(p->n_tasks) + 1, sizeof(amk__word));
    if (!ids) { amk__sb_free(&w.sb); return AMK_ERR_OUT_OF_MEMORY; }
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        if (t->id < 0 || t->id >= p->n_tasks || amk__bit_get(ids, (size_t)t->id)) w.bad = 1;
        else amk__bit_set(ids, (size_t)t->id);
        amk__sb_puts(&w.sb, i ? ",\n    " : "\n    ");
        amk__jw_task(&w, p, t);
    }
    amk__free(ids);
    amk__sb_puts(&w.sb, p->n_tasks ? "\n  ],\n  \"pages\": " : "],\n  \"pages\": ");
    if (p->has_pages) amk__jw_pages(&w, p);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, ",\n  \"config\": ");
    if (p->has_config) amk__jw_config(&w, &p->config);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, "\n}\n");
    if (w.sb.oom) { amk__sb_free(&w.sb); return AMK_ERR_OUT_OF_MEMORY; }
    if (w.bad) { amk__sb_free(&w.sb); return AMK_ERR_INVALID_ARG; }
    if (out_len) *out_len = w.sb.len;
    *out = w.sb.p;
    return AMK_OK;
}

AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d) {
    char *text;
    size_t len;
    amk_result r;
    amk_diag_clear(d);
    if (!p || !path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_save: NULL argument");
    r = amk_program_write_json(p, &text, &len);
    if (r == AMK_ERR_INVALID_ARG)
        return amk__fail(d, r, "the program holds a value the JSON format cannot express or would not load "
                               "(a dangling id, an unnamed enum code, a non-finite real or invalid UTF-8)");
    if (r != AMK_OK) return amk__fail(d, r, "out of memory writing the program");
    r = amk__write_file(path, text, len, d);
    amk__free(text);
    return r;
}

/* ==== >>impl_opshape: what each opcode accepts (shared by validate and the reference VM) ===== */
/* (part of amk.h's implementation; included once from amk.h)

   One place defines which buffers (shapes, dtypes) and param values each opcode accepts, so the
   validator and the reference VM can never disagree. Buffers are flat row-major arrays of numel
   elements; "last dim" is shape[rank-1] (1 for a rank-0 scalar). Params are read with their
   marshalled defaults (amk_task_marshal_params), exactly what the device sees. */

typedef struct amk__opshape {
    amk_check *which;
    char *msg;
    size_t msg_size;
    const char *op; /* opcode name, the prefix of every message */
} amk__opshape;

/* Records check c and "OP: message" in the caller's slots; returns 0 (the "rejected" value). */
AMK__FN int amk__opshape_fail(const amk__opshape *c, amk_check check, const char *fmt, ...) {
    int n;
    va_list ap;
    if (c->which) *c->which = check;
    if (!c->msg || !c->msg_size) return 0;
    n = snprintf(c->msg, c->msg_size, "%s: ", c->op);
    if (n < 0 || (size_t)n >= c->msg_size) return 0;
    va_start(ap, fmt);
    vsnprintf(c->msg + n, c->msg_size - (size_t)n, fmt, ap);
    va_end(ap);
    return 0;
}

AMK__FN const char *amk__opshape_name(const amk_buffer *b) { return b->name ? b->name : "?"; }
AMK__FN int64_t amk__opshape_last(const amk_buffer *b) { return b->rank ? b->shape[b->rank - 1] : 1; }
/* Token ids and positions: integer dtypes that hold a plain index. */
AMK__FN int amk__opshape_is_index(int dt) {
    return dt == AMK_DTYPE_I32 || dt == AMK_DTYPE_I8 || dt == AMK_DTYPE_U8;
}
/* A real param that converts to a finite float. */
AMK__FN int amk__opshape_finite(double v) { return v == v && fabs(v) <= (double)FLT_MAX; }

/* Checks that task t's buffers (shapes, dtypes) and param values fit its opcode. Precondition:
   every buffer id of t exists, the opcode is defined, the arity and the param types are right;
   these are re-checked defensively (OP_UNKNOWN, OP_ARITY, ABI_CAP, REF_BUFFER, PARAM_TYPE,
   BUFFER_ENUM, BUFFER_SHAPE) so a direct amk_ref_exec call can never read out of bounds.
   Returns 1 if fine; else 0 with *which (OP_SHAPE, OP_DTYPE, PARAM_VALUE or OP_UNSUPPORTED) and a
   message naming the buffers and numbers. */
/* The output of an accumulating op (RMSNORM_MLP, ATTENTION_O), out [M, H] of n_out elements: F32
   (the device adds with F32 atomics) in a kind written during a launch; resid (the op's last input
   when it takes one, or NULL), n_resid elements, a float of out's size. 0 and the failure in c. */
AMK__FN int amk__opshape_accum_out(const amk__opshape *c, const amk_buffer *out, int64_t n_out, int64_t M, int64_t H,
                                   const amk_buffer *resid, int64_t n_resid) {
    int64_t mh;
    if (out->dtype != AMK_DTYPE_F32)
        return amk__opshape_fail(c, AMK_CHECK_OP_DTYPE, "out '%s' accumulates, so it must be F32, not %s",
                                 amk__opshape_name(out), amk_dtype_name(out->dtype));
    if (out->kind != AMK_KIND_ACTIVATION && out->kind != AMK_KIND_IO_OUTPUT)
        return amk__opshape_fail(c, AMK_CHECK_OP_UNSUPPORTED, "out '%s' accumulates, so it must be an "
                                 "ACTIVATION or IO_OUTPUT", amk__opshape_name(out));
    if (!amk__mul_i64(M, H, &mh) || n_out != mh || amk__opshape_last(out) != H)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "out '%s' has %lld elements, needs [M, H] = [%lld, %lld]",
                                 amk__opshape_name(out), (long long)n_out, (long long)M, (long long)H);
    if (resid && (n_resid != mh || !amk_dtype_is_float(resid->dtype)))
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "resid '%s' must be float with %lld elements (out's)",
                                 amk__opshape_name(resid), (long long)mh);
    return 1;
}

/* RoPE's frequency params (ROPE, RMSNORM_GEMV with AMK_GEMV_FLAG_ROPE): 0 and the failure in c. */
AMK__FN int amk__opshape_rope(const amk__opshape *c, const amk_task *t, const amk_params_t *P) {
    double theta = amk__param_f(t, "theta", 10000.0), factor = amk__param_f(t, "rope_factor", 0.0);
    double lo = amk__param_f(t, "rope_low_freq_factor", 1.0);
    double hi = amk__param_f(t, "rope_high_freq_factor", 4.0);
    if (!amk__opshape_finite(theta) || theta <= 0)
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "theta = %g must be finite and > 0", theta);
    if (!amk__opshape_finite(factor))
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "rope_factor = %g must be finite", factor);
    if (factor > 0 && (P->rope_orig_ctx < 1 || !amk__opshape_finite(lo) || !amk__opshape_finite(hi) ||
                       !(lo > 0) || !(lo < hi)))
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "llama3 scaling needs rope_orig_ctx = %d >= 1 "
                                 "and 0 < low_freq_factor = %g < high_freq_factor = %g",
                                 P->rope_orig_ctx, lo, hi);
    return 1;
}

/* A GEMV-family tile's output out [M, N_out] (n_out elements) holds its columns [n_off, end). */
AMK__FN int amk__opshape_tile_out(const amk__opshape *c, const amk_buffer *out, int64_t n_out, int64_t M,
                                  int64_t end) {
    int64_t last = amk__opshape_last(out), v;
    if (last < end)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "out '%s' last dim %lld < n_off+N_tile = %lld",
                                 amk__opshape_name(out), (long long)last, (long long)end);
    if (!amk__mul_i64(M, last, &v) || n_out != v)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "out '%s' has %lld elements, M*N_out = %lld*%lld",
                                 amk__opshape_name(out), (long long)n_out, (long long)M, (long long)last);
    return 1;
}

/* An argmax partials buffer out [rows, 2P] (n_out elements, F32) that holds the pair `part`
   (ARGMAX_PARTIAL's output, RMSNORM_GEMV's with AMK_GEMV_FLAG_ARGMAX). */
AMK__FN int amk__opshape_pairs_out(const amk__opshape *c, const amk_buffer *out, int64_t n_out, int64_t rows,
                                   int part) {
    const int64_t W = amk__opshape_last(out);
    if (out->dtype != AMK_DTYPE_F32)
        return amk__opshape_fail(c, AMK_CHECK_OP_DTYPE, "partials '%s' must be F32, not %s", amk__opshape_name(out),
                                 amk_dtype_name(out->dtype));
    if (out->rank < 1 || W < 2 || W % 2 || n_out / W != rows)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "partials '%s' needs one row per logits row (%lld) of an "
                                 "even number of columns, got %lld elements", amk__opshape_name(out),
                                 (long long)rows, (long long)n_out);
    if (part < 0 || 2 * (int64_t)part + 2 > W)
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "part = %d is not one of the %lld pairs of '%s'", part,
                                 (long long)(W / 2), amk__opshape_name(out));
    return 1;
}

AMK__FN int amk__op_check(const amk_program *p, const amk_task *t, amk_check *which, char *msg,
                          size_t msg_size) {
    amk__opshape c;
    const amk_op_spec *spec;
    const amk_buffer *in[AMK_MAX_INPUTS], *out = NULL, *out2 = NULL; /* the first and second outputs */
    int64_t n_in[AMK_MAX_INPUTS], n_out = 0, n_out2 = 0, v;
    amk_params_t P;
    int i, ni, max_in, quant;
    c.which = which;
    c.msg = msg;
    c.msg_size = msg_size;
    c.op = amk_op_name(t->op);
    if (msg && msg_size) msg[0] = 0;
    for (i = 0; i < AMK_MAX_INPUTS; i++) { in[i] = NULL; n_in[i] = 0; }

#define AMK__OPS_FAIL(check, ...) return amk__opshape_fail(&c, AMK_CHECK_##check, __VA_ARGS__)
    /* ---- the preconditions (validate checks them first) */
    spec = amk_op_spec_get(t->op);
    if (!spec) AMK__OPS_FAIL(OP_UNKNOWN, "opcode %d is not defined", t->op);
    quant = (t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE) &&
            amk_task_param(t, "qdtype") != NULL;
    max_in = quant ? 4 : spec->max_inputs < 0 ? AMK_MAX_INPUTS : spec->max_inputs;
    ni = t->n_inputs;
    if (ni > AMK_MAX_INPUTS || t->n_outputs > AMK_MAX_OUTPUTS)
        AMK__OPS_FAIL(ABI_CAP, "%d inputs, %d outputs exceed the ABI caps (%d/%d)", ni,
                      t->n_outputs, AMK_MAX_INPUTS, AMK_MAX_OUTPUTS);
    if (ni < spec->min_inputs || ni > max_in || (ni && !t->inputs) || (t->n_outputs && !t->outputs) ||
        (spec->n_outputs >= 0 ? t->n_outputs != spec->n_outputs : t->n_outputs < 1)) {
        if (spec->n_outputs < 0) /* the op's own rules below say how many */
            AMK__OPS_FAIL(OP_ARITY, "takes %d..%d inputs and at least 1 output, got %d and %d",
                          spec->min_inputs, max_in, ni, t->n_outputs);
        AMK__OPS_FAIL(OP_ARITY, "takes %d..%d inputs and %d outputs, got %d and %d",
                      spec->min_inputs, max_in, spec->n_outputs, ni, t->n_outputs);
    }
    for (i = 0; i < ni + t->n_outputs; i++) {
        int id = i < ni ? t->inputs[i] : t->outputs[i - ni];
        const amk_buffer *b;
        if (id < 0 || id >= p->n_buffers)
            AMK__OPS_FAIL(REF_BUFFER, "buffer id %d does not exist (%d buffers)", id, p->n_buffers);
        b = &p->buffers[id];
        if (b->dtype < 0 || b->dtype >= AMK_DTYPE_COUNT)
            AMK__OPS_FAIL(BUFFER_ENUM, "buffer %d '%s' has dtype code %d", id,
                          amk__opshape_name(b), b->dtype);
        v = amk__buffer_nbytes(b);
        if (v < 0 || (uint64_t)v > (uint64_t)SIZE_MAX)
            AMK__OPS_FAIL(BUFFER_SHAPE, "buffer %d '%s' has a bad shape or too many bytes", id,
                          amk__opshape_name(b));
        if (i < ni) { in[i] = b; n_in[i] = amk_buffer_numel(b); }
        else if (i == ni) { out = b; n_out = amk_buffer_numel(b); }
        else if (i == ni + 1) { out2 = b; n_out2 = amk_buffer_numel(b); }
    }
    for (i = 0; i < t->n_params; i++) {
        const amk_param *pr = &t->params[i];
        char ty = pr->key ? amk__param_field_type(pr->key) : 0;
        if (ty == 'i' && (pr->type != AMK_PARAM_INT || pr->i < INT32_MIN || pr->i > INT32_MAX))
            AMK__OPS_FAIL(PARAM_TYPE, "param '%s' must be an int32", pr->key);
        if (ty == 'f' && pr->type != AMK_PARAM_REAL && pr->type != AMK_PARAM_INT)
            AMK__OPS_FAIL(PARAM_TYPE, "param '%s' must be a real number", pr->key);
    }
    amk_task_marshal_params(t, &P); /* int params are int32 now, so nothing truncates */

    /* ---- the opcode's own rules */
    switch (t->op) {
    case AMK_OP_NOP:
        break;

    case AMK_OP_COPY:
    case AMK_OP_GELU:
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        break;

    case AMK_OP_EMBED: {
        int64_t H;
        if (!amk__opshape_is_index(in[0]->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "ids '%s' must be I32, I8 or U8, not %s",
                          amk__opshape_name(in[0]), amk_dtype_name(in[0]->dtype));
        if (P.hidden < 1) AMK__OPS_FAIL(PARAM_VALUE, "hidden = %d must be >= 1", P.hidden);
        if (in[1]->rank != 2 || in[1]->shape[1] != P.hidden)
            AMK__OPS_FAIL(OP_SHAPE, "table '%s' must be [V, hidden = %d]", amk__opshape_name(in[1]),
                          P.hidden);
        H = P.hidden;
        if (!amk__mul_i64(n_in[0], H, &v) || n_out != v)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, ids*hidden = %lld*%lld",
                          amk__opshape_name(out), (long long)n_out, (long long)n_in[0], (long long)H);
        break;
    }

    case AMK_OP_RMSNORM:
    case AMK_OP_LAYERNORM: {
        double eps = amk__param_f(t, "eps", 0.0);
        if (P.hidden < 1) AMK__OPS_FAIL(PARAM_VALUE, "hidden = %d must be >= 1", P.hidden);
        if (n_in[0] % P.hidden)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a multiple of hidden = %d",
                          amk__opshape_name(in[0]), (long long)n_in[0], P.hidden);
        for (i = 1; i < ni; i++)
            if (n_in[i] != P.hidden)
                AMK__OPS_FAIL(OP_SHAPE, "%s '%s' has %lld elements, hidden = %d", i == 1 ? "w" : "b",
                              amk__opshape_name(in[i]), (long long)n_in[i], P.hidden);
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        if (!amk__opshape_finite(eps) || eps < 0)
            AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
        break;
    }

    case AMK_OP_GEMV_TILE:
    case AMK_OP_GEMM_TILE: {
        int64_t K = P.K, M, N, end;
        const amk_buffer *W = in[1];
        if (K < 1) AMK__OPS_FAIL(PARAM_VALUE, "K = %lld must be >= 1", (long long)K);
        if (n_in[0] % K || n_in[0] / K < 1)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a positive multiple of K = %lld",
                          amk__opshape_name(in[0]), (long long)n_in[0], (long long)K);
        M = n_in[0] / K;
        if (P.n_off < 0 || P.N_tile < 1)
            AMK__OPS_FAIL(PARAM_VALUE, "n_off = %d must be >= 0 and N_tile = %d >= 1", P.n_off,
                          P.N_tile);
        if (quant) {
            int64_t group = P.group, G;
            if (P.qdtype != AMK_DTYPE_I8 && P.qdtype != AMK_DTYPE_I4)
                AMK__OPS_FAIL(PARAM_VALUE, "qdtype = %d must be 6 (I8) or 7 (I4)", P.qdtype);
            if (ni < 3)
                AMK__OPS_FAIL(OP_SHAPE, "the quantized form takes x, qW, scales[, zeros], got %d inputs", ni);
            if (P.qdtype == AMK_DTYPE_I8 ? W->dtype != AMK_DTYPE_I8
                                         : W->dtype != AMK_DTYPE_I4 && W->dtype != AMK_DTYPE_U8)
                AMK__OPS_FAIL(OP_DTYPE, "qW '%s' is %s, qdtype %d needs %s", amk__opshape_name(W),
                              amk_dtype_name(W->dtype), P.qdtype,
                              P.qdtype == AMK_DTYPE_I8 ? "I8" : "I4 or U8 (packed)");
            if (W->dtype == AMK_DTYPE_U8) {
                if (W->rank != 2 || K % 2 || W->shape[1] != K / 2)
                    AMK__OPS_FAIL(OP_SHAPE, "packed qW '%s' must be U8 [N, K/2] with K = %lld even",
                                  amk__opshape_name(W), (long long)K);
            } else if (W->rank != 2 || W->shape[1] != K) {
                AMK__OPS_FAIL(OP_SHAPE, "qW '%s' must be [N, K = %lld]", amk__opshape_name(W),
                              (long long)K);
            }
            N = W->shape[0];
            if (group < 1 || K % group)
                AMK__OPS_FAIL(PARAM_VALUE, "group = %lld must be >= 1 and divide K = %lld",
                              (long long)group, (long long)K);
            G = K / group;
            if (!amk_dtype_is_float(in[2]->dtype))
                AMK__OPS_FAIL(OP_DTYPE, "scales '%s' must be a float dtype, not %s",
                              amk__opshape_name(in[2]), amk_dtype_name(in[2]->dtype));
            if (!amk__mul_i64(N, G, &v) || n_in[2] != v)
                AMK__OPS_FAIL(OP_SHAPE, "scales '%s' has %lld elements, N*(K/group) = %lld*%lld",
                              amk__opshape_name(in[2]), (long long)n_in[2], (long long)N, (long long)G);
            if (ni == 4 && n_in[3] != n_in[2])
                AMK__OPS_FAIL(OP_SHAPE, "zeros '%s' has %lld elements, scales has %lld",
                              amk__opshape_name(in[3]), (long long)n_in[3], (long long)n_in[2]);
        } else {
            if (W->rank != 2 || W->shape[1] != K)
                AMK__OPS_FAIL(OP_SHAPE, "W '%s' must be [N, K = %lld]", amk__opshape_name(W),
                              (long long)K);
            N = W->shape[0];
            if (ni == 3 && n_in[2] != N)
                AMK__OPS_FAIL(OP_SHAPE, "bias '%s' has %lld elements, W has %lld rows",
                              amk__opshape_name(in[2]), (long long)n_in[2], (long long)N);
        }
        end = (int64_t)P.n_off + P.N_tile;
        if (end > N)
            AMK__OPS_FAIL(PARAM_VALUE, "n_off+N_tile = %lld exceeds W rows %lld", (long long)end,
                          (long long)N);
        if (!amk__opshape_tile_out(&c, out, n_out, M, end)) return 0;
        if (t->op == AMK_OP_GEMM_TILE) {
            if (P.M_tile < 1 || P.m_off < 0)
                AMK__OPS_FAIL(PARAM_VALUE, "m_off = %d must be >= 0 and M_tile = %d >= 1", P.m_off,
                              P.M_tile);
            if ((int64_t)P.m_off + P.M_tile > M)
                AMK__OPS_FAIL(PARAM_VALUE, "m_off+M_tile = %lld exceeds x rows %lld",
                              (long long)P.m_off + P.M_tile, (long long)M);
        }
        break;
    }

    case AMK_OP_ATTENTION_TILE:
    case AMK_OP_ATTENTION_DECODE:
    case AMK_OP_ATTENTION_O: {
        const int fo = t->op == AMK_OP_ATTENTION_O, decode = t->op == AMK_OP_ATTENTION_DECODE || fo;
        const int prenorm = fo && ((uint32_t)P.flags & AMK_ATTN_FLAG_PRENORM) != 0; /* input 0 is qkv */
        int64_t row, max_seq, want;
        double scale = amk__param_f(t, "scale", 1.0);
        if (ni == 4 && !decode) AMK__OPS_FAIL(OP_UNSUPPORTED, "4th ATTENTION_TILE input is not supported");
        if (fo && P.flags && (uint32_t)P.flags != AMK_ATTN_FLAG_PRENORM)
            AMK__OPS_FAIL(PARAM_VALUE, "flags = %d: ATTENTION_O takes PRENORM (4) alone, or none", P.flags);
        if (fo && (ni < 5 + prenorm || ni > 6 + prenorm || (t->n_outputs != 1 && !(prenorm && t->n_outputs == 3))))
            AMK__OPS_FAIL(OP_ARITY, "takes %d or %d inputs and %s with flags %d, got %d and %d", 5 + prenorm,
                          6 + prenorm, prenorm ? "1 or 3 outputs" : "1 output", P.flags, ni, t->n_outputs);
        if (P.head_dim < 1 || P.n_heads < 1 || P.n_kv_heads < 1 || P.n_heads % P.n_kv_heads)
            AMK__OPS_FAIL(PARAM_VALUE,
                          "head_dim = %d, n_heads = %d, n_kv_heads = %d: each must be >= 1 and "
                          "n_kv_heads must divide n_heads", P.head_dim, P.n_heads, P.n_kv_heads);
        if (decode && (P.n_off < 0 || P.N_tile < 1 || (int64_t)P.n_off + P.N_tile > P.n_kv_heads))
            AMK__OPS_FAIL(PARAM_VALUE, "kv heads n_off = %d, N_tile = %d are outside [0, n_kv_heads = %d)",
                          P.n_off, P.N_tile, P.n_kv_heads);
        if (prenorm) { /* qkv [1, F]: the Q rows, then K, then V */
            if (!amk__mul_i64((int64_t)P.n_heads + 2 * (int64_t)P.n_kv_heads, P.head_dim, &want) || n_in[0] != want)
                AMK__OPS_FAIL(OP_SHAPE, "qkv '%s' has %lld elements, (n_heads + 2*n_kv_heads)*head_dim = "
                              "(%d + 2*%d)*%d", amk__opshape_name(in[0]), (long long)n_in[0], P.n_heads,
                              P.n_kv_heads, P.head_dim);
            if (in[0]->dtype != AMK_DTYPE_F32)
                AMK__OPS_FAIL(OP_DTYPE, "qkv '%s' (a sum RMSNORM_MLP's FOLD builds) must be F32, not %s",
                              amk__opshape_name(in[0]), amk_dtype_name(in[0]->dtype));
        } else if (n_in[0] != (int64_t)P.n_heads * P.head_dim) {
            AMK__OPS_FAIL(OP_SHAPE, "q '%s' has %lld elements, n_heads*head_dim = %lld",
                          amk__opshape_name(in[0]), (long long)n_in[0],
                          (long long)P.n_heads * P.head_dim);
        }
        row = (int64_t)P.n_kv_heads * P.head_dim;
        if (n_in[1] % row || n_in[2] != n_in[1])
            AMK__OPS_FAIL(OP_SHAPE, "k '%s' (%lld) and v '%s' (%lld) must hold equal whole rows of "
                          "n_kv_heads*head_dim = %lld", amk__opshape_name(in[1]), (long long)n_in[1],
                          amk__opshape_name(in[2]), (long long)n_in[2], (long long)row);
        max_seq = n_in[1] / row;
        if (P.kv_start < 0 || P.kv_len < 0 || (int64_t)P.kv_start + P.kv_len > max_seq)
            AMK__OPS_FAIL(PARAM_VALUE, "window kv_start = %d, kv_len = %d is outside the %lld cache rows",
                          P.kv_start, P.kv_len, (long long)max_seq);
        if (decode && (!amk__opshape_is_index(in[3]->dtype) || n_in[3] != 1))
            AMK__OPS_FAIL(OP_SHAPE, "pos '%s' must be one I32, I8 or U8", amk__opshape_name(in[3]));
        if (!amk__opshape_finite(scale)) AMK__OPS_FAIL(PARAM_VALUE, "scale = %g must be finite", scale);
        if (!fo && decode && ((uint32_t)P.flags & ~AMK_ATTN_FLAG_PARTIAL))
            AMK__OPS_FAIL(PARAM_VALUE, "flags = %d has bits other than PARTIAL (2)", P.flags);
        if (fo) { /* W_oT [n_heads*head_dim, H]: its rows [m_off, m_off+M_tile) among the kv heads' */
            const amk_buffer *Wo = in[4];
            const int64_t grp = P.n_heads / P.n_kv_heads, a0 = (int64_t)P.n_off * grp * P.head_dim;
            const int64_t a1 = ((int64_t)P.n_off + P.N_tile) * grp * P.head_dim, H = Wo->shape[1];
            const int r = 5 + prenorm; /* the resid's input, when given */
            if (Wo->rank != 2 || Wo->shape[0] != (int64_t)P.n_heads * P.head_dim || !amk_dtype_is_float(Wo->dtype))
                AMK__OPS_FAIL(OP_SHAPE, "W_oT '%s' must be a float [n_heads*head_dim = %lld, H]",
                              amk__opshape_name(Wo), (long long)P.n_heads * P.head_dim);
            if (P.M_tile < 1 || P.m_off < a0 || (int64_t)P.m_off + P.M_tile > a1)
                AMK__OPS_FAIL(PARAM_VALUE, "rows m_off = %d, M_tile = %d are outside the kv heads' [%lld, %lld)",
                              P.m_off, P.M_tile, (long long)a0, (long long)a1);
            if (!amk__opshape_accum_out(&c, out, n_out, 1, H, ni > r ? in[r] : NULL, ni > r ? n_in[r] : 0)) return 0;
            if (prenorm) { /* x [1, H], its rms; eps and RoPE's params; the cache outputs */
                double eps = amk__param_f(t, "eps", 0.0);
                if (n_in[5] != H || !amk_dtype_is_float(in[5]->dtype))
                    AMK__OPS_FAIL(OP_SHAPE, "x '%s' must be float with H = %lld elements", amk__opshape_name(in[5]),
                                  (long long)H);
                if (!amk_task_param(t, "eps"))
                    AMK__OPS_FAIL(PARAM_MISSING, "PRENORM needs eps (x's rms norm)");
                if (!amk__opshape_finite(eps) || eps < 0)
                    AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
                if (P.head_dim % 2)
                    AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be even (RoPE's pairs)", P.head_dim);
                if (!amk__opshape_rope(&c, t, &P)) return 0;
                if (t->n_outputs == 3 && (t->outputs[1] != t->inputs[1] || t->outputs[2] != t->inputs[2] ||
                                          t->inputs[1] == t->inputs[2] || t->outputs[0] == t->inputs[1] ||
                                          t->outputs[0] == t->inputs[2]))
                    AMK__OPS_FAIL(OP_SHAPE, "outputs 2 and 3 (buffers %d, %d) must be the k and v caches (inputs "
                                  "%d, %d): two buffers, neither out", t->outputs[1], t->outputs[2], t->inputs[1],
                                  t->inputs[2]);
            }
            break;
        }
        want = (int64_t)P.n_heads * P.head_dim;
        if ((uint32_t)P.flags & AMK_ATTN_FLAG_PARTIAL) {
            if (out->dtype != AMK_DTYPE_F32)
                AMK__OPS_FAIL(OP_DTYPE, "partial out '%s' must be F32, not %s",
                              amk__opshape_name(out), amk_dtype_name(out->dtype));
            want = (int64_t)P.n_heads * (P.head_dim + 2);
        }
        if (n_out != want)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, needs %lld", amk__opshape_name(out),
                          (long long)n_out, (long long)want);
        break;
    }

    case AMK_OP_ROPE: {
        int64_t S = n_in[1];
        if (!amk__opshape_is_index(in[1]->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "positions '%s' must be I32, I8 or U8, not %s",
                          amk__opshape_name(in[1]), amk_dtype_name(in[1]->dtype));
        if (S < 1) AMK__OPS_FAIL(OP_SHAPE, "positions '%s' is empty", amk__opshape_name(in[1]));
        if (P.head_dim < 2 || P.head_dim % 2)
            AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be even and >= 2", P.head_dim);
        if (!amk__mul_i64(S, P.head_dim, &v) || n_in[0] % v)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a multiple of positions*head_dim "
                          "= %lld*%d", amk__opshape_name(in[0]), (long long)n_in[0], (long long)S,
                          P.head_dim);
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        if (!amk__opshape_rope(&c, t, &P)) return 0;
        break;
    }

    case AMK_OP_SILU_MUL:
    case AMK_OP_ADD:
    case AMK_OP_ALLREDUCE_SHARD:
        for (i = 0; i < ni; i++)
            if (n_in[i] != n_out)
                AMK__OPS_FAIL(OP_SHAPE, "input %d '%s' has %lld elements, out '%s' has %lld", i,
                              amk__opshape_name(in[i]), (long long)n_in[i], amk__opshape_name(out),
                              (long long)n_out);
        break;

    case AMK_OP_MUL:
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, a '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        if (ni == 2 && n_in[1] != n_in[0] && n_in[1] != 1)
            AMK__OPS_FAIL(OP_SHAPE, "b '%s' has %lld elements, needs %lld or 1 (broadcast)",
                          amk__opshape_name(in[1]), (long long)n_in[1], (long long)n_in[0]);
        break;

    case AMK_OP_DEQUANT: {
        const amk_buffer *q = in[0];
        int64_t logical = n_in[0], last = amk__opshape_last(q);
        if (P.qdtype != AMK_DTYPE_I8 && P.qdtype != AMK_DTYPE_I4)
            AMK__OPS_FAIL(PARAM_VALUE, "qdtype = %d must be 6 (I8) or 7 (I4)", P.qdtype);
        if (P.qdtype == AMK_DTYPE_I8 ? q->dtype != AMK_DTYPE_I8
                                     : q->dtype != AMK_DTYPE_I4 && q->dtype != AMK_DTYPE_U8)
            AMK__OPS_FAIL(OP_DTYPE, "q '%s' is %s, qdtype %d needs %s", amk__opshape_name(q),
                          amk_dtype_name(q->dtype), P.qdtype,
                          P.qdtype == AMK_DTYPE_I8 ? "I8" : "I4 or U8 (packed)");
        if (q->dtype == AMK_DTYPE_U8) { /* two 4-bit values per byte */
            if (!amk__mul_i64(logical, 2, &logical) || !amk__mul_i64(last, 2, &last))
                AMK__OPS_FAIL(OP_SHAPE, "q '%s' is too large", amk__opshape_name(q));
        }
        if (P.group < 1 || last % P.group)
            AMK__OPS_FAIL(PARAM_VALUE, "group = %d must be >= 1 and divide the last dim %lld",
                          P.group, (long long)last);
        for (i = 1; i < ni; i++)
            if (n_in[i] != logical / P.group)
                AMK__OPS_FAIL(OP_SHAPE, "%s '%s' has %lld elements, needs %lld/group = %lld",
                              i == 1 ? "scales" : "zeros", amk__opshape_name(in[i]),
                              (long long)n_in[i], (long long)logical, (long long)(logical / P.group));
        if (!amk_dtype_is_float(out->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be a float dtype, not %s", amk__opshape_name(out),
                          amk_dtype_name(out->dtype));
        if (n_out != logical)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, q holds %lld values",
                          amk__opshape_name(out), (long long)n_out, (long long)logical);
        break;
    }

    case AMK_OP_SOFTMAX:
        if (P.dim < -in[0]->rank || P.dim >= in[0]->rank)
            AMK__OPS_FAIL(PARAM_VALUE, "dim = %d is outside [%d, %d) for x '%s'", P.dim,
                          -in[0]->rank, in[0]->rank, amk__opshape_name(in[0]));
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        break;

    case AMK_OP_KV_APPEND: {
        int64_t R = n_in[0];
        if (R < 1) AMK__OPS_FAIL(OP_SHAPE, "new '%s' is empty", amk__opshape_name(in[0]));
        if (n_in[1] % R)
            AMK__OPS_FAIL(OP_SHAPE, "cache '%s' has %lld elements, not whole rows of %lld",
                          amk__opshape_name(in[1]), (long long)n_in[1], (long long)R);
        if (P.pos < 0 || P.pos >= n_in[1] / R)
            AMK__OPS_FAIL(PARAM_VALUE, "pos = %d is outside the %lld rows of cache '%s'", P.pos,
                          (long long)(n_in[1] / R), amk__opshape_name(in[1]));
        if (t->outputs[0] != t->inputs[1])
            AMK__OPS_FAIL(OP_SHAPE, "the output (buffer %d) must be the cache input (buffer %d)",
                          t->outputs[0], t->inputs[1]);
        break;
    }

    case AMK_OP_SAMPLE_ARGMAX:
    case AMK_OP_ARGMAX_PARTIAL:
    case AMK_OP_ARGMAX_COMBINE: {
        /* L: the logits' last axis, or the combine's (value, index) pairs, two columns each */
        const int combine = t->op == AMK_OP_ARGMAX_COMBINE;
        const int64_t L = amk__opshape_last(in[0]);
        const char *what = combine ? "partials" : "logits";
        if (combine && in[0]->dtype != AMK_DTYPE_F32)
            AMK__OPS_FAIL(OP_DTYPE, "partials '%s' must be F32, not %s", amk__opshape_name(in[0]),
                          amk_dtype_name(in[0]->dtype));
        if (in[0]->rank < 1 || L < 1 || (combine && L % 2))
            AMK__OPS_FAIL(OP_SHAPE, "%s '%s' needs rank >= 1 and a last dim >= 1%s", what,
                          amk__opshape_name(in[0]), combine ? ", even ((value, index) pairs)" : "");
        if (t->op == AMK_OP_ARGMAX_PARTIAL) {
            if (L > (1LL << 24)) /* why: the index travels as an F32 beside its value */
                AMK__OPS_FAIL(OP_SHAPE, "logits '%s' has %lld columns; at most 2^24", amk__opshape_name(in[0]),
                              (long long)L);
            if (P.n_off < 0 || P.N_tile < 1 || (int64_t)P.n_off + P.N_tile > L)
                AMK__OPS_FAIL(PARAM_VALUE, "columns [%d, %d + %d) are not inside the %lld of '%s'", P.n_off,
                              P.n_off, P.N_tile, (long long)L, amk__opshape_name(in[0]));
            if (!amk__opshape_pairs_out(&c, out, n_out, n_in[0] / L, P.part)) return 0;
            break;
        }
        if (!amk__opshape_is_index(out->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be I32, I8 or U8, not %s", amk__opshape_name(out),
                          amk_dtype_name(out->dtype));
        if (n_out != n_in[0] / L)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, %s have %lld rows", amk__opshape_name(out),
                          (long long)n_out, what, (long long)(n_in[0] / L));
        break;
    }

    case AMK_OP_ATTENTION_COMBINE: {
        int64_t row = (int64_t)P.head_dim + 2;
        if (P.head_dim < 1) AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be >= 1", P.head_dim);
        for (i = 0; i < ni; i++) {
            if (in[i]->dtype != AMK_DTYPE_F32)
                AMK__OPS_FAIL(OP_DTYPE, "partial %d '%s' must be F32, not %s", i,
                              amk__opshape_name(in[i]), amk_dtype_name(in[i]->dtype));
            if (n_in[i] != n_in[0] || n_in[i] % row)
                AMK__OPS_FAIL(OP_SHAPE, "partial %d '%s' has %lld elements; every partial needs "
                              "%lld, a multiple of head_dim+2 = %lld", i, amk__opshape_name(in[i]),
                              (long long)n_in[i], (long long)n_in[0], (long long)row);
        }
        if (n_out != n_in[0] / row * P.head_dim)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, n_heads*head_dim = %lld*%d",
                          amk__opshape_name(out), (long long)n_out, (long long)(n_in[0] / row),
                          P.head_dim);
        break;
    }

    case AMK_OP_FILL: {
        double value = amk__param_f(t, "scale", 1.0);
        if (!amk__opshape_finite(value))
            AMK__OPS_FAIL(PARAM_VALUE, "scale = %g (the value) must be finite", value);
        if (!amk_dtype_is_float(out->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be a float dtype, not %s", amk__opshape_name(out),
                          amk_dtype_name(out->dtype));
        break;
    }

    case AMK_OP_RMSNORM_GEMV:
    case AMK_OP_RMSNORM_SWIGLU:
    case AMK_OP_RMSNORM_MLP: {
        const int mlp = t->op == AMK_OP_RMSNORM_MLP, swiglu = t->op == AMK_OP_RMSNORM_SWIGLU || mlp;
        const uint32_t flags = swiglu ? 0u : (uint32_t)P.flags; /* RMSNORM_GEMV's */
        const int fold = mlp && ((uint32_t)P.flags & AMK_MLP_FLAG_FOLD) != 0; /* W_cat input 5, qkv output 1 */
        const int64_t K = P.K;
        double eps = amk__param_f(t, "eps", 0.0);
        int64_t M, N, end;
        if (!amk__opshape_finite(eps) || eps < 0)
            AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
        if (K < 1) AMK__OPS_FAIL(PARAM_VALUE, "K = %lld must be >= 1", (long long)K);
        if (n_in[0] % K || n_in[0] / K < 1)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a positive multiple of K = %lld",
                          amk__opshape_name(in[0]), (long long)n_in[0], (long long)K);
        M = n_in[0] / K;
        if (n_in[1] != K)
            AMK__OPS_FAIL(OP_SHAPE, "norm_w '%s' has %lld elements, K = %lld", amk__opshape_name(in[1]),
                          (long long)n_in[1], (long long)K);
        for (i = 2; i < (swiglu ? 4 : 3); i++) {
            if (in[i]->rank != 2 || in[i]->shape[1] != K || !amk_dtype_is_float(in[i]->dtype))
                AMK__OPS_FAIL(OP_SHAPE, "W '%s' must be a float [N, K = %lld]", amk__opshape_name(in[i]),
                              (long long)K);
            if (in[i]->shape[0] != in[2]->shape[0])
                AMK__OPS_FAIL(OP_SHAPE, "W_up '%s' has %lld rows, W_gate %lld", amk__opshape_name(in[i]),
                              (long long)in[i]->shape[0], (long long)in[2]->shape[0]);
        }
        N = in[2]->shape[0];
        if (P.n_off < 0 || P.N_tile < 1)
            AMK__OPS_FAIL(PARAM_VALUE, "n_off = %d must be >= 0 and N_tile = %d >= 1", P.n_off, P.N_tile);
        end = (int64_t)P.n_off + P.N_tile;
        if (end > N)
            AMK__OPS_FAIL(PARAM_VALUE, "n_off+N_tile = %lld exceeds W rows %lld", (long long)end, (long long)N);
        if (flags & ~(AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW | AMK_GEMV_FLAG_ARGMAX))
            AMK__OPS_FAIL(PARAM_VALUE, "flags = %d has bits other than ROPE (1), KV_ROW (2) and ARGMAX (4)", P.flags);
        if ((flags & AMK_GEMV_FLAG_ARGMAX) && (flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW)))
            AMK__OPS_FAIL(PARAM_VALUE, "flags = %d: ARGMAX (4) goes with neither ROPE (1) nor KV_ROW (2)", P.flags);
        if (mlp && ((uint32_t)P.flags & ~AMK_MLP_FLAG_FOLD))
            AMK__OPS_FAIL(PARAM_VALUE, "flags = %d has bits other than FOLD (1)", P.flags);
        if (t->n_outputs != 1 + ((flags & AMK_GEMV_FLAG_ARGMAX) != 0 || fold))
            AMK__OPS_FAIL(OP_ARITY, "takes a second output (%s) exactly when flags has %s (flags %d, %d outputs)",
                          mlp ? "qkv" : "the argmax partials", mlp ? "FOLD" : "ARGMAX", P.flags, t->n_outputs);
        if (mlp && (ni < 5 + fold || ni > 6 + fold))
            AMK__OPS_FAIL(OP_ARITY, "takes %d or %d inputs with flags %d, got %d", 5 + fold, 6 + fold, P.flags, ni);
        if (!swiglu && (ni == 4) != ((flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW)) != 0))
            AMK__OPS_FAIL(OP_ARITY, "takes the positions as a 4th input exactly when flags has ROPE or "
                          "KV_ROW (flags %d, %d inputs)", P.flags, ni);
        if (flags & AMK_GEMV_FLAG_ARGMAX) {
            if (N > (1LL << 24)) /* why: the index travels as an F32 beside its value */
                AMK__OPS_FAIL(OP_SHAPE, "W '%s' has %lld rows; ARGMAX takes at most 2^24", amk__opshape_name(in[2]),
                              (long long)N);
            if (!amk__opshape_pairs_out(&c, out2, n_out2, M, P.part)) return 0;
            if (t->outputs[1] == t->outputs[0] || t->outputs[1] == t->inputs[0])
                AMK__OPS_FAIL(OP_SHAPE, "the partials (buffer %d) must be a buffer of their own", t->outputs[1]);
        } else if (flags) {
            if (!amk__opshape_is_index(in[3]->dtype) || n_in[3] != M)
                AMK__OPS_FAIL(OP_SHAPE, "positions '%s' must be I32, I8 or U8 with one per row of x (%lld)",
                              amk__opshape_name(in[3]), (long long)M);
        }
        if (flags & AMK_GEMV_FLAG_ROPE) {
            if (P.head_dim < 2 || P.head_dim % 2 || N % P.head_dim || P.n_off % 2 || P.N_tile % 2)
                AMK__OPS_FAIL(PARAM_VALUE, "RoPE needs an even head_dim (%d) dividing W rows %lld, and "
                              "an even n_off (%d) and N_tile (%d)", P.head_dim, (long long)N, P.n_off, P.N_tile);
            if (!amk__opshape_rope(&c, t, &P)) return 0;
        }
        if (mlp) { /* W_downT [N, H] maps the tile's N_tile values onto out [M, H] (+ resid [M, H]) */
            const amk_buffer *Wd = in[4], *Wc = in[5];
            const int r = 5 + fold; /* the resid's input, when given */
            if (Wd->rank != 2 || Wd->shape[0] != N || !amk_dtype_is_float(Wd->dtype))
                AMK__OPS_FAIL(OP_SHAPE, "W_downT '%s' must be a float [N = %lld, H]", amk__opshape_name(Wd),
                              (long long)N);
            if (!amk__opshape_accum_out(&c, out, n_out, M, Wd->shape[1], ni > r ? in[r] : NULL, ni > r ? n_in[r] : 0))
                return 0;
            if (fold) { /* W_cat [N + K, F] maps the tile's values and its share of x onto qkv [M, F] */
                if (Wc->rank != 2 || Wc->shape[0] != N + K || Wc->shape[1] < 1)
                    AMK__OPS_FAIL(OP_SHAPE, "W_cat '%s' must be [N + K = %lld, F >= 1]", amk__opshape_name(Wc),
                                  (long long)(N + K));
                if (Wc->dtype != AMK_DTYPE_F32 && Wc->dtype != AMK_DTYPE_BF16 && Wc->dtype != AMK_DTYPE_F16)
                    AMK__OPS_FAIL(OP_DTYPE, "W_cat '%s' must be F32, BF16 or F16, not %s", amk__opshape_name(Wc),
                                  amk_dtype_name(Wc->dtype));
                if (!amk__opshape_accum_out(&c, out2, n_out2, M, Wc->shape[1], NULL, 0)) return 0;
                if (t->outputs[1] == t->outputs[0] || t->outputs[1] == t->inputs[0])
                    AMK__OPS_FAIL(OP_SHAPE, "qkv (buffer %d) must be a buffer of its own", t->outputs[1]);
            }
        } else if (flags & AMK_GEMV_FLAG_KV_ROW) {
            if (n_out % N || n_out < N)
                AMK__OPS_FAIL(OP_SHAPE, "cache '%s' has %lld elements, not whole rows of W's N = %lld",
                              amk__opshape_name(out), (long long)n_out, (long long)N);
        } else if (!amk__opshape_tile_out(&c, out, n_out, M, end)) {
            return 0;
        }
        break;
    }

    default:
        AMK__OPS_FAIL(OP_UNKNOWN, "opcode %d is not defined", t->op);
    }
#undef AMK__OPS_FAIL
    return 1;
}

/* ==== >>impl_validate: spec §3 + IR_SPEC_NOTES, counter simulations (spec §3.4) =============== */
/* (part of amk.h's implementation; included once from amk.h)

   amk_program_validate runs in passes; each records every failure it finds and goes on:
     1 buffers, counters, task ids
     2 each task alone: references, opcode, arity, params, then amk__op_check
     3 waits against the producer count of their counter
     4 the dependency graph: Kahn's algorithm, one witness cycle
     5 SM assignment and the per-SM queues
     6 uses: unwritten reads, unreached outputs, on-chip buffers, page table
     7 happens-before: RACE_READ, RACE_KV, RACE_WAW, PAGE_ALIAS
     8 config and target
   A later pass skips what an earlier one found broken, so one defect gives one issue, not dozens:
   a task that fails a pass-2 check takes no part in race checks (its references, waits or regions
   cannot be trusted); a wait on the task's own counter carries no edge; a buffer with a bad kind
   gets no use checks; a cycle stops every check that needs a topological order.

   The dependency graph is bipartite, task -> its out_counter -> each task waiting on it, so it
   stays linear in size however many producers and waiters a counter has. Happens-before is exact
   for every size (IR_SPEC_NOTES 7): anc(counter) = union over producers p of anc(p) + {p} and
   anc(task) = union over its waited counters, as bit sets over tasks numbered by topological rank,
   computed one block of columns at a time so memory stays bounded. Every race question is then
   "is this set of tasks inside anc(t)?", answered block by block. */

#define AMK__V_MAX_ISSUES 1000   /* why: a report stays readable; the counts go on past it */
#define AMK__V_RACE_CAP 16       /* why: race issues per buffer before one summary issue */
#define AMK__V_BLOCK_WORDS 64    /* why: 4096 task columns per happens-before block */
#define AMK__V_HB_BYTES ((size_t)128 << 20) /* why: bound on the ancestor rows of one block */
#define AMK__V_MAX_COUNT (INT_MAX / 16) /* why: CSR offsets (<= 8 entries per task) fit an int */

#if defined(__GNUC__) || defined(__clang__)
#define AMK__V_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMK__V_PRINTF(f, a)
#endif

/* ---- small helpers ----------------------------------------------------------------------------- */

/* Entries of a list the validator may read: 0 for a negative count or a NULL array, at most cap
   (an over-long list is reported by ABI_CAP and read no further). */
AMK__FN int amk__v_len(int n, const void *items, int cap) {
    if (n <= 0 || !items) return 0;
    return n < cap ? n : cap;
}

AMK__FN int amk__v_ctz(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int i = 0;
    while (!(x & 1u)) { x >>= 1; i++; }
    return i;
#endif
}

AMK__FN int amk__v_readonly_kind(int kind) {
    return kind == AMK_KIND_WEIGHT || kind == AMK_KIND_CONST || kind == AMK_KIND_IO_INPUT;
}

/* A buffer whose reads must follow its writers in this pass. */
AMK__FN int amk__v_transient_kind(int kind) {
    return kind == AMK_KIND_ACTIVATION || kind == AMK_KIND_IO_OUTPUT || kind == AMK_KIND_KV_CACHE;
}

/* Task t adds into its output x (one of its outputs) instead of overwriting it: RMSNORM_MLP into
   every output, ATTENTION_O into its first (its cache outputs are plain writes). Such writers of
   one buffer commute, so they may run unordered among themselves; each reads what the buffer's
   other writers left, so every one of those must be ordered before it (amk__v_accum). */
AMK__FN int amk__task_accumulates(const amk_task *t, int x) {
    if (t->op == AMK_OP_RMSNORM_MLP) return 1;
    return t->op == AMK_OP_ATTENTION_O && amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS) >= 1 &&
           t->outputs[0] == x;
}

/* Input j of t is KV_APPEND's cache, written in place: the op writes row pos and reads nothing
   of the cache, so it is not a read for the race rules. */
AMK__FN int amk__v_inplace_target(const amk_task *t, int j) {
    return t->op == AMK_OP_KV_APPEND && j == 1 && amk__v_len(t->n_outputs, t->outputs, 1) == 1 &&
           t->outputs[0] == t->inputs[1];
}

/* A task's param by key; unlike amk_task_param it survives NULL keys and malformed lists. */
AMK__FN const amk_param *amk__v_param(const amk_task *t, const char *key) {
    int i, np = amk__v_len(t->n_params, t->params, INT_MAX);
    for (i = 0; i < np; i++)
        if (t->params[i].key && strcmp(t->params[i].key, key) == 0) return &t->params[i];
    return NULL;
}

/* The reads below the position (RACE_KV). A PRENORM ATTENTION_O reads its caches' rows below its
   position and never their row at it (it has that row's k and v itself), so its read of a cache
   need not follow a writer that writes only the row at the same position: one that cannot, within
   a pass, have written a row the reader reads, provided the position is the same in both, i.e.
   the position buffer is written by no task. amk__v_kv_reader_pos is the position buffer of t's
   read of KV cache x when t is such a reader (x only as its k or v cache), else -1;
   amk__v_kv_row_writer_pos that of t's write of x when t writes only the row at a position of x (an
   RMSNORM_GEMV with KV_ROW over one row of x, or a PRENORM ATTENTION_O writing its caches), else
   -1. The caller checks that nothing writes the position buffer. */
AMK__FN int amk__v_kv_reader_pos(const amk_program *p, const amk_task *t, int x) {
    const amk_param *f = amk__v_param(t, "flags");
    int j, ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
    if (t->op != AMK_OP_ATTENTION_O || !f || !((uint32_t)f->i & AMK_ATTN_FLAG_PRENORM) || ni < 4 ||
        x < 0 || x >= p->n_buffers || p->buffers[x].kind != AMK_KIND_KV_CACHE || (t->inputs[1] != x && t->inputs[2] != x))
        return -1;
    for (j = 0; j < ni; j++)
        if (j != 1 && j != 2 && t->inputs[j] == x) return -1;
    return t->inputs[3];
}
AMK__FN int amk__v_kv_row_writer_pos(const amk_program *p, const amk_task *t, int x) {
    const amk_param *f = amk__v_param(t, "flags"), *K = amk__v_param(t, "K");
    const int ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
    const int no = amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
    if (!f || ni < 4 || t->inputs[0] < 0 || t->inputs[0] >= p->n_buffers) return -1;
    if (t->op == AMK_OP_RMSNORM_GEMV && ((uint32_t)f->i & AMK_GEMV_FLAG_KV_ROW) && no == 1 && t->outputs[0] == x &&
        K && amk_buffer_numel(&p->buffers[t->inputs[0]]) == K->i)
        return t->inputs[3];
    if (t->op == AMK_OP_ATTENTION_O && ((uint32_t)f->i & AMK_ATTN_FLAG_PRENORM) && no == 3 && t->outputs[0] != x &&
        (t->outputs[1] == x || t->outputs[2] == x))
        return t->inputs[3];
    return -1;
}

/* "task 3 'label'" with the task id (and the label when set). */
AMK__FN const char *amk__v_tname(const amk_program *p, int ti, char *buf, size_t size) {
    const amk_task *t = &p->tasks[ti];
    if (t->label && t->label[0]) snprintf(buf, size, "task %d '%.40s'", t->id, t->label);
    else snprintf(buf, size, "task %d", t->id);
    return buf;
}

/* "buffer 4 'name'". */
AMK__FN const char *amk__v_bname(const amk_program *p, int bi, char *buf, size_t size) {
    const amk_buffer *b = &p->buffers[bi];
    if (b->name && b->name[0]) snprintf(buf, size, "buffer %d '%.40s'", bi, b->name);
    else snprintf(buf, size, "buffer %d", bi);
    return buf;
}

/* ---- the dependency graph (shared by validate, the simulations and the critical path) ----------- */

typedef struct amk__vgraph {
    int n, nc;
    int *out_c;           /* [n] the task's out_counter, -1 when out of range */
    int *prod_off, *prod; /* counter c's producer tasks: prod[prod_off[c] .. prod_off[c+1]) */
    int *wt_off, *wt;     /* counter c's waiting tasks, one entry per valid wait not on itself */
    int *tw_off, *tw;     /* task t's waited counters (the same edges, seen from the task) */
    int *order, n_order;  /* Kahn order of the nodes: task t is node t, counter c is n + c */
    int *rank, *by_rank;  /* task <-> topological rank among tasks (valid when acyclic) */
} amk__vgraph;

AMK__FN void amk__vgraph_free(amk__vgraph *g) {
    amk__free(g->out_c);
    amk__free(g->prod_off); amk__free(g->prod);
    amk__free(g->wt_off); amk__free(g->wt);
    amk__free(g->tw_off); amk__free(g->tw);
    amk__free(g->order); amk__free(g->rank); amk__free(g->by_rank);
    memset(g, 0, sizeof *g);
}

/* Builds the edges of p's first n tasks over nc counters. Waits on a bad counter id and waits of
   a task on its own out_counter (WAIT_SELF) carry no edge. 0 on out of memory. */
AMK__FN int amk__vgraph_build(const amk_program *p, int n, int nc, amk__vgraph *g) {
    int t, j, c, *cur = NULL;
    memset(g, 0, sizeof *g);
    g->n = n;
    g->nc = nc;
    g->out_c = (int *)amk__calloc((size_t)n, sizeof(int));
    g->prod_off = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    g->wt_off = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    g->tw_off = (int *)amk__calloc((size_t)n + 1, sizeof(int));
    g->order = (int *)amk__calloc((size_t)n + (size_t)nc, sizeof(int));
    g->rank = (int *)amk__calloc((size_t)n, sizeof(int));
    g->by_rank = (int *)amk__calloc((size_t)n, sizeof(int));
    cur = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    if (!g->out_c || !g->prod_off || !g->wt_off || !g->tw_off || !g->order || !g->rank ||
        !g->by_rank || !cur)
        goto oom;
    for (t = 0; t < n; t++) {
        const amk_task *tk = &p->tasks[t];
        int oc = tk->out_counter, nw = amk__v_len(tk->n_waits, tk->waits, AMK_MAX_WAITS);
        g->out_c[t] = oc >= 0 && oc < nc ? oc : -1;
        if (g->out_c[t] >= 0) g->prod_off[oc + 1]++;
        g->tw_off[t + 1] = g->tw_off[t];
        for (j = 0; j < nw; j++) {
            c = tk->waits[j].counter;
            if (c < 0 || c >= nc || c == g->out_c[t]) continue;
            g->wt_off[c + 1]++;
            g->tw_off[t + 1]++;
        }
    }
    for (c = 0; c < nc; c++) {
        g->prod_off[c + 1] += g->prod_off[c];
        g->wt_off[c + 1] += g->wt_off[c];
    }
    g->prod = (int *)amk__calloc((size_t)g->prod_off[nc], sizeof(int));
    g->wt = (int *)amk__calloc((size_t)g->wt_off[nc], sizeof(int));
    g->tw = (int *)amk__calloc((size_t)g->tw_off[n], sizeof(int));
    if (!g->prod || !g->wt || !g->tw) goto oom;
    for (c = 0; c < nc; c++) cur[c] = g->prod_off[c];
    for (t = 0; t < n; t++)
        if (g->out_c[t] >= 0) g->prod[cur[g->out_c[t]]++] = t;
    for (c = 0; c < nc; c++) cur[c] = g->wt_off[c];
    for (t = 0; t < n; t++) {
        const amk_task *tk = &p->tasks[t];
        int nw = amk__v_len(tk->n_waits, tk->waits, AMK_MAX_WAITS), k = g->tw_off[t];
        for (j = 0; j < nw; j++) {
            c = tk->waits[j].counter;
            if (c < 0 || c >= nc || c == g->out_c[t]) continue;
            g->wt[cur[c]++] = t;
            g->tw[k++] = c;
        }
    }
    amk__free(cur);
    return 1;
oom:
    amk__free(cur);
    amk__vgraph_free(g);
    return 0;
}

/* Kahn's algorithm over tasks and counters, plus queue edges qprev[t] -> t when qprev is given
   (qnext is its inverse). Writes the node order into order, returns how many nodes it ordered
   (n + nc when acyclic); indeg (scratch, n + nc) keeps > 0 exactly for the nodes left over. */
AMK__FN int amk__vgraph_kahn(const amk__vgraph *g, const int *qprev, const int *qnext, int *indeg,
                             int *order) {
    int n = g->n, total = g->n + g->nc, head = 0, tail = 0, x, c, k;
    for (x = 0; x < n; x++) indeg[x] = g->tw_off[x + 1] - g->tw_off[x] + (qprev && qprev[x] >= 0);
    for (c = 0; c < g->nc; c++) indeg[n + c] = g->prod_off[c + 1] - g->prod_off[c];
    for (x = 0; x < total; x++)
        if (indeg[x] == 0) order[tail++] = x;
    while (head < tail) {
        x = order[head++];
        if (x < n) {
            c = g->out_c[x];
            if (c >= 0 && --indeg[n + c] == 0) order[tail++] = n + c;
            if (qnext && qnext[x] >= 0 && --indeg[qnext[x]] == 0) order[tail++] = qnext[x];
        } else {
            c = x - n;
            for (k = g->wt_off[c]; k < g->wt_off[c + 1]; k++)
                if (--indeg[g->wt[k]] == 0) order[tail++] = g->wt[k];
        }
    }
    return tail;
}

/* One cycle among the nodes Kahn left (indeg > 0). Each such node has a predecessor that was
   left too, so walking predecessors from one must come back to a node already walked: iterative,
   linear, no recursion. Writes the cycle in edge direction, from its lowest task index, into cyc and
   returns its length (0 if there is none). pos and walk are scratch of n + nc. */
AMK__FN int amk__vgraph_cycle(const amk__vgraph *g, const int *qprev, const int *indeg, int *pos,
                              int *walk, int *cyc) {
    int n = g->n, total = g->n + g->nc, x, nx, k, len = 0, m = 0, first = 0, i;
    for (x = 0; x < n && indeg[x] <= 0; x++) {}
    if (x >= n) return 0;
    for (i = 0; i < total; i++) pos[i] = -1;
    while (pos[x] < 0) {
        pos[x] = len;
        walk[len++] = x;
        nx = -1;
        if (x < n) {
            for (k = g->tw_off[x]; k < g->tw_off[x + 1] && nx < 0; k++)
                if (indeg[n + g->tw[k]] > 0) nx = n + g->tw[k];
            if (nx < 0 && qprev && qprev[x] >= 0 && indeg[qprev[x]] > 0) nx = qprev[x];
        } else {
            for (k = g->prod_off[x - n]; k < g->prod_off[x - n + 1] && nx < 0; k++)
                if (indeg[g->prod[k]] > 0) nx = g->prod[k];
        }
        if (nx < 0) return 0; /* why: unreachable while the invariant above holds */
        x = nx;
    }
    for (i = len - 1; i >= pos[x]; i--) cyc[m++] = walk[i];
    for (i = 0; i < m; i++) /* why: start at the lowest task index, so the text is stable */
        if (cyc[i] < n && (cyc[first] >= n || cyc[i] < cyc[first])) first = i;
    for (i = 0; i < m; i++) walk[i] = cyc[(first + i) % m];
    memcpy(cyc, walk, (size_t)m * sizeof(int));
    return m;
}

/* "cycle through 3 tasks: task 3 'a' -> counter 2 -> task 7 'b' -> ... -> task 3 'a'"; queue
   edges (SM_QUEUE_DEADLOCK) read "-> next on SM 0 ->". Long cycles are elided in the middle. */
AMK__FN void amk__v_cycle_text(const amk_program *p, const amk__vgraph *g, const int *cyc, int m,
                               amk__sb *sb) {
    char tn[64];
    int i, tasks = 0;
    for (i = 0; i < m; i++) tasks += cyc[i] < g->n;
    amk__sb_printf(sb, "cycle through %d task%s: ", tasks, tasks == 1 ? "" : "s");
    for (i = 0; i < m; i++) {
        int x = cyc[i], next = cyc[(i + 1) % m];
        if (x < g->n) {
            amk__sb_puts(sb, amk__v_tname(p, x, tn, sizeof tn));
            if (next < g->n) amk__sb_printf(sb, " -> next on SM %d -> ", p->tasks[x].sm);
            else amk__sb_puts(sb, " -> ");
        } else {
            amk__sb_printf(sb, "counter %d -> ", x - g->n);
        }
        if (sb->len > 160 && i < m - 2) { /* why: the issue message holds 256 characters */
            amk__sb_puts(sb, "... -> ");
            break;
        }
    }
    amk__sb_puts(sb, amk__v_tname(p, cyc[0], tn, sizeof tn));
}

typedef struct amk__v_pair { int a, b; } amk__v_pair;            /* sorted by a, then b */
typedef struct amk__v_key3 { int64_t a; int b, c; } amk__v_key3; /* sorted by a, b, c */

/* ---- the validator's state ---------------------------------------------------------------------- */

/* A question for the happens-before engine: is every member of a set (pool[set_off ..
   set_off+set_len), task indices) a transitive predecessor of target? */
typedef struct amk__vq {
    int set_off, set_len;
    int target;
    int excl;     /* 1: the target itself may be a member and does not count */
    int found;    /* a member not before target (task index), -1 while none */
    int kind;     /* AMK__VQ_* */
    int buffer;   /* the buffer the question is about */
    int other;    /* PAGE: the other buffer on the page; else -1 */
} amk__vq;

enum { AMK__VQ_READ, AMK__VQ_KV, AMK__VQ_WAW_COUNTER, AMK__VQ_WAW_OVERLAP, AMK__VQ_PAGE, AMK__VQ_ACCUM };

typedef struct amk__vctx {
    const amk_program *p;
    amk_report *rep;
    int keep;                 /* store issues (the caller passed a report) */
    int oom;
    int bad_output;           /* some task names a missing output buffer (maybe the unwritten one) */
    int bad_signal;           /* some task signals a missing counter (maybe a missing producer) */
    int n, nb, nc;            /* readable task, buffer, counter counts */
    unsigned char *task_bad;  /* [n] failed a pass-2 check */
    unsigned char *buf_enum;  /* [nb] kind/dtype/space out of range */
    unsigned char *buf_shape; /* [nb] bad rank, negative dim or size overflow */
    unsigned char *page_ok;   /* [nb] on a page, and the page entry is right */
    amk__v_pair *ids;         /* [n] (task id, index) sorted by id */
    amk__vgraph g;
    int acyclic;
    int *rd_off, *rd;         /* buffer x's reader tasks (deduplicated, task order) */
    int *wr_off, *wr;         /* buffer x's writer tasks */
    int *grd_off, *grd;       /* the same lists without the tasks that failed pass 2 */
    int *gwr_off, *gwr;
    int *pool; int n_pool, cap_pool;
    amk__vq *qs; int n_qs, cap_qs;
} amk__vctx;

AMK__FN void amk__v_issue(amk__vctx *v, amk_check c, int task, int buffer, int counter,
                          const char *fmt, ...) AMK__V_PRINTF(6, 7);
AMK__FN void amk__v_issue(amk__vctx *v, amk_check c, int task, int buffer, int counter,
                          const char *fmt, ...) {
    amk_report *r = v->rep;
    amk_issue *is;
    va_list ap;
    if (amk_check_is_error(c)) r->n_errors++;
    else r->n_warnings++;
    if (!v->keep) return;
    if (r->n_items >= AMK__V_MAX_ISSUES) { r->truncated = 1; return; }
    if (!amk__grow((void **)&r->items, &r->cap_items, r->n_items + 1, sizeof(amk_issue))) {
        v->oom = 1;
        r->truncated = 1;
        return;
    }
    is = &r->items[r->n_items++];
    memset(is, 0, sizeof *is);
    is->check = c;
    is->is_error = amk_check_is_error(c);
    is->task = task;
    is->buffer = buffer;
    is->counter = counter;
    va_start(ap, fmt);
    vsnprintf(is->message, sizeof is->message, fmt, ap);
    va_end(ap);
}

/* ---- pass 1: buffers, counters, task ids ---------------------------------------------------------- */

typedef struct amk__v_named { const char *name; int idx; } amk__v_named;

AMK__FN int amk__v_cmp_named(const void *x, const void *y) {
    const amk__v_named *a = (const amk__v_named *)x, *b = (const amk__v_named *)y;
    int r = strcmp(a->name, b->name);
    return r ? r : (a->idx > b->idx) - (a->idx < b->idx);
}
AMK__FN int amk__v_cmp_pair(const void *x, const void *y) {
    const amk__v_pair *a = (const amk__v_pair *)x, *b = (const amk__v_pair *)y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}
AMK__FN int amk__v_cmp_key3(const void *x, const void *y) {
    const amk__v_key3 *a = (const amk__v_key3 *)x, *b = (const amk__v_key3 *)y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    return (a->c > b->c) - (a->c < b->c);
}

AMK__FN void amk__v_buffers(amk__vctx *v) {
    const amk_program *p = v->p;
    amk__v_named *names;
    char bn[64];
    int i, d, nn = 0;
    for (i = 0; i < v->nb; i++) {
        const amk_buffer *b = &p->buffers[i];
        amk__v_bname(p, i, bn, sizeof bn);
        if (b->id != i)
            amk__v_issue(v, AMK_CHECK_REF_BUFFER, -1, i, -1,
                         "%s has id %d; a buffer id must equal its index (tasks name buffers by index)",
                         bn, b->id);
        if (b->kind < 0 || b->kind >= AMK_KIND_COUNT || b->dtype < 0 || b->dtype >= AMK_DTYPE_COUNT ||
            b->space < 0 || b->space >= AMK_SPACE_COUNT) {
            v->buf_enum[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_ENUM, -1, i, -1,
                         "%s has kind %d, dtype %d, space %d; valid codes are kind 0..%d, dtype 0..%d, space 0..%d",
                         bn, b->kind, b->dtype, b->space, AMK_KIND_COUNT - 1, AMK_DTYPE_COUNT - 1,
                         AMK_SPACE_COUNT - 1);
        }
        if (b->rank < 0 || b->rank > AMK_MAX_RANK) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s has rank %d; the ABI holds 0..%d",
                         bn, b->rank, AMK_MAX_RANK);
            continue;
        }
        for (d = 0; d < b->rank && b->shape[d] >= 0; d++) {}
        if (d < b->rank) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s has dimension %d of size %lld",
                         bn, d, (long long)b->shape[d]);
        } else if (amk_buffer_numel(b) < 0) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s: its element count overflows int64", bn);
        } else if (!v->buf_enum[i] && amk__buffer_nbytes(b) < 0) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s: its byte size overflows int64", bn);
        }
    }
    names = (amk__v_named *)amk__calloc((size_t)v->nb + 1, sizeof(amk__v_named));
    if (!names) { v->oom = 1; return; }
    for (i = 0; i < v->nb; i++)
        if (p->buffers[i].name) { names[nn].name = p->buffers[i].name; names[nn++].idx = i; }
    qsort(names, (size_t)nn, sizeof *names, amk__v_cmp_named);
    for (i = 1; i < nn; i++) {
        int first = i - 1;
        if (strcmp(names[i].name, names[i - 1].name) != 0) continue;
        while (first > 0 && strcmp(names[first - 1].name, names[i].name) == 0) first--;
        amk__v_issue(v, AMK_CHECK_NAME_DUP, -1, names[i].idx, -1,
                     "buffers %d and %d are both named '%.60s'", names[first].idx, names[i].idx,
                     names[i].name);
    }
    amk__free(names);
}

AMK__FN void amk__v_counters_and_ids(amk__vctx *v) {
    const amk_program *p = v->p;
    amk__v_pair *ids = v->ids;
    char tn[64], tn2[64];
    int i;
    for (i = 0; i < v->nc; i++) {
        const amk_counter *c = &p->counters[i];
        if (c->id != i)
            amk__v_issue(v, AMK_CHECK_REF_COUNTER, -1, -1, i,
                         "counter at index %d has id %d; a counter id must equal its index", i, c->id);
        if (c->init != 0)
            amk__v_issue(v, AMK_CHECK_COUNTER_INIT, -1, -1, i,
                         "counter %d starts at %lld; counters are zeroed before every pass (init must be 0)",
                         i, (long long)c->init);
    }
    for (i = 0; i < v->n; i++) {
        ids[i].a = p->tasks[i].id;
        ids[i].b = i;
        if (p->tasks[i].id < 0)
            amk__v_issue(v, AMK_CHECK_TASK_ID, i, -1, -1, "%s has a negative id",
                         amk__v_tname(p, i, tn, sizeof tn));
    }
    qsort(ids, (size_t)v->n, sizeof *ids, amk__v_cmp_pair);
    for (i = 1; i < v->n; i++) {
        int first = i - 1;
        if (ids[i].a != ids[i - 1].a) continue;
        while (first > 0 && ids[first - 1].a == ids[i].a) first--;
        amk__v_issue(v, AMK_CHECK_TASK_ID, ids[i].b, -1, -1,
                     "%s (at index %d) has the same id as %s (at index %d)",
                     amk__v_tname(p, ids[i].b, tn, sizeof tn), ids[i].b,
                     amk__v_tname(p, ids[first].b, tn2, sizeof tn2), ids[first].b);
    }
}

/* Index of the task with this id (ids sorted by pass 1), or -1. */
AMK__FN int amk__v_find_id(const amk__vctx *v, int id) {
    const amk__v_pair *ids = v->ids;
    int lo = 0, hi = v->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ids[mid].a < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n && ids[lo].a == id ? ids[lo].b : -1;
}

/* ---- pass 2: each task alone -------------------------------------------------------------------- */

/* ABI_CAP for one of a task's lists; 1 if it failed. */
AMK__FN int amk__v_cap(amk__vctx *v, int ti, const char *tn, const char *what, int n,
                       const void *items, int cap) {
    if (n < 0 || (n > 0 && !items)) {
        amk__v_issue(v, AMK_CHECK_ABI_CAP, ti, -1, -1, "%s has a malformed %s list (count %d%s)", tn,
                     what, n, items ? "" : ", no array");
        return 1;
    }
    if (n > cap) {
        amk__v_issue(v, AMK_CHECK_ABI_CAP, ti, -1, -1, "%s has %d %s; the ABI holds %d", tn, n, what, cap);
        return 1;
    }
    return 0;
}

/* Checks one buffer reference of a task; 1 if it names no buffer. */
AMK__FN int amk__v_ref(amk__vctx *v, int ti, const char *tn, const char *what, int j, int x) {
    if (x >= 0 && x < v->nb) return 0;
    amk__v_issue(v, AMK_CHECK_REF_BUFFER, ti, -1, -1, "%s %s %d names buffer %d; the program has %d buffers",
                 tn, what, j, x, v->nb);
    return 1;
}

AMK__FN void amk__v_param_desc(const amk_param *pr, char *buf, size_t size) {
    switch (pr->type) {
    case AMK_PARAM_INT: snprintf(buf, size, "the integer %lld", (long long)pr->i); break;
    case AMK_PARAM_REAL: snprintf(buf, size, "the real %g", pr->f); break;
    case AMK_PARAM_BOOL: snprintf(buf, size, "a bool"); break;
    case AMK_PARAM_STRING: snprintf(buf, size, "a string"); break;
    case AMK_PARAM_NULL: snprintf(buf, size, "null"); break;
    default: snprintf(buf, size, "of unknown type %d", (int)pr->type); break;
    }
}

/* PARAM_TYPE, PARAM_UNKNOWN and PARAM_MISSING for one task; 1 if an error was found. */
AMK__FN int amk__v_params(amk__vctx *v, int ti, const char *tn, const amk_op_spec *spec) {
    const amk_task *t = &v->p->tasks[ti];
    int i, k, bad = 0, np = amk__v_len(t->n_params, t->params, INT_MAX);
    char desc[64];
    if (t->n_params < 0 || (t->n_params > 0 && !t->params)) {
        amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1, "%s has a malformed param list (count %d)",
                     tn, t->n_params);
        bad = 1;
    }
    for (i = 0; i < np; i++) {
        const amk_param *pr = &t->params[i];
        char ty;
        if (!pr->key) {
            amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1, "%s param %d has no key", tn, i);
            bad = 1;
            continue;
        }
        ty = amk__param_field_type(pr->key);
        amk__v_param_desc(pr, desc, sizeof desc);
        if (ty == 'i' && (pr->type != AMK_PARAM_INT || pr->i < INT32_MIN || pr->i > INT32_MAX)) {
            amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1, "%s param '%s' must be an int32; it is %s",
                         tn, pr->key, desc);
            bad = 1;
        } else if (ty == 'f' && !(pr->type == AMK_PARAM_INT ||
                                  (pr->type == AMK_PARAM_REAL && pr->f == pr->f &&
                                   pr->f <= DBL_MAX && pr->f >= -DBL_MAX))) {
            amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1,
                         "%s param '%s' must be a finite real number; it is %s", tn, pr->key, desc);
            bad = 1;
        } else if (ty == 0) {
            amk__v_issue(v, AMK_CHECK_PARAM_UNKNOWN, ti, -1, -1,
                         "%s has param '%.40s', which no opcode knows (it will not marshal)", tn, pr->key);
        }
    }
    for (k = 0; spec && k < (int)(sizeof spec->required / sizeof spec->required[0]) && spec->required[k]; k++)
        if (!amk__v_param(t, spec->required[k])) {
            amk__v_issue(v, AMK_CHECK_PARAM_MISSING, ti, -1, -1, "%s (%s) needs param '%s'", tn,
                         spec->name, spec->required[k]);
            bad = 1;
        }
    return bad;
}

AMK__FN void amk__v_tasks(amk__vctx *v) {
    const amk_program *p = v->p;
    char tn[64], bn[64], msg[200];
    int ti, j;
    for (ti = 0; ti < v->n; ti++) {
        const amk_task *t = &p->tasks[ti];
        const amk_op_spec *spec = amk_op_spec_get(t->op);
        int bad = 0, refs_ok = 1, cap_in, cap_out, ni, no, nw;
        amk__v_tname(p, ti, tn, sizeof tn);
        cap_in = amk__v_cap(v, ti, tn, "inputs", t->n_inputs, t->inputs, AMK_MAX_INPUTS);
        cap_out = amk__v_cap(v, ti, tn, "outputs", t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
        bad |= cap_in | cap_out | amk__v_cap(v, ti, tn, "waits", t->n_waits, t->waits, AMK_MAX_WAITS);
        ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
        no = amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
        nw = amk__v_len(t->n_waits, t->waits, AMK_MAX_WAITS);
        for (j = 0; j < ni; j++) {
            int x = t->inputs[j];
            if (amk__v_ref(v, ti, tn, "input", j, x)) { bad = 1; refs_ok = 0; }
            else if (v->buf_enum[x] || v->buf_shape[x]) refs_ok = 0;
        }
        for (j = 0; j < no; j++) {
            int x = t->outputs[j];
            if (amk__v_ref(v, ti, tn, "output", j, x)) { bad = 1; refs_ok = 0; v->bad_output = 1; }
            else if (v->buf_enum[x] || v->buf_shape[x]) refs_ok = 0;
        }
        if (t->out_counter < 0 || t->out_counter >= v->nc) {
            amk__v_issue(v, AMK_CHECK_REF_COUNTER, ti, -1, -1,
                         "%s signals counter %d; the program has %d counters", tn, t->out_counter, v->nc);
            bad = 1;
            v->bad_signal = 1;
        }
        for (j = 0; j < nw; j++) {
            int c = t->waits[j].counter;
            if (c >= 0 && c < v->nc) continue;
            amk__v_issue(v, AMK_CHECK_REF_COUNTER, ti, -1, -1,
                         "%s wait %d names counter %d; the program has %d counters", tn, j, c, v->nc);
            bad = 1;
        }
        if (!spec) {
            if (t->op_name)
                amk__v_issue(v, AMK_CHECK_OP_UNKNOWN, ti, -1, -1, "%s has unknown opcode '%.40s'", tn, t->op_name);
            else
                amk__v_issue(v, AMK_CHECK_OP_UNKNOWN, ti, -1, -1, "%s has unknown opcode %d", tn, t->op);
            bad = 1;
        } else {
            int lo = spec->min_inputs < 0 ? 0 : spec->min_inputs;
            int hi = spec->max_inputs < 0 ? AMK_MAX_INPUTS : spec->max_inputs;
            /* why: weight-only quantized GEMV/GEMM takes x, qW, scales[, zeros] (IR_SPEC_NOTES) */
            if ((t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE) && amk__v_param(t, "qdtype"))
                hi = 4;
            if (!cap_in && (t->n_inputs < lo || t->n_inputs > hi)) {
                amk__v_issue(v, AMK_CHECK_OP_ARITY, ti, -1, -1, "%s (%s) has %d inputs; it takes %d..%d",
                             tn, spec->name, t->n_inputs, lo, hi);
                bad = 1;
            }
            if (!cap_out && spec->n_outputs >= 0 && t->n_outputs != spec->n_outputs) {
                amk__v_issue(v, AMK_CHECK_OP_ARITY, ti, -1, -1, "%s (%s) has %d outputs; it takes %d",
                             tn, spec->name, t->n_outputs, spec->n_outputs);
                bad = 1;
            }
        }
        bad |= amk__v_params(v, ti, tn, spec);
        for (j = 0; j < no; j++) {
            int x = t->outputs[j];
            if (x < 0 || x >= v->nb || v->buf_enum[x] || !amk__v_readonly_kind(p->buffers[x].kind)) continue;
            amk__v_issue(v, AMK_CHECK_WRITE_READONLY, ti, x, -1, "%s writes %s, a read-only %s buffer", tn,
                         amk__v_bname(p, x, bn, sizeof bn), amk_kind_name(p->buffers[x].kind));
        }
        if (!bad && refs_ok && spec) {
            amk_check which = AMK_CHECK_OP_SHAPE;
            msg[0] = 0;
            if (!amk__op_check(p, t, &which, msg, sizeof msg)) {
                if ((int)which < 0 || which >= AMK_CHECK_COUNT) which = AMK_CHECK_OP_SHAPE;
                amk__v_issue(v, which, ti, -1, -1, "%s: %s", tn, msg);
                bad = 1;
            }
        }
        v->task_bad[ti] = (unsigned char)bad;
    }
}

/* ---- pass 3: waits ------------------------------------------------------------------------------ */

AMK__FN void amk__v_waits(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    char tn[64];
    int ti, j;
    for (ti = 0; ti < v->n; ti++) {
        const amk_task *t = &p->tasks[ti];
        int nw = amk__v_len(t->n_waits, t->waits, AMK_MAX_WAITS);
        for (j = 0; j < nw; j++) {
            int c = t->waits[j].counter, np;
            long long thr = (long long)t->waits[j].threshold;
            if (c < 0 || c >= v->nc) continue; /* REF_COUNTER */
            np = g->prod_off[c + 1] - g->prod_off[c];
            amk__v_tname(p, ti, tn, sizeof tn);
            if (c == g->out_c[ti])
                amk__v_issue(v, AMK_CHECK_WAIT_SELF, ti, -1, c,
                             "%s waits on counter %d, which only its own completion can advance: it never starts",
                             tn, c);
            else if (thr >= 1 && thr > np && v->bad_signal)
                continue; /* why: the task with a bad out_counter may be the missing producer */
            else if (np == 0)
                amk__v_issue(v, AMK_CHECK_WAIT_UNSATISFIABLE, ti, -1, c,
                             "%s waits on counter %d for %lld, but no task signals counter %d", tn, c, thr, c);
            else if (thr < 1 || thr > np)
                amk__v_issue(v, AMK_CHECK_WAIT_UNSATISFIABLE, ti, -1, c,
                             "%s waits on counter %d for %lld; it has %d producer%s (a threshold must be in 1..%d)",
                             tn, c, thr, np, np == 1 ? "" : "s", np);
            else if (thr < np)
                amk__v_issue(v, AMK_CHECK_WAIT_PARTIAL_JOIN, ti, -1, c,
                             "%s waits on counter %d for %lld of its %d producers: the first to "
                             "finish may not be the ones it needs (wait for %d)",
                             tn, c, thr, np, np);
        }
    }
}

/* ---- pass 4: the graph ------------------------------------------------------------------------- */

/* Kahn over the dependency graph (plus queue edges when qprev is given); on a cycle reports one
   witness as check c. Returns 1 if acyclic, 0 if not or on out of memory (v->oom). */
AMK__FN int amk__v_acyclic(amk__vctx *v, const int *qprev, const int *qnext, amk_check c, int *order) {
    size_t total = (size_t)v->n + (size_t)v->nc;
    int *indeg = (int *)amk__calloc(total, sizeof(int));
    int *pos = NULL, *walk = NULL, *cyc = NULL, m, done;
    amk__sb sb;
    if (!indeg) { v->oom = 1; return 0; }
    done = amk__vgraph_kahn(&v->g, qprev, qnext, indeg, order);
    if ((size_t)done == total) { amk__free(indeg); return 1; }
    pos = (int *)amk__calloc(total, sizeof(int));
    walk = (int *)amk__calloc(total, sizeof(int));
    cyc = (int *)amk__calloc(total, sizeof(int));
    memset(&sb, 0, sizeof sb);
    if (!pos || !walk || !cyc) {
        v->oom = 1;
    } else if ((m = amk__vgraph_cycle(&v->g, qprev, indeg, pos, walk, cyc)) > 0) {
        amk__v_cycle_text(v->p, &v->g, cyc, m, &sb);
        if (sb.oom) v->oom = 1;
        else amk__v_issue(v, c, cyc[0], -1, -1, "%s%s",
                          c == AMK_CHECK_SM_QUEUE_DEADLOCK ? "the per-SM queues deadlock: " : "", sb.p);
    } else {
        amk__v_issue(v, c, -1, -1, -1, "the dependency graph has a cycle");
    }
    amk__sb_free(&sb);
    amk__free(indeg); amk__free(pos); amk__free(walk); amk__free(cyc);
    return 0;
}

/* ---- pass 5: SMs -------------------------------------------------------------------------------- */

/* SM_QUEUE_ORDER: for every edge a -> b with sm[a] == sm[b], a must come first in the list. Per
   counter, producers sorted by (sm, index): the last one on b's SM is the one that must precede b.
   Returns the number of issues. */
AMK__FN int amk__v_queue_order(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    amk__v_pair *pe;
    char tn[64], tn2[64];
    int c, k, issues = 0;
    pe = (amk__v_pair *)amk__calloc((size_t)g->prod_off[g->nc] + 1, sizeof(amk__v_pair));
    if (!pe) { v->oom = 1; return 0; }
    for (k = 0; k < g->prod_off[g->nc]; k++) { pe[k].a = p->tasks[g->prod[k]].sm; pe[k].b = g->prod[k]; }
    for (c = 0; c < g->nc; c++) {
        int lo0 = g->prod_off[c], hi0 = g->prod_off[c + 1];
        qsort(pe + lo0, (size_t)(hi0 - lo0), sizeof *pe, amk__v_cmp_pair);
        for (k = g->wt_off[c]; k < g->wt_off[c + 1]; k++) {
            int b = g->wt[k], sm = p->tasks[b].sm, lo = lo0, hi = hi0, a;
            if (sm < 0 || (k > g->wt_off[c] && g->wt[k - 1] == b)) continue;
            while (lo < hi) { /* first producer with an SM above sm */
                int mid = lo + (hi - lo) / 2;
                if (pe[mid].a <= sm) lo = mid + 1;
                else hi = mid;
            }
            if (lo == lo0 || pe[lo - 1].a != sm || (a = pe[lo - 1].b) < b) continue;
            amk__v_issue(v, AMK_CHECK_SM_QUEUE_ORDER, b, -1, c,
                         "%s (queue position %d on SM %d) waits on counter %d, signalled by %s, which comes "
                         "later (position %d) in the same SM's queue: SM %d blocks forever",
                         amk__v_tname(p, b, tn, sizeof tn), b, sm, c, amk__v_tname(p, a, tn2, sizeof tn2),
                         a, sm);
            issues++;
        }
    }
    amk__free(pe);
    return issues;
}

/* SM_QUEUE_DEADLOCK: dependencies plus "next in this SM's queue" edges must stay acyclic. */
AMK__FN void amk__v_queue_deadlock(amk__vctx *v) {
    const amk_program *p = v->p;
    amk__v_pair *q = (amk__v_pair *)amk__calloc((size_t)v->n + 1, sizeof(amk__v_pair));
    int *qprev = (int *)amk__calloc((size_t)v->n + 1, sizeof(int));
    int *qnext = (int *)amk__calloc((size_t)v->n + 1, sizeof(int));
    int *order = (int *)amk__calloc((size_t)v->n + (size_t)v->nc + 1, sizeof(int));
    int i, nq = 0;
    if (!q || !qprev || !qnext || !order) {
        v->oom = 1;
    } else {
        for (i = 0; i < v->n; i++) {
            qprev[i] = qnext[i] = -1;
            if (p->tasks[i].sm >= 0) { q[nq].a = p->tasks[i].sm; q[nq++].b = i; }
        }
        qsort(q, (size_t)nq, sizeof *q, amk__v_cmp_pair);
        for (i = 1; i < nq; i++)
            if (q[i].a == q[i - 1].a) { qprev[q[i].b] = q[i - 1].b; qnext[q[i - 1].b] = q[i].b; }
        amk__v_acyclic(v, qprev, qnext, AMK_CHECK_SM_QUEUE_DEADLOCK, order);
    }
    amk__free(q); amk__free(qprev); amk__free(qnext); amk__free(order);
}

AMK__FN void amk__v_sms(amk__vctx *v) {
    const amk_program *p = v->p;
    char tn[64];
    int i, assigned = 0, unassigned = 0, first_un = -1;
    for (i = 0; i < v->n; i++) {
        int sm = p->tasks[i].sm;
        if (sm >= 0) assigned++;
        if (sm == -1 && unassigned++ == 0) first_un = i;
        if (sm < -1)
            amk__v_issue(v, AMK_CHECK_SM_RANGE, i, -1, -1, "%s is on SM %d (-1 means unassigned)",
                         amk__v_tname(p, i, tn, sizeof tn), sm);
    }
    if (!assigned) return;
    if (unassigned)
        amk__v_issue(v, AMK_CHECK_SM_MIXED, first_un, -1, -1,
                     "%d task%s have an SM and %d do not (the first without one is %s)", assigned,
                     assigned == 1 ? "" : "s", unassigned, amk__v_tname(p, first_un, tn, sizeof tn));
    if (p->has_target)
        for (i = 0; i < v->n; i++)
            if (p->tasks[i].sm >= p->target.num_sms)
                amk__v_issue(v, AMK_CHECK_SM_RANGE, i, -1, -1, "%s is on SM %d; the target has %d SMs",
                             amk__v_tname(p, i, tn, sizeof tn), p->tasks[i].sm, p->target.num_sms);
    if (v->acyclic && !v->oom && amk__v_queue_order(v) == 0 && !v->oom) amk__v_queue_deadlock(v);
}

/* ---- pass 6: uses ------------------------------------------------------------------------------- */

/* Builds the reader and writer lists of every buffer: one entry per (buffer, task) in task order.
   KV_APPEND's in-place cache input is not a read. 0 on out of memory. */
AMK__FN int amk__v_uses(amk__vctx *v) {
    const amk_program *p = v->p;
    int pass, ti, j, x, *last = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    int *rcur = NULL, *wcur = NULL;
    v->rd_off = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    v->wr_off = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    if (!last || !v->rd_off || !v->wr_off) { amk__free(last); return 0; }
    for (pass = 0; pass < 2; pass++) {
        for (x = 0; x < v->nb; x++) last[x] = -1;
        for (ti = 0; ti < v->n; ti++) {
            const amk_task *t = &p->tasks[ti];
            int ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
            int no = amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
            for (j = 0; j < ni; j++) {
                x = t->inputs[j];
                if (x < 0 || x >= v->nb || last[x] == ti || amk__v_inplace_target(t, j)) continue;
                last[x] = ti;
                if (pass == 0) v->rd_off[x + 1]++;
                else v->rd[rcur[x]++] = ti;
            }
            for (j = 0; j < no; j++) {
                x = t->outputs[j];
                if (x < 0 || x >= v->nb || last[x] == -2 - ti) continue;
                last[x] = -2 - ti; /* why: a separate mark so a read and a write both count */
                if (pass == 0) v->wr_off[x + 1]++;
                else v->wr[wcur[x]++] = ti;
            }
        }
        if (pass == 1) break;
        for (x = 0; x < v->nb; x++) {
            v->rd_off[x + 1] += v->rd_off[x];
            v->wr_off[x + 1] += v->wr_off[x];
        }
        v->rd = (int *)amk__calloc((size_t)v->rd_off[v->nb] + 1, sizeof(int));
        v->wr = (int *)amk__calloc((size_t)v->wr_off[v->nb] + 1, sizeof(int));
        rcur = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
        wcur = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
        if (!v->rd || !v->wr || !rcur || !wcur) { amk__free(last); amk__free(rcur); amk__free(wcur); return 0; }
        memcpy(rcur, v->rd_off, (size_t)v->nb * sizeof(int));
        memcpy(wcur, v->wr_off, (size_t)v->nb * sizeof(int));
    }
    amk__free(last); amk__free(rcur); amk__free(wcur);
    return 1;
}

/* Copies per-buffer task lists without the tasks that failed pass 2. 0 on out of memory. */
AMK__FN int amk__v_good_list(const amk__vctx *v, const int *off, const int *list, int **goff, int **glist) {
    int x, k, n = 0;
    *goff = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    *glist = (int *)amk__calloc((size_t)off[v->nb] + 1, sizeof(int));
    if (!*goff || !*glist) return 0;
    for (x = 0; x < v->nb; x++) {
        (*goff)[x] = n;
        for (k = off[x]; k < off[x + 1]; k++)
            if (!v->task_bad[list[k]]) (*glist)[n++] = list[k];
    }
    (*goff)[v->nb] = n;
    return 1;
}

/* READ_UNWRITTEN, OUTPUT_UNREACHED, ONCHIP_SM, ONCHIP_UNASSIGNED: facts about uses alone. */
AMK__FN void amk__v_use_checks(amk__vctx *v) {
    const amk_program *p = v->p;
    char tn[64], tn2[64], bn[64];
    int x, k;
    for (x = 0; x < v->nb; x++) {
        const amk_buffer *b = &p->buffers[x];
        int nr = v->rd_off[x + 1] - v->rd_off[x], nw = v->wr_off[x + 1] - v->wr_off[x];
        if (v->buf_enum[x]) continue;
        amk__v_bname(p, x, bn, sizeof bn);
        /* why: with a task writing a missing buffer id, "nothing writes x" may be that typo */
        if (nr && !nw && !v->bad_output && (b->kind == AMK_KIND_ACTIVATION || b->kind == AMK_KIND_IO_OUTPUT))
            amk__v_issue(v, AMK_CHECK_READ_UNWRITTEN, v->rd[v->rd_off[x]], x, -1,
                         "%s (%s) is read by %s%s but no task writes it", bn, amk_kind_name(b->kind),
                         amk__v_tname(p, v->rd[v->rd_off[x]], tn, sizeof tn),
                         nr > 1 ? " and others" : "");
        if (!nw && !v->bad_output && b->kind == AMK_KIND_IO_OUTPUT)
            amk__v_issue(v, AMK_CHECK_OUTPUT_UNREACHED, -1, x, -1, "output %s is never written", bn);
        if (b->space == AMK_SPACE_SMEM || b->space == AMK_SPACE_REGISTER) {
            int on = -1, off = -1, un = -1, first = -1, multi = 0;
            for (k = 0; k < nr + nw; k++) {
                int u = k < nr ? v->rd[v->rd_off[x] + k] : v->wr[v->wr_off[x] + k - nr];
                int sm = p->tasks[u].sm;
                if (first < 0) first = u;
                else if (u != first) multi = 1;
                if (sm < 0) { if (un < 0) un = u; }
                else if (on < 0) on = u;
                else if (sm != p->tasks[on].sm && off < 0) off = u;
            }
            if (off >= 0)
                amk__v_issue(v, AMK_CHECK_ONCHIP_SM, on, x, -1,
                             "%s lives in %s but %s runs on SM %d and %s on SM %d: on-chip memory does not cross SMs",
                             bn, amk_space_name(b->space), amk__v_tname(p, on, tn, sizeof tn),
                             p->tasks[on].sm, amk__v_tname(p, off, tn2, sizeof tn2), p->tasks[off].sm);
            if (multi && un >= 0)
                amk__v_issue(v, AMK_CHECK_ONCHIP_UNASSIGNED, un, x, -1,
                             "%s lives in %s and is used by several tasks, %s among them "
                             "without an SM: they must all run on one SM",
                             bn, amk_space_name(b->space), amk__v_tname(p, un, tn, sizeof tn));
        }
    }
}

/* PAGE_REF; marks page_ok for the buffers whose page entry is right. */
AMK__FN void amk__v_page_refs(amk__vctx *v) {
    const amk_program *p = v->p;
    char bn[64];
    int i, x, np = amk__v_len(p->n_pages, p->pages, INT_MAX);
    if (!p->has_pages) return;
    if (p->n_pages < 0 || (p->n_pages > 0 && !p->pages))
        amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, -1, -1, "the page list is malformed (count %d)", p->n_pages);
    for (i = 0; i < np; i++) {
        const amk_page *pg = &p->pages[i];
        if (pg->id != i)
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, -1, -1,
                         "page at index %d has id %d; a page id must equal its index", i, pg->id);
        if (pg->space < 0 || pg->space >= AMK_SPACE_COUNT || pg->nbytes < 0)
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, -1, -1, "page %d has space %d and %lld bytes", i,
                         pg->space, (long long)pg->nbytes);
    }
    for (x = 0; p->buffer_page && x < v->nb; x++) {
        const amk_buffer *b = &p->buffers[x];
        int pg = p->buffer_page[x], ok = 1;
        int64_t nbytes;
        if (pg == -1) continue;
        amk__v_bname(p, x, bn, sizeof bn);
        if (pg < 0 || pg >= np) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s is bound to page %d; there are %d pages", bn, pg, np);
            continue;
        }
        if (v->buf_enum[x]) continue;
        if (b->kind != AMK_KIND_ACTIVATION) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s is a %s buffer; only activations live in pages",
                         bn, amk_kind_name(b->kind));
            ok = 0;
        }
        nbytes = v->buf_shape[x] ? -1 : amk__buffer_nbytes(b);
        if (nbytes > p->pages[pg].nbytes) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s needs %lld bytes but page %d holds %lld", bn,
                         (long long)nbytes, pg, (long long)p->pages[pg].nbytes);
            ok = 0;
        }
        if (p->pages[pg].space != b->space) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s is in %s but page %d is in %s", bn,
                         amk_space_name(b->space), pg, amk_space_name(p->pages[pg].space));
            ok = 0;
        }
        v->page_ok[x] = (unsigned char)ok;
    }
}

/* ---- pass 7: happens-before --------------------------------------------------------------------- */

/* Appends n task indices to the pool; returns their offset or -1 (v->oom). */
AMK__FN int amk__v_pool_add(amk__vctx *v, const int *tasks, int n) {
    int off = v->n_pool;
    if (n > INT_MAX - off || !amk__grow((void **)&v->pool, &v->cap_pool, off + n, sizeof(int))) {
        v->oom = 1;
        return -1;
    }
    if (n) memcpy(v->pool + off, tasks, (size_t)n * sizeof(int));
    v->n_pool += n;
    return off;
}

AMK__FN void amk__v_query(amk__vctx *v, int set_off, int set_len, int target, int excl, int kind,
                          int buffer, int other) {
    amk__vq *q;
    if (v->oom || set_off < 0) return;
    if (!amk__grow((void **)&v->qs, &v->cap_qs, v->n_qs + 1, sizeof(amk__vq))) { v->oom = 1; return; }
    q = &v->qs[v->n_qs++];
    q->set_off = set_off;
    q->set_len = set_len;
    q->target = target;
    q->excl = excl;
    q->found = -1;
    q->kind = kind;
    q->buffer = buffer;
    q->other = other;
}

/* The region a writer writes: columns [n0, n1) of rows [m0, m1) (IR_SPEC_NOTES 1), in the units
   of its kind: 0 the whole buffer; 1 columns of the output's last axis (GEMV/GEMM tiles and the
   fused tiles, whose KV-row form writes columns of every cache row it may pick; ARGMAX_PARTIAL's
   pair; a PRENORM ATTENTION_O's kv heads in its caches, the KV-row tiles' columns); 2 flat elements
   (ATTENTION_DECODE: the rows of its query heads). Of buffer x: an RMSNORM_GEMV with ARGMAX writes
   its pair (kind 1) into its second output. Regions of different kinds never compare as disjoint
   (amk__v_waw). */
typedef struct amk__v_region { int64_t n0, n1, m0, m1; int task, kind; } amk__v_region;

AMK__FN void amk__v_region_of(const amk_task *t, int ti, int x, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile");
    const amk_param *flags = amk__v_param(t, "flags"), *part = amk__v_param(t, "part");
    r->task = ti;
    r->kind = 0;
    r->n0 = r->m0 = INT64_MIN;
    r->n1 = r->m1 = INT64_MAX;
    if (t->op == AMK_OP_RMSNORM_GEMV && flags && (flags->i & AMK_GEMV_FLAG_ARGMAX) && t->n_outputs == 2 &&
        t->outputs && x == t->outputs[1]) { /* its (value, index) pair */
        if (!part || t->outputs[0] == x) return;
        r->kind = 1;
        r->n0 = 2 * part->i;
        r->n1 = r->n0 + 2;
        return;
    }
    if (!off || !w) return;
    switch (t->op) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE: case AMK_OP_RMSNORM_GEMV: case AMK_OP_RMSNORM_SWIGLU:
        r->kind = 1;
        r->n0 = off->i; /* why: pass 2 proved these are int32, so the sums cannot overflow */
        r->n1 = off->i + w->i;
        if (t->op == AMK_OP_GEMM_TILE) {
            const amk_param *moff = amk__v_param(t, "m_off"), *mw = amk__v_param(t, "M_tile");
            if (!mw) { r->kind = 0; r->n0 = INT64_MIN; r->n1 = INT64_MAX; return; }
            r->m0 = moff ? moff->i : 0;
            r->m1 = r->m0 + mw->i;
        }
        return;
    case AMK_OP_ARGMAX_PARTIAL: { /* its (value, index) pair: columns 2*part, 2*part+1 of every row */
        const amk_param *part = amk__v_param(t, "part");
        if (!part) return;
        r->kind = 1;
        r->n0 = 2 * part->i;
        r->n1 = r->n0 + 2;
        return;
    }
    case AMK_OP_ATTENTION_DECODE: {
        amk_params_t P;
        int64_t rw;
        amk_task_marshal_params(t, &P);
        if (P.n_kv_heads < 1 || P.n_heads % P.n_kv_heads || P.head_dim < 1) return; /* pass 2 reports it */
        rw = (int64_t)(P.n_heads / P.n_kv_heads) * (P.head_dim + ((uint32_t)P.flags & AMK_ATTN_FLAG_PARTIAL ? 2 : 0));
        r->kind = 2;
        r->n0 = off->i * rw;
        r->n1 = (off->i + w->i) * rw;
        return;
    }
    case AMK_OP_ATTENTION_O: { /* a PRENORM writer's cache: its kv heads' columns of the cache row */
        const amk_param *hd = amk__v_param(t, "head_dim");
        if (!hd || t->n_outputs != 3 || !t->outputs || t->outputs[0] == x) return;
        r->kind = 1;
        r->n0 = off->i * hd->i;
        r->n1 = (off->i + w->i) * hd->i;
        return;
    }
    default:
        return;
    }
}

AMK__FN int amk__v_cmp_region(const void *x, const void *y) {
    const amk__v_region *a = (const amk__v_region *)x, *b = (const amk__v_region *)y;
    if (a->n0 != b->n0) return a->n0 < b->n0 ? -1 : 1;
    return (a->task > b->task) - (a->task < b->task);
}

AMK__FN int amk__v_overlap(const amk__v_region *a, const amk__v_region *b) {
    if (a->kind != b->kind) return 1;
    return a->n0 < a->n1 && a->m0 < a->m1 && b->n0 < b->n1 && b->m0 < b->m1 && a->n0 < b->n1 &&
           b->n0 < a->n1 && a->m0 < b->m1 && b->m0 < a->m1;
}

/* RACE_WAW questions for one buffer (IR_SPEC_NOTES 1). Writers signalling one counter form a
   group; writers of different groups must be ordered, and it is enough to ask it of consecutive
   groups sorted by their first topological rank (ordering is transitive through a non-empty
   group, and a later group can never precede an earlier one). Inside a group, overlapping
   regions (found by a sort on n_off) must be ordered too. */
AMK__FN void amk__v_waw(amk__vctx *v, int x, amk__v_key3 *tmp, amk__v_region *reg, amk__v_pair *grp) {
    const amk__vgraph *g = &v->g;
    int nw = v->gwr_off[x + 1] - v->gwr_off[x], i, j, k, base = v->n_pool, ng = 0, overlaps = 0;
    for (i = 0; i < nw; i++) {
        int t = v->gwr[v->gwr_off[x] + i];
        tmp[i].a = g->out_c[t];
        tmp[i].b = g->rank[t];
        tmp[i].c = t;
    }
    qsort(tmp, (size_t)nw, sizeof *tmp, amk__v_cmp_key3);
    for (i = 0; i < nw; i++) {
        if (amk__v_pool_add(v, &tmp[i].c, 1) < 0) return;
        if (i == 0 || tmp[i].a != tmp[i - 1].a) grp[ng++].a = base + i; /* a group starts */
    }
    for (i = 0; i < ng; i++) grp[i].b = (i + 1 < ng ? grp[i + 1].a : base + nw) - grp[i].a;
    /* tmp is free again: the groups as (first rank, pool offset, length), by first rank */
    for (i = 0; i < ng; i++) {
        tmp[i].a = g->rank[v->pool[grp[i].a]];
        tmp[i].b = grp[i].a;
        tmp[i].c = grp[i].b;
    }
    qsort(tmp, (size_t)ng, sizeof *tmp, amk__v_cmp_key3);
    for (i = 0; i + 1 < ng; i++)
        for (k = 0; k < tmp[i + 1].c; k++)
            amk__v_query(v, tmp[i].b, tmp[i].c, v->pool[tmp[i + 1].b + k], 0, AMK__VQ_WAW_COUNTER, x, -1);
    for (i = 0; i < ng && overlaps < AMK__V_RACE_CAP && !v->oom; i++) {
        int start = tmp[i].b, len = tmp[i].c;
        if (len < 2) continue;
        for (k = 0; k < len; k++) {
            int t = v->pool[start + k];
            amk__v_region_of(&v->p->tasks[t], t, x, &reg[k]);
        }
        for (k = 1; k < len && reg[k].kind == reg[0].kind; k++) {}
        if (k < len) /* why: mixed units; the sort's early stop below needs one kind, so all overlap */
            for (k = 0; k < len; k++) { reg[k].kind = 0; reg[k].n0 = reg[k].m0 = INT64_MIN; reg[k].n1 = reg[k].m1 = INT64_MAX; }
        qsort(reg, (size_t)len, sizeof *reg, amk__v_cmp_region);
        for (j = 0; j < len && overlaps < AMK__V_RACE_CAP; j++)
            for (k = j + 1; k < len && reg[k].n0 < reg[j].n1 && overlaps < AMK__V_RACE_CAP; k++) {
                int a = reg[j].task, b = reg[k].task, lo, hi;
                if (!amk__v_overlap(&reg[j], &reg[k])) continue;
                if (amk__task_accumulates(&v->p->tasks[a], x) && amk__task_accumulates(&v->p->tasks[b], x))
                    continue; /* why: additions commute */
                lo = g->rank[a] < g->rank[b] ? a : b;
                hi = lo == a ? b : a;
                amk__v_query(v, amk__v_pool_add(v, &lo, 1), 1, hi, 0, AMK__VQ_WAW_OVERLAP, x, -1);
                overlaps++;
            }
    }
}

/* RACE_READ questions of the accumulating writers of buffer x: each reads what the other writers
   left, so every writer that does not accumulate must be ordered before it, and there must be
   one (else it adds onto whatever the memory held). tmp holds at least x's writer count. */
AMK__FN void amk__v_accum(amk__vctx *v, int x, amk__v_key3 *tmp) {
    const amk_program *p = v->p;
    int k, na = 0, np = 0, off;
    char tn[64], bn[64];
    for (k = v->gwr_off[x]; k < v->gwr_off[x + 1]; k++) {
        if (amk__task_accumulates(&p->tasks[v->gwr[k]], x)) na++;
        else tmp[np++].c = v->gwr[k];
    }
    if (!na) return;
    if (!np) {
        for (k = v->gwr_off[x]; !amk__task_accumulates(&p->tasks[v->gwr[k]], x); k++) {}
        amk__v_issue(v, AMK_CHECK_READ_UNWRITTEN, v->gwr[k], x, -1,
                     "%s accumulates onto %s, but no task writes its starting value (a FILL, say)",
                     amk__v_tname(p, v->gwr[k], tn, sizeof tn), amk__v_bname(p, x, bn, sizeof bn));
        return;
    }
    off = v->n_pool; /* why: the pool grows at its end, so the np entries are contiguous */
    for (k = 0; k < np; k++)
        if (amk__v_pool_add(v, &tmp[k].c, 1) < 0) return;
    for (k = v->gwr_off[x]; k < v->gwr_off[x + 1]; k++)
        if (amk__task_accumulates(&p->tasks[v->gwr[k]], x))
            amk__v_query(v, off, np, v->gwr[k], 0, AMK__VQ_ACCUM, x, -1);
}

/* Creates every happens-before question: RACE_READ / RACE_KV, RACE_WAW, PAGE_ALIAS. */
AMK__FN void amk__v_questions(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    int x, k, maxw = 1, npe = 0;
    amk__v_key3 *tmp = NULL;
    amk__v_region *reg = NULL;
    amk__v_pair *grp = NULL;
    if (!amk__v_good_list(v, v->rd_off, v->rd, &v->grd_off, &v->grd) ||
        !amk__v_good_list(v, v->wr_off, v->wr, &v->gwr_off, &v->gwr)) {
        v->oom = 1;
        return;
    }
    for (x = 0; x < v->nb; x++)
        if (v->gwr_off[x + 1] - v->gwr_off[x] > maxw) maxw = v->gwr_off[x + 1] - v->gwr_off[x];
    tmp = (amk__v_key3 *)amk__calloc((size_t)(maxw > v->nb ? maxw : v->nb) + 1, sizeof(amk__v_key3));
    reg = (amk__v_region *)amk__calloc((size_t)maxw + 1, sizeof(amk__v_region));
    grp = (amk__v_pair *)amk__calloc((size_t)maxw + 1, sizeof(amk__v_pair));
    if (!tmp || !reg || !grp) { v->oom = 1; goto done; }
    for (x = 0; x < v->nb && !v->oom; x++) {
        int kind = p->buffers[x].kind, nw = v->gwr_off[x + 1] - v->gwr_off[x], off;
        if (v->buf_enum[x] || !amk__v_transient_kind(kind) || nw == 0) continue;
        if (v->grd_off[x + 1] > v->grd_off[x]) {
            int pb_set = -1, pb_off = -1, pb_len = 0; /* the writers a reader at position pb_set needs */
            off = amk__v_pool_add(v, v->gwr + v->gwr_off[x], nw);
            for (k = v->grd_off[x]; k < v->grd_off[x + 1]; k++) {
                const int r = v->grd[k], pb = amk__v_kv_reader_pos(p, &p->tasks[r], x);
                int j;
                if (pb < 0 || pb >= v->nb || v->wr_off[pb + 1] > v->wr_off[pb]) {
                    amk__v_query(v, off, nw, r, 1, kind == AMK_KIND_KV_CACHE ? AMK__VQ_KV : AMK__VQ_READ, x, -1);
                    continue;
                }
                if (pb != pb_set) { /* why: the pool grows at its end, so the entries are contiguous */
                    pb_set = pb;
                    pb_off = v->n_pool;
                    pb_len = 0;
                    for (j = v->gwr_off[x]; j < v->gwr_off[x + 1]; j++)
                        if (amk__v_kv_row_writer_pos(p, &p->tasks[v->gwr[j]], x) != pb) {
                            if (amk__v_pool_add(v, &v->gwr[j], 1) < 0) break;
                            pb_len++;
                        }
                }
                amk__v_query(v, pb_off, pb_len, r, 1, AMK__VQ_KV, x, -1);
            }
        }
        if (nw > 1) amk__v_waw(v, x, tmp, reg, grp);
        amk__v_accum(v, x, tmp);
    }
    /* PAGE_ALIAS (IR_SPEC_NOTES 5): the written buffers of a page sorted by their first writer's
       rank; each must be wholly used before the next one's writers run. As with WAW groups,
       consecutive pairs suffice and a failing pair cannot hold the other way round. */
    if (p->has_pages && p->buffer_page) {
        for (x = 0; x < v->nb; x++) {
            int nw = v->gwr_off[x + 1] - v->gwr_off[x], r = INT_MAX;
            if (!v->page_ok[x] || nw == 0) continue;
            for (k = v->gwr_off[x]; k < v->gwr_off[x + 1]; k++)
                if (g->rank[v->gwr[k]] < r) r = g->rank[v->gwr[k]];
            tmp[npe].a = p->buffer_page[x];
            tmp[npe].b = r;
            tmp[npe++].c = x;
        }
        qsort(tmp, (size_t)npe, sizeof *tmp, amk__v_cmp_key3);
        for (k = 0; k + 1 < npe && !v->oom; k++) {
            int a = tmp[k].c, b = tmp[k + 1].c, off, j;
            if (tmp[k].a != tmp[k + 1].a) continue;
            off = amk__v_pool_add(v, v->grd + v->grd_off[a], v->grd_off[a + 1] - v->grd_off[a]);
            if (off < 0 || amk__v_pool_add(v, v->gwr + v->gwr_off[a], v->gwr_off[a + 1] - v->gwr_off[a]) < 0) break;
            for (j = v->gwr_off[b]; j < v->gwr_off[b + 1]; j++)
                amk__v_query(v, off, v->n_pool - off, v->gwr[j], 0, AMK__VQ_PAGE, a, b);
        }
    }
done:
    amk__free(tmp); amk__free(reg); amk__free(grp);
}

/* Answers every question: ancestor rows for one block of topological ranks at a time. */
AMK__FN void amk__v_answer(amk__vctx *v) {
    const amk__vgraph *g = &v->g;
    size_t total = (size_t)v->n + (size_t)v->nc, W = AMK__V_BLOCK_WORDS;
    amk__word *rows, *mask;
    int B, qi, k;
    if (!v->n_qs || !v->n) return;
    if (W > AMK__WORDS(v->n)) W = AMK__WORDS(v->n);
    while (W > 1 && total * W * sizeof(amk__word) > AMK__V_HB_BYTES) W /= 2;
    rows = (amk__word *)amk__calloc(total * W, sizeof(amk__word));
    mask = (amk__word *)amk__calloc(W, sizeof(amk__word));
    if (!rows || !mask) { v->oom = 1; amk__free(rows); amk__free(mask); return; }
    for (B = 0; B < v->n; B += (int)(W * 64)) {
        int width = v->n - B < (int)(W * 64) ? v->n - B : (int)(W * 64), lo = (int)W, hi = -1;
        int prev_off = -1, prev_len = -1;
        memset(mask, 0, W * sizeof(amk__word));
        for (k = 0; k < g->n_order; k++) {
            int node = g->order[k], j;
            amk__word *row = rows + (size_t)node * W;
            size_t w;
            memset(row, 0, W * sizeof(amk__word));
            if (node < v->n) {
                for (j = g->tw_off[node]; j < g->tw_off[node + 1]; j++) {
                    const amk__word *src = rows + ((size_t)v->n + (size_t)g->tw[j]) * W;
                    for (w = 0; w < W; w++) row[w] |= src[w];
                }
            } else {
                int c = node - v->n;
                for (j = g->prod_off[c]; j < g->prod_off[c + 1]; j++) {
                    int pt = g->prod[j], r = g->rank[pt] - B;
                    const amk__word *src = rows + (size_t)pt * W;
                    for (w = 0; w < W; w++) row[w] |= src[w];
                    if (r >= 0 && r < width) amk__bit_set(row, (size_t)r);
                }
            }
        }
        for (qi = 0; qi < v->n_qs; qi++) {
            amk__vq *q = &v->qs[qi];
            const amk__word *row;
            int tr, w;
            if (q->found >= 0) continue;
            if (q->set_off != prev_off || q->set_len != prev_len) {
                for (w = lo; w <= hi; w++) mask[w] = 0;
                lo = (int)W;
                hi = -1;
                for (k = 0; k < q->set_len; k++) {
                    int r = g->rank[v->pool[q->set_off + k]] - B;
                    if (r < 0 || r >= width) continue;
                    amk__bit_set(mask, (size_t)r);
                    if (r / 64 < lo) lo = r / 64;
                    if (r / 64 > hi) hi = r / 64;
                }
                prev_off = q->set_off;
                prev_len = q->set_len;
            }
            row = rows + (size_t)q->target * W;
            tr = g->rank[q->target] - B;
            for (w = lo; w <= hi; w++) {
                amk__word miss = mask[w] & ~row[w];
                if (q->excl && tr >= 0 && tr < width && tr / 64 == w) miss &= ~((amk__word)1 << (tr % 64));
                if (miss) { q->found = g->by_rank[B + w * 64 + amk__v_ctz(miss)]; break; }
            }
        }
    }
    amk__free(rows);
    amk__free(mask);
}

/* Turns answered questions into issues, at most AMK__V_RACE_CAP per (kind, buffer, other), then
   one summary issue; one PAGE_ALIAS per pair of buffers. */
AMK__FN void amk__v_race_issues(amk__vctx *v) {
    static const amk_check checks[] = {AMK_CHECK_RACE_READ, AMK_CHECK_RACE_KV, AMK_CHECK_RACE_WAW,
                                       AMK_CHECK_RACE_WAW, AMK_CHECK_PAGE_ALIAS, AMK_CHECK_RACE_READ};
    const amk_program *p = v->p;
    char tn[64], tn2[64], bn[64], bn2[64];
    int qi, shown = 0, more = 0;
    for (qi = 0; qi <= v->n_qs; qi++) {
        const amk__vq *q = qi < v->n_qs ? &v->qs[qi] : NULL;
        const amk__vq *pq = qi > 0 ? &v->qs[qi - 1] : NULL;
        if (pq && (!q || q->kind != pq->kind || q->buffer != pq->buffer || q->other != pq->other)) {
            if (more)
                amk__v_issue(v, checks[pq->kind], -1, pq->buffer, -1, "... and %d more like the above on %s",
                             more, amk__v_bname(p, pq->buffer, bn, sizeof bn));
            shown = more = 0;
        }
        if (!q || q->found < 0) continue;
        if (shown >= (q->kind == AMK__VQ_PAGE ? 1 : AMK__V_RACE_CAP)) {
            if (q->kind != AMK__VQ_PAGE) more++;
            continue;
        }
        shown++;
        amk__v_tname(p, q->target, tn, sizeof tn);
        amk__v_tname(p, q->found, tn2, sizeof tn2);
        amk__v_bname(p, q->buffer, bn, sizeof bn);
        switch (q->kind) {
        case AMK__VQ_READ:
            amk__v_issue(v, AMK_CHECK_RACE_READ, q->target, q->buffer, -1,
                         "%s reads %s, but its writer %s is not ordered before it (no chain of waits)",
                         tn, bn, tn2);
            break;
        case AMK__VQ_KV:
            amk__v_issue(v, AMK_CHECK_RACE_KV, q->target, q->buffer, -1,
                         "%s reads KV cache %s, which %s writes in this pass without being ordered before it",
                         tn, bn, tn2);
            break;
        case AMK__VQ_WAW_COUNTER:
            amk__v_issue(v, AMK_CHECK_RACE_WAW, q->target, q->buffer, -1,
                         "%s and %s both write %s, signal different counters (%d, %d) and are not ordered",
                         tn, tn2, bn, p->tasks[q->target].out_counter, p->tasks[q->found].out_counter);
            break;
        case AMK__VQ_WAW_OVERLAP:
            amk__v_issue(v, AMK_CHECK_RACE_WAW, q->target, q->buffer, -1,
                         "%s and %s write overlapping regions of %s and are not ordered", tn, tn2, bn);
            break;
        case AMK__VQ_ACCUM:
            amk__v_issue(v, AMK_CHECK_RACE_READ, q->target, q->buffer, -1,
                         "%s accumulates onto %s, but %s, which writes it, is not ordered before it",
                         tn, bn, tn2);
            break;
        default:
            amk__v_issue(v, AMK_CHECK_PAGE_ALIAS, q->target, q->buffer, -1,
                         "%s and %s share page %d, but %s (a user of the first) is not "
                         "ordered before %s (a writer of the second)",
                         bn, amk__v_bname(p, q->other, bn2, sizeof bn2), p->buffer_page[q->buffer], tn2, tn);
            break;
        }
    }
}

/* ---- pass 8: config and target ------------------------------------------------------------------- */

AMK__FN void amk__v_config(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk_config *c = &p->config;
    char gpu[80];
    int i, ne, meta_ok = 1;
    if (p->has_target && p->target.num_sms <= 0)
        amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "the target has %d SMs", p->target.num_sms);
    if (p->has_config) {
        if (c->threads_per_block < 32 || c->threads_per_block > 1024 || c->threads_per_block % 32)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                         "threads_per_block is %d; it must be a multiple of 32 in [32, 1024]", c->threads_per_block);
        if (c->pipelining_depth < 0)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "pipelining_depth is %d; it must be >= 0",
                         c->pipelining_depth);
        if (c->smem_bytes_per_block < 0)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "smem_bytes_per_block is %lld",
                         (long long)c->smem_bytes_per_block);
        else if (p->has_target && c->smem_bytes_per_block > p->target.smem_bytes_per_block_optin)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                         "smem_bytes_per_block is %lld; the target allows %lld per block",
                         (long long)c->smem_bytes_per_block, (long long)p->target.smem_bytes_per_block_optin);
        if ((int)c->sm_assignment < 0 || (int)c->sm_assignment > AMK_SM_EXPLICIT)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "sm_assignment code %d is unknown",
                         (int)c->sm_assignment);
        if ((int)c->page_allocation < 0 || (int)c->page_allocation > AMK_PAGES_NONE)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "page_allocation code %d is unknown",
                         (int)c->page_allocation);
        ne = c->explicit_task && c->explicit_sm ? amk__v_len(c->n_explicit, c->explicit_task, INT_MAX) : 0;
        if (c->n_explicit < 0 || (c->n_explicit > 0 && !ne))
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "the explicit sm_assignment is malformed (count %d)",
                         c->n_explicit);
        for (i = 0; i < ne; i++) {
            int sm = c->explicit_sm[i];
            if (amk__v_find_id(v, c->explicit_task[i]) < 0)
                amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                             "sm_assignment names task id %d, which does not exist", c->explicit_task[i]);
            if (sm < 0 || (p->has_target && sm >= p->target.num_sms))
                amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                             "sm_assignment puts task id %d on SM %d, outside [0, %d)", c->explicit_task[i], sm,
                             p->has_target ? p->target.num_sms : INT_MAX);
        }
    }
    if (!p->has_target) return;
    for (i = 0; i < amk__v_len(p->n_meta, p->meta, INT_MAX); i++)
        if (!p->meta[i].key || !p->meta[i].json) meta_ok = 0;
    if (p->n_meta > 0 && !p->meta) meta_ok = 0;
    if (meta_ok && amk_program_meta_string(p, "gpu", gpu, sizeof gpu)) {
        size_t len = 0;
        while (len < sizeof p->target.name && p->target.name[len]) len++;
        if (strlen(gpu) != len || memcmp(gpu, p->target.name, len) != 0)
            amk__v_issue(v, AMK_CHECK_GPU_LABEL, -1, -1, -1,
                         "meta.gpu is '%.40s' but the target is '%.*s' (results are filed by target name)",
                         gpu, (int)(len > 40 ? 40 : len), p->target.name);
    }
}

/* ---- amk_program_validate ------------------------------------------------------------------------ */

AMK__FN void amk__v_free(amk__vctx *v) {
    amk__free(v->task_bad); amk__free(v->buf_enum); amk__free(v->buf_shape);
    amk__free(v->page_ok); amk__free(v->ids);
    amk__free(v->grd_off); amk__free(v->grd); amk__free(v->gwr_off); amk__free(v->gwr);
    amk__vgraph_free(&v->g);
    amk__free(v->rd_off); amk__free(v->rd); amk__free(v->wr_off); amk__free(v->wr);
    amk__free(v->pool); amk__free(v->qs);
}

AMK_API amk_result amk_program_validate(const amk_program *p, amk_report *report) {
    amk__vctx v;
    amk_report local;
    amk_result r;
    int k;
    if (report) memset(report, 0, sizeof *report);
    if (!p) return AMK_ERR_INVALID_ARG;
    memset(&v, 0, sizeof v);
    memset(&local, 0, sizeof local);
    v.p = p;
    v.rep = report ? report : &local;
    v.keep = report != NULL;
    v.n = amk__v_len(p->n_tasks, p->tasks, INT_MAX);
    v.nb = amk__v_len(p->n_buffers, p->buffers, INT_MAX);
    v.nc = amk__v_len(p->n_counters, p->counters, INT_MAX);
    if (v.n > AMK__V_MAX_COUNT || v.nb > AMK__V_MAX_COUNT || v.nc > AMK__V_MAX_COUNT) return AMK_ERR_OUT_OF_MEMORY;
    v.task_bad = (unsigned char *)amk__calloc((size_t)v.n + 1, 1);
    v.buf_enum = (unsigned char *)amk__calloc((size_t)v.nb + 1, 1);
    v.buf_shape = (unsigned char *)amk__calloc((size_t)v.nb + 1, 1);
    v.page_ok = (unsigned char *)amk__calloc((size_t)v.nb + 1, 1);
    v.ids = (amk__v_pair *)amk__calloc((size_t)v.n + 1, sizeof(amk__v_pair));
    if (!v.task_bad || !v.buf_enum || !v.buf_shape || !v.page_ok || !v.ids) v.oom = 1;
    if (!v.oom && p->build_error != AMK_OK)
        amk__v_issue(&v, AMK_CHECK_BUILD_ERROR, -1, -1, -1, "a builder call failed (%s); the program is incomplete",
                     amk_result_str(p->build_error));
    if (!v.oom) amk__v_buffers(&v);
    if (!v.oom) amk__v_counters_and_ids(&v);
    if (!v.oom) amk__v_tasks(&v);
    if (!v.oom && !amk__vgraph_build(p, v.n, v.nc, &v.g)) v.oom = 1;
    if (!v.oom) amk__v_waits(&v);
    if (!v.oom) {
        v.acyclic = amk__v_acyclic(&v, NULL, NULL, AMK_CHECK_CYCLE, v.g.order);
        v.g.n_order = v.acyclic ? v.n + v.nc : 0;
        if (v.acyclic) {
            int rk = 0;
            for (k = 0; k < v.g.n_order; k++)
                if (v.g.order[k] < v.n) { v.g.rank[v.g.order[k]] = rk; v.g.by_rank[rk++] = v.g.order[k]; }
        }
    }
    if (!v.oom) amk__v_sms(&v);
    if (!v.oom && !amk__v_uses(&v)) v.oom = 1;
    if (!v.oom) amk__v_use_checks(&v);
    if (!v.oom) amk__v_page_refs(&v);
    if (!v.oom && v.acyclic) {
        amk__v_questions(&v);
        if (!v.oom) amk__v_answer(&v);
        if (!v.oom) amk__v_race_issues(&v);
    }
    if (!v.oom) amk__v_config(&v);
    r = v.oom ? AMK_ERR_OUT_OF_MEMORY : v.rep->n_errors ? AMK_ERR_REJECTED : AMK_OK;
    amk__v_free(&v);
    amk__free(local.items);
    return r;
}

AMK_API void amk_report_free(amk_report *r) {
    if (!r) return;
    amk__free(r->items);
    memset(r, 0, sizeof *r);
}

AMK_API void amk_report_format_issue(const amk_program *p, const amk_issue *is, char *buf, size_t size) {
    char where[128];
    int nt = p ? amk__v_len(p->n_tasks, p->tasks, INT_MAX) : 0;
    int nb = p ? amk__v_len(p->n_buffers, p->buffers, INT_MAX) : 0;
    if (!buf || !size) return;
    if (!is) { buf[0] = 0; return; }
    where[0] = 0;
    if (is->task >= 0 && is->task < nt) {
        const amk_task *t = &p->tasks[is->task];
        if (t->label && t->label[0])
            snprintf(where, sizeof where, " task %d (id %d '%.60s')", is->task, t->id, t->label);
        else snprintf(where, sizeof where, " task %d (id %d)", is->task, t->id);
    } else if (is->task >= 0) {
        snprintf(where, sizeof where, " task %d", is->task);
    } else if (is->buffer >= 0 && is->buffer < nb && p->buffers[is->buffer].name) {
        snprintf(where, sizeof where, " buffer %d '%.60s'", is->buffer, p->buffers[is->buffer].name);
    } else if (is->buffer >= 0) {
        snprintf(where, sizeof where, " buffer %d", is->buffer);
    } else if (is->counter >= 0) {
        snprintf(where, sizeof where, " counter %d", is->counter);
    }
    snprintf(buf, size, "%s %s%s: %s", is->is_error ? "error" : "warning", amk_check_id(is->check), where,
             is->message);
}

/* ---- counter simulations (spec §3.4) ------------------------------------------------------------- */

/* The waits of every counter sorted by threshold, so each increment releases the waits it
   satisfies in O(1) each. A wait on a bad counter id is never satisfied. */
typedef struct amk__vsim {
    int n, nc, nb;
    int *out_c;          /* [n] */
    int *n_waits;        /* [n] waits per task */
    int *w_off;          /* [nc+1] */
    amk__v_key3 *w;      /* (threshold, task) per wait, sorted per counter */
    /* per order */
    int *pending, *value, *ptr, *ready, n_ready;
    unsigned char *fired;
    /* race tracking (adversarial only) */
    int *rd_off, *rd;    /* per task: transient buffers it reads */
    int *rd_pos;         /* per read: the position buffer of a read below the position (RACE_KV's
                            rule: amk__v_kv_reader_pos), else -1 */
    int *wr_off, *wr;    /* per buffer: its distinct writer tasks */
    int *wcount;         /* [nb] distinct writer tasks */
    int *wfired;         /* [nb] writers fired so far */
    int *victims, n_victims; /* tasks writing a buffer some task reads */
} amk__vsim;

AMK__FN void amk__vsim_free(amk__vsim *s) {
    amk__free(s->out_c); amk__free(s->n_waits); amk__free(s->w_off); amk__free(s->w);
    amk__free(s->pending); amk__free(s->value); amk__free(s->ptr); amk__free(s->ready);
    amk__free(s->fired); amk__free(s->rd_off); amk__free(s->rd); amk__free(s->rd_pos);
    amk__free(s->wr_off); amk__free(s->wr); amk__free(s->wcount);
    amk__free(s->wfired); amk__free(s->victims);
    memset(s, 0, sizeof *s);
}

AMK__FN int amk__vsim_build(const amk_program *p, amk__vsim *s) {
    int t, j, c, *cur;
    memset(s, 0, sizeof *s);
    s->n = amk__v_len(p->n_tasks, p->tasks, INT_MAX);
    s->nc = amk__v_len(p->n_counters, p->counters, INT_MAX);
    s->nb = amk__v_len(p->n_buffers, p->buffers, INT_MAX);
    if (s->n > AMK__V_MAX_COUNT || s->nc > AMK__V_MAX_COUNT || s->nb > AMK__V_MAX_COUNT) return 0;
    s->out_c = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->n_waits = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->w_off = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    s->pending = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->value = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    s->ptr = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    s->ready = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->fired = (unsigned char *)amk__calloc((size_t)s->n + 1, 1);
    cur = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    if (!s->out_c || !s->n_waits || !s->w_off || !s->pending || !s->value || !s->ptr || !s->ready ||
        !s->fired || !cur) {
        amk__free(cur);
        return 0;
    }
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        int nw = amk__v_len(tk->n_waits, tk->waits, AMK_MAX_WAITS);
        s->out_c[t] = tk->out_counter >= 0 && tk->out_counter < s->nc ? tk->out_counter : -1;
        s->n_waits[t] = nw;
        for (j = 0; j < nw; j++)
            if (tk->waits[j].counter >= 0 && tk->waits[j].counter < s->nc) s->w_off[tk->waits[j].counter + 1]++;
    }
    for (c = 0; c < s->nc; c++) s->w_off[c + 1] += s->w_off[c];
    s->w = (amk__v_key3 *)amk__calloc((size_t)s->w_off[s->nc] + 1, sizeof(amk__v_key3));
    if (!s->w) { amk__free(cur); return 0; }
    memcpy(cur, s->w_off, (size_t)s->nc * sizeof(int));
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        for (j = 0; j < s->n_waits[t]; j++) {
            c = tk->waits[j].counter;
            if (c < 0 || c >= s->nc) continue;
            s->w[cur[c]].a = tk->waits[j].threshold;
            s->w[cur[c]].b = t;
            s->w[cur[c]++].c = j;
        }
    }
    for (c = 0; c < s->nc; c++)
        qsort(s->w + s->w_off[c], (size_t)(s->w_off[c + 1] - s->w_off[c]), sizeof(amk__v_key3), amk__v_cmp_key3);
    amk__free(cur);
    return 1;
}

/* Ready set: a binary heap on sign * index (sign 1: lowest index first, -1: highest), or a bag
   (sign 0) picked at random. */
AMK__FN void amk__vsim_push(amk__vsim *s, int t, int sign) {
    int i = s->n_ready++;
    s->ready[i] = t;
    while (sign && i > 0) {
        int up = (i - 1) / 2, tmp;
        if (sign * s->ready[up] <= sign * s->ready[i]) break;
        tmp = s->ready[up]; s->ready[up] = s->ready[i]; s->ready[i] = tmp;
        i = up;
    }
}

AMK__FN int amk__vsim_pop(amk__vsim *s, int sign, amk__rng *rng, int victim) {
    int top, i = 0;
    if (!sign) {
        int k = (int)amk__rng_below(rng, (uint64_t)s->n_ready);
        /* why: the victim waits while anything else is ready (a starved producer) */
        if (s->ready[k] == victim && s->n_ready > 1) k = (k + 1) % s->n_ready;
        top = s->ready[k];
        s->ready[k] = s->ready[--s->n_ready];
        return top;
    }
    top = s->ready[0];
    s->ready[0] = s->ready[--s->n_ready];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i, tmp;
        if (l < s->n_ready && sign * s->ready[l] < sign * s->ready[m]) m = l;
        if (r < s->n_ready && sign * s->ready[r] < sign * s->ready[m]) m = r;
        if (m == i) break;
        tmp = s->ready[i]; s->ready[i] = s->ready[m]; s->ready[m] = tmp;
        i = m;
    }
    return top;
}

/* The first violation seen by the adversarial walk. */
typedef struct amk__vsim_race { int count, task, buffer, writer, order; } amk__vsim_race;

/* A writer of x other than t that has not fired, and with pb >= 0 is not a writer of the row at
   position pb alone (amk__v_kv_row_writer_pos); -1 when there is none. */
AMK__FN int amk__vsim_unfired(const amk_program *p, const amk__vsim *s, int t, int x, int pb) {
    int k;
    for (k = s->wr_off[x]; k < s->wr_off[x + 1]; k++) {
        const int w = s->wr[k];
        if (w != t && !s->fired[w] && (pb < 0 || amk__v_kv_row_writer_pos(p, &p->tasks[w], x) != pb)) return w;
    }
    return -1;
}

/* t just became ready: an adversary may fire it now, so every transient buffer it reads must
   already have all its writers (other than t) fired; for a read below the position, all but the
   writers of the row at it. */
AMK__FN void amk__vsim_check(const amk_program *p, amk__vsim *s, int t, amk__vsim_race *race, int order) {
    int k, j;
    const amk_task *tk = &p->tasks[t];
    int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS);
    for (k = s->rd_off[t]; k < s->rd_off[t + 1]; k++) {
        int x = s->rd[k], self = 0;
        for (j = 0; j < no; j++) self |= tk->outputs[j] == x;
        if (s->rd_pos[k] < 0 ? s->wfired[x] >= s->wcount[x] - self : amk__vsim_unfired(p, s, t, x, s->rd_pos[k]) < 0)
            continue;
        if (race->count++ == 0) {
            race->task = t;
            race->buffer = x;
            race->order = order;
            race->writer = amk__vsim_unfired(p, s, t, x, s->rd_pos[k]);
        }
    }
}

/* One counter-driven walk. sign picks the ready task (see amk__vsim_push); race, when given,
   checks every task as it becomes ready. order gets the fired tasks; returns how many fired. */
AMK__FN int amk__vsim_run(const amk_program *p, amk__vsim *s, int sign, amk__rng *rng, int victim,
                          int *order, amk__vsim_race *race, int order_no) {
    int t, c, nf = 0, k;
    for (t = 0; t < s->n; t++) { s->pending[t] = s->n_waits[t]; s->fired[t] = 0; }
    for (c = 0; c < s->nc; c++) {
        s->value[c] = 0;
        for (k = s->w_off[c]; k < s->w_off[c + 1] && s->w[k].a <= 0; k++) s->pending[s->w[k].b]--;
        s->ptr[c] = k;
    }
    if (race) for (k = 0; k < s->nb; k++) s->wfired[k] = 0;
    s->n_ready = 0;
    for (t = 0; t < s->n; t++)
        if (s->pending[t] == 0) {
            amk__vsim_push(s, t, sign);
            if (race) amk__vsim_check(p, s, t, race, order_no);
        }
    while (s->n_ready) {
        t = amk__vsim_pop(s, sign, rng, victim);
        s->fired[t] = 1;
        if (order) order[nf] = t;
        nf++;
        if (race) {
            const amk_task *tk = &p->tasks[t];
            int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS), j, i;
            for (j = 0; j < no; j++) {
                int x = tk->outputs[j], dup = 0;
                for (i = 0; i < j; i++) dup |= tk->outputs[i] == x;
                if (x >= 0 && x < s->nb && !dup) s->wfired[x]++;
            }
        }
        c = s->out_c[t];
        if (c < 0) continue;
        s->value[c]++;
        for (k = s->ptr[c]; k < s->w_off[c + 1] && s->w[k].a <= s->value[c]; k++)
            if (--s->pending[s->w[k].b] == 0) {
                amk__vsim_push(s, s->w[k].b, sign);
                if (race) amk__vsim_check(p, s, s->w[k].b, race, order_no);
            }
        s->ptr[c] = k;
    }
    return nf;
}

AMK_API amk_result amk_program_simulate(const amk_program *p, int *order, int *n_fired, int *stuck,
                                        int *n_stuck) {
    amk__vsim s;
    int nf, t, ns = 0;
    if (n_fired) *n_fired = 0;
    if (n_stuck) *n_stuck = 0;
    if (!p) return AMK_ERR_INVALID_ARG;
    if (!amk__vsim_build(p, &s)) { amk__vsim_free(&s); return AMK_ERR_OUT_OF_MEMORY; }
    nf = amk__vsim_run(p, &s, 1, NULL, -1, order, NULL, 0);
    for (t = 0; t < s.n; t++)
        if (!s.fired[t]) {
            if (stuck) stuck[ns] = t;
            ns++;
        }
    if (n_fired) *n_fired = nf;
    if (n_stuck) *n_stuck = ns;
    amk__vsim_free(&s);
    return ns ? AMK_ERR_STUCK : AMK_OK;
}

/* Reads and writers for the adversarial walk: reads of transient buffers that some task writes
   (KV_APPEND's in-place cache excepted, as in validate); victims are their writers. */
AMK__FN int amk__vsim_build_races(const amk_program *p, amk__vsim *s) {
    int t, j, i, x, pass, n_rd = 0;
    unsigned char *is_read;
    s->rd_off = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->wr_off = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->wcount = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->wfired = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->victims = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    is_read = (unsigned char *)amk__calloc((size_t)s->nb + 1, 1);
    if (!s->rd_off || !s->wr_off || !s->wcount || !s->wfired || !s->victims || !is_read) { amk__free(is_read); return 0; }
    for (pass = 0; pass < 2; pass++) { /* the distinct writers: counted, then listed */
        for (t = 0; t < s->n; t++) {
            const amk_task *tk = &p->tasks[t];
            int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS);
            for (j = 0; j < no; j++) {
                int dup = 0;
                x = tk->outputs[j];
                for (i = 0; i < j; i++) dup |= tk->outputs[i] == x;
                if (x < 0 || x >= s->nb || dup) continue;
                if (pass) s->wr[s->wr_off[x + 1]++] = t; /* wr_off[x + 1]: x's cursor until the pass ends */
                else s->wcount[x]++;
            }
        }
        if (pass) break;
        for (x = 0; x < s->nb; x++) s->wr_off[x + 1] = s->wr_off[x] + s->wcount[x];
        if (!(s->wr = (int *)amk__calloc((size_t)s->wr_off[s->nb] + 1, sizeof(int)))) { amk__free(is_read); return 0; }
        for (x = s->nb; x > 0; x--) s->wr_off[x] = s->wr_off[x - 1];
    }
    for (pass = 0; pass < 2; pass++) {
        n_rd = 0;
        for (t = 0; t < s->n; t++) {
            const amk_task *tk = &p->tasks[t];
            int ni = amk__v_len(tk->n_inputs, tk->inputs, AMK_MAX_INPUTS);
            s->rd_off[t] = n_rd;
            for (j = 0; j < ni; j++) {
                int dup = 0, pb;
                x = tk->inputs[j];
                for (i = 0; i < j; i++) dup |= tk->inputs[i] == x;
                if (x < 0 || x >= s->nb || dup || !s->wcount[x] || amk__v_inplace_target(tk, j)) continue;
                if (!amk__v_transient_kind(p->buffers[x].kind)) continue;
                if (pass) {
                    pb = amk__v_kv_reader_pos(p, tk, x);
                    s->rd[n_rd] = x;
                    s->rd_pos[n_rd] = pb >= 0 && pb < s->nb && !s->wcount[pb] ? pb : -1;
                }
                is_read[x] = 1;
                n_rd++;
            }
        }
        s->rd_off[s->n] = n_rd;
        if (pass == 0 && (!(s->rd = (int *)amk__calloc((size_t)n_rd + 1, sizeof(int))) ||
                          !(s->rd_pos = (int *)amk__calloc((size_t)n_rd + 1, sizeof(int))))) {
            amk__free(is_read);
            return 0;
        }
    }
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS), hit = 0;
        for (j = 0; j < no; j++) hit |= tk->outputs[j] >= 0 && tk->outputs[j] < s->nb && is_read[tk->outputs[j]];
        if (hit) s->victims[s->n_victims++] = t;
    }
    amk__free(is_read);
    return 1;
}

AMK_API int amk_program_simulate_adversarial(const amk_program *p, uint64_t seed, int n_orders,
                                             amk_diag *d) {
    amk__vsim s;
    amk__vsim_race race;
    int o;
    /* why: four adversaries: the list order, its reverse, uniform random, and random with one
       writer starved so its readers get every chance to run first */
    static const int signs[4] = {1, -1, 0, 0};
    amk_diag_clear(d);
    if (!p || n_orders <= 0) return 0;
    memset(&race, 0, sizeof race);
    if (!amk__vsim_build(p, &s) || !amk__vsim_build_races(p, &s)) {
        amk__vsim_free(&s);
        amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory in the adversarial simulation");
        return -1;
    }
    for (o = 0; o < n_orders; o++) {
        amk__rng rng;
        int strategy = o % 4, victim = -1;
        amk__rng_seed(&rng, seed + (uint64_t)o);
        if (strategy == 3 && s.n_victims) victim = s.victims[amk__rng_below(&rng, (uint64_t)s.n_victims)];
        amk__vsim_run(p, &s, signs[strategy], &rng, victim, NULL, &race, o);
    }
    if (race.count && d) {
        char tn[64], tn2[64], bn[64];
        snprintf(d->check, sizeof d->check, "RACE_READ");
        d->task = race.task;
        d->buffer = race.buffer;
        amk__fail(d, AMK_ERR_REJECTED,
                  "order %d (seed %llu): %s can run before %s is fully written (its "
                  "writer %s has not run); %d violation%s in %d orders",
                  race.order, (unsigned long long)(seed + (uint64_t)race.order),
                  amk__v_tname(p, race.task, tn, sizeof tn), amk__v_bname(p, race.buffer, bn, sizeof bn),
                  race.writer >= 0 ? amk__v_tname(p, race.writer, tn2, sizeof tn2) : "?", race.count,
                  race.count == 1 ? "" : "s", n_orders);
    }
    amk__vsim_free(&s);
    return race.count;
}

AMK_API int amk_program_critical_path(const amk_program *p) {
    amk__vgraph g;
    int n, nc, *indeg, *len, k, j, best = 0;
    if (!p) return 0;
    n = amk__v_len(p->n_tasks, p->tasks, INT_MAX);
    nc = amk__v_len(p->n_counters, p->counters, INT_MAX);
    if (n > AMK__V_MAX_COUNT || nc > AMK__V_MAX_COUNT || !amk__vgraph_build(p, n, nc, &g)) return 0;
    indeg = (int *)amk__calloc((size_t)n + (size_t)nc + 1, sizeof(int));
    len = (int *)amk__calloc((size_t)n + (size_t)nc + 1, sizeof(int));
    if (indeg && len && amk__vgraph_kahn(&g, NULL, NULL, indeg, g.order) == n + nc) {
        for (k = 0; k < n + nc; k++) {
            int x = g.order[k], m = 0;
            if (x < n) {
                for (j = g.tw_off[x]; j < g.tw_off[x + 1]; j++)
                    if (len[n + g.tw[j]] > m) m = len[n + g.tw[j]];
                len[x] = m + 1;
                if (len[x] > best) best = len[x];
            } else {
                for (j = g.prod_off[x - n]; j < g.prod_off[x - n + 1]; j++)
                    if (len[g.prod[j]] > m) m = len[g.prod[j]];
                len[x] = m;
            }
        }
    }
    amk__free(indeg);
    amk__free(len);
    amk__vgraph_free(&g);
    return best;
}

/* ==== >>impl_lower: ScheduleConfig -> ordered, assigned, paged program (spec §5) ============== */
/* (part of amk.h's implementation; included once from amk.h)

   amk_program_lower works in passes over the dependency graph (producer -> counter -> waiter),
   each computed into scratch memory, so any failure before the commit leaves p untouched:
   1. order   a stable topological order: Kahn's algorithm taking the ready task with the lowest
              ORIGINAL list index, so a list that is already topological keeps its order and every
              per-SM queue (the list filtered by sm) is a linear extension of the DAG;
   2. SMs     round robin, greedy least-loaded by est_bytes, or an explicit {task id: sm} map.
              Under round robin and load balance the users of an on-chip (SMEM/REGISTER) buffer
              all follow the SM of the first of them (union-find); an explicit map is taken as is;
   3. pages   ACTIVATION buffers only: one page each (linear), or greedy reuse (graph_color) that
              puts a buffer on a page of its space only if every use of every buffer already there
              happens-before every write of the new one (the PAGE_ALIAS rule, IR_SPEC_NOTES 5).
   Then p takes the order, SMs, pages, config and target, and the result is validated. */

/* ---- a min-heap of (key, value) pairs, ordered by key then value ----------------------------- */

typedef struct amk__lower_hitem { int64_t key; int val; } amk__lower_hitem;
typedef struct amk__lower_heap { amk__lower_hitem *items; int n; } amk__lower_heap;

AMK__FN int amk__lower_hless(const amk__lower_hitem *a, const amk__lower_hitem *b) {
    return a->key < b->key || (a->key == b->key && a->val < b->val);
}

/* Pushes (key, val); the caller sized items for every push. */
AMK__FN void amk__lower_hpush(amk__lower_heap *h, int64_t key, int val) {
    int i = h->n++;
    h->items[i].key = key;
    h->items[i].val = val;
    while (i > 0) {
        int up = (i - 1) / 2;
        amk__lower_hitem tmp;
        if (!amk__lower_hless(&h->items[i], &h->items[up])) break;
        tmp = h->items[i]; h->items[i] = h->items[up]; h->items[up] = tmp;
        i = up;
    }
}

/* Removes and returns the least item (h->n > 0). */
AMK__FN amk__lower_hitem amk__lower_hpop(amk__lower_heap *h) {
    amk__lower_hitem top = h->items[0];
    int i = 0;
    h->items[0] = h->items[--h->n];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        amk__lower_hitem tmp;
        if (l < h->n && amk__lower_hless(&h->items[l], &h->items[m])) m = l;
        if (r < h->n && amk__lower_hless(&h->items[r], &h->items[m])) m = r;
        if (m == i) break;
        tmp = h->items[i]; h->items[i] = h->items[m]; h->items[m] = tmp;
        i = m;
    }
    return top;
}

/* ---- diagnostics ------------------------------------------------------------------------------ */

AMK__FN amk_result amk__lower_oom(amk_diag *d) {
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory while lowering");
}

/* Fills d from a validator issue (check id, task, buffer, counter, the formatted line). */
AMK__FN amk_result amk__lower_report_issue(const amk_program *p, const amk_issue *is, amk_diag *d) {
    if (d) {
        char line[512];
        amk_report_format_issue(p, is, line, sizeof line);
        snprintf(d->check, sizeof d->check, "%s", amk_check_id(is->check));
        d->task = is->task;
        d->buffer = is->buffer;
        d->counter = is->counter;
        amk__fail(d, AMK_ERR_REJECTED, "%s", line);
    }
    return AMK_ERR_REJECTED;
}

/* Checks that lowering redoes anyway: the SM assignment, the page table, the config (replaced). */
AMK__FN int amk__lower_is_schedule_check(amk_check c) {
    return c == AMK_CHECK_SM_RANGE || c == AMK_CHECK_SM_MIXED || c == AMK_CHECK_SM_QUEUE_ORDER ||
           c == AMK_CHECK_SM_QUEUE_DEADLOCK || c == AMK_CHECK_ONCHIP_SM ||
           c == AMK_CHECK_ONCHIP_UNASSIGNED || c == AMK_CHECK_PAGE_REF ||
           c == AMK_CHECK_PAGE_ALIAS || c == AMK_CHECK_CONFIG_VALUE;
}

/* Validates p. AMK_OK when accepted; else AMK_ERR_REJECTED with the first error in d (skipping
   the checks of a schedule when before is set: lowering replaces the schedule), or the
   validator's failure (out of memory). */
AMK__FN amk_result amk__lower_validate(const amk_program *p, int before, amk_diag *d) {
    amk_report rep;
    amk_result r;
    int i;
    memset(&rep, 0, sizeof rep);
    r = amk_program_validate(p, &rep);
    if (r == AMK_ERR_REJECTED) {
        r = AMK_OK;
        for (i = 0; i < rep.n_items; i++) {
            const amk_issue *is = &rep.items[i];
            if (!is->is_error || (before && amk__lower_is_schedule_check(is->check))) continue;
            r = amk__lower_report_issue(p, is, d);
            break;
        }
        if (r == AMK_OK && rep.truncated)
            r = amk__fail(d, AMK_ERR_REJECTED, "validate rejected the program (its report was truncated)");
    } else if (r != AMK_OK) {
        r = amk__fail(d, r, "validate could not finish: %s", amk_result_str(r));
    }
    amk_report_free(&rep);
    return r;
}

/* ---- step 1: the arguments -------------------------------------------------------------------- */

typedef struct amk__lower_idpos { int id, index; } amk__lower_idpos;

AMK__FN int amk__lower_idpos_cmp(const void *a, const void *b) {
    const amk__lower_idpos *x = (const amk__lower_idpos *)a, *y = (const amk__lower_idpos *)b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Resolves an explicit {task id: sm} map into sm_of[task index]; every task must be named once. */
AMK__FN amk_result amk__lower_explicit(const amk_program *p, const amk_config *c, int num_sms,
                                       int *sm_of, amk_diag *d) {
    amk__lower_idpos *ids;
    amk_result r = AMK_OK;
    int i, n = p->n_tasks;
    ids = (amk__lower_idpos *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk__lower_idpos));
    if (!ids) return amk__lower_oom(d);
    for (i = 0; i < n; i++) { ids[i].id = p->tasks[i].id; ids[i].index = i; sm_of[i] = -1; }
    qsort(ids, (size_t)n, sizeof *ids, amk__lower_idpos_cmp);
    for (i = 0; i < c->n_explicit && r == AMK_OK; i++) {
        int id = c->explicit_task[i], sm = c->explicit_sm[i], lo = 0, hi = n;
        while (lo < hi) { /* the first entry with ids[].id >= id */
            int mid = lo + (hi - lo) / 2;
            if (ids[mid].id < id) lo = mid + 1; else hi = mid;
        }
        if (lo == n || ids[lo].id != id)
            r = amk__fail(d, AMK_ERR_INVALID_ARG,
                          "explicit SM assignment entry %d names task id %d, which does not exist", i, id);
        else if (sm < 0 || sm >= num_sms)
            r = amk__fail(d, AMK_ERR_INVALID_ARG,
                          "explicit SM assignment puts task id %d on SM %d, outside [0, %d)", id, sm, num_sms);
        else if (sm_of[ids[lo].index] >= 0)
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "explicit SM assignment names task id %d twice", id);
        else
            sm_of[ids[lo].index] = sm;
        if (r != AMK_OK && d) d->task = lo < n && ids[lo].id == id ? ids[lo].index : -1;
    }
    for (i = 0; i < n && r == AMK_OK; i++)
        if (sm_of[i] < 0) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG,
                          "explicit SM assignment is missing task id %d (index %d)", p->tasks[i].id, i);
            if (d) d->task = i;
        }
    amk__free(ids);
    return r;
}

AMK__FN amk_result amk__lower_check_args(const amk_program *p, const amk_config *c,
                                         const amk_target *t, amk_diag *d) {
    if (!p || !c || !t) return amk__fail(d, AMK_ERR_INVALID_ARG, "lower: program, config and target are required");
    if (p->build_error != AMK_OK)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "the program has a build error (%s)", amk_result_str(p->build_error));
    if (t->num_sms < 1) return amk__fail(d, AMK_ERR_INVALID_ARG, "target.num_sms is %d; it must be >= 1", t->num_sms);
    if (c->threads_per_block < 32 || c->threads_per_block > 1024 || c->threads_per_block % 32 != 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "config.threads_per_block is %d; it must be a multiple of 32 in [32, 1024]",
                         c->threads_per_block);
    if (c->pipelining_depth < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config.pipelining_depth is %d; it must be >= 0",
                         c->pipelining_depth);
    if (c->smem_bytes_per_block < 0 || c->smem_bytes_per_block > t->smem_bytes_per_block_optin)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "config.smem_bytes_per_block is %lld; it must be in [0, %lld] (target opt-in)",
                         (long long)c->smem_bytes_per_block, (long long)t->smem_bytes_per_block_optin);
    if (c->sm_assignment != AMK_SM_LOAD_BALANCE && c->sm_assignment != AMK_SM_ROUND_ROBIN &&
        c->sm_assignment != AMK_SM_EXPLICIT)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config.sm_assignment %d is not a known mode", (int)c->sm_assignment);
    if (c->page_allocation != AMK_PAGES_GRAPH_COLOR && c->page_allocation != AMK_PAGES_LINEAR &&
        c->page_allocation != AMK_PAGES_NONE)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config.page_allocation %d is not a known mode", (int)c->page_allocation);
    if (c->n_explicit < 0 || (c->n_explicit > 0 && (!c->explicit_task || !c->explicit_sm)))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config explicit SM assignment: %d entries but no arrays",
                         c->n_explicit);
    return AMK_OK;
}

/* ---- step 2: the stable topological order ----------------------------------------------------- */

/* order[k] = the original index of the task at position k. A cycle (or a task behind one) is
   AMK_ERR_REJECTED with check CYCLE. Out-of-range counter ids carry no edge (validate reports
   them); a counter nothing produces orders nothing. */
AMK__FN amk_result amk__lower_order(const amk_program *p, int *order, amk_diag *d) {
    int n = p->n_tasks, nc = p->n_counters, i, j, k = 0;
    int *left = (int *)amk__calloc((size_t)nc + 1, sizeof(int));          /* [nc] producers left */
    int *start = (int *)amk__calloc((size_t)nc + 2, sizeof(int));         /* [nc+1] CSR offsets */
    int *pending = (int *)amk__calloc((size_t)(n > 0 ? n : 1), sizeof(int));  /* [n] waits left */
    int *waiters = NULL;                                                  /* task index per wait */
    amk__lower_heap heap;
    amk_result r = AMK_OK;
    int64_t total = 0;
    heap.n = 0;
    heap.items = (amk__lower_hitem *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk__lower_hitem));
    if (!left || !start || !pending || !heap.items) { r = amk__lower_oom(d); goto done; }
    for (i = 0; i < n; i++) {
        int c = p->tasks[i].out_counter;
        if (c >= 0 && c < nc) left[c]++;
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < p->tasks[i].n_waits; j++) {
            int c = p->tasks[i].waits[j].counter;
            if (c < 0 || c >= nc || left[c] == 0) continue;
            start[c + 1]++;
            pending[i]++;
            total++;
        }
    if (total > INT_MAX) { r = amk__fail(d, AMK_ERR_UNSUPPORTED, "too many waits (%lld)", (long long)total); goto done; }
    for (i = 0; i < nc; i++) start[i + 1] += start[i];
    waiters = (int *)amk__malloc((size_t)(total ? total : 1) * sizeof(int));
    if (!waiters) { r = amk__lower_oom(d); goto done; }
    for (i = 0; i < n; i++) /* fill, advancing start[c] as a cursor; shifted back below */
        for (j = 0; j < p->tasks[i].n_waits; j++) {
            int c = p->tasks[i].waits[j].counter;
            if (c < 0 || c >= nc || left[c] == 0) continue;
            waiters[start[c]++] = i;
        }
    for (i = nc; i > 0; i--) start[i] = start[i - 1];
    start[0] = 0;
    for (i = 0; i < n; i++)
        if (pending[i] == 0) amk__lower_hpush(&heap, i, i);
    while (heap.n > 0) {
        int ti = amk__lower_hpop(&heap).val, c = p->tasks[ti].out_counter;
        order[k++] = ti;
        if (c < 0 || c >= nc || --left[c] != 0) continue;
        for (j = start[c]; j < start[c + 1]; j++)
            if (--pending[waiters[j]] == 0) amk__lower_hpush(&heap, waiters[j], waiters[j]);
    }
    if (k < n) {
        for (i = 0; i < n && pending[i] == 0; i++) {}
        if (d) {
            d->task = i;
            snprintf(d->check, sizeof d->check, "%s", amk_check_id(AMK_CHECK_CYCLE));
        }
        r = amk__fail(d, AMK_ERR_REJECTED,
                      "task %d (id %d) is on or behind a dependency cycle: no topological order exists",
                      i, p->tasks[i].id);
    }
done:
    amk__free(left);
    amk__free(start);
    amk__free(pending);
    amk__free(waiters);
    amk__free(heap.items);
    return r;
}

/* ---- step 3: SM assignment -------------------------------------------------------------------- */

AMK__FN int amk__lower_find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

AMK__FN int amk__lower_is_onchip(const amk_program *p, int b) {
    return b >= 0 && b < p->n_buffers &&
           (p->buffers[b].space == AMK_SPACE_SMEM || p->buffers[b].space == AMK_SPACE_REGISTER);
}

/* sm[k] for the task at position k. explicit_sm is sm_of[original index] (explicit mode).
   load_balance balances each dependency level on its own (the level of a task is 1 + the deepest
   producer it waits on): tasks of one level run at about the same time, so each level's bytes
   are what must spread evenly. why: balancing cumulative bytes over the whole program put up to
   3 of one phase's GEMV tiles on one SM (that phase then took 3 tile times) to make up for an
   earlier, larger phase. Within a level: the least level load, then the least total, then the
   lowest index; but among the SMs with that level load, one that already runs a task of the same
   opcode is taken when its total is at most max(the largest task so far, 1/8 of the chosen SM's
   total) above the chosen SM's. why: an SM's first task of an opcode runs cold: Llama's decode
   attention took ~10-12 us instead of ~6.5 on SMs new to it, and without this rule the per-layer
   attention tasks moved to new SMs every layer (bench/RESULTS.md run 51: 1B -1.4%, SmolLM2
   -1.8%). The bound keeps the totals within about one task of balanced. */
AMK__FN amk_result amk__lower_assign(const amk_program *p, const int *order, const amk_config *c,
                                     int num_sms, const int *explicit_sm, int *sm, amk_diag *d) {
    int n = p->n_tasks, k, j, m = num_sms < n ? num_sms : n;
    int *parent = NULL, *first_user = NULL, *group_sm = NULL;
    int64_t *load = NULL;
    amk__lower_heap heap;
    amk_result r = AMK_OK;
    heap.n = 0;
    heap.items = NULL;
    if (c->sm_assignment == AMK_SM_EXPLICIT) {
        for (k = 0; k < n; k++) sm[k] = explicit_sm[order[k]];
        return AMK_OK;
    }
    /* why: group the users of each on-chip buffer; the group's first task picks the SM */
    parent = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    group_sm = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    first_user = (int *)amk__malloc((size_t)(p->n_buffers ? p->n_buffers : 1) * sizeof(int));
    if (!parent || !group_sm || !first_user) { r = amk__lower_oom(d); goto done; }
    for (k = 0; k < n; k++) { parent[k] = k; group_sm[k] = -1; }
    for (j = 0; j < p->n_buffers; j++) first_user[j] = -1;
    for (k = 0; k < n; k++) {
        const amk_task *t = &p->tasks[order[k]];
        for (j = 0; j < t->n_inputs + t->n_outputs; j++) {
            int b = j < t->n_inputs ? t->inputs[j] : t->outputs[j - t->n_inputs];
            if (!amk__lower_is_onchip(p, b)) continue;
            if (first_user[b] < 0) first_user[b] = k;
            else parent[amk__lower_find(parent, k)] = amk__lower_find(parent, first_user[b]);
        }
    }
    if (c->sm_assignment == AMK_SM_ROUND_ROBIN) {
        for (k = 0; k < n; k++) {
            int g = amk__lower_find(parent, k), s = group_sm[g];
            if (s < 0) s = k % num_sms;
            group_sm[g] = s;
            sm[k] = s;
        }
        goto done;
    }
    { /* load_balance, level by level. why m: ties go to the lowest index, so n tasks never reach
         an SM index >= n; loads beyond min(num_sms, n) need no memory */
        int nc = p->n_counters, lv, *depth, *cdepth, *by_level, *level_start, max_depth = 0;
        int64_t *lvl, big = 0;
        uint32_t *ran; /* why: ran[s] bit op = SM s already runs a task of opcode op */
        load = (int64_t *)amk__calloc((size_t)(m ? m : 1), sizeof(int64_t));
        ran = (uint32_t *)amk__calloc((size_t)(m ? m : 1), sizeof(uint32_t));
        lvl = (int64_t *)amk__calloc((size_t)(m ? m : 1), sizeof(int64_t));
        depth = (int *)amk__calloc((size_t)(n > 0 ? n : 1), sizeof(int));
        cdepth = (int *)amk__calloc((size_t)(nc > 0 ? nc : 1), sizeof(int));
        by_level = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
        level_start = NULL;
        if (load && lvl && depth && cdepth && by_level && ran) {
            for (k = 0; k < n; k++) { /* order is topological: producers come first */
                const amk_task *t = &p->tasks[order[k]];
                int dep = 0;
                for (j = 0; j < t->n_waits; j++) {
                    int cc = t->waits[j].counter;
                    if (cc >= 0 && cc < nc && cdepth[cc] > dep) dep = cdepth[cc];
                }
                depth[k] = dep + 1;
                if (depth[k] > max_depth) max_depth = depth[k];
                if (t->out_counter >= 0 && t->out_counter < nc && cdepth[t->out_counter] < depth[k])
                    cdepth[t->out_counter] = depth[k];
            }
            level_start = (int *)amk__calloc((size_t)max_depth + 2, sizeof(int));
        }
        if (!level_start) {
            amk__free(lvl); amk__free(depth); amk__free(cdepth); amk__free(by_level); amk__free(ran);
            r = amk__lower_oom(d);
            goto done;
        }
        for (k = 0; k < n; k++) level_start[depth[k] + 1]++; /* counting sort, stable in k */
        for (lv = 0; lv <= max_depth; lv++) level_start[lv + 1] += level_start[lv];
        for (k = 0; k < n; k++) by_level[level_start[depth[k]]++] = k;
        for (lv = max_depth; lv > 0; lv--) level_start[lv] = level_start[lv - 1];
        level_start[0] = 0;
        for (lv = 1; lv <= max_depth; lv++) {
            for (j = 0; j < m; j++) lvl[j] = 0;
            for (j = level_start[lv]; j < level_start[lv + 1]; j++) {
                int kk = by_level[j], g = amk__lower_find(parent, kk), s = group_sm[g], q;
                int64_t cost = p->tasks[order[kk]].est_bytes;
                const uint32_t bit = 1u << ((uint32_t)p->tasks[order[kk]].op & 31u);
                if (cost < 1) cost = 1; /* why: zero-cost tasks still spread over the SMs */
                if (s < 0) { /* why: linear scans; m <= n, and programs have ~100 SMs */
                    int a = -1;
                    for (s = 0, q = 1; q < m; q++)
                        if (lvl[q] < lvl[s] || (lvl[q] == lvl[s] && load[q] < load[s])) s = q;
                    for (q = 0; q < m; q++)
                        if (lvl[q] == lvl[s] && (ran[q] & bit) && (a < 0 || load[q] < load[a])) a = q;
                    if (a >= 0 && load[a] - load[s] <= (load[s] / 8 > big ? load[s] / 8 : big)) s = a;
                }
                if (cost > big) big = cost;
                if (s < m) {
                    ran[s] |= bit;
                    lvl[s] = lvl[s] > INT64_MAX - cost ? INT64_MAX : lvl[s] + cost;
                    load[s] = load[s] > INT64_MAX - cost ? INT64_MAX : load[s] + cost;
                }
                group_sm[g] = s;
                sm[kk] = s;
            }
        }
        amk__free(lvl); amk__free(depth); amk__free(cdepth); amk__free(by_level); amk__free(level_start); amk__free(ran);
    }
done:
    amk__free(parent);
    amk__free(first_user);
    amk__free(group_sm);
    amk__free(load);
    amk__free(heap.items);
    return r;
}

/* ---- step 4: pages ------------------------------------------------------------------------------ */

/* Uses of the activation buffers, by position in the new order (CSR over buffer ids). */
typedef struct amk__lower_uses {
    int *use_start, *uses;     /* [n_buffers+1], reads and writes (a task may appear twice) */
    int *write_start, *writes; /* [n_buffers+1], writes only */
} amk__lower_uses;

AMK__FN void amk__lower_uses_free(amk__lower_uses *u) {
    amk__free(u->use_start); amk__free(u->uses);
    amk__free(u->write_start); amk__free(u->writes);
}

AMK__FN int amk__lower_is_activation(const amk_program *p, int b) {
    return b >= 0 && b < p->n_buffers && p->buffers[b].kind == AMK_KIND_ACTIVATION;
}

AMK__FN int amk__lower_uses_build(const amk_program *p, const int *order, amk__lower_uses *u) {
    int nb = p->n_buffers, n = p->n_tasks, k, j, pass;
    int64_t n_uses = 0, n_writes = 0;
    memset(u, 0, sizeof *u);
    u->use_start = (int *)amk__calloc((size_t)nb + 2, sizeof(int));
    u->write_start = (int *)amk__calloc((size_t)nb + 2, sizeof(int));
    if (!u->use_start || !u->write_start) return 0;
    /* pass 0 counts into start[b + 1]; pass 1 fills, advancing start[b] as a cursor */
    for (pass = 0; pass < 2; pass++) {
        for (k = 0; k < n; k++) {
            const amk_task *t = &p->tasks[order[k]];
            for (j = 0; j < t->n_inputs + t->n_outputs; j++) {
                int is_write = j >= t->n_inputs, b = is_write ? t->outputs[j - t->n_inputs] : t->inputs[j];
                if (!amk__lower_is_activation(p, b)) continue;
                if (pass == 0) {
                    u->use_start[b + 1]++; n_uses++;
                    if (is_write) { u->write_start[b + 1]++; n_writes++; }
                } else {
                    u->uses[u->use_start[b]++] = k;
                    if (is_write) u->writes[u->write_start[b]++] = k;
                }
            }
        }
        if (pass == 0) {
            if (n_uses > INT_MAX) return 0;
            for (j = 0; j < nb; j++) {
                u->use_start[j + 1] += u->use_start[j];
                u->write_start[j + 1] += u->write_start[j];
            }
            u->uses = (int *)amk__malloc((size_t)(n_uses ? n_uses : 1) * sizeof(int));
            u->writes = (int *)amk__malloc((size_t)(n_writes ? n_writes : 1) * sizeof(int));
            if (!u->uses || !u->writes) return 0;
        }
    }
    for (j = nb; j > 0; j--) { u->use_start[j] = u->use_start[j - 1]; u->write_start[j] = u->write_start[j - 1]; }
    u->use_start[0] = u->write_start[0] = 0;
    return 1;
}

/* Happens-before over positions: anc[c] holds the positions of every transitive predecessor of a
   task waiting on counter c (its producers and theirs). why: per counter rather than per task,
   since tasks join on few counters and the sets are the big memory. */
typedef struct amk__lower_hb {
    const amk_program *p;
    const int *order;
    amk__word *anc; /* [n_counters][words] */
    size_t words;
} amk__lower_hb;

/* why: 1 GiB of sets is far past any real program (20k tasks x 20k counters is 50 MB); a larger
   one must use linear pages rather than take the machine's memory */
#define AMK__LOWER_HB_MAX_BYTES ((uint64_t)1 << 30)

AMK__FN amk_result amk__lower_hb_build(amk__lower_hb *hb, const amk_program *p, const int *order,
                                       amk_diag *d) {
    int n = p->n_tasks, nc = p->n_counters, k, j;
    uint64_t bytes;
    size_t w;
    hb->p = p;
    hb->order = order;
    hb->words = AMK__WORDS(n);
    if (!amk__mul_u64((uint64_t)nc, (uint64_t)hb->words * sizeof(amk__word), &bytes) ||
        bytes > AMK__LOWER_HB_MAX_BYTES)
        return amk__fail(d, AMK_ERR_UNSUPPORTED,
                         "graph_color pages for %d tasks x %d counters need too much memory; use linear pages",
                         n, nc);
    hb->anc = (amk__word *)amk__calloc((size_t)(nc ? nc : 1) * (hb->words ? hb->words : 1), sizeof(amk__word));
    if (!hb->anc) return amk__lower_oom(d);
    /* in topological order every producer of a counter a task waits on is already folded in */
    for (k = 0; k < n; k++) {
        const amk_task *t = &p->tasks[order[k]];
        amk__word *dst;
        if (t->out_counter < 0 || t->out_counter >= nc) continue;
        dst = hb->anc + (size_t)t->out_counter * hb->words;
        for (j = 0; j < t->n_waits; j++) {
            int c = t->waits[j].counter;
            const amk__word *src;
            if (c < 0 || c >= nc || c == t->out_counter) continue;
            src = hb->anc + (size_t)c * hb->words;
            for (w = 0; w < hb->words; w++) dst[w] |= src[w];
        }
        amk__bit_set(dst, (size_t)k);
    }
    return AMK_OK;
}

/* 1 if the task at position u happens-before the task at position v. */
AMK__FN int amk__lower_hb_before(const amk__lower_hb *hb, int u, int v) {
    const amk_task *t = &hb->p->tasks[hb->order[v]];
    int j;
    for (j = 0; j < t->n_waits; j++) {
        int c = t->waits[j].counter;
        if (c >= 0 && c < hb->p->n_counters && amk__bit_get(hb->anc + (size_t)c * hb->words, (size_t)u))
            return 1;
    }
    return 0;
}

/* A page being coloured: the maximal uses (under happens-before) of the buffers on it. why: a use
   that happens-before another one on the page is implied by it, so checks stay O(frontier). */
typedef struct amk__lower_color {
    int *frontier; int n_frontier, cap_frontier;
    int expiry; /* min reach_end over the frontier: no write after this position can fit */
} amk__lower_color;

/* 1 if buffer b may join the page: every use already there happens-before every write of b. */
AMK__FN int amk__lower_fits(const amk__lower_hb *hb, const amk__lower_uses *u,
                            const amk__lower_color *pc, int b) {
    int i, j;
    for (j = u->write_start[b]; j < u->write_start[b + 1]; j++)
        for (i = 0; i < pc->n_frontier; i++)
            if (!amk__lower_hb_before(hb, pc->frontier[i], u->writes[j])) return 0;
    return 1;
}

/* Adds b's uses to the page's frontier and keeps only the maximal ones; 0 on out of memory.
   stamp[] (one int per position, none equal to mark on entry: a fresh mark per call) de-duplicates;
   reach_end[position] is the last position of that task's descendants (itself if none). */
AMK__FN int amk__lower_add_uses(const amk__lower_hb *hb, const amk__lower_uses *u,
                                amk__lower_color *pc, int b, int *stamp, int mark,
                                const int *reach_end) {
    int i, j, n_keep = 0;
    for (i = 0; i < pc->n_frontier; i++) stamp[pc->frontier[i]] = mark;
    for (j = u->use_start[b]; j < u->use_start[b + 1]; j++) {
        int x = u->uses[j];
        if (stamp[x] == mark) continue;
        stamp[x] = mark;
        if (!amk__grow((void **)&pc->frontier, &pc->cap_frontier, pc->n_frontier + 1, sizeof(int)))
            return 0;
        pc->frontier[pc->n_frontier++] = x;
    }
    pc->expiry = INT_MAX;
    for (i = 0; i < pc->n_frontier; i++) {
        int x = pc->frontier[i], dominated = 0;
        for (j = 0; j < pc->n_frontier && !dominated; j++)
            dominated = j != i && amk__lower_hb_before(hb, x, pc->frontier[j]);
        if (dominated) continue;
        pc->frontier[n_keep++] = x;
        if (reach_end[x] < pc->expiry) pc->expiry = reach_end[x];
    }
    pc->n_frontier = n_keep;
    return 1;
}

/* Greedy colouring (graph_color): buffers in order of first use (ties: the order the task names
   them), each on the lowest-id page of its space where it fits, else on a new page. why: a page
   fits only if all its uses precede the new buffer's first write in position, i.e. its live_end
   is behind the current position k, and only while k is not past its expiry (a write must be a
   descendant of every frontier task; programs with values nobody reads leave many such pages).
   Candidate pages are kept in the bit set free_pages (fed by a min-heap of live_end, pruned when
   expired), so the happens-before test runs only on them, not on every page. */
AMK__FN amk_result amk__lower_color_pages(const amk_program *p, const int *order,
                                          const amk__lower_uses *u, amk_page **pages_io,
                                          int *n_pages_io, int *buffer_page, amk_diag *d) {
    amk__lower_hb hb;
    amk__lower_color *colors = NULL;
    amk__lower_heap busy;     /* (live_end, page) of pages not yet in free */
    amk__word *free_pages = NULL;
    amk_page *pages = NULL;
    int *reach_end = NULL; /* [n_tasks] by position, then [n_counters] scratch */
    int *stamp = NULL;
    int n_pages = 0, cap_pages = 0, cap_colors = 0, cap_words = 0, mark = 0, n_act = 0, b, k, j, pg;
    amk_result r;
    memset(&hb, 0, sizeof hb);
    busy.n = 0;
    for (b = 0; b < p->n_buffers; b++) n_act += amk__lower_is_activation(p, b);
    busy.items = (amk__lower_hitem *)amk__malloc((size_t)(n_act + 1) * sizeof(amk__lower_hitem));
    stamp = (int *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(int));
    reach_end = (int *)amk__malloc(((size_t)p->n_tasks + (size_t)p->n_counters + 1) * sizeof(int));
    if (!busy.items || !stamp || !reach_end) { r = amk__lower_oom(d); goto done; }
    r = amk__lower_hb_build(&hb, p, order, d);
    if (r != AMK_OK) goto done;
    { /* reverse topological order: a counter reaches as far as its waiters do */
        int *counter_end = reach_end + p->n_tasks;
        for (j = 0; j < p->n_counters; j++) counter_end[j] = -1;
        for (k = p->n_tasks - 1; k >= 0; k--) {
            const amk_task *t = &p->tasks[order[k]];
            int c = t->out_counter, e = k;
            if (c >= 0 && c < p->n_counters && counter_end[c] > e) e = counter_end[c];
            reach_end[k] = e;
            for (j = 0; j < t->n_waits; j++) {
                c = t->waits[j].counter;
                if (c >= 0 && c < p->n_counters && counter_end[c] < e) counter_end[c] = e;
            }
        }
    }
    for (k = 0; k < p->n_tasks; k++) {
        const amk_task *t = &p->tasks[order[k]];
        while (busy.n > 0 && busy.items[0].key < k) {
            pg = amk__lower_hpop(&busy).val;
            free_pages[pg / 64] |= (amk__word)1 << (pg % 64);
        }
        for (j = 0; j < t->n_inputs + t->n_outputs; j++) {
            int bb = j < t->n_inputs ? t->inputs[j] : t->outputs[j - t->n_inputs], w;
            const amk_buffer *buf;
            int64_t nbytes;
            if (!amk__lower_is_activation(p, bb) || buffer_page[bb] >= 0) continue;
            buf = &p->buffers[bb];
            pg = n_pages;
            for (w = 0; w < cap_words && pg == n_pages; w++) {
                int i;
                if (!free_pages[w]) continue;
                for (i = 0; i < 64 && pg == n_pages; i++) {
                    if (!((free_pages[w] >> i) & 1)) continue;
                    if (colors[w * 64 + i].expiry < k) { /* for good: positions only grow */
                        free_pages[w] &= ~((amk__word)1 << i);
                        continue;
                    }
                    if (pages[w * 64 + i].space == buf->space && amk__lower_fits(&hb, u, &colors[w * 64 + i], bb))
                        pg = w * 64 + i;
                }
            }
            if (pg == n_pages) {
                if (!amk__grow((void **)&pages, &cap_pages, n_pages + 1, sizeof(amk_page)) ||
                    !amk__grow((void **)&colors, &cap_colors, n_pages + 1, sizeof(amk__lower_color))) {
                    r = amk__lower_oom(d);
                    goto done;
                }
                if ((int)AMK__WORDS(n_pages + 1) > cap_words) {
                    amk__word *nw = (amk__word *)amk__realloc(free_pages, (size_t)(cap_words + 1) * sizeof(amk__word));
                    if (!nw) { r = amk__lower_oom(d); goto done; }
                    free_pages = nw;
                    free_pages[cap_words++] = 0;
                }
                memset(&colors[pg], 0, sizeof colors[pg]);
                pages[pg].id = pg;
                pages[pg].space = buf->space;
                pages[pg].nbytes = 0;
                pages[pg].live_start = k; /* bb's first use */
                pages[pg].live_end = k;
                n_pages++;
            }
            free_pages[pg / 64] &= ~((amk__word)1 << (pg % 64));
            if (!amk__lower_add_uses(&hb, u, &colors[pg], bb, stamp, ++mark, reach_end)) { r = amk__lower_oom(d); goto done; }
            nbytes = amk__buffer_nbytes(buf);
            if (nbytes > pages[pg].nbytes) pages[pg].nbytes = nbytes;
            if (u->uses[u->use_start[bb + 1] - 1] > pages[pg].live_end)
                pages[pg].live_end = u->uses[u->use_start[bb + 1] - 1];
            if (colors[pg].expiry > pages[pg].live_end) amk__lower_hpush(&busy, pages[pg].live_end, pg);
            buffer_page[bb] = pg;
        }
    }
done:
    for (pg = 0; colors && pg < n_pages; pg++) amk__free(colors[pg].frontier);
    amk__free(colors);
    amk__free(free_pages);
    amk__free(busy.items);
    amk__free(reach_end);
    amk__free(stamp);
    amk__free(hb.anc);
    if (r != AMK_OK) { amk__free(pages); pages = NULL; n_pages = 0; }
    *pages_io = pages;
    *n_pages_io = n_pages;
    return r;
}

/* The page table of the activation buffers: *pages_out (n_pages) and buffer_page[n_buffers]. */
AMK__FN amk_result amk__lower_pages(const amk_program *p, const int *order, int mode,
                                    amk_page **pages_out, int *n_pages_out, int *buffer_page,
                                    amk_diag *d) {
    amk__lower_uses u;
    amk_page *pages = NULL;
    int nb = p->n_buffers, n_pages = 0, cap_pages = 0, b;
    amk_result r = AMK_OK;
    *pages_out = NULL;
    *n_pages_out = 0;
    for (b = 0; b < nb; b++) buffer_page[b] = -1;
    if (!amk__lower_uses_build(p, order, &u)) { amk__lower_uses_free(&u); return amk__lower_oom(d); }
    for (b = 0; b < nb; b++) /* every page's size must be representable */
        if (amk__lower_is_activation(p, b) && amk__buffer_nbytes(&p->buffers[b]) < 0) {
            if (d) {
                d->buffer = b;
                snprintf(d->check, sizeof d->check, "%s", amk_check_id(AMK_CHECK_BUFFER_SHAPE));
            }
            r = amk__fail(d, AMK_ERR_REJECTED, "buffer %d has no valid byte size", b);
            goto done;
        }
    if (mode == AMK_PAGES_GRAPH_COLOR) {
        r = amk__lower_color_pages(p, order, &u, &pages, &n_pages, buffer_page, d);
        goto done;
    }
    for (b = 0; b < nb; b++) { /* linear: one page per activation, in buffer id order */
        amk_page *pgp;
        if (!amk__lower_is_activation(p, b)) continue;
        if (!amk__grow((void **)&pages, &cap_pages, n_pages + 1, sizeof(amk_page))) { r = amk__lower_oom(d); goto done; }
        pgp = &pages[n_pages];
        pgp->id = n_pages;
        pgp->space = p->buffers[b].space;
        pgp->nbytes = amk__buffer_nbytes(&p->buffers[b]);
        pgp->live_start = pgp->live_end = -1;
        if (u.use_start[b] < u.use_start[b + 1]) {
            pgp->live_start = u.uses[u.use_start[b]]; /* uses are in position order */
            pgp->live_end = u.uses[u.use_start[b + 1] - 1];
        }
        buffer_page[b] = n_pages++;
    }
done:
    amk__lower_uses_free(&u);
    if (r != AMK_OK) { amk__free(pages); pages = NULL; n_pages = 0; }
    *pages_out = pages;
    *n_pages_out = n_pages;
    return r;
}

/* ---- the pass ----------------------------------------------------------------------------------- */

AMK_API amk_result amk_program_lower(amk_program *p, const amk_config *c, const amk_target *t,
                                     amk_diag *d) {
    amk_config cfg;
    amk_target target;
    amk_task *tasks = NULL;
    amk_page *pages = NULL;
    int *order = NULL, *sm = NULL, *explicit_sm = NULL, *buffer_page = NULL;
    int n, n_pages = 0, k;
    amk_result r;
    amk_diag_clear(d);
    r = amk__lower_check_args(p, c, t, d);
    if (r != AMK_OK) return r;
    n = p->n_tasks;
    target = *t; /* why: c and t may point into p (re-lowering with p's own config) */
    amk_config_default(&cfg);
    if (!amk__config_copy(&cfg, c)) { amk__config_free(&cfg); return amk__lower_oom(d); }
    order = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    sm = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    explicit_sm = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    buffer_page = (int *)amk__malloc((size_t)(p->n_buffers ? p->n_buffers : 1) * sizeof(int));
    tasks = (amk_task *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk_task));
    if (!order || !sm || !explicit_sm || !buffer_page || !tasks) { r = amk__lower_oom(d); goto fail; }
    if (cfg.sm_assignment == AMK_SM_EXPLICIT &&
        (r = amk__lower_explicit(p, &cfg, target.num_sms, explicit_sm, d)) != AMK_OK)
        goto fail;
    if ((r = amk__lower_validate(p, 1, d)) != AMK_OK) goto fail;
    if ((r = amk__lower_order(p, order, d)) != AMK_OK) goto fail;
    if ((r = amk__lower_assign(p, order, &cfg, target.num_sms, explicit_sm, sm, d)) != AMK_OK) goto fail;
    if (cfg.page_allocation != AMK_PAGES_NONE &&
        (r = amk__lower_pages(p, order, cfg.page_allocation, &pages, &n_pages, buffer_page, d)) != AMK_OK)
        goto fail;

    /* commit: nothing below can fail */
    for (k = 0; k < n; k++) {
        tasks[k] = p->tasks[order[k]];
        tasks[k].sm = sm[k];
    }
    amk__free(p->tasks);
    p->tasks = tasks;
    p->cap_tasks = n ? n : 1;
    amk__free(p->pages);
    amk__free(p->buffer_page);
    p->pages = NULL;
    p->buffer_page = NULL;
    p->n_pages = 0;
    p->has_pages = cfg.page_allocation != AMK_PAGES_NONE;
    if (p->has_pages) {
        p->pages = pages;
        p->n_pages = n_pages;
        p->buffer_page = buffer_page;
        buffer_page = NULL;
    }
    amk__config_free(&p->config);
    p->config = cfg;
    p->has_config = 1;
    p->target = target;
    p->has_target = 1;
    amk__free(order);
    amk__free(sm);
    amk__free(explicit_sm);
    amk__free(buffer_page);
    return amk__lower_validate(p, 0, d);
fail:
    amk__config_free(&cfg);
    amk__free(order);
    amk__free(sm);
    amk__free(explicit_sm);
    amk__free(buffer_page);
    amk__free(tasks);
    amk__free(pages);
    return r;
}

/* ==== >>impl_refvm: the reference VM, the conformance oracle ================================== */
/* (part of amk.h's implementation; included once from amk.h)

   Every opcode with real numerics on the CPU, following IR_SPEC_NOTES "What each opcode
   computes": inputs are read as fp32 (amk__load_f32), all arithmetic and accumulation is fp32,
   and each result is cast to the output dtype once (amk__store_f32). A task writes only what its
   opcode says (a GEMV tile its columns, KV_APPEND its row). The code is meant to be obviously
   right; only GEMV/GEMM is tuned (row conversion plus 8 independent accumulators), because the
   Llama path runs whole models through it. */

/* Fills d (cleared first) and returns r. check may be NULL; task/counter -1 when they do not apply. */
AMK__FN amk_result amk__refvm_fail(amk_diag *d, amk_result r, const char *check, int task,
                                   int counter, const char *fmt, ...) {
    va_list ap;
    if (!d) return r;
    amk_diag_clear(d);
    d->result = r;
    d->task = task;
    d->counter = counter;
    if (check) snprintf(d->check, sizeof d->check, "%s", check);
    va_start(ap, fmt);
    vsnprintf(d->message, sizeof d->message, fmt, ap);
    va_end(ap);
    return r;
}

/* The index of t in p's task list, or -1 when t is not one of p's tasks. */
AMK__FN int amk__refvm_task_index(const amk_program *p, const amk_task *t) {
    uintptr_t a = (uintptr_t)p->tasks, b = (uintptr_t)t;
    if (!p->tasks || b < a || (b - a) % sizeof(amk_task) ||
        (b - a) / sizeof(amk_task) >= (uintptr_t)p->n_tasks)
        return -1;
    return (int)((b - a) / sizeof(amk_task));
}

/* n floats of scratch, or NULL (also when n does not fit size_t). */
AMK__FN float *amk__refvm_floats(int64_t n) {
    if (n < 0 || (uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(float))) return NULL;
    return (float *)amk__malloc((size_t)n * sizeof(float));
}

/* amk_f16_to_f32 with the common case, a normal number, decoded inline. why: the generic decode
   made F16 weights 5x slower than BF16 in GEMV. */
AMK__FN float amk__refvm_f16(uint16_t h) {
    uint32_t e = h & 0x7C00u;
    if (e == 0 || e == 0x7C00u) return amk_f16_to_f32(h); /* zero, subnormal, inf, NaN */
    /* rebias the exponent (15 -> 127): add (127-15) << 23 to the shifted exponent|mantissa */
    return amk__bits_f32(((uint32_t)(h & 0x8000u) << 16) |
                         ((((uint32_t)h & 0x7FFFu) << 13) + 0x38000000u));
}

/* dst[0..n) = elements [off, off+n) of a buffer of dtype t, as fp32. */
AMK__FN void amk__refvm_load_row(const void *base, int t, int64_t off, int64_t n, float *dst) {
    const uint8_t *b = (const uint8_t *)base;
    int64_t i;
    uint16_t h;
    if (n <= 0) return;
    switch (t) {
    case AMK_DTYPE_F32:
        memcpy(dst, b + 4 * off, (size_t)n * 4);
        break;
    case AMK_DTYPE_BF16:
        for (i = 0; i < n; i++) { memcpy(&h, b + 2 * (off + i), 2); dst[i] = amk_bf16_to_f32(h); }
        break;
    case AMK_DTYPE_F16:
        for (i = 0; i < n; i++) { memcpy(&h, b + 2 * (off + i), 2); dst[i] = amk__refvm_f16(h); }
        break;
    default:
        for (i = 0; i < n; i++) dst[i] = amk__load_f32(base, t, off + i);
        break;
    }
}

/* sum a[k]*b[k] in fp32 with 8 independent accumulators, combined pairwise. */
AMK__FN float amk__refvm_dot(const float *a, const float *b, int64_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        s0 += a[k] * b[k];         s1 += a[k + 1] * b[k + 1];
        s2 += a[k + 2] * b[k + 2]; s3 += a[k + 3] * b[k + 3];
        s4 += a[k + 4] * b[k + 4]; s5 += a[k + 5] * b[k + 5];
        s6 += a[k + 6] * b[k + 6]; s7 += a[k + 7] * b[k + 7];
    }
    for (; k < n; k++) s0 += a[k] * b[k];
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

/* Element e of 4-bit packed data (dtype I4, or U8 holding two per byte): low nibble first,
   stored q + 8 (IR_SPEC_NOTES). */
AMK__FN float amk__refvm_nibble(const void *base, int64_t e) {
    uint8_t byte = ((const uint8_t *)base)[e >> 1];
    return (float)((int)((e & 1) ? byte >> 4 : byte & 15) - 8);
}

/* dst elements [doff, doff+n) = src elements [soff, soff+n), cast. Equal byte-sized dtypes copy
   the bytes (exact, also for I32 beyond 2^24); anything else goes through fp32. */
AMK__FN void amk__refvm_cast(void *dst, int dt, int64_t doff, const void *src, int st, int64_t soff,
                             int64_t n) {
    int64_t i;
    int bits = amk_dtype_bits(dt);
    if (n <= 0) return;
    if (dt == st && bits % 8 == 0) {
        size_t w = (size_t)(bits / 8);
        memmove((uint8_t *)dst + (size_t)doff * w, (const uint8_t *)src + (size_t)soff * w,
                (size_t)n * w);
        return;
    }
    for (i = 0; i < n; i++) amk__store_f32(dst, dt, doff + i, amk__load_f32(src, st, soff + i));
}

/* One task being executed: its buffers, their storage and its marshalled params. */
typedef struct amk__refop {
    const amk_task *t;
    int task_index;
    amk_params_t P;
    int ni;
    const amk_buffer *in[AMK_MAX_INPUTS];
    const void *x[AMK_MAX_INPUTS]; /* storage of input i */
    int64_t n_in[AMK_MAX_INPUTS];
    const amk_buffer *out;
    void *y;                       /* storage of the (first) output */
    int64_t n_out;
    const amk_buffer *outs[AMK_MAX_OUTPUTS]; /* every output (outs[0] = out): RMSNORM_GEMV with ARGMAX's
                                                partials, RMSNORM_MLP with FOLD's qkv, the caches of
                                                a PRENORM ATTENTION_O that writes them */
    void *ys[AMK_MAX_OUTPUTS];
} amk__refop;

#define AMK__IN(o, i, e) amk__load_f32((o)->x[i], (o)->in[i]->dtype, (e))
#define AMK__OUT(o, e, v) amk__store_f32((o)->y, (o)->out->dtype, (e), (v))

AMK__FN amk_result amk__refvm_oom(const amk__refop *o, amk_diag *d) {
    return amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, o->task_index, -1,
                           "%s: out of memory for scratch", amk_op_name(o->t->op));
}

AMK__FN amk_result amk__ref_embed(const amk__refop *o, amk_diag *d) {
    int64_t i, H = o->P.hidden, V = o->in[1]->shape[0];
    for (i = 0; i < o->n_in[0]; i++) { /* why: check every id first, so an error writes nothing */
        int64_t id = amk__load_i64(o->x[0], o->in[0]->dtype, i);
        if (id < 0 || id >= V)
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "EMBED: token id %lld at index %lld is outside [0, %lld)",
                                   (long long)id, (long long)i, (long long)V);
    }
    for (i = 0; i < o->n_in[0]; i++) {
        int64_t id = amk__load_i64(o->x[0], o->in[0]->dtype, i);
        amk__refvm_cast(o->y, o->out->dtype, i * H, o->x[1], o->in[1]->dtype, id * H, H);
    }
    return AMK_OK;
}

/* 1/sqrt(mean(x^2) + eps) of elements [off, off+n) of input i, summed in fp32 in order: the
   scale of every rms norm (RMSNORM, the RMSNORM_* tiles, PRENORM ATTENTION_O). */
AMK__FN float amk__ref_rms_inv(const amk__refop *o, int i, int64_t off, int64_t n) {
    float ss = 0.0f;
    int64_t k;
    for (k = 0; k < n; k++) { float v = AMK__IN(o, i, off + k); ss += v * v; }
    return 1.0f / sqrtf(ss / (float)n + o->P.eps);
}

AMK__FN void amk__ref_rmsnorm(const amk__refop *o) {
    int64_t r, h, H = o->P.hidden;
    for (r = 0; r < o->n_in[0] / H; r++) {
        const float inv = amk__ref_rms_inv(o, 0, r * H, H);
        for (h = 0; h < H; h++) AMK__OUT(o, r * H + h, AMK__IN(o, 0, r * H + h) * inv * AMK__IN(o, 1, h));
    }
}

AMK__FN void amk__ref_layernorm(const amk__refop *o) {
    int64_t r, h, H = o->P.hidden;
    for (r = 0; r < o->n_in[0] / H; r++) {
        float sum = 0.0f, var = 0.0f, mean, den;
        for (h = 0; h < H; h++) sum += AMK__IN(o, 0, r * H + h);
        mean = sum / (float)H;
        for (h = 0; h < H; h++) { float c = AMK__IN(o, 0, r * H + h) - mean; var += c * c; }
        den = sqrtf(var / (float)H + o->P.eps); /* population variance */
        for (h = 0; h < H; h++) {
            float v = (AMK__IN(o, 0, r * H + h) - mean) / den * AMK__IN(o, 1, h);
            if (o->ni == 3) v += AMK__IN(o, 2, h);
            AMK__OUT(o, r * H + h, v);
        }
    }
}

/* Row n of the quantized weight, dequantized: (q - zero) * scale per group of `group` columns. */
AMK__FN void amk__ref_dequant_wrow(const amk__refop *o, int64_t n, float *dst) {
    int64_t K = o->P.K, group = o->P.group, G = K / group, g, k;
    int i8 = o->in[1]->dtype == AMK_DTYPE_I8;
    /* why: when the row and every group start on a byte, decode 4-bit pairs a byte at a time */
    int pairs = !i8 && (n * K) % 2 == 0 && group % 2 == 0;
    const int8_t *q8 = (const int8_t *)o->x[1];
    const uint8_t *q4 = (const uint8_t *)o->x[1] + (n * K) / 2; /* this row's bytes */
    for (g = 0; g < G; g++) {
        float s = AMK__IN(o, 2, n * G + g), z = o->ni == 4 ? AMK__IN(o, 3, n * G + g) : 0.0f;
        if (pairs) {
            for (k = g * group; k < (g + 1) * group; k += 2) {
                uint8_t b = q4[k / 2];
                dst[k] = ((float)((int)(b & 15) - 8) - z) * s;
                dst[k + 1] = ((float)((int)(b >> 4) - 8) - z) * s;
            }
            continue;
        }
        for (k = g * group; k < (g + 1) * group; k++) {
            float q = i8 ? (float)q8[n * K + k] : amk__refvm_nibble(o->x[1], n * K + k);
            dst[k] = (q - z) * s;
        }
    }
}

/* out[m, n] = sum_k x[m,k]*W[n,k] (+bias[n]) for n in the tile (GEMM: m in its rows too). */
AMK__FN amk_result amk__ref_gemv(const amk__refop *o, amk_diag *d) {
    int64_t K = o->P.K, M = o->n_in[0] / K, n_out_last = o->n_out / M;
    int64_t m0 = 0, m1 = M, n, m;
    int quant = o->P.qdtype == AMK_DTYPE_I8 || o->P.qdtype == AMK_DTYPE_I4;
    float *xs, *w; /* xs [m1-m0, K] fp32 rows of x; w [K] one weight row */
    if (o->t->op == AMK_OP_GEMM_TILE) { m0 = o->P.m_off; m1 = m0 + o->P.M_tile; }
    xs = amk__refvm_floats((m1 - m0) * K);
    w = amk__refvm_floats(K);
    if (!xs || !w) { amk__free(xs); amk__free(w); return amk__refvm_oom(o, d); }
    amk__refvm_load_row(o->x[0], o->in[0]->dtype, m0 * K, (m1 - m0) * K, xs);
    for (n = o->P.n_off; n < (int64_t)o->P.n_off + o->P.N_tile; n++) {
        if (quant) amk__ref_dequant_wrow(o, n, w);
        else amk__refvm_load_row(o->x[1], o->in[1]->dtype, n * K, K, w);
        for (m = m0; m < m1; m++) {
            float acc = amk__refvm_dot(xs + (m - m0) * K, w, K);
            if (!quant && o->ni == 3) acc += AMK__IN(o, 2, n);
            AMK__OUT(o, m * n_out_last + n, acc);
        }
    }
    amk__free(xs);
    amk__free(w);
    return AMK_OK;
}

#define AMK__TWO_PI 6.283185307179586476925 /* why: M_PI is not C99 */

/* RoPE inverse frequency of pair i of a head of P->head_dim: theta^(-2i/head_dim) in fp32 as HF
   computes it, with the optional llama3 frequency scaling of REFERENCE.md §3.4. */
AMK__FN float amk__rope_inv_freq(const amk_params_t *P, int64_t i) {
    float inv = 1.0f / powf(P->theta, (float)(2 * i) / (float)P->head_dim);
    if (P->rope_factor > 0.0f) {
        float orig = (float)P->rope_orig_ctx, lo = P->rope_low_freq_factor;
        float hi = P->rope_high_freq_factor, factor = P->rope_factor;
        float wavelen = (float)AMK__TWO_PI / inv, low_wl = orig / lo, high_wl = orig / hi;
        if (wavelen > low_wl) {
            inv = inv / factor;
        } else if (!(wavelen < high_wl)) {
            float smooth = (orig / wavelen - lo) / (hi - lo);
            inv = (1.0f - smooth) * inv / factor + smooth * inv;
        }
    }
    return inv;
}

/* RMSNORM_GEMV's RoPE (and PRENORM ATTENTION_O's): y[0..nt) are values n0.. of rows of heads of
   head_dim, in interleaved pair order; pair (n, n+1), n even, rotates by pos * inv_freq((n %
   head_dim) / 2). */
AMK__FN void amk__ref_rope_pairs(const amk_params_t *P, int64_t pos, int64_t n0, float *y, int64_t nt) {
    int64_t n;
    for (n = 0; n + 1 < nt; n += 2) {
        float angle = (float)pos * amk__rope_inv_freq(P, ((n0 + n) % P->head_dim) / 2);
        float c = cosf(angle), sn = sinf(angle), x1 = y[n], x2 = y[n + 1];
        y[n] = x1 * c - x2 * sn;
        y[n + 1] = x2 * c + x1 * sn;
    }
}

/* v as a buffer of dtype t holds it: stored and loaded back. */
AMK__FN float amk__refvm_round(float v, int t) {
    unsigned char b[8] = {0};
    amk__store_f32(b, t, 0, v);
    return amk__load_f32(b, t, 0);
}

/* PRENORM ATTENTION_O's head_dim values at element off of qkv (input 0): dst = inv * qkv[off..],
   rotated (RoPE at pos) when rope, rounded to dtype dt. */
AMK__FN void amk__ref_prenorm(const amk__refop *o, float inv, int64_t pos, int64_t off, int rope, int dt, float *dst) {
    const int64_t hd = o->P.head_dim;
    int64_t e;
    for (e = 0; e < hd; e++) dst[e] = inv * AMK__IN(o, 0, off + e);
    if (rope) amk__ref_rope_pairs(&o->P, pos, 0, dst, hd);
    for (e = 0; e < hd; e++) dst[e] = amk__refvm_round(dst[e], dt);
}

/* Head h uses kv head h / (n_heads/n_kv_heads); cache row j of kv head g starts at element
   (j*n_kv_heads + g)*head_dim. Partial layout per head: [acc(head_dim) | m | l]. ATTENTION_O: the
   heads' results a (F32, not cast) then out[h'] += sum_j a[j] * W_oT[j, h'] over its rows j
   [m_off, m_off+M_tile) (+ resid[h']), added to what out holds. PRENORM: q and the key and value
   of row pos of each of its kv heads from qkv and x's rms (amk__ref_prenorm), that row from them,
   never from the caches; with the caches as outputs 2 and 3 the task then stores them there. */
AMK__FN amk_result amk__ref_attention(const amk__refop *o, amk_diag *d) {
    int64_t hd = o->P.head_dim, nh = o->P.n_heads, nkv = o->P.n_kv_heads, rep = nh / nkv, g0 = o->P.n_off;
    int64_t start = o->P.kv_start, len = o->P.kv_len, h, h0 = 0, h1 = nh, j, e, pos = 0;
    int partial = ((uint32_t)o->P.flags & AMK_ATTN_FLAG_PARTIAL) != 0, fo = o->t->op == AMK_OP_ATTENTION_O;
    const int prenorm = fo && ((uint32_t)o->P.flags & AMK_ATTN_FLAG_PRENORM) != 0;
    const int writer = prenorm && o->t->n_outputs == 3;
    float *q, *row, *acc, *s, *a = NULL, *kv = NULL; /* kv: PRENORM's [2, N_tile, head_dim] keys, values at pos */
    float inv = 0.0f;
    if (o->t->op == AMK_OP_ATTENTION_DECODE || fo) { /* its kv heads, and rows up to the position */
        pos = amk__load_i64(o->x[3], o->in[3]->dtype, 0);
        if (pos < 0)
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "%s: position %lld is negative", amk_op_name(o->t->op), (long long)pos);
        if (writer && pos >= o->n_in[1] / (nkv * hd))
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "%s: position %lld is outside the cache (%lld rows)", amk_op_name(o->t->op),
                                   (long long)pos, (long long)(o->n_in[1] / (nkv * hd)));
        if (pos + 1 - start < len) len = pos + 1 - start < 0 ? 0 : pos + 1 - start;
        h0 = g0 * rep;
        h1 = (g0 + o->P.N_tile) * rep;
    }
    q = amk__refvm_floats(hd); row = amk__refvm_floats(hd); acc = amk__refvm_floats(hd);
    s = amk__refvm_floats(len ? len : 1); /* [len] scores */
    if (fo) a = amk__refvm_floats((h1 - h0) * hd); /* [heads h0..h1, head_dim] */
    if (prenorm) kv = amk__refvm_floats(2 * o->P.N_tile * hd);
    if (!q || !row || !acc || !s || (fo && !a) || (prenorm && !kv)) {
        amk__free(q); amk__free(row); amk__free(acc); amk__free(s); amk__free(a); amk__free(kv);
        return amk__refvm_oom(o, d);
    }
    if (prenorm) {
        inv = amk__ref_rms_inv(o, 5, 0, o->n_in[5]);
        for (e = 0; e < o->P.N_tile; e++) {
            amk__ref_prenorm(o, inv, pos, (nh + g0 + e) * hd, 1, o->in[1]->dtype, kv + e * hd);
            amk__ref_prenorm(o, inv, pos, (nh + nkv + g0 + e) * hd, 0, o->in[2]->dtype, kv + (o->P.N_tile + e) * hd);
        }
    }
    for (h = h0; h < h1; h++) {
        int64_t g = h / rep;
        float m = -INFINITY, l = 0.0f;
        if (prenorm) amk__ref_prenorm(o, inv, pos, h * hd, 1, AMK_DTYPE_F32, q);
        else amk__refvm_load_row(o->x[0], o->in[0]->dtype, h * hd, hd, q);
        for (j = 0; j < len; j++) {
            if (prenorm && start + j == pos) memcpy(row, kv + (g - g0) * hd, (size_t)hd * sizeof(float));
            else amk__refvm_load_row(o->x[1], o->in[1]->dtype, ((start + j) * nkv + g) * hd, hd, row);
            s[j] = o->P.scale * amk__refvm_dot(q, row, hd);
            if (s[j] > m) m = s[j];
        }
        for (e = 0; e < hd; e++) acc[e] = 0.0f;
        for (j = 0; j < len; j++) {
            float pj = expf(s[j] - m);
            l += pj;
            if (prenorm && start + j == pos) memcpy(row, kv + (o->P.N_tile + g - g0) * hd, (size_t)hd * sizeof(float));
            else amk__refvm_load_row(o->x[2], o->in[2]->dtype, ((start + j) * nkv + g) * hd, hd, row);
            for (e = 0; e < hd; e++) acc[e] += pj * row[e];
        }
        if (partial) { /* an empty window leaves acc 0, m -inf, l 0 */
            for (e = 0; e < hd; e++) AMK__OUT(o, h * (hd + 2) + e, acc[e]);
            AMK__OUT(o, h * (hd + 2) + hd, m);
            AMK__OUT(o, h * (hd + 2) + hd + 1, l);
        } else if (fo) {
            for (e = 0; e < hd; e++) a[(h - h0) * hd + e] = len ? acc[e] / l : 0.0f;
        } else {
            for (e = 0; e < hd; e++) AMK__OUT(o, h * hd + e, len ? acc[e] / l : 0.0f);
        }
    }
    if (fo) { /* out[h'] += a[m_off..] . W_oT[m_off.., h'] (+ resid[h']) */
        const int64_t H = o->in[4]->shape[1], m0 = o->P.m_off, mt = o->P.M_tile;
        const int r = 5 + prenorm; /* the resid's input */
        int64_t c;
        for (c = 0; c < H; c++) {
            float sum = 0.0f;
            for (j = 0; j < mt; j++) sum += a[m0 + j - h0 * hd] * AMK__IN(o, 4, (m0 + j) * H + c);
            if (o->ni > r) sum += AMK__IN(o, r, c);
            AMK__OUT(o, c, amk__load_f32(o->y, AMK_DTYPE_F32, c) + sum);
        }
    }
    if (writer) /* row pos of its kv heads; the values already hold the caches' rounding */
        for (j = 0; j < 2; j++)
            for (e = 0; e < o->P.N_tile * hd; e++)
                amk__store_f32(o->ys[1 + j], o->outs[1 + j]->dtype, (pos * nkv + g0) * hd + e, kv[(j * o->P.N_tile) * hd + e]);
    amk__free(q); amk__free(row); amk__free(acc); amk__free(s); amk__free(a); amk__free(kv);
    return AMK_OK;
}

/* Rotate-half RoPE as HF transformers computes it in fp32, with the optional llama3 frequency
   scaling of REFERENCE.md §3.4. x is [S, n_heads, head_dim]: row r has position r / n_heads. */
AMK__FN amk_result amk__ref_rope(const amk__refop *o, amk_diag *d) {
    int64_t hd = o->P.head_dim, half = hd / 2, S = o->n_in[1], rows = o->n_in[0] / hd;
    int64_t per_pos = rows / S, r, i;
    float *inv = amk__refvm_floats(half); /* [head_dim/2] inverse frequencies */
    if (!inv) return amk__refvm_oom(o, d);
    for (i = 0; i < S; i++) {
        int64_t pos = amk__load_i64(o->x[1], o->in[1]->dtype, i);
        if (pos < 0) {
            amk__free(inv);
            return amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1,
                                   "ROPE: position %lld at index %lld is negative", (long long)pos,
                                   (long long)i);
        }
    }
    for (i = 0; i < half; i++) inv[i] = amk__rope_inv_freq(&o->P, i);
    for (r = 0; r < rows; r++) {
        float pos = (float)amk__load_i64(o->x[1], o->in[1]->dtype, r / per_pos);
        for (i = 0; i < half; i++) {
            float angle = pos * inv[i], c = cosf(angle), sn = sinf(angle);
            float x1 = AMK__IN(o, 0, r * hd + i), x2 = AMK__IN(o, 0, r * hd + i + half);
            AMK__OUT(o, r * hd + i, x1 * c - x2 * sn);
            AMK__OUT(o, r * hd + i + half, x2 * c + x1 * sn);
        }
    }
    amk__free(inv);
    return AMK_OK;
}

/* The argmax rule of SAMPLE_ARGMAX and the ARGMAX_* pair: candidate (v, i) replaces (*bv, *bi)
   when it is a candidate (i >= 0, v not NaN) and there is none yet, or v is larger, or equal
   with a smaller index (the first maximum wins). */
AMK__FN void amk__argmax_merge(float *bv, int64_t *bi, float v, int64_t i) {
    if (i < 0 || v != v) return;
    if (*bi < 0 || v > *bv || (v == *bv && i < *bi)) { *bv = v; *bi = i; }
}

/* The first index j in [j0, j1) of the max of x[base + j] (dtype t), the max in *bv; -1 when none
   is a candidate (all NaN). */
AMK__FN int64_t amk__ref_best(const void *x, int t, int64_t base, int64_t j0, int64_t j1, float *bv) {
    int64_t best = -1, j;
    *bv = 0.0f;
    for (j = j0; j < j1; j++) amk__argmax_merge(bv, &best, amk__load_f32(x, t, base + j), j);
    return best;
}

/* The pair of columns [j0, j1) of row base of x (dtype t): at y[at], y[at + 1] (F32) the max and
   its first index as F32 (NaN, -1 when none is a candidate): ARGMAX_PARTIAL's pair, and
   RMSNORM_GEMV's with ARGMAX. */
AMK__FN void amk__ref_pair(const void *x, int t, int64_t base, int64_t j0, int64_t j1, void *y, int64_t at) {
    float bv;
    const int64_t best = amk__ref_best(x, t, base, j0, j1, &bv);
    amk__store_f32(y, AMK_DTYPE_F32, at, best < 0 ? NAN : bv);
    amk__store_f32(y, AMK_DTYPE_F32, at + 1, (float)best);
}

/* RMSNORM_GEMV and RMSNORM_SWIGLU: each row m of x is normalised in fp32 (rmsnorm as RMSNORM, no
   cast in between), then the tile's rows n: y = xn . W[n] (SWIGLU: silu(xn . Wg[n]) * (xn . Wu[n])).
   RMSNORM_GEMV flags: ROPE rotates pairs (n, n+1), n even, by pos[m] * inv_freq((n % head_dim)/2)
   (the interleaved pair order, like GGUF's Q/K rows); KV_ROW stores y at pos[m] * N + n of a
   cache of rows of N, instead of out[m, n]. Positions are checked before anything is written.
   ARGMAX: then, per row m, the max of the tile's values as out holds them (rounded to its dtype)
   and its first index, as ARGMAX_PARTIAL's pair `part` of the second output.
   RMSNORM_MLP: the SWIGLU values y (not cast) times the tile's rows of W_downT, plus resid when
   given, added to what out[m] holds; with FOLD also y times its rows of W_cat plus its share of the
   raw x times W_cat's base rows (AMK_MLP_FLAG_FOLD), added to what qkv[m] holds. */
AMK__FN amk_result amk__ref_norm_gemv(const amk__refop *o, amk_diag *d) {
    const int mlp = o->t->op == AMK_OP_RMSNORM_MLP, swiglu = o->t->op == AMK_OP_RMSNORM_SWIGLU || mlp;
    /* flags: the bits that take the positions; argmax: the pairs into the second output */
    const uint32_t flags = swiglu ? 0u : (uint32_t)o->P.flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW);
    const int argmax = !swiglu && ((uint32_t)o->P.flags & AMK_GEMV_FLAG_ARGMAX) != 0;
    const int64_t K = o->P.K, M = o->n_in[0] / K, N = o->in[2]->shape[0], n0 = o->P.n_off, nt = o->P.N_tile;
    const int64_t last = (flags & AMK_GEMV_FLAG_KV_ROW) ? N : o->n_out / M;
    const int fold = mlp && ((uint32_t)o->P.flags & AMK_MLP_FLAG_FOLD) != 0;
    const int64_t F = fold ? o->in[5]->shape[1] : 0;
    const int64_t b0 = n0 * K / N, b1 = (n0 + nt) * K / N; /* FOLD: the tile's base rows of W_cat, N + [b0, b1) */
    int64_t m, n, k;
    float *xs = amk__refvm_floats(K), *w = amk__refvm_floats(K > F ? K : F), *y = amk__refvm_floats(nt);
    float *qs = fold ? amk__refvm_floats(F) : NULL; /* [F] FOLD: the tile's share of a row of qkv */
    amk_result r = AMK_OK;
    if (!xs || !w || !y || (fold && !qs)) { r = amk__refvm_oom(o, d); goto done; }
    for (m = 0; m < M && flags; m++) {
        int64_t pos = amk__load_i64(o->x[3], o->in[3]->dtype, m);
        if (pos < 0 || ((flags & AMK_GEMV_FLAG_KV_ROW) && pos >= o->n_out / N)) {
            r = amk__refvm_fail(d, AMK_ERR_RUNTIME, NULL, o->task_index, -1, "%s: position %lld of row %lld "
                                "is outside %s", amk_op_name(o->t->op), (long long)pos, (long long)m,
                                (flags & AMK_GEMV_FLAG_KV_ROW) ? "the cache" : "[0, inf)");
            goto done;
        }
    }
    for (m = 0; m < M; m++) {
        const float inv = amk__ref_rms_inv(o, 0, m * K, K);
        int64_t pos = flags ? amk__load_i64(o->x[3], o->in[3]->dtype, m) : 0;
        for (k = 0; k < K; k++) xs[k] = AMK__IN(o, 0, m * K + k) * inv * AMK__IN(o, 1, k);
        for (n = 0; n < nt; n++) {
            amk__refvm_load_row(o->x[2], o->in[2]->dtype, (n0 + n) * K, K, w);
            y[n] = amk__refvm_dot(xs, w, K);
            if (swiglu) {
                amk__refvm_load_row(o->x[3], o->in[3]->dtype, (n0 + n) * K, K, w);
                y[n] = y[n] / (1.0f + expf(-y[n])) * amk__refvm_dot(xs, w, K);
            }
        }
        if (flags & AMK_GEMV_FLAG_ROPE) amk__ref_rope_pairs(&o->P, pos, n0, y, nt);
        if (mlp) { /* out[m, h] += sum_n y[n] * W_downT[n0 + n, h] (+ resid[m, h]) */
            const int64_t H = o->in[4]->shape[1];
            int64_t h, f;
            for (h = 0; h < H; h++) {
                float acc = 0.0f;
                for (n = 0; n < nt; n++) acc += AMK__IN(o, 4, (n0 + n) * H + h) * y[n];
                if (o->ni == 6 + fold) acc += AMK__IN(o, 5 + fold, m * H + h);
                AMK__OUT(o, m * H + h, amk__load_f32(o->y, AMK_DTYPE_F32, m * H + h) + acc);
            }
            if (fold) { /* qkv[m, f] += sum_n y[n] W_cat[n0 + n, f] + sum_k x[m, k] W_cat[N + k, f], k in [b0, b1) */
                for (f = 0; f < F; f++) qs[f] = 0.0f;
                for (k = 0; k < nt + b1 - b0; k++) {
                    const float c = k < nt ? y[k] : AMK__IN(o, 0, m * K + b0 + k - nt);
                    amk__refvm_load_row(o->x[5], o->in[5]->dtype, (k < nt ? n0 + k : N + b0 + k - nt) * F, F, w);
                    for (f = 0; f < F; f++) qs[f] += c * w[f];
                }
                for (f = 0; f < F; f++)
                    amk__store_f32(o->ys[1], AMK_DTYPE_F32, m * F + f, amk__load_f32(o->ys[1], AMK_DTYPE_F32, m * F + f) + qs[f]);
            }
            continue;
        }
        for (n = 0; n < nt; n++)
            AMK__OUT(o, (flags & AMK_GEMV_FLAG_KV_ROW) ? pos * N + n0 + n : m * last + n0 + n, y[n]);
        if (argmax) /* over the values as stored */
            amk__ref_pair(o->y, o->out->dtype, m * last, n0, n0 + nt, o->ys[1],
                          m * amk__opshape_last(o->outs[1]) + 2 * o->P.part);
    }
done:
    amk__free(xs); amk__free(w); amk__free(y); amk__free(qs);
    return r;
}

/* Logical element e of a quantized q: (q - zero) * scale, group e / group. */
AMK__FN void amk__ref_dequant(const amk__refop *o) {
    int64_t e, group = o->P.group;
    for (e = 0; e < o->n_out; e++) {
        float q = o->in[0]->dtype == AMK_DTYPE_U8 ? amk__refvm_nibble(o->x[0], e) : AMK__IN(o, 0, e);
        float z = o->ni == 3 ? AMK__IN(o, 2, e / group) : 0.0f;
        AMK__OUT(o, e, (q - z) * AMK__IN(o, 1, e / group));
    }
}

AMK__FN amk_result amk__ref_softmax(const amk__refop *o, amk_diag *d) {
    const amk_buffer *b = o->in[0];
    int dim = o->P.dim < 0 ? o->P.dim + b->rank : o->P.dim, k;
    int64_t outer = 1, len = b->shape[dim], inner = 1, a, i, j;
    float *e; /* [len] exponentials of one slice */
    if (o->n_out == 0) return AMK_OK; /* why: with a zero dim, the other dims' product may not fit */
    for (k = 0; k < dim; k++) outer *= b->shape[k];
    for (k = dim + 1; k < b->rank; k++) inner *= b->shape[k];
    e = amk__refvm_floats(len);
    if (!e) return amk__refvm_oom(o, d);
    for (a = 0; a < outer; a++)
        for (i = 0; i < inner; i++) {
            int64_t base = a * len * inner + i;
            float m = -INFINITY, sum = 0.0f;
            for (j = 0; j < len; j++) {
                e[j] = AMK__IN(o, 0, base + j * inner);
                if (e[j] > m) m = e[j];
            }
            for (j = 0; j < len; j++) { e[j] = expf(e[j] - m); sum += e[j]; }
            for (j = 0; j < len; j++) AMK__OUT(o, base + j * inner, e[j] / sum);
        }
    amk__free(e);
    return AMK_OK;
}

/* A partial's index as stored (an F32): -1 (no candidate) unless it is in [0, 2^31); truncated. */
AMK__FN int64_t amk__argmax_index(float f) {
    return f >= 0.0f && f < 2147483648.0f ? (int64_t)f : -1;
}

/* SAMPLE_ARGMAX per row: the first index of the maximum; NaN never wins; an all-NaN row gives 0.
   ARGMAX_PARTIAL per row: (max, its first index) over columns [n_off, n_off + N_tile) into the
   pair `part` of out (NaN, -1 when all are NaN). ARGMAX_COMBINE per row: the index of the best
   pair by the same rule (0 when none is a candidate): the argmax of the columns the partials
   cover, as SAMPLE_ARGMAX over them. */
AMK__FN void amk__ref_argmax(const amk__refop *o) {
    const int64_t L = amk__opshape_last(o->in[0]), rows = o->n_in[0] / L;
    const int partial = o->t->op == AMK_OP_ARGMAX_PARTIAL, combine = o->t->op == AMK_OP_ARGMAX_COMBINE;
    const int64_t j0 = partial ? o->P.n_off : 0, j1 = partial ? j0 + o->P.N_tile : combine ? L / 2 : L;
    int64_t r, j;
    for (r = 0; r < rows; r++) {
        int64_t best = -1;
        float bv = 0.0f;
        if (partial) { /* out is F32 (the op check) */
            amk__ref_pair(o->x[0], o->in[0]->dtype, r * L, j0, j1, o->y, r * amk__opshape_last(o->out) + 2 * o->P.part);
            continue;
        }
        if (combine)
            for (j = j0; j < j1; j++)
                amk__argmax_merge(&bv, &best, AMK__IN(o, 0, r * L + 2 * j), amk__argmax_index(AMK__IN(o, 0, r * L + 2 * j + 1)));
        else
            best = amk__ref_best(o->x[0], o->in[0]->dtype, r * L, j0, j1, &bv);
        amk__store_i64(o->y, o->out->dtype, r, best < 0 ? 0 : best);
    }
}

/* m = max m_p; w_p = l_p > 0 ? exp(m_p - m) : 0; out = sum acc_p*w_p / sum l_p*w_p (0 if empty). */
AMK__FN void amk__ref_combine(const amk__refop *o) {
    int64_t hd = o->P.head_dim, nh = o->n_in[0] / (hd + 2), h, e;
    int p;
    for (h = 0; h < nh; h++) {
        float m = -INFINITY, l = 0.0f, w[AMK_MAX_INPUTS];
        for (p = 0; p < o->ni; p++) {
            float mp = AMK__IN(o, p, h * (hd + 2) + hd);
            if (mp > m) m = mp;
        }
        for (p = 0; p < o->ni; p++) {
            float mp = AMK__IN(o, p, h * (hd + 2) + hd), lp = AMK__IN(o, p, h * (hd + 2) + hd + 1);
            w[p] = lp > 0.0f ? expf(mp - m) : 0.0f;
            l += lp * w[p];
        }
        for (e = 0; e < hd; e++) {
            float num = 0.0f;
            for (p = 0; p < o->ni; p++) num += AMK__IN(o, p, h * (hd + 2) + e) * w[p];
            AMK__OUT(o, h * hd + e, l > 0.0f ? num / l : 0.0f);
        }
    }
}

/* The numerics of one task whose check already passed. */
AMK__FN amk_result amk__refvm_exec(const amk__refop *o, amk_diag *d) {
    int64_t i;
    int p;
    switch (o->t->op) {
    case AMK_OP_NOP: return AMK_OK;
    case AMK_OP_COPY:
        amk__refvm_cast(o->y, o->out->dtype, 0, o->x[0], o->in[0]->dtype, 0, o->n_out);
        return AMK_OK;
    case AMK_OP_EMBED: return amk__ref_embed(o, d);
    case AMK_OP_RMSNORM: amk__ref_rmsnorm(o); return AMK_OK;
    case AMK_OP_LAYERNORM: amk__ref_layernorm(o); return AMK_OK;
    case AMK_OP_GEMV_TILE:
    case AMK_OP_GEMM_TILE: return amk__ref_gemv(o, d);
    case AMK_OP_ATTENTION_TILE:
    case AMK_OP_ATTENTION_DECODE: case AMK_OP_ATTENTION_O: return amk__ref_attention(o, d);
    case AMK_OP_ROPE: return amk__ref_rope(o, d);
    case AMK_OP_RMSNORM_GEMV:
    case AMK_OP_RMSNORM_SWIGLU: case AMK_OP_RMSNORM_MLP: return amk__ref_norm_gemv(o, d);
    case AMK_OP_FILL: {
        int64_t e;
        for (e = 0; e < o->n_out; e++) AMK__OUT(o, e, o->P.scale);
        return AMK_OK;
    }
    case AMK_OP_SILU_MUL:
        for (i = 0; i < o->n_out; i++) {
            float g = AMK__IN(o, 0, i);
            AMK__OUT(o, i, g / (1.0f + expf(-g)) * AMK__IN(o, 1, i));
        }
        return AMK_OK;
    case AMK_OP_GELU:
        for (i = 0; i < o->n_out; i++) {
            float v = AMK__IN(o, 0, i);
            AMK__OUT(o, i, 0.5f * v * (1.0f + erff(v / sqrtf(2.0f))));
        }
        return AMK_OK;
    case AMK_OP_ADD:
        for (i = 0; i < o->n_out; i++) AMK__OUT(o, i, AMK__IN(o, 0, i) + AMK__IN(o, 1, i));
        return AMK_OK;
    case AMK_OP_MUL:
        for (i = 0; i < o->n_out; i++) {
            float b = o->ni == 1 ? o->P.scale : AMK__IN(o, 1, o->n_in[1] == 1 ? 0 : i);
            AMK__OUT(o, i, AMK__IN(o, 0, i) * b);
        }
        return AMK_OK;
    case AMK_OP_DEQUANT: amk__ref_dequant(o); return AMK_OK;
    case AMK_OP_SOFTMAX: return amk__ref_softmax(o, d);
    case AMK_OP_ALLREDUCE_SHARD:
        for (i = 0; i < o->n_out; i++) {
            float s = AMK__IN(o, 0, i);
            for (p = 1; p < o->ni; p++) s += AMK__IN(o, p, i);
            AMK__OUT(o, i, s);
        }
        return AMK_OK;
    case AMK_OP_KV_APPEND: /* the output is the cache itself; only row pos changes */
        amk__refvm_cast(o->y, o->out->dtype, (int64_t)o->P.pos * o->n_in[0], o->x[0],
                        o->in[0]->dtype, 0, o->n_in[0]);
        return AMK_OK;
    case AMK_OP_SAMPLE_ARGMAX: case AMK_OP_ARGMAX_PARTIAL: case AMK_OP_ARGMAX_COMBINE: amk__ref_argmax(o); return AMK_OK;
    case AMK_OP_ATTENTION_COMBINE: amk__ref_combine(o); return AMK_OK;
    default:
        return amk__refvm_fail(d, AMK_ERR_UNSUPPORTED, NULL, o->task_index, -1,
                               "opcode %d has no reference implementation", o->t->op);
    }
}

/* amk__op_check as a result: AMK_ERR_REJECTED with the check id and message in d. */
AMK__FN amk_result amk__refvm_check(const amk_program *p, const amk_task *t, int task_index,
                                    amk_diag *d) {
    amk_check which;
    char msg[256];
    if (amk__op_check(p, t, &which, msg, sizeof msg)) return AMK_OK;
    return amk__refvm_fail(d, AMK_ERR_REJECTED, amk_check_id(which), task_index, -1, "%s", msg);
}

/* Fills o for a task that passed amk__refvm_check, from the storage pointers of its buffers. */
AMK__FN amk_result amk__refvm_fill(const amk_program *p, const amk_task *t, int task_index,
                                   void *const *ins, void *const *outs, amk__refop *o, amk_diag *d) {
    int i;
    memset(o, 0, sizeof *o);
    o->t = t;
    o->task_index = task_index;
    o->ni = t->n_inputs;
    amk_task_marshal_params(t, &o->P);
    for (i = 0; i < t->n_inputs + t->n_outputs; i++) {
        int is_in = i < t->n_inputs;
        const amk_buffer *b = &p->buffers[is_in ? t->inputs[i] : t->outputs[i - t->n_inputs]];
        void *ptr = is_in ? (ins ? ins[i] : NULL) : (outs ? outs[i - t->n_inputs] : NULL);
        if (!ptr && amk__buffer_nbytes(b) > 0)
            return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, task_index, -1,
                                   "%s: no storage given for buffer %d '%s'", amk_op_name(t->op),
                                   b->id, b->name ? b->name : "?");
        if (is_in) {
            o->in[i] = b; o->x[i] = ptr; o->n_in[i] = amk_buffer_numel(b);
        } else {
            o->outs[i - t->n_inputs] = b;
            o->ys[i - t->n_inputs] = ptr;
            if (i == t->n_inputs) { o->out = b; o->y = ptr; o->n_out = amk_buffer_numel(b); }
        }
    }
    return AMK_OK;
}

AMK_API amk_result amk_ref_exec(const amk_program *p, const amk_task *t, void *const *ins,
                                void *const *outs, amk_diag *d) {
    amk__refop o;
    amk_result r;
    int ti;
    if (!p || !t) return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1, "amk_ref_exec: NULL program or task");
    ti = amk__refvm_task_index(p, t);
    r = amk__refvm_check(p, t, ti, d);
    if (r == AMK_OK) r = amk__refvm_fill(p, t, ti, ins, outs, &o, d);
    return r != AMK_OK ? r : amk__refvm_exec(&o, d);
}

/* ---- the VM: storage for every buffer and the counter-driven walk ---------------------------- */

struct amk_refvm {
    const amk_program *p;
    int n_buffers;
    void **data;     /* [n_buffers] where each buffer lives: its own block, its page, or bound */
    void **own;      /* [n_buffers] the VM's own block of a buffer (NULL when paged or bound) */
    size_t *nbytes;  /* [n_buffers] */
    void **page;     /* [n_pages] storage shared by the buffers of a page */
    int n_pages;
};

AMK_API void amk_refvm_free(amk_refvm *vm) {
    int i;
    if (!vm) return;
    for (i = 0; vm->own && i < vm->n_buffers; i++) amk__free(vm->own[i]);
    for (i = 0; vm->page && i < vm->n_pages; i++) amk__free(vm->page[i]);
    amk__free(vm->data);
    amk__free(vm->own);
    amk__free(vm->nbytes);
    amk__free(vm->page);
    amk__free(vm);
}

/* Allocates zeroed storage for every buffer; paged buffers share their page's block, sized
   max(page nbytes, largest buffer on it). */
AMK__FN amk_result amk__refvm_alloc(amk_refvm *vm, amk_diag *d) {
    const amk_program *p = vm->p;
    int i, paged = p->has_pages && p->buffer_page;
    int64_t *need = NULL; /* [n_pages] largest buffer on each page, -1 for an unused page */
    size_t nb = (size_t)(p->n_buffers ? p->n_buffers : 1);
    vm->n_buffers = p->n_buffers;
    vm->data = (void **)amk__calloc(nb, sizeof(void *));
    vm->own = (void **)amk__calloc(nb, sizeof(void *));
    vm->nbytes = (size_t *)amk__calloc(nb, sizeof(size_t));
    if (!vm->data || !vm->own || !vm->nbytes) goto oom;
    if (paged) {
        if (p->n_pages < 0 || (p->n_pages > 0 && !p->pages))
            return amk__refvm_fail(d, AMK_ERR_REJECTED, "PAGE_REF", -1, -1, "the page table is malformed");
        vm->n_pages = p->n_pages;
        vm->page = (void **)amk__calloc((size_t)(p->n_pages ? p->n_pages : 1), sizeof(void *));
        need = (int64_t *)amk__calloc((size_t)(p->n_pages ? p->n_pages : 1), sizeof(int64_t));
        if (!vm->page || !need) goto oom;
        for (i = 0; i < p->n_pages; i++) need[i] = -1;
    }
    for (i = 0; i < p->n_buffers; i++) {
        int64_t n = amk__buffer_nbytes(&p->buffers[i]);
        int pg = paged ? p->buffer_page[i] : -1;
        if (n < 0 || (uint64_t)n > (uint64_t)SIZE_MAX) {
            amk__free(need);
            amk__refvm_fail(d, AMK_ERR_REJECTED, "BUFFER_SHAPE", -1, -1,
                            "buffer %d '%s' has a bad shape or too many bytes", i,
                            p->buffers[i].name ? p->buffers[i].name : "?");
            if (d) d->buffer = i;
            return AMK_ERR_REJECTED;
        }
        vm->nbytes[i] = (size_t)n;
        if (pg >= p->n_pages) {
            amk__free(need);
            amk__refvm_fail(d, AMK_ERR_REJECTED, "PAGE_REF", -1, -1,
                            "buffer %d is mapped to page %d of %d", i, pg, p->n_pages);
            if (d) d->buffer = i;
            return AMK_ERR_REJECTED;
        }
        if (pg >= 0) {
            if (n > need[pg]) need[pg] = n;
        } else if (!(vm->data[i] = vm->own[i] = amk__calloc(1, (size_t)n))) {
            goto oom;
        }
    }
    for (i = 0; paged && i < p->n_pages; i++) {
        int64_t n = p->pages[i].nbytes > need[i] ? p->pages[i].nbytes : need[i];
        if (need[i] < 0) continue; /* no buffer lives there */
        if ((uint64_t)n > (uint64_t)SIZE_MAX || !(vm->page[i] = amk__calloc(1, (size_t)n))) goto oom;
    }
    for (i = 0; paged && i < p->n_buffers; i++)
        if (p->buffer_page[i] >= 0) vm->data[i] = vm->page[p->buffer_page[i]];
    amk__free(need);
    return AMK_OK;
oom:
    amk__free(need);
    return amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, -1, -1, "out of memory for buffer storage");
}

AMK_API amk_result amk_refvm_create(const amk_program *p, amk_refvm **out, amk_diag *d) {
    amk_report rep;
    amk_result r;
    amk_refvm *vm;
    int i;
    if (out) *out = NULL;
    if (!p || !out) return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1, "amk_refvm_create: NULL argument");
    if (p->build_error != AMK_OK)
        return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1,
                               "the program is incomplete: a builder call failed (%s)",
                               amk_result_str(p->build_error));
    memset(&rep, 0, sizeof rep);
    r = amk_program_validate(p, &rep);
    if (r == AMK_ERR_REJECTED) {
        for (i = 0; i < rep.n_items && !rep.items[i].is_error; i++) {}
        if (i < rep.n_items) {
            const amk_issue *is = &rep.items[i];
            amk__refvm_fail(d, r, amk_check_id(is->check), is->task, is->counter, "%s", is->message);
            if (d) d->buffer = is->buffer;
        } else {
            amk__refvm_fail(d, r, NULL, -1, -1, "the program was rejected by validation");
        }
        amk_report_free(&rep);
        return r;
    }
    amk_report_free(&rep);
    if (r != AMK_OK) return amk__refvm_fail(d, r, NULL, -1, -1, "validation failed: %s", amk_result_str(r));
    vm = (amk_refvm *)amk__calloc(1, sizeof(amk_refvm));
    if (!vm) return amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, -1, -1, "out of memory");
    vm->p = p;
    r = amk__refvm_alloc(vm, d);
    if (r != AMK_OK) { amk_refvm_free(vm); return r; }
    *out = vm;
    return AMK_OK;
}

AMK_API void *amk_refvm_buffer(amk_refvm *vm, int buffer_id, size_t *nbytes) {
    if (nbytes) *nbytes = 0;
    if (!vm || buffer_id < 0 || buffer_id >= vm->n_buffers) return NULL;
    if (nbytes) *nbytes = vm->nbytes[buffer_id];
    return vm->data[buffer_id];
}

AMK_API amk_result amk_refvm_bind(amk_refvm *vm, int buffer_id, const void *data, size_t nbytes) {
    int kind;
    if (!vm || buffer_id < 0 || buffer_id >= vm->n_buffers || (!data && nbytes)) return AMK_ERR_INVALID_ARG;
    kind = vm->p->buffers[buffer_id].kind;
    if (kind != AMK_KIND_WEIGHT && kind != AMK_KIND_CONST && kind != AMK_KIND_IO_INPUT)
        return AMK_ERR_INVALID_ARG;
    if (nbytes != vm->nbytes[buffer_id]) return AMK_ERR_MISMATCH;
    if (!data) return AMK_OK; /* an empty buffer keeps its own (empty) block */
    amk__free(vm->own[buffer_id]); /* why: a bound weight needs no copy; calloc'd pages were never touched */
    vm->own[buffer_id] = NULL;
    /* why: the VM never writes read-only kinds (amk_refvm_run refuses a task that would) */
    vm->data[buffer_id] = (void *)(uintptr_t)data;
    return AMK_OK;
}

/* A wait of one task, in the per-counter lists the walk releases as counters rise. */
typedef struct amk__refvm_waiter { int counter; int task; int64_t threshold; } amk__refvm_waiter;

AMK__FN int amk__refvm_waiter_cmp(const void *a, const void *b) {
    const amk__refvm_waiter *x = (const amk__refvm_waiter *)a, *y = (const amk__refvm_waiter *)b;
    if (x->counter != y->counter) return x->counter < y->counter ? -1 : 1;
    if (x->threshold != y->threshold) return x->threshold < y->threshold ? -1 : 1;
    return x->task < y->task ? -1 : x->task > y->task;
}

/* Min-heap of task indices (the ready tasks when firing in list order). */
AMK__FN void amk__refvm_heap_push(int *h, int *n, int v) {
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = v;
}
AMK__FN int amk__refvm_heap_pop(int *h, int *n) {
    int top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = v;
    return top;
}

/* The message of a stuck walk: up to 8 unfired tasks, each with its first unmet wait. */
AMK__FN amk_result amk__refvm_stuck(const amk_program *p, const int64_t *counters, const int *pending,
                                    int n_fired, amk_diag *d) {
    amk__sb sb;
    int i, j, shown = 0, first = -1, first_counter = -1;
    amk_result r;
    memset(&sb, 0, sizeof sb);
    amk__sb_printf(&sb, "no task is ready but %d of %d never fired:", p->n_tasks - n_fired, p->n_tasks);
    for (i = 0; i < p->n_tasks && shown < 8; i++) {
        const amk_task *t = &p->tasks[i];
        if (pending[i] <= 0) continue; /* fired (or ready, which cannot happen when stuck) */
        for (j = 0; j < t->n_waits; j++) {
            const amk_wait *w = &t->waits[j];
            if (counters[w->counter] >= w->threshold) continue;
            amk__sb_printf(&sb, " task %d waits counter %d >= %lld (at %lld);", i, w->counter,
                           (long long)w->threshold, (long long)counters[w->counter]);
            if (first < 0) { first = i; first_counter = w->counter; }
            break;
        }
        shown++;
    }
    r = amk__refvm_fail(d, AMK_ERR_STUCK, NULL, first, first_counter, "%s",
                        sb.oom || !sb.p ? "no task is ready but some never fired" : sb.p);
    amk__sb_free(&sb);
    return r;
}

AMK_API amk_result amk_refvm_run(amk_refvm *vm, const amk_refvm_opts *opts, amk_diag *d) {
    const amk_program *p;
    int64_t *counters = NULL;       /* [n_counters] */
    int *pending = NULL;            /* [n_tasks] unmet waits; -1 once fired */
    int *off = NULL, *next = NULL;  /* [n_counters+1] waiter offsets, [n_counters] next to release */
    int *ready = NULL, n_ready = 0; /* a min-heap (list order) or a bag (seeded random order) */
    amk__refvm_waiter *ws = NULL;   /* [n_waits] sorted by (counter, threshold) */
    int i, j, n_ws = 0, n_fired = 0, nc, nt;
    uint64_t seed = opts ? opts->seed : 0;
    amk__rng rng;
    amk_result r = AMK_OK;
    if (!vm) return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1, "amk_refvm_run: NULL VM");
    p = vm->p;
    if (p->n_buffers != vm->n_buffers)
        return amk__refvm_fail(d, AMK_ERR_INVALID_ARG, NULL, -1, -1,
                               "the program has %d buffers, the VM was created for %d", p->n_buffers,
                               vm->n_buffers);
    nc = p->n_counters;
    nt = p->n_tasks;
    for (i = 0; i < nt; i++) { /* why: validate checks ids; the walk indexes by them, so be sure */
        const amk_task *t = &p->tasks[i];
        if (t->out_counter < 0 || t->out_counter >= nc)
            return amk__refvm_fail(d, AMK_ERR_REJECTED, "REF_COUNTER", i, t->out_counter,
                                   "task %d signals counter %d of %d", i, t->out_counter, nc);
        if (t->n_waits < 0 || (t->n_waits && !t->waits) || t->n_waits > INT_MAX - n_ws)
            return amk__refvm_fail(d, AMK_ERR_REJECTED, "ABI_CAP", i, -1, "task %d has a bad wait list", i);
        for (j = 0; j < t->n_waits; j++)
            if (t->waits[j].counter < 0 || t->waits[j].counter >= nc)
                return amk__refvm_fail(d, AMK_ERR_REJECTED, "REF_COUNTER", i, t->waits[j].counter,
                                       "task %d waits on counter %d of %d", i, t->waits[j].counter, nc);
        n_ws += t->n_waits;
    }
    counters = (int64_t *)amk__calloc((size_t)nc + 1, sizeof(int64_t));
    off = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    next = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    pending = (int *)amk__calloc((size_t)nt + 1, sizeof(int));
    ready = (int *)amk__calloc((size_t)nt + 1, sizeof(int));
    ws = (amk__refvm_waiter *)amk__calloc((size_t)n_ws + 1, sizeof(amk__refvm_waiter));
    if (!counters || !off || !next || !pending || !ready || !ws) {
        r = amk__refvm_fail(d, AMK_ERR_OUT_OF_MEMORY, NULL, -1, -1, "out of memory for the walk");
        goto done;
    }
    n_ws = 0;
    for (i = 0; i < nt; i++)
        for (j = 0; j < p->tasks[i].n_waits; j++) {
            const amk_wait *w = &p->tasks[i].waits[j];
            if (w->threshold <= 0) continue; /* met before anything fires */
            ws[n_ws].counter = w->counter;
            ws[n_ws].task = i;
            ws[n_ws].threshold = w->threshold;
            n_ws++;
            pending[i]++;
        }
    qsort(ws, (size_t)n_ws, sizeof *ws, amk__refvm_waiter_cmp);
    for (i = 0; i < n_ws; i++) off[ws[i].counter + 1]++;
    for (i = 0; i < nc; i++) { off[i + 1] += off[i]; next[i] = off[i]; }
    if (seed) amk__rng_seed(&rng, seed);
    for (i = 0; i < nt; i++)
        if (pending[i] == 0) {
            if (seed) ready[n_ready++] = i;
            else amk__refvm_heap_push(ready, &n_ready, i);
        }
    while (n_ready > 0) {
        const amk_task *t;
        void *ins[AMK_MAX_INPUTS], *outs[AMK_MAX_OUTPUTS];
        amk__refop o;
        int c;
        if (seed) { /* a uniformly random ready task: swap it out of the bag */
            int k = (int)amk__rng_below(&rng, (uint64_t)n_ready);
            i = ready[k];
            ready[k] = ready[--n_ready];
        } else {
            i = amk__refvm_heap_pop(ready, &n_ready);
        }
        t = &p->tasks[i];
        /* params may have changed since create: check the task again before touching memory */
        r = amk__refvm_check(p, t, i, d);
        if (r != AMK_OK) goto done;
        for (j = 0; j < t->n_inputs; j++) ins[j] = vm->data[t->inputs[j]];
        for (j = 0; j < t->n_outputs; j++) {
            const amk_buffer *b = &p->buffers[t->outputs[j]];
            if (b->kind == AMK_KIND_WEIGHT || b->kind == AMK_KIND_CONST || b->kind == AMK_KIND_IO_INPUT) {
                r = amk__refvm_fail(d, AMK_ERR_REJECTED, "WRITE_READONLY", i, -1,
                                    "task %d writes read-only buffer %d '%s' (%s)", i, b->id,
                                    b->name ? b->name : "?", amk_kind_name(b->kind));
                goto done;
            }
            outs[j] = vm->data[t->outputs[j]];
        }
        r = amk__refvm_fill(p, t, i, ins, outs, &o, d);
        if (r == AMK_OK) r = amk__refvm_exec(&o, d);
        if (r != AMK_OK) goto done;
        pending[i] = -1;
        n_fired++;
        c = t->out_counter;
        counters[c]++;
        while (next[c] < off[c + 1] && ws[next[c]].threshold <= counters[c]) {
            int w = ws[next[c]++].task;
            if (--pending[w] == 0) {
                if (seed) ready[n_ready++] = w;
                else amk__refvm_heap_push(ready, &n_ready, w);
            }
        }
    }
    if (n_fired < nt) r = amk__refvm_stuck(p, counters, pending, n_fired, d);
done:
    amk__free(counters);
    amk__free(off);
    amk__free(next);
    amk__free(pending);
    amk__free(ready);
    amk__free(ws);
    return r;
}

#undef AMK__IN
#undef AMK__OUT

/* ==== >>impl_safetensors: read and write safetensors files (REFERENCE.md §2.1) ================ */
/* Layout: u64 little-endian header length N, N bytes of JSON header (an object, maybe padded with
   spaces), then the data buffer. Every offset in the header is relative to the buffer's start. */

#define AMK__ST_MAX_HEADER 100000000ull /* why: the reference implementation's 100 MB header cap */
#define AMK__ST_MAX_RANK 8              /* amk_st_tensor.shape[8] */
#define AMK__ST_JSON_DEPTH 8            /* why: the header nests 3 deep (object, entry, shape) */

typedef struct amk__st_dtype_row {
    const char *name; /* safetensors spelling */
    int dtype;        /* amk_dtype, or -1 where AMK has none */
    int size;         /* bytes per element */
} amk__st_dtype_row;

static const amk__st_dtype_row amk__st_dtypes[] = {
    {"BOOL", AMK_DTYPE_BOOL, 1}, {"U8", AMK_DTYPE_U8, 1},     {"I8", AMK_DTYPE_I8, 1},
    {"I16", -1, 2},              {"U16", -1, 2},              {"F16", AMK_DTYPE_F16, 2},
    {"BF16", AMK_DTYPE_BF16, 2}, {"I32", AMK_DTYPE_I32, 4},   {"U32", -1, 4},
    {"F32", AMK_DTYPE_F32, 4},   {"F64", -1, 8},              {"I64", -1, 8},
    {"U64", -1, 8},              {"F8_E4M3", AMK_DTYPE_F8E4M3, 1}, {"F8_E5M2", AMK_DTYPE_F8E5M2, 1},
};
#define AMK__ST_N_DTYPES ((int)(sizeof amk__st_dtypes / sizeof amk__st_dtypes[0]))

AMK__FN const amk__st_dtype_row *amk__st_dtype_by_name(const char *name, size_t len) {
    int i;
    for (i = 0; i < AMK__ST_N_DTYPES; i++)
        if (strlen(amk__st_dtypes[i].name) == len && memcmp(amk__st_dtypes[i].name, name, len) == 0)
            return &amk__st_dtypes[i];
    return NULL;
}

AMK__FN const amk__st_dtype_row *amk__st_dtype_by_code(int dtype) {
    int i;
    for (i = 0; i < AMK__ST_N_DTYPES; i++)
        if (amk__st_dtypes[i].dtype >= 0 && amk__st_dtypes[i].dtype == dtype) return &amk__st_dtypes[i];
    return NULL;
}

/* "[3, 4]" ("[]" for rank 0) into buf, truncated if it does not fit. */
AMK__FN void amk__st_fmt_shape(char *buf, size_t size, const int64_t *shape, int rank) {
    size_t len;
    int i;
    if (!size) return;
    len = (size_t)snprintf(buf, size, "[");
    for (i = 0; i < rank && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* A parse error at JSON value v (NULL: no location), message formatted like printf. */
AMK__FN amk_result amk__st_err(amk_diag *d, const amk__jval *v, const char *fmt, ...) {
    if (d) {
        va_list ap;
        d->result = AMK_ERR_PARSE;
        if (v) { d->line = v->line; d->col = v->col; }
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return AMK_ERR_PARSE;
}

/* A non-negative JSON integer into *out; 0 if v is anything else. */
AMK__FN int amk__st_uint(const amk__jval *v, uint64_t *out) {
    if (!v || v->type != AMK__J_INT || v->i < 0) return 0;
    *out = (uint64_t)v->i;
    return 1;
}

/* Fills t from the header entry v (named name). begin/end get the entry's data_offsets. */
AMK__FN amk_result amk__st_parse_entry(const char *name, const amk__jval *v, uint64_t buf_size,
                                       amk_st_tensor *t, uint64_t *begin, uint64_t *end,
                                       amk_diag *d) {
    const amk__jval *jd = NULL, *js = NULL, *jo = NULL;
    const amk__st_dtype_row *row;
    char shape_txt[160];
    uint64_t numel = 1, nbytes;
    int i;
    if (v->type != AMK__J_OBJECT)
        return amk__st_err(d, v, "tensor '%.200s': entry is not an object", name);
    /* why strict: the format defines exactly these three fields; anything else is not a file we
       understand, and guessing would hide a corrupt header. */
    for (i = 0; i < v->n; i++) {
        const char *k = v->keys[i];
        if (strcmp(k, "dtype") == 0 && v->key_lens[i] == 5) jd = &v->items[i];
        else if (strcmp(k, "shape") == 0 && v->key_lens[i] == 5) js = &v->items[i];
        else if (strcmp(k, "data_offsets") == 0 && v->key_lens[i] == 12) jo = &v->items[i];
        else return amk__st_err(d, &v->items[i], "tensor '%.200s': unknown field '%.64s'", name, k);
    }
    if (!jd || !js || !jo)
        return amk__st_err(d, v, "tensor '%.200s': missing field '%s'", name,
                           !jd ? "dtype" : !js ? "shape" : "data_offsets");
    if (jd->type != AMK__J_STRING) return amk__st_err(d, jd, "tensor '%.200s': dtype is not a string", name);
    row = amk__st_dtype_by_name(jd->s, jd->slen);
    if (!row) return amk__st_err(d, jd, "tensor '%.200s': unknown dtype '%.32s'", name, jd->s);
    t->dtype = row->dtype;
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", row->name);

    if (js->type != AMK__J_ARRAY) return amk__st_err(d, js, "tensor '%.200s': shape is not an array", name);
    if (js->n > AMK__ST_MAX_RANK)
        return amk__st_err(d, js, "tensor '%.200s': rank %d exceeds %d", name, js->n, AMK__ST_MAX_RANK);
    t->rank = js->n;
    for (i = 0; i < js->n; i++) {
        uint64_t dim;
        if (!amk__st_uint(&js->items[i], &dim))
            return amk__st_err(d, &js->items[i], "tensor '%.200s': shape[%d] is not an integer >= 0", name, i);
        t->shape[i] = (int64_t)dim;
    }
    amk__st_fmt_shape(shape_txt, sizeof shape_txt, t->shape, t->rank);
    for (i = 0; i < t->rank; i++)
        if (!amk__mul_u64(numel, (uint64_t)t->shape[i], &numel) || numel > (uint64_t)INT64_MAX)
            return amk__st_err(d, js, "tensor '%.200s': shape %s has too many elements", name, shape_txt);
    if (!amk__mul_u64(numel, (uint64_t)row->size, &nbytes))
        return amk__st_err(d, js, "tensor '%.200s': shape %s of %s overflows a 64-bit byte size", name,
                           shape_txt, row->name);

    if (jo->type != AMK__J_ARRAY || jo->n != 2 || !amk__st_uint(&jo->items[0], begin) ||
        !amk__st_uint(&jo->items[1], end))
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets is not [begin, end] of integers >= 0", name);
    if (*begin > *end)
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets [%llu, %llu] end before they begin",
                           name, (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > buf_size)
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets [%llu, %llu] run past the data buffer (%llu bytes)",
                           name, (unsigned long long)*begin, (unsigned long long)*end,
                           (unsigned long long)buf_size);
    if (*end - *begin != nbytes)
        return amk__st_err(d, jo, "tensor '%.200s': data_offsets [%llu, %llu] do not match shape %s of %s (%llu bytes)",
                           name, (unsigned long long)*begin, (unsigned long long)*end, shape_txt,
                           row->name, (unsigned long long)nbytes);
    t->nbytes = nbytes;
    return AMK_OK;
}

AMK__FN amk_result amk__st_parse_metadata(const amk__jval *v, amk_safetensors *out, amk_diag *d) {
    int i;
    if (v->type != AMK__J_OBJECT) return amk__st_err(d, v, "__metadata__ is not an object");
    if (v->n == 0) return AMK_OK;
    out->metadata = (amk_meta *)amk__calloc((size_t)v->n, sizeof(amk_meta));
    if (!out->metadata) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading __metadata__");
    for (i = 0; i < v->n; i++) {
        const amk__jval *val = &v->items[i];
        amk__sb sb;
        if (val->type != AMK__J_STRING)
            return amk__st_err(d, val, "__metadata__ '%.200s' is not a string", v->keys[i]);
        if (strlen(v->keys[i]) != v->key_lens[i])
            return amk__st_err(d, val, "__metadata__ key '%.200s' contains a NUL byte", v->keys[i]);
        /* amk_meta keeps the value as canonical JSON text (a quoted string here): lossless even
           for a value that holds a NUL byte. */
        memset(&sb, 0, sizeof sb);
        amk__json_put_string(&sb, val->s, val->slen);
        out->metadata[i].key = amk__strdup(v->keys[i]);
        out->metadata[i].json = sb.p;
        out->n_metadata = i + 1;
        if (sb.oom || !sb.p || !out->metadata[i].key)
            return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading __metadata__");
    }
    return AMK_OK;
}

typedef struct amk__st_span { uint64_t begin, end; int tensor; } amk__st_span;

static int amk__st_span_cmp(const void *a, const void *b) {
    const amk__st_span *x = (const amk__st_span *)a, *y = (const amk__st_span *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->tensor - y->tensor;
}

/* Rejects two tensors whose byte ranges overlap. The format also says the buffer is fully
   covered; we accept holes (unused bytes harm nothing) but never overlaps (two tensors would
   alias). Zero-size tensors occupy nothing. spans is sorted in place. */
AMK__FN amk_result amk__st_check_overlap(const amk_safetensors *st, amk__st_span *spans, int n,
                                         amk_diag *d) {
    int i, last = -1;
    if (n > 1) qsort(spans, (size_t)n, sizeof *spans, amk__st_span_cmp);
    for (i = 0; i < n; i++) {
        if (spans[i].begin == spans[i].end) continue;
        if (last >= 0 && spans[i].begin < spans[last].end)
            return amk__st_err(d, NULL, "tensor '%.200s': data_offsets [%llu, %llu] overlap tensor '%.200s' [%llu, %llu]",
                               st->tensors[spans[i].tensor].name, (unsigned long long)spans[i].begin,
                               (unsigned long long)spans[i].end, st->tensors[spans[last].tensor].name,
                               (unsigned long long)spans[last].begin, (unsigned long long)spans[last].end);
        if (last < 0 || spans[i].end > spans[last].end) last = i;
    }
    return AMK_OK;
}

AMK_API void amk_safetensors_close(amk_safetensors *st) {
    int i;
    if (!st) return;
    for (i = 0; i < st->n_tensors; i++) amk__free(st->tensors[i].name);
    amk__free(st->tensors);
    for (i = 0; i < st->n_metadata; i++) { amk__free(st->metadata[i].key); amk__free(st->metadata[i].json); }
    amk__free(st->metadata);
    if (st->owns_map) amk__unmap_file(st->map, st->map_size);
    memset(st, 0, sizeof *st);
}

AMK_API amk_result amk_safetensors_parse(const void *data, size_t size, amk_safetensors *out,
                                         amk_diag *d) {
    const uint8_t *bytes = (const uint8_t *)data;
    uint64_t n_header = 0, buf_size;
    const uint8_t *buf;
    amk__jdoc doc;
    const amk__jval *root;
    amk__st_span *spans = NULL;
    amk_result r = AMK_OK;
    int i, n_spans = 0;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no output");
    memset(out, 0, sizeof *out);
    if (size < 8)
        return amk__st_err(d, NULL, "safetensors: %lu bytes is shorter than the 8-byte header length",
                           (unsigned long)size);
    if (!data) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no data");
    for (i = 0; i < 8; i++) n_header |= (uint64_t)bytes[i] << (8 * i);
    if (n_header > (uint64_t)(size - 8))
        return amk__st_err(d, NULL, "safetensors: header length %llu runs past the end of the file (%llu bytes)",
                           (unsigned long long)n_header, (unsigned long long)size);
    if (n_header > AMK__ST_MAX_HEADER)
        return amk__st_err(d, NULL, "safetensors: header length %llu exceeds the 100 MB limit",
                           (unsigned long long)n_header);
    if (n_header == 0 || bytes[8] != '{')
        return amk__st_err(d, NULL, "safetensors: header is not a JSON object (must start with '{')");
    buf = bytes + 8 + n_header;
    buf_size = (uint64_t)(size - 8) - n_header;

    r = amk__json_parse((const char *)bytes + 8, (size_t)n_header, AMK__ST_JSON_DEPTH, &doc, d);
    if (r != AMK_OK) {
        if (d && r == AMK_ERR_PARSE) {
            char msg[sizeof d->message];
            snprintf(msg, sizeof msg, "%s", d->message);
            amk__st_err(d, NULL, "safetensors header: %.480s", msg);
        }
        return r;
    }
    root = doc.root;
    if (!root || root->type != AMK__J_OBJECT) {
        r = amk__st_err(d, root, "safetensors: header is not a JSON object");
        goto done;
    }
    if (root->n > 0) {
        out->tensors = (amk_st_tensor *)amk__calloc((size_t)root->n, sizeof(amk_st_tensor));
        spans = (amk__st_span *)amk__calloc((size_t)root->n, sizeof(amk__st_span));
        if (!out->tensors || !spans) {
            r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading a safetensors header");
            goto done;
        }
    }
    for (i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        amk_st_tensor *t;
        uint64_t begin = 0, end = 0;
        if (strlen(key) != root->key_lens[i]) {
            r = amk__st_err(d, &root->items[i], "tensor '%.200s': name contains a NUL byte", key);
            goto done;
        }
        if (strcmp(key, "__metadata__") == 0) {
            r = amk__st_parse_metadata(&root->items[i], out, d);
            if (r != AMK_OK) goto done;
            continue;
        }
        t = &out->tensors[out->n_tensors];
        t->name = amk__strdup(key);
        if (!t->name) {
            r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading a safetensors header");
            goto done;
        }
        out->n_tensors++;
        r = amk__st_parse_entry(key, &root->items[i], buf_size, t, &begin, &end, d);
        if (r != AMK_OK) goto done;
        t->data = buf + begin;
        spans[n_spans].begin = begin;
        spans[n_spans].end = end;
        spans[n_spans].tensor = out->n_tensors - 1;
        n_spans++;
    }
    r = amk__st_check_overlap(out, spans, n_spans, d);
done:
    amk__free(spans);
    amk__json_free(&doc);
    if (r != AMK_OK) amk_safetensors_close(out);
    return r;
}

AMK_API amk_result amk_safetensors_open(const char *path, amk_safetensors *out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no output");
    memset(out, 0, sizeof *out);
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors: no path");
    r = amk__map_file(path, &map, &size, d);
    if (r == AMK_OK) {
        r = amk_safetensors_parse(map, size, out, d);
        if (r != AMK_OK) {
            amk__unmap_file(map, size);
            if (d) { /* the file name goes first in the message: "W.st: tensor 'x': ..." */
                char msg[sizeof d->message];
                snprintf(msg, sizeof msg, "%s", d->message);
                amk__fail(d, r, "%.200s: %.300s", path, msg);
            }
        } else {
            out->map = map;
            out->map_size = size;
            out->owns_map = 1;
        }
    }
    if (r != AMK_OK && d) snprintf(d->path, sizeof d->path, "%s", path);
    return r;
}

AMK_API const amk_st_tensor *amk_safetensors_find(const amk_safetensors *st, const char *name) {
    int i;
    if (!st || !name) return NULL;
    for (i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

static int amk__st_name_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes the 8-byte length, the header and every entry's bytes to f; 0 on a short write. */
AMK__FN int amk__st_write_all(FILE *f, const amk__sb *header, const amk_st_entry *e,
                              const uint64_t *nbytes, int n) {
    uint8_t len8[8];
    int i;
    for (i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)header->len >> (8 * i));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(header->p, 1, header->len, f) != header->len) return 0;
    for (i = 0; i < n; i++)
        if (nbytes[i] && fwrite(e[i].data, 1, (size_t)nbytes[i], f) != (size_t)nbytes[i]) return 0;
    return 1;
}

AMK_API amk_result amk_safetensors_write(const char *path, const amk_st_entry *e, int n,
                                         amk_diag *d) {
    amk__sb header, tmp;
    uint64_t *nbytes = NULL, offset = 0;
    const char **names = NULL;
    amk_result r = AMK_OK;
    FILE *f = NULL;
    int i, j;
    if (!path || n < 0 || (n > 0 && !e))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: bad path or entries");
    memset(&header, 0, sizeof header);
    memset(&tmp, 0, sizeof tmp);
    if (n > 0) {
        nbytes = (uint64_t *)amk__calloc((size_t)n, sizeof(uint64_t));
        names = (const char **)amk__calloc((size_t)n, sizeof(const char *));
        if (!nbytes || !names) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path); goto done; }
    }
    amk__sb_putc(&header, '{');
    for (i = 0; i < n; i++) {
        const amk__st_dtype_row *row = amk__st_dtype_by_code(e[i].dtype);
        int64_t numel = 1, nb;
        if (!e[i].name || strcmp(e[i].name, "__metadata__") == 0) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: entry %d has no usable name", i);
            goto done;
        }
        if (!row) {
            r = amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%.200s': dtype %s has no safetensors equivalent",
                          e[i].name, amk_dtype_name(e[i].dtype));
            goto done;
        }
        if (e[i].rank < 0 || e[i].rank > AMK__ST_MAX_RANK || (e[i].rank > 0 && !e[i].shape)) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': rank %d is outside [0, 8]", e[i].name, e[i].rank);
            goto done;
        }
        for (j = 0; j < e[i].rank; j++)
            if (!amk__mul_i64(numel, e[i].shape[j], &numel)) {
                r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': shape is negative or overflows", e[i].name);
                goto done;
            }
        nb = amk_dtype_nbytes(e[i].dtype, numel);
        if (nb < 0 || (uint64_t)nb > (uint64_t)SIZE_MAX || (nb > 0 && !e[i].data)) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': byte size overflows or data is missing", e[i].name);
            goto done;
        }
        nbytes[i] = (uint64_t)nb;
        names[i] = e[i].name;
        if (i) amk__sb_putc(&header, ',');
        amk__json_put_string(&header, e[i].name, strlen(e[i].name));
        amk__sb_printf(&header, ":{\"dtype\":\"%s\",\"shape\":[", row->name);
        for (j = 0; j < e[i].rank; j++) amk__sb_printf(&header, "%s%lld", j ? "," : "", (long long)e[i].shape[j]);
        amk__sb_printf(&header, "],\"data_offsets\":[%llu,", (unsigned long long)offset);
        if (!amk__add_u64(offset, nbytes[i], &offset)) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: total size overflows");
            goto done;
        }
        amk__sb_printf(&header, "%llu]}", (unsigned long long)offset);
    }
    amk__sb_putc(&header, '}');
    /* why: pad with spaces so the data starts 8-byte aligned (8 + header length) */
    while ((header.len & 7u) != 0 && !header.oom) amk__sb_putc(&header, ' ');
    if (header.oom) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path); goto done; }
    if ((uint64_t)header.len > AMK__ST_MAX_HEADER) {
        r = amk__fail(d, AMK_ERR_INVALID_ARG, "safetensors write: header of %llu bytes exceeds the 100 MB limit",
                      (unsigned long long)header.len);
        goto done;
    }
    if (n > 1) { /* duplicate names would make the header ambiguous */
        qsort(names, (size_t)n, sizeof *names, amk__st_name_cmp);
        for (i = 1; i < n; i++)
            if (strcmp(names[i - 1], names[i]) == 0) {
                r = amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%.200s': name used twice", names[i]);
                goto done;
            }
    }
    /* why: write beside the target, then rename, so a failed write never leaves a half file */
    amk__sb_printf(&tmp, "%s.tmp", path);
    if (tmp.oom) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path); goto done; }
    f = fopen(tmp.p, "wb");
    if (!f) { r = amk__fail(d, AMK_ERR_IO, "cannot create '%s': %s", tmp.p, strerror(errno)); goto done; }
    if (!amk__st_write_all(f, &header, e, nbytes, n)) {
        fclose(f);
        remove(tmp.p);
        r = amk__fail(d, AMK_ERR_IO, "short write on '%s'", tmp.p);
        goto done;
    }
    if (fclose(f) != 0) {
        remove(tmp.p);
        r = amk__fail(d, AMK_ERR_IO, "cannot finish writing '%s'", tmp.p);
        goto done;
    }
#if defined(_WIN32)
    remove(path); /* why: rename does not replace an existing file there */
#endif
    if (rename(tmp.p, path) != 0) {
        r = amk__fail(d, AMK_ERR_IO, "cannot rename '%s' to '%s': %s", tmp.p, path, strerror(errno));
        remove(tmp.p);
    }
done:
    if (r != AMK_OK && d) snprintf(d->path, sizeof d->path, "%s", path);
    amk__sb_free(&header);
    amk__sb_free(&tmp);
    amk__free(nbytes);
    amk__free(names);
    return r;
}

/* ==== >>impl_gguf =================================================================================== */
#define AMK__GGUF_MAGIC 0x46554747u  /* "GGUF" read as a little-endian u32 */
#define AMK__GGUF_MAX_DEPTH 4        /* why: real files nest arrays at most 1 deep; bounds recursion */
#define AMK__GGUF_DEFAULT_ALIGN 32   /* why: the GGUF spec's default when general.alignment is absent */
/* why: 4096 floats (16 KB of stack) hold a whole number of blocks of every type and amortise the
   per-chunk calls of dequantization */
#define AMK__GGUF_CHUNK 4096

/* ---- ggml type table: name, elements per block, bytes per block (gguf-py GGML_QUANT_SIZES) ---- */

typedef struct amk__ggml_traits { const char *name; uint32_t blck, tsize; } amk__ggml_traits;

static const amk__ggml_traits amk__ggml_types[] = {
    {"F32", 1, 4}, {"F16", 1, 2}, {"Q4_0", 32, 18}, {"Q4_1", 32, 20}, {NULL, 0, 0}, {NULL, 0, 0},
    {"Q5_0", 32, 22}, {"Q5_1", 32, 24}, {"Q8_0", 32, 34}, {"Q8_1", 32, 40}, {"Q2_K", 256, 84},
    {"Q3_K", 256, 110}, {"Q4_K", 256, 144}, {"Q5_K", 256, 176}, {"Q6_K", 256, 210},
    {"Q8_K", 256, 292}, {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98},
    {"IQ1_S", 256, 50}, {"IQ4_NL", 32, 18}, {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},
    {"IQ4_XS", 256, 136}, {"I8", 1, 1}, {"I16", 1, 2}, {"I32", 1, 4}, {"I64", 1, 8},
    {"F64", 1, 8}, {"IQ1_M", 256, 56}, {"BF16", 1, 2}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0},
    {"TQ1_0", 256, 54}, {"TQ2_0", 256, 66}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0},
    {"MXFP4", 32, 17}, {"NVFP4", 64, 36}, {"Q1_0", 128, 18},
};
#define AMK__GGML_N_TYPES (sizeof amk__ggml_types / sizeof amk__ggml_types[0])

AMK__FN const amk__ggml_traits *amk__ggml_type_traits(uint32_t type) {
    if (type >= AMK__GGML_N_TYPES || !amk__ggml_types[type].name) return NULL;
    return &amk__ggml_types[type];
}

AMK_API const char *amk_gguf_type_name(uint32_t type) {
    const amk__ggml_traits *t = amk__ggml_type_traits(type);
    return t ? t->name : "?";
}

/* ---- the parsed file ----------------------------------------------------------------------- */

typedef struct amk__gguf_kv {
    char *key; size_t key_len;   /* NUL-terminated copy */
    uint32_t type;               /* amk_gguf_value_type */
    int64_t ival; int ival_ok;   /* integer and bool scalars (ival_ok 0: a u64 above INT64_MAX) */
    double fval;                 /* every numeric scalar */
    char *str; size_t str_len;   /* STRING: NUL-terminated copy */
    uint32_t elem_type;          /* ARRAY */
    int64_t count;
    const uint8_t *elems;        /* ARRAY: the first element, in the file */
    uint64_t *str_off;           /* ARRAY of STRING: [count] offset from elems of each u64 length */
} amk__gguf_kv;

/* Open-addressing hash from a name to an index (keys and tensor names); names point at copies
   owned by the amk_gguf. */
typedef struct amk__gguf_slot { const char *name; size_t len; int idx; } amk__gguf_slot;
typedef struct amk__gguf_index { amk__gguf_slot *slots; size_t mask; } amk__gguf_index;

struct amk_gguf {
    const uint8_t *data; size_t size;
    void *map; size_t map_size;  /* owned mapping (amk_gguf_open), else NULL */
    uint32_t version;
    uint64_t alignment, data_start;
    amk__gguf_kv *kvs; int n_kvs;
    amk_gguf_tensor *tensors; int n_tensors;
    amk__gguf_index kv_index, tensor_index;
};

static const uint8_t amk__gguf_vsize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const amk__gguf_vnames[13] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32",
    "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};

AMK__FN uint64_t amk__gguf_hash(const char *s, size_t n) {
    uint64_t h = 14695981039346656037ull; /* why: FNV-1a 64-bit offset basis and prime */
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* Sized for n names at most half full, so probing always ends at an empty slot. */
AMK__FN int amk__gguf_index_init(amk__gguf_index *ix, int n) {
    size_t cap = 16, i;
    while (cap < (size_t)n * 2) cap *= 2;
    ix->slots = (amk__gguf_slot *)amk__malloc(cap * sizeof(amk__gguf_slot));
    if (!ix->slots) return 0;
    for (i = 0; i < cap; i++) ix->slots[i].idx = -1;
    ix->mask = cap - 1;
    return 1;
}

/* The index of name, or -1 when absent; then with insert >= 0 it is added under that index (name
   must stay alive). */
AMK__FN int amk__gguf_index_find(const amk__gguf_index *ix, const char *name, size_t len,
                                 int insert) {
    size_t h;
    if (!ix->slots) return -1;
    for (h = (size_t)amk__gguf_hash(name, len) & ix->mask;; h = (h + 1) & ix->mask) {
        amk__gguf_slot *s = &ix->slots[h];
        if (s->idx < 0) {
            if (insert >= 0) { s->name = name; s->len = len; s->idx = insert; }
            return -1;
        }
        if (s->len == len && memcmp(s->name, name, len) == 0) return s->idx;
    }
}

AMK__FN int amk__gguf_is_int(uint32_t t) {
    return t <= AMK_GGUF_INT32 || t == AMK_GGUF_UINT64 || t == AMK_GGUF_INT64;
}
AMK__FN int amk__gguf_is_num(uint32_t t) {
    return amk__gguf_is_int(t) || t == AMK_GGUF_FLOAT32 || t == AMK_GGUF_FLOAT64;
}

/* ---- bounds-checked reader ------------------------------------------------------------------- */

typedef struct amk__gguf_rd { const uint8_t *p; size_t size, pos; amk_diag *d; } amk__gguf_rd;

AMK__FN size_t amk__gguf_left(const amk__gguf_rd *r) { return r->size - r->pos; }

AMK__FN amk_result amk__gguf_short(amk__gguf_rd *r, const char *what, uint64_t need) {
    return amk__fail(r->d, AMK_ERR_PARSE, "%s needs %llu bytes at offset %llu but the file ends "
                     "there (size %llu)", what, (unsigned long long)need,
                     (unsigned long long)r->pos, (unsigned long long)r->size);
}

AMK__FN amk_result amk__gguf_u32(amk__gguf_rd *r, const char *what, uint32_t *v) {
    *v = 0;
    if (amk__gguf_left(r) < 4) return amk__gguf_short(r, what, 4);
    *v = (uint32_t)r->p[r->pos] | (uint32_t)r->p[r->pos + 1] << 8 |
         (uint32_t)r->p[r->pos + 2] << 16 | (uint32_t)r->p[r->pos + 3] << 24;
    r->pos += 4;
    return AMK_OK;
}
AMK__FN uint64_t amk__gguf_le64(const uint8_t *b) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}
AMK__FN amk_result amk__gguf_u64(amk__gguf_rd *r, const char *what, uint64_t *v) {
    *v = 0;
    if (amk__gguf_left(r) < 8) return amk__gguf_short(r, what, 8);
    *v = amk__gguf_le64(r->p + r->pos);
    r->pos += 8;
    return AMK_OK;
}
/* A gguf string (u64 length + bytes): *s points into the file. */
AMK__FN amk_result amk__gguf_str(amk__gguf_rd *r, const char *what, const char **s, size_t *len) {
    uint64_t n;
    amk_result res = amk__gguf_u64(r, what, &n);
    if (res) return res;
    if (n > amk__gguf_left(r))
        return amk__fail(r->d, AMK_ERR_PARSE, "%s: string length %llu at offset %llu runs past "
                         "the end of the file (size %llu)", what, (unsigned long long)n,
                         (unsigned long long)(r->pos - 8), (unsigned long long)r->size);
    *s = (const char *)r->p + r->pos;
    *len = (size_t)n;
    r->pos += (size_t)n;
    return AMK_OK;
}

/* Decodes one fixed-size scalar of type t at b. */
AMK__FN void amk__gguf_scalar(uint32_t t, const uint8_t *b, int64_t *iv, int *iv_ok, double *fv) {
    uint64_t u = 0;
    int i;
    for (i = amk__gguf_vsize[t] - 1; i >= 0; i--) u = u << 8 | b[i];
    *iv_ok = 1;
    switch (t) {
    case AMK_GGUF_INT8: *iv = (int8_t)u; break;
    case AMK_GGUF_INT16: *iv = (int16_t)u; break;
    case AMK_GGUF_INT32: *iv = (int32_t)(uint32_t)u; break;
    case AMK_GGUF_INT64: *iv = (int64_t)u; break;
    case AMK_GGUF_UINT64: *iv = (int64_t)u; *iv_ok = u <= (uint64_t)INT64_MAX; break;
    case AMK_GGUF_FLOAT32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, 4);
        *iv = 0; *iv_ok = 0; *fv = f;
        return;
    }
    case AMK_GGUF_FLOAT64: *iv = 0; *iv_ok = 0; memcpy(fv, &u, 8); return;
    default: *iv = (int64_t)u; break; /* UINT8/16/32, BOOL */
    }
    *fv = t == AMK_GGUF_UINT64 ? (double)u : (double)*iv;
}

/* Walks one array (elem type + count + elements) at r, checking every length. depth counts the
   enclosing arrays. With kv non-NULL (a top-level array) it records where the elements are. */
AMK__FN amk_result amk__gguf_array(amk__gguf_rd *r, const char *key, int depth, amk__gguf_kv *kv) {
    uint32_t et;
    uint64_t count, i;
    amk_result res;
    if (depth > AMK__GGUF_MAX_DEPTH)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': arrays nested deeper than %d", key,
                         AMK__GGUF_MAX_DEPTH);
    if ((res = amk__gguf_u32(r, "array element type", &et)) != AMK_OK ||
        (res = amk__gguf_u64(r, "array length", &count)) != AMK_OK)
        return res;
    if (et > AMK_GGUF_FLOAT64)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': unknown array element type %u", key, et);
    /* why: check the count against the bytes left before looping or allocating; a string needs
       its 8-byte length, a nested array 12 bytes of header */
    {
        uint64_t min = et == AMK_GGUF_STRING ? 8 : et == AMK_GGUF_ARRAY ? 12 : amk__gguf_vsize[et];
        if (count > amk__gguf_left(r) / min)
            return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': array of %llu %s elements at offset "
                             "%llu runs past the end of the file (size %llu)", key,
                             (unsigned long long)count, amk__gguf_vnames[et],
                             (unsigned long long)r->pos, (unsigned long long)r->size);
    }
    if (kv) {
        kv->elem_type = et;
        kv->count = (int64_t)count;
        kv->elems = r->p + r->pos;
    }
    if (et == AMK_GGUF_STRING) {
        if (kv && !(kv->str_off = (uint64_t *)amk__malloc((size_t)count * sizeof(uint64_t))))
            return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "key '%s': out of memory", key);
        for (i = 0; i < count; i++) {
            const char *s;
            size_t n;
            if (kv) kv->str_off[i] = (uint64_t)(r->p + r->pos - kv->elems);
            if ((res = amk__gguf_str(r, key, &s, &n)) != AMK_OK) return res;
        }
    } else if (et == AMK_GGUF_ARRAY) {
        for (i = 0; i < count; i++)
            if ((res = amk__gguf_array(r, key, depth + 1, NULL)) != AMK_OK) return res;
    } else {
        if (et == AMK_GGUF_BOOL)
            for (i = 0; i < count; i++)
                if (r->p[r->pos + i] > 1)
                    return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': bool element %llu is %u "
                                     "(must be 0 or 1)", key, (unsigned long long)i,
                                     r->p[r->pos + i]);
        r->pos += (size_t)count * amk__gguf_vsize[et];
    }
    return AMK_OK;
}

AMK__FN amk_result amk__gguf_kv_parse(amk__gguf_rd *r, amk_gguf *g, int idx) {
    amk__gguf_kv *kv = &g->kvs[idx];
    const char *s;
    size_t n;
    amk_result res;
    if ((res = amk__gguf_str(r, "metadata key", &s, &n)) != AMK_OK) return res;
    if (!(kv->key = amk__strndup(s, n)))
        return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading metadata");
    kv->key_len = n;
    g->n_kvs = idx + 1; /* why: from here on close frees this entry */
    if (amk__gguf_index_find(&g->kv_index, kv->key, n, idx) >= 0)
        return amk__fail(r->d, AMK_ERR_PARSE, "duplicate metadata key '%s'", kv->key);
    if ((res = amk__gguf_u32(r, kv->key, &kv->type)) != AMK_OK) return res;
    if (kv->type > AMK_GGUF_FLOAT64)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': unknown value type %u", kv->key,
                         kv->type);
    if (kv->type == AMK_GGUF_STRING) {
        if ((res = amk__gguf_str(r, kv->key, &s, &n)) != AMK_OK) return res;
        if (!(kv->str = amk__strndup(s, n)))
            return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "key '%s': out of memory", kv->key);
        kv->str_len = n;
        return AMK_OK;
    }
    if (kv->type == AMK_GGUF_ARRAY) return amk__gguf_array(r, kv->key, 1, kv);
    if (amk__gguf_left(r) < amk__gguf_vsize[kv->type])
        return amk__gguf_short(r, kv->key, amk__gguf_vsize[kv->type]);
    amk__gguf_scalar(kv->type, r->p + r->pos, &kv->ival, &kv->ival_ok, &kv->fval);
    if (kv->type == AMK_GGUF_BOOL && kv->ival > 1)
        return amk__fail(r->d, AMK_ERR_PARSE, "key '%s': bool value %d (must be 0 or 1)", kv->key,
                         (int)kv->ival);
    r->pos += amk__gguf_vsize[kv->type];
    return AMK_OK;
}

AMK__FN amk_result amk__gguf_tensor_parse(amk__gguf_rd *r, amk_gguf *g, int idx) {
    amk_gguf_tensor *t = &g->tensors[idx];
    const amk__ggml_traits *tr;
    const char *s;
    size_t n;
    uint32_t nd;
    uint64_t v;
    int64_t numel = 1, blocks;
    int k;
    amk_result res;
    if ((res = amk__gguf_str(r, "tensor name", &s, &n)) != AMK_OK) return res;
    if (memchr(s, 0, n))
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor %d: name holds a NUL byte", idx);
    if (!(t->name = amk__strndup(s, n)))
        return amk__fail(r->d, AMK_ERR_OUT_OF_MEMORY, "out of memory reading tensor infos");
    g->n_tensors = idx + 1; /* why: from here on close frees this entry */
    if (amk__gguf_index_find(&g->tensor_index, t->name, n, idx) >= 0)
        return amk__fail(r->d, AMK_ERR_PARSE, "duplicate tensor name '%s'", t->name);
    if ((res = amk__gguf_u32(r, t->name, &nd)) != AMK_OK) return res;
    if (nd < 1 || nd > 4)
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': %u dimensions (must be 1..4)",
                         t->name, nd);
    t->n_dims = (int)nd;
    for (k = 0; k < 4; k++) t->dims[k] = 1;
    for (k = 0; k < (int)nd; k++) {
        if ((res = amk__gguf_u64(r, t->name, &v)) != AMK_OK) return res;
        if (v < 1 || v > (uint64_t)INT64_MAX)
            return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': dimension %d is %llu (must be "
                             ">= 1)", t->name, k, (unsigned long long)v);
        t->dims[k] = (int64_t)v;
        if (!amk__mul_i64(numel, t->dims[k], &numel))
            return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': element count overflows",
                             t->name);
    }
    if ((res = amk__gguf_u32(r, t->name, &t->type)) != AMK_OK ||
        (res = amk__gguf_u64(r, t->name, &t->offset)) != AMK_OK)
        return res;
    if (!(tr = amk__ggml_type_traits(t->type)))
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': unknown ggml type code %u", t->name,
                         t->type);
    if (t->dims[0] % tr->blck != 0)
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': row length %lld is not a multiple "
                         "of the %s block size %u", t->name, (long long)t->dims[0], tr->name,
                         tr->blck);
    blocks = numel / tr->blck;
    if (!amk__mul_u64((uint64_t)blocks, tr->tsize, &t->nbytes))
        return amk__fail(r->d, AMK_ERR_PARSE, "tensor '%s': byte size overflows", t->name);
    return AMK_OK;
}

/* Places every tensor in the data section once the header's end is known. */
AMK__FN amk_result amk__gguf_place(amk_gguf *g, amk_diag *d) {
    int i;
    for (i = 0; i < g->n_tensors; i++) {
        amk_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (t->offset % g->alignment != 0)
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': offset %llu is not a multiple of the "
                             "alignment %llu", t->name, (unsigned long long)t->offset,
                             (unsigned long long)g->alignment);
        if (!amk__add_u64(g->data_start, t->offset, &start) ||
            !amk__add_u64(start, t->nbytes, &end) || end > (uint64_t)g->size)
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': data [offset %llu, %llu bytes] runs "
                             "past the end of the file (size %llu)", t->name,
                             (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                             (unsigned long long)g->size);
        t->data = g->data + start;
    }
    return AMK_OK;
}

AMK__FN amk_result amk__gguf_parse_all(amk_gguf *g, amk_diag *d) {
    amk__gguf_rd rd;
    uint32_t magic;
    uint64_t n_tensors, n_kv, pad;
    int i, ai;
    amk_result res;
    rd.p = g->data; rd.size = g->size; rd.pos = 0; rd.d = d;
    if ((res = amk__gguf_u32(&rd, "magic", &magic)) != AMK_OK) return res;
    if (magic != AMK__GGUF_MAGIC)
        return amk__fail(d, AMK_ERR_PARSE, "not a GGUF file (magic 0x%08x, expected 'GGUF')",
                         magic);
    if ((res = amk__gguf_u32(&rd, "version", &g->version)) != AMK_OK) return res;
    if (g->version == 1)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "GGUF version 1 is not supported (v2 and v3 are)");
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version, sw = (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
        if (sw >= 1 && sw <= 3)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "big-endian GGUF (version %u byte-swapped) "
                             "is not supported; only little-endian files are", sw);
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "GGUF version %u is not supported (v2 and v3 "
                         "are)", v);
    }
    if ((res = amk__gguf_u64(&rd, "tensor count", &n_tensors)) != AMK_OK ||
        (res = amk__gguf_u64(&rd, "metadata count", &n_kv)) != AMK_OK)
        return res;
    /* why: a kv needs >= 13 bytes (8 key length, 4 type, 1 value), a tensor info >= 32
       (8 name length, 4 n_dims, 8 dim, 4 type, 8 offset): check before allocating */
    if (n_kv > amk__gguf_left(&rd) / 13 || n_kv > (uint64_t)INT_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "metadata count %llu does not fit in the file (size "
                         "%llu)", (unsigned long long)n_kv, (unsigned long long)g->size);
    if (n_tensors > (amk__gguf_left(&rd) - n_kv * 13) / 32 || n_tensors > (uint64_t)INT_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "tensor count %llu does not fit in the file (size "
                         "%llu)", (unsigned long long)n_tensors, (unsigned long long)g->size);
    g->kvs = (amk__gguf_kv *)amk__calloc((size_t)n_kv, sizeof(amk__gguf_kv));
    g->tensors = (amk_gguf_tensor *)amk__calloc((size_t)n_tensors, sizeof(amk_gguf_tensor));
    if (!g->kvs || !g->tensors || !amk__gguf_index_init(&g->kv_index, (int)n_kv) ||
        !amk__gguf_index_init(&g->tensor_index, (int)n_tensors))
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory for %llu keys and %llu tensors",
                         (unsigned long long)n_kv, (unsigned long long)n_tensors);
    for (i = 0; i < (int)n_kv; i++)
        if ((res = amk__gguf_kv_parse(&rd, g, i)) != AMK_OK) return res;
    g->alignment = AMK__GGUF_DEFAULT_ALIGN;
    ai = amk_gguf_find_key(g, "general.alignment");
    if (ai >= 0) {
        const amk__gguf_kv *kv = &g->kvs[ai];
        if (!amk__gguf_is_int(kv->type) || !kv->ival_ok || kv->ival < 8 || kv->ival % 8 != 0)
            return amk__fail(d, AMK_ERR_PARSE, "general.alignment must be an integer multiple of "
                             "8 (got type %s, value %lld)", amk__gguf_vnames[kv->type],
                             (long long)kv->ival);
        g->alignment = (uint64_t)kv->ival;
    }
    for (i = 0; i < (int)n_tensors; i++)
        if ((res = amk__gguf_tensor_parse(&rd, g, i)) != AMK_OK) return res;
    pad = (g->alignment - (uint64_t)rd.pos % g->alignment) % g->alignment;
    if (!amk__add_u64((uint64_t)rd.pos, pad, &g->data_start))
        return amk__fail(d, AMK_ERR_PARSE, "data section start overflows");
    return amk__gguf_place(g, d);
}

AMK_API amk_result amk_gguf_parse(const void *data, size_t size, amk_gguf **out, amk_diag *d) {
    amk_gguf *g;
    amk_result res;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_parse: out is NULL");
    *out = NULL;
    if (!data && size) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_parse: data is NULL");
    g = (amk_gguf *)amk__calloc(1, sizeof *g);
    if (!g) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    g->data = (const uint8_t *)data;
    g->size = size;
    res = amk__gguf_parse_all(g, d);
    if (res != AMK_OK) { amk_gguf_close(g); return res; }
    *out = g;
    return AMK_OK;
}

AMK_API amk_result amk_gguf_open(const char *path, amk_gguf **out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result res;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_gguf_open: path is NULL");
    if ((res = amk__map_file(path, &map, &size, d)) != AMK_OK) return res;
    res = amk_gguf_parse(map, size, out, d);
    if (res != AMK_OK) {
        amk__unmap_file(map, size);
        if (d) {
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, res, "'%s': %s", path, msg);
            snprintf(d->path, sizeof d->path, "%s", path);
        }
        return res;
    }
    (*out)->map = map;
    (*out)->map_size = size;
    return AMK_OK;
}

AMK_API void amk_gguf_close(amk_gguf *g) {
    int i;
    if (!g) return;
    for (i = 0; i < g->n_kvs; i++) {
        amk__free(g->kvs[i].key);
        amk__free(g->kvs[i].str);
        amk__free(g->kvs[i].str_off);
    }
    for (i = 0; i < g->n_tensors; i++) amk__free((void *)g->tensors[i].name);
    amk__free(g->kvs);
    amk__free(g->tensors);
    amk__free(g->kv_index.slots);
    amk__free(g->tensor_index.slots);
    amk__unmap_file(g->map, g->map_size);
    amk__free(g);
}

/* ---- accessors ------------------------------------------------------------------------------- */

AMK_API uint32_t amk_gguf_version(const amk_gguf *g) { return g ? g->version : 0; }
AMK_API int amk_gguf_n_tensors(const amk_gguf *g) { return g ? g->n_tensors : 0; }
AMK_API const amk_gguf_tensor *amk_gguf_tensor_at(const amk_gguf *g, int i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
AMK_API const amk_gguf_tensor *amk_gguf_find_tensor(const amk_gguf *g, const char *name) {
    int i;
    if (!g || !name) return NULL;
    i = amk__gguf_index_find(&g->tensor_index, name, strlen(name), -1);
    return i >= 0 ? &g->tensors[i] : NULL;
}
AMK_API int amk_gguf_n_kv(const amk_gguf *g) { return g ? g->n_kvs : 0; }
AMK_API const char *amk_gguf_kv_key(const amk_gguf *g, int i) {
    return g && i >= 0 && i < g->n_kvs ? g->kvs[i].key : NULL;
}
AMK_API int amk_gguf_find_key(const amk_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return amk__gguf_index_find(&g->kv_index, key, strlen(key), -1);
}
AMK_API uint32_t amk_gguf_kv_type(const amk_gguf *g, int i) {
    return g && i >= 0 && i < g->n_kvs ? g->kvs[i].type : 0;
}

AMK__FN const amk__gguf_kv *amk__gguf_kv_get(const amk_gguf *g, const char *key) {
    int i = amk_gguf_find_key(g, key);
    return i >= 0 ? &g->kvs[i] : NULL;
}

AMK_API int amk_gguf_get_int(const amk_gguf *g, const char *key, int64_t *out) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || !amk__gguf_is_int(kv->type) || !kv->ival_ok) return 0;
    if (out) *out = kv->ival;
    return 1;
}
AMK_API int amk_gguf_get_float(const amk_gguf *g, const char *key, double *out) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || !amk__gguf_is_num(kv->type)) return 0;
    if (out) *out = kv->fval;
    return 1;
}
AMK_API int amk_gguf_get_bool(const amk_gguf *g, const char *key, int *out) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_BOOL) return 0;
    if (out) *out = (int)kv->ival;
    return 1;
}
AMK_API const char *amk_gguf_get_string(const amk_gguf *g, const char *key, size_t *len) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_STRING) return NULL;
    if (len) *len = kv->str_len;
    return kv->str;
}

AMK_API int64_t amk_gguf_array_len(const amk_gguf *g, const char *key, uint32_t *elem_type) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_ARRAY) return -1;
    if (elem_type) *elem_type = kv->elem_type;
    return kv->count;
}
/* The array kv for key when i is a valid index, else NULL. */
AMK__FN const amk__gguf_kv *amk__gguf_elem(const amk_gguf *g, const char *key, int64_t i) {
    const amk__gguf_kv *kv = amk__gguf_kv_get(g, key);
    if (!kv || kv->type != AMK_GGUF_ARRAY || i < 0 || i >= kv->count) return NULL;
    return kv;
}
AMK_API const char *amk_gguf_array_string(const amk_gguf *g, const char *key, int64_t i,
                                          size_t *len) {
    const amk__gguf_kv *kv = amk__gguf_elem(g, key, i);
    const uint8_t *at;
    if (!kv || kv->elem_type != AMK_GGUF_STRING) return NULL;
    at = kv->elems + kv->str_off[i];
    if (len) *len = (size_t)amk__gguf_le64(at);
    return (const char *)at + 8;
}
AMK_API int amk_gguf_array_int(const amk_gguf *g, const char *key, int64_t i, int64_t *out) {
    const amk__gguf_kv *kv = amk__gguf_elem(g, key, i);
    int64_t iv;
    int ok;
    double fv;
    if (!kv || !(amk__gguf_is_int(kv->elem_type) || kv->elem_type == AMK_GGUF_BOOL)) return 0;
    amk__gguf_scalar(kv->elem_type, kv->elems + (size_t)i * amk__gguf_vsize[kv->elem_type], &iv,
                     &ok, &fv);
    if (!ok) return 0;
    if (out) *out = iv;
    return 1;
}
AMK_API int amk_gguf_array_float(const amk_gguf *g, const char *key, int64_t i, double *out) {
    const amk__gguf_kv *kv = amk__gguf_elem(g, key, i);
    int64_t iv;
    int ok;
    double fv;
    if (!kv || !(amk__gguf_is_num(kv->elem_type) || kv->elem_type == AMK_GGUF_BOOL)) return 0;
    amk__gguf_scalar(kv->elem_type, kv->elems + (size_t)i * amk__gguf_vsize[kv->elem_type], &iv,
                     &ok, &fv);
    if (out) *out = fv;
    return 1;
}

/* ---- dequantization (REFERENCE.md §1.4; ggml-quants.c dequantize_row_*) ---------------------- */

/* Each converts nb blocks at x into nb * block-size floats at y. */
typedef void (*amk__gguf_deq_fn)(const uint8_t *x, int64_t nb, float *y);

AMK__FN float amk__gguf_f16(const uint8_t *b) { return amk_f16_to_f32((uint16_t)(b[0] | b[1] << 8)); }

AMK__FN void amk__gguf_deq_f32(const uint8_t *x, int64_t nb, float *y) { memcpy(y, x, (size_t)nb * 4); }
AMK__FN void amk__gguf_deq_f16(const uint8_t *x, int64_t nb, float *y) {
    int64_t i;
    for (i = 0; i < nb; i++) y[i] = amk__gguf_f16(x + 2 * i);
}
AMK__FN void amk__gguf_deq_bf16(const uint8_t *x, int64_t nb, float *y) {
    int64_t i;
    for (i = 0; i < nb; i++) y[i] = amk_bf16_to_f32((uint16_t)(x[2 * i] | x[2 * i + 1] << 8));
}
/* Q8_0: [d f16][qs int8 x32]; y = qs*d */
AMK__FN void amk__gguf_deq_q8_0(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 34, y += 32) {
        float d = amk__gguf_f16(x);
        for (j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * d;
    }
}
/* Q4_0: [d f16][qs u8 x16]; low nibbles are y[0..15], high nibbles y[16..31]; y = (q-8)*d */
AMK__FN void amk__gguf_deq_q4_0(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 18, y += 32) {
        float d = amk__gguf_f16(x);
        const uint8_t *qs = x + 2;
        for (j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}
/* Q4_1: [d f16][m f16][qs u8 x16]; y = q*d + m */
AMK__FN void amk__gguf_deq_q4_1(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int j;
    for (b = 0; b < nb; b++, x += 20, y += 32) {
        float d = amk__gguf_f16(x), m = amk__gguf_f16(x + 2);
        const uint8_t *qs = x + 4;
        for (j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}
/* Q5_0 / Q5_1: [d f16]([m f16])[qh u32: bit j = 5th bit of y[j]][qs u8 x16 as Q4_0] */
AMK__FN void amk__gguf_deq_q5(const uint8_t *x, int64_t nb, float *y, int has_m) {
    int64_t b;
    int j;
    const int bsize = has_m ? 24 : 22, hoff = has_m ? 4 : 2;
    for (b = 0; b < nb; b++, x += bsize, y += 32) {
        float d = amk__gguf_f16(x), m = has_m ? amk__gguf_f16(x + 2) : 0.0f;
        uint32_t qh = (uint32_t)x[hoff] | (uint32_t)x[hoff + 1] << 8 | (uint32_t)x[hoff + 2] << 16 |
                      (uint32_t)x[hoff + 3] << 24;
        const uint8_t *qs = x + hoff + 4;
        const int off = has_m ? 0 : 16;
        for (j = 0; j < 16; j++) {
            int q0 = (int)((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - off;
            int q1 = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - off;
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}
AMK__FN void amk__gguf_deq_q5_0(const uint8_t *x, int64_t nb, float *y) { amk__gguf_deq_q5(x, nb, y, 0); }
AMK__FN void amk__gguf_deq_q5_1(const uint8_t *x, int64_t nb, float *y) { amk__gguf_deq_q5(x, nb, y, 1); }

/* Q4_K: [d f16][dmin f16][scales 12: 8 packed 6-bit (scale, min) pairs][qs 128]. Chunk c of 64
   outputs: low nibbles of qs[32c..] with sub-block 2c, high nibbles with 2c+1; y = d*sc*q - dmin*m */
AMK__FN void amk__gguf_deq_q4_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int c, l;
    for (b = 0; b < nb; b++, x += 144) {
        float d = amk__gguf_f16(x), dmin = amk__gguf_f16(x + 2);
        const uint8_t *sc = x + 4, *q = x + 16;
        for (c = 0; c < 4; c++, q += 32) {
            int j;
            float dd[2], mm[2];
            for (j = 0; j < 2; j++) {
                int s = 2 * c + j, scale, min;
                if (s < 4) {
                    scale = sc[s] & 63;
                    min = sc[s + 4] & 63;
                } else {
                    scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
                    min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
                }
                dd[j] = d * (float)scale;
                mm[j] = dmin * (float)min;
            }
            for (l = 0; l < 32; l++) *y++ = dd[0] * (float)(q[l] & 0xF) - mm[0];
            for (l = 0; l < 32; l++) *y++ = dd[1] * (float)(q[l] >> 4) - mm[1];
        }
    }
}
/* Q6_K: [ql 128][qh 64][scales int8 x16][d f16]; two halves of 128 outputs, q in 0..63 minus 32 */
AMK__FN void amk__gguf_deq_q6_k(const uint8_t *x, int64_t nb, float *y) {
    int64_t b;
    int n, l;
    for (b = 0; b < nb; b++, x += 210) {
        float d = amk__gguf_f16(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

AMK__FN amk__gguf_deq_fn amk__gguf_deq_for(uint32_t type) {
    switch (type) {
    case AMK_GGML_F32: return amk__gguf_deq_f32;
    case AMK_GGML_F16: return amk__gguf_deq_f16;
    case AMK_GGML_BF16: return amk__gguf_deq_bf16;
    case AMK_GGML_Q8_0: return amk__gguf_deq_q8_0;
    case AMK_GGML_Q4_0: return amk__gguf_deq_q4_0;
    case AMK_GGML_Q4_1: return amk__gguf_deq_q4_1;
    case AMK_GGML_Q5_0: return amk__gguf_deq_q5_0;
    case AMK_GGML_Q5_1: return amk__gguf_deq_q5_1;
    case AMK_GGML_Q4_K: return amk__gguf_deq_q4_k;
    case AMK_GGML_Q6_K: return amk__gguf_deq_q6_k;
    default: return NULL;
    }
}

AMK_API amk_result amk_gguf_dequant(uint32_t type, const void *src, uint64_t src_bytes, int64_t n,
                                    int out_dtype, void *dst, amk_diag *d) {
    float tmp[AMK__GGUF_CHUNK];
    const amk__ggml_traits *tr = amk__ggml_type_traits(type);
    amk__gguf_deq_fn fn = amk__gguf_deq_for(type);
    const uint8_t *x = (const uint8_t *)src;
    uint8_t *out = (uint8_t *)dst;
    int64_t done, need;
    if (!fn || !tr)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "cannot dequantize ggml type %s (code %u)",
                         amk_gguf_type_name(type), type);
    if (out_dtype != AMK_DTYPE_F32 && out_dtype != AMK_DTYPE_F16 && out_dtype != AMK_DTYPE_BF16)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: output dtype %s (must be F32, F16 "
                         "or BF16)", amk_dtype_name(out_dtype));
    if (n < 0 || n % tr->blck != 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: %lld elements is not a multiple of "
                         "the %s block size %u", (long long)n, tr->name, tr->blck);
    if (!amk__mul_i64(n / tr->blck, tr->tsize, &need) || (uint64_t)need > src_bytes)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: %lld %s elements need more than "
                         "the %llu source bytes", (long long)n, tr->name,
                         (unsigned long long)src_bytes);
    if (n && (!src || !dst)) return amk__fail(d, AMK_ERR_INVALID_ARG, "dequantize: NULL buffer");
    for (done = 0; done < n;) {
        int64_t m = n - done < AMK__GGUF_CHUNK ? n - done : AMK__GGUF_CHUNK, j;
        fn(x, m / tr->blck, tmp);
        x += m / tr->blck * tr->tsize;
        if (out_dtype == AMK_DTYPE_F32) {
            memcpy(out, tmp, (size_t)m * 4);
            out += m * 4;
        } else if (out_dtype == AMK_DTYPE_F16) {
            for (j = 0; j < m; j++, out += 2) {
                uint16_t h = amk_f32_to_f16(tmp[j]);
                memcpy(out, &h, 2);
            }
        } else {
            for (j = 0; j < m; j++, out += 2) {
                uint16_t h = amk_f32_to_bf16(tmp[j]);
                memcpy(out, &h, 2);
            }
        }
        done += m;
    }
    return AMK_OK;
}

/* ==== >>impl_model ================================================================================== */
struct amk_model {
    amk_llama_config cfg;
    char *dir;                       /* directory of the model files */
    amk_gguf *gguf;                  /* a GGUF model, else NULL */
    amk_safetensors *shards; int n_shards; /* a safetensors model */
};

/* A weight located in the files: what amk_model_tensor_read needs. */
typedef struct amk__model_src {
    uint32_t type;         /* ggml type of the stored data (F32/F16/BF16 for safetensors) */
    int rank;
    int64_t shape[4];      /* HF order, unused entries 1 */
    const void *data;
    uint64_t nbytes;
    int perm_heads;        /* GGUF attn_q/attn_k: un-permute rows within this many heads; 0 none */
} amk__model_src;

/* HF per-layer suffix -> GGUF per-layer suffix (REFERENCE §1.6); perm: 1 q (n_heads), 2 k. */
static const struct amk__model_layer_name { const char *hf, *gguf; int perm; } amk__model_layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0},
    {"self_attn.q_proj.weight", "attn_q.weight", 1},
    {"self_attn.k_proj.weight", "attn_k.weight", 2},
    {"self_attn.v_proj.weight", "attn_v.weight", 0},
    {"self_attn.o_proj.weight", "attn_output.weight", 0},
    {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
    {"mlp.up_proj.weight", "ffn_up.weight", 0},
    {"mlp.down_proj.weight", "ffn_down.weight", 0},
};
#define AMK__MODEL_N_LAYER_NAMES ((int)(sizeof amk__model_layer_names / sizeof amk__model_layer_names[0]))

/* The GGUF name of an HF name into out (0 if it has none); *perm as in the table. */
AMK__FN int amk__model_gguf_name(const char *hf, char *out, size_t size, int *perm) {
    static const char *const globals[3][2] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                              {"model.norm.weight", "output_norm.weight"},
                                              {"lm_head.weight", "output.weight"}};
    const char *p;
    int i, nd = 0;
    *perm = 0;
    for (i = 0; i < 3; i++)
        if (strcmp(hf, globals[i][0]) == 0) { snprintf(out, size, "%s", globals[i][1]); return 1; }
    if (strncmp(hf, "model.layers.", 13) != 0) return 0;
    p = hf + 13;
    while (p[nd] >= '0' && p[nd] <= '9') nd++;
    /* why: 9 digits keep the layer index inside int; a leading 0 would alias another layer */
    if (nd == 0 || nd > 9 || p[nd] != '.' || (p[0] == '0' && nd > 1)) return 0;
    for (i = 0; i < AMK__MODEL_N_LAYER_NAMES; i++)
        if (strcmp(p + nd + 1, amk__model_layer_names[i].hf) == 0) {
            snprintf(out, size, "blk.%.*s.%s", nd, p, amk__model_layer_names[i].gguf);
            *perm = amk__model_layer_names[i].perm;
            return 1;
        }
    return 0;
}

/* Locates hf_name: GGUF via the name map, safetensors by name in every shard; lm_head falls back
   to the embedding. */
AMK__FN amk_result amk__model_find(const amk_model *m, const char *hf_name, amk__model_src *s,
                                   amk_diag *d) {
    int k;
    memset(s, 0, sizeof *s);
    for (k = 0; k < 4; k++) s->shape[k] = 1;
    if (!hf_name) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: tensor name is NULL");
    if (m->gguf) {
        char gname[96] = "";
        int perm;
        const amk_gguf_tensor *t = NULL;
        if (amk__model_gguf_name(hf_name, gname, sizeof gname, &perm)) {
            t = amk_gguf_find_tensor(m->gguf, gname);
            if (!t && strcmp(hf_name, "lm_head.weight") == 0)
                t = amk_gguf_find_tensor(m->gguf, "token_embd.weight");
        }
        if (!t)
            return amk__fail(d, AMK_ERR_NOT_FOUND, "model has no tensor '%s'%s%s%s", hf_name,
                             gname[0] ? " (GGUF '" : "", gname[0] ? gname : "", gname[0] ? "')" : "");
        s->type = t->type;
        s->rank = t->n_dims;
        for (k = 0; k < t->n_dims; k++) s->shape[k] = t->dims[t->n_dims - 1 - k];
        s->data = t->data;
        s->nbytes = t->nbytes;
        s->perm_heads = perm == 1 ? m->cfg.n_heads : perm == 2 ? m->cfg.n_kv_heads : 0;
        return AMK_OK;
    }
    {
        const amk_st_tensor *t = NULL;
        for (k = 0; k < m->n_shards && !t; k++) t = amk_safetensors_find(&m->shards[k], hf_name);
        if (!t && strcmp(hf_name, "lm_head.weight") == 0)
            for (k = 0; k < m->n_shards && !t; k++)
                t = amk_safetensors_find(&m->shards[k], "model.embed_tokens.weight");
        if (!t) return amk__fail(d, AMK_ERR_NOT_FOUND, "model has no tensor '%s'", hf_name);
        if (t->dtype == AMK_DTYPE_F32) s->type = AMK_GGML_F32;
        else if (t->dtype == AMK_DTYPE_F16) s->type = AMK_GGML_F16;
        else if (t->dtype == AMK_DTYPE_BF16) s->type = AMK_GGML_BF16;
        else
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, "
                             "F16 or BF16)", hf_name, t->dtype_name);
        if (t->rank > 4)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s': rank %d (at most 4)", hf_name,
                             t->rank);
        s->rank = t->rank;
        for (k = 0; k < t->rank; k++) s->shape[k] = t->shape[k];
        s->data = t->data;
        s->nbytes = t->nbytes;
        return AMK_OK;
    }
}

AMK_API amk_result amk_model_tensor_shape(amk_model *m, const char *hf_name, int *rank,
                                          int64_t shape[4], amk_diag *d) {
    amk__model_src s;
    amk_result r;
    int k;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL model");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    if (rank) *rank = s.rank;
    if (shape)
        for (k = 0; k < 4; k++) shape[k] = s.shape[k];
    return AMK_OK;
}

AMK_API amk_result amk_model_tensor_read(amk_model *m, const char *hf_name, int dtype, void *dst,
                                         size_t dst_bytes, amk_diag *d) {
    amk__model_src s;
    amk_result r;
    int64_t numel = 1, want;
    int k;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "model: NULL model");
    if ((r = amk__model_find(m, hf_name, &s, d)) != AMK_OK) return r;
    if (dtype != AMK_DTYPE_F32 && dtype != AMK_DTYPE_F16 && dtype != AMK_DTYPE_BF16)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tensor '%s': cannot read as %s (F32, F16 or "
                         "BF16)", hf_name, amk_dtype_name(dtype));
    for (k = 0; k < s.rank; k++)
        if (!amk__mul_i64(numel, s.shape[k], &numel))
            return amk__fail(d, AMK_ERR_PARSE, "tensor '%s': element count overflows", hf_name);
    want = amk_dtype_nbytes(dtype, numel);
    if (want < 0 || (uint64_t)want != (uint64_t)dst_bytes)
        return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s': %lld elements as %s need %lld bytes, "
                         "the destination has %llu", hf_name, (long long)numel,
                         amk_dtype_name(dtype), (long long)want, (unsigned long long)dst_bytes);
    if (!s.perm_heads) return amk_gguf_dequant(s.type, s.data, s.nbytes, numel, dtype, dst, d);
    {
        /* undo the converter's Q/K row permutation (REFERENCE §1.7 (b)): within each head of hd
           rows, HF row j < hd/2 is GGUF row 2j and HF row j + hd/2 is GGUF row 2j + 1 */
        int64_t rows = s.shape[0], row_len = s.shape[1], hd, row;
        uint64_t row_bytes;
        size_t out_row = (size_t)amk_dtype_nbytes(dtype, row_len);
        if (s.rank != 2 || rows % s.perm_heads != 0 || (rows / s.perm_heads) % 2 != 0)
            return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s': %lld rows do not split into %d "
                             "heads of an even size", hf_name, (long long)rows, s.perm_heads);
        hd = rows / s.perm_heads;
        row_bytes = s.nbytes / (uint64_t)rows;
        for (row = 0; row < rows; row++) {
            int64_t h = row / hd, j = row % hd;
            int64_t src = h * hd + (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
            r = amk_gguf_dequant(s.type, (const uint8_t *)s.data + (uint64_t)src * row_bytes,
                                 row_bytes, row_len, dtype, (uint8_t *)dst + (size_t)row * out_row, d);
            if (r != AMK_OK) return r;
        }
        return AMK_OK;
    }
}

/* ---- config from GGUF metadata (REFERENCE §1.5) ----------------------------------------------- */

/* Reads an integer key into [lo, hi]; absent: *out = dflt, or an error when required. */
AMK__FN amk_result amk__model_gguf_int(const amk_gguf *g, const char *key, int required, int dflt,
                                       int lo, int hi, int *out, amk_diag *d) {
    int64_t v;
    if (amk_gguf_find_key(g, key) < 0) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the key '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (!amk_gguf_get_int(g, key, &v))
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is not an integer", key);
    if (v < lo || v > hi)
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is %lld (must be in [%d, %d])", key,
                         (long long)v, lo, hi);
    *out = (int)v;
    return AMK_OK;
}
AMK__FN amk_result amk__model_gguf_float(const amk_gguf *g, const char *key, int required,
                                         float dflt, float *out, amk_diag *d) {
    double v;
    if (amk_gguf_find_key(g, key) < 0) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the key '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (!amk_gguf_get_float(g, key, &v))
        return amk__fail(d, AMK_ERR_PARSE, "GGUF key '%s' is not a number", key);
    *out = (float)v;
    return AMK_OK;
}

AMK__FN amk_result amk__model_config_gguf(const amk_gguf *g, amk_llama_config *c, amk_diag *d) {
    const char *arch = amk_gguf_get_string(g, "general.architecture", NULL), *s;
    const amk_gguf_tensor *emb = amk_gguf_find_tensor(g, "token_embd.weight");
    amk_result r;
    int64_t ntok;
    int has_freqs = amk_gguf_find_tensor(g, "rope_freqs.weight") != NULL, i;
    static const char *const eos_keys[3] = {"tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    if (!arch) return amk__fail(d, AMK_ERR_PARSE, "GGUF lacks the string 'general.architecture'");
    if (strcmp(arch, "llama") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "architecture '%.100s' is not supported (only "
                         "llama)", arch);
    snprintf(c->arch, sizeof c->arch, "llama");
    if ((s = amk_gguf_get_string(g, "general.name", NULL)) != NULL)
        snprintf(c->name, sizeof c->name, "%s", s);
    if ((r = amk__model_gguf_int(g, "llama.block_count", 1, 0, 1, INT_MAX, &c->n_layers, d)) ||
        (r = amk__model_gguf_int(g, "llama.embedding_length", 1, 0, 1, INT_MAX, &c->hidden, d)) ||
        (r = amk__model_gguf_int(g, "llama.feed_forward_length", 1, 0, 1, INT_MAX, &c->intermediate, d)) ||
        (r = amk__model_gguf_int(g, "llama.attention.head_count", 1, 0, 1, INT_MAX, &c->n_heads, d)) ||
        (r = amk__model_gguf_int(g, "llama.attention.head_count_kv", 0, c->n_heads, 1, INT_MAX, &c->n_kv_heads, d)) ||
        (r = amk__model_gguf_int(g, "llama.context_length", 1, 0, 1, INT_MAX, &c->max_pos, d)) ||
        (r = amk__model_gguf_float(g, "llama.attention.layer_norm_rms_epsilon", 1, 0, &c->rms_eps, d)) ||
        (r = amk__model_gguf_float(g, "llama.rope.freq_base", 0, 10000.0f, &c->rope_theta, d)))
        return r;
    /* head_dim: rope.dimension_count, else attention.key_length, else hidden / heads */
    if ((r = amk__model_gguf_int(g, "llama.attention.key_length", 0, c->hidden / c->n_heads, 1,
                                 INT_MAX, &c->head_dim, d)) ||
        (r = amk__model_gguf_int(g, "llama.rope.dimension_count", 0, c->head_dim, 1, INT_MAX,
                                 &c->head_dim, d)))
        return r;
    /* vocab: llama.vocab_size, else the token list, else the embedding's rows */
    ntok = amk_gguf_array_len(g, "tokenizer.ggml.tokens", NULL);
    if (ntok < 0 && emb) ntok = emb->n_dims == 2 ? emb->dims[1] : -1;
    if (ntok > INT_MAX) ntok = -1;
    if ((r = amk__model_gguf_int(g, "llama.vocab_size", ntok < 1, (int)ntok, 1, INT_MAX, &c->vocab, d)))
        return r;
    /* RoPE scaling: only llama3 (rope_freqs.weight or scaling.type "llama3") */
    s = amk_gguf_get_string(g, "llama.rope.scaling.type", NULL);
    if (s && strcmp(s, "none") != 0 && strcmp(s, "llama3") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "RoPE scaling '%.100s' is not supported (only "
                         "llama3)", s);
    if (has_freqs || (s && strcmp(s, "llama3") == 0)) {
        static const char *const keys[3] = {"llama.rope.scaling.factor",
                                            "llama.rope.scaling.low_freq_factor",
                                            "llama.rope.scaling.high_freq_factor"};
        for (i = 0; i < 3; i++)
            if (amk_gguf_find_key(g, keys[i]) < 0)
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling (rope_freqs.weight) "
                                 "without the key '%s' is not supported yet", keys[i]);
        if (amk_gguf_find_key(g, "llama.rope.scaling.original_context_length") < 0)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "llama3 RoPE scaling without the key "
                             "'llama.rope.scaling.original_context_length' is not supported yet");
        c->rope_llama3 = 1;
        if ((r = amk__model_gguf_float(g, keys[0], 1, 0, &c->rope_factor, d)) ||
            (r = amk__model_gguf_float(g, keys[1], 1, 0, &c->rope_low_freq_factor, d)) ||
            (r = amk__model_gguf_float(g, keys[2], 1, 0, &c->rope_high_freq_factor, d)) ||
            (r = amk__model_gguf_int(g, "llama.rope.scaling.original_context_length", 1, 0, 1,
                                     INT_MAX, &c->rope_orig_ctx, d)))
            return r;
    }
    if ((r = amk__model_gguf_int(g, "tokenizer.ggml.bos_token_id", 0, -1, 0, INT_MAX, &c->bos_id, d)))
        return r;
    for (i = 0; i < 3; i++) {
        int id, k, seen = 0;
        if ((r = amk__model_gguf_int(g, eos_keys[i], 0, -1, 0, INT_MAX, &id, d))) return r;
        for (k = 0; k < c->n_eos; k++) seen |= c->eos_ids[k] == id;
        if (id >= 0 && !seen) c->eos_ids[c->n_eos++] = id;
    }
    c->tie_embeddings = amk_gguf_find_tensor(g, "output.weight") == NULL;
    c->attention_bias = amk_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->mlp_bias = amk_gguf_find_tensor(g, "blk.0.ffn_up.bias") != NULL;
    return AMK_OK;
}

/* ---- config from config.json (REFERENCE §2.3) ------------------------------------------------- */

AMK__FN amk_result amk__model_json_fail(amk_diag *d, const amk__jval *at, amk_result r,
                                        const char *fmt, const char *key) {
    if (d && at) { d->line = at->line; d->col = at->col; }
    return amk__fail(d, r, fmt, key);
}

/* An integer member in [lo, hi]; absent or null: dflt, or an error when required. */
AMK__FN amk_result amk__model_json_int(const amk__jval *o, const char *key, int required, int dflt,
                                       int lo, int hi, int *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) {
        if (required) return amk__fail(d, AMK_ERR_PARSE, "config.json lacks '%s'", key);
        *out = dflt;
        return AMK_OK;
    }
    if (v->type != AMK__J_INT)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be an integer", key);
    if (v->i < lo || v->i > hi)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' is out of range", key);
    *out = (int)v->i;
    return AMK_OK;
}
AMK__FN amk_result amk__model_json_float(const amk__jval *o, const char *key, float dflt,
                                         float *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) { *out = dflt; return AMK_OK; }
    if (v->type != AMK__J_INT && v->type != AMK__J_REAL)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be a number", key);
    *out = (float)v->f;
    return AMK_OK;
}
AMK__FN amk_result amk__model_json_bool(const amk__jval *o, const char *key, int *out, amk_diag *d) {
    const amk__jval *v = amk__json_get(o, key);
    if (!v || v->type == AMK__J_NULL) { *out = 0; return AMK_OK; }
    if (v->type != AMK__J_BOOL)
        return amk__model_json_fail(d, v, AMK_ERR_PARSE, "config.json: '%s' must be true or false", key);
    *out = (int)v->i;
    return AMK_OK;
}
/* A string member, or NULL when absent or not a string. */
AMK__FN const char *amk__model_json_str(const amk__jval *o, const char *key) {
    const amk__jval *v = amk__json_get(o, key);
    return v && v->type == AMK__J_STRING ? v->s : NULL;
}

AMK__FN amk_result amk__model_config_json(const amk__jval *o, amk_llama_config *c, amk_diag *d) {
    const char *mt = amk__model_json_str(o, "model_type"), *s;
    const amk__jval *v, *rope;
    amk_result r;
    int i;
    if (!o || o->type != AMK__J_OBJECT)
        return amk__fail(d, AMK_ERR_PARSE, "config.json is not a JSON object");
    if (mt && strcmp(mt, "llama") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "model_type '%.100s' is not supported (only "
                         "llama)", mt);
    if (!mt) {
        const amk__jval *a = amk__json_get(o, "architectures");
        int ok = 0;
        for (i = 0; a && a->type == AMK__J_ARRAY && i < a->n; i++)
            ok |= a->items[i].type == AMK__J_STRING && strcmp(a->items[i].s, "LlamaForCausalLM") == 0;
        if (!ok)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "config.json names neither model_type 'llama' "
                             "nor the architecture LlamaForCausalLM");
    }
    snprintf(c->arch, sizeof c->arch, "llama");
    if ((s = amk__model_json_str(o, "_name_or_path")) != NULL) snprintf(c->name, sizeof c->name, "%s", s);
    s = amk__model_json_str(o, "hidden_act");
    if (s && strcmp(s, "silu") != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "hidden_act '%.100s' is not supported (only silu)", s);
    if ((r = amk__model_json_int(o, "num_hidden_layers", 1, 0, 1, INT_MAX, &c->n_layers, d)) ||
        (r = amk__model_json_int(o, "hidden_size", 1, 0, 1, INT_MAX, &c->hidden, d)) ||
        (r = amk__model_json_int(o, "intermediate_size", 1, 0, 1, INT_MAX, &c->intermediate, d)) ||
        (r = amk__model_json_int(o, "num_attention_heads", 1, 0, 1, INT_MAX, &c->n_heads, d)) ||
        (r = amk__model_json_int(o, "num_key_value_heads", 0, c->n_heads, 1, INT_MAX, &c->n_kv_heads, d)) ||
        (r = amk__model_json_int(o, "head_dim", 0, c->hidden / c->n_heads, 1, INT_MAX, &c->head_dim, d)) ||
        (r = amk__model_json_int(o, "vocab_size", 1, 0, 1, INT_MAX, &c->vocab, d)) ||
        /* why: 2048 and 1e-6 are transformers' LlamaConfig defaults */
        (r = amk__model_json_int(o, "max_position_embeddings", 0, 2048, 1, INT_MAX, &c->max_pos, d)) ||
        (r = amk__model_json_float(o, "rms_norm_eps", 1e-6f, &c->rms_eps, d)) ||
        (r = amk__model_json_bool(o, "tie_word_embeddings", &c->tie_embeddings, d)) ||
        (r = amk__model_json_bool(o, "attention_bias", &c->attention_bias, d)) ||
        (r = amk__model_json_bool(o, "mlp_bias", &c->mlp_bias, d)) ||
        (r = amk__model_json_int(o, "bos_token_id", 0, -1, 0, INT_MAX, &c->bos_id, d)))
        return r;
    /* eos_token_id: an int, a list of up to 4, or null */
    v = amk__json_get(o, "eos_token_id");
    if (v && v->type == AMK__J_ARRAY) {
        if (v->n > 4)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "config.json: eos_token_id lists %d ids (at "
                             "most 4)", v->n);
        for (i = 0; i < v->n; i++) {
            if (v->items[i].type != AMK__J_INT || v->items[i].i < 0 || v->items[i].i > INT_MAX)
                return amk__model_json_fail(d, &v->items[i], AMK_ERR_PARSE, "config.json: '%s' "
                                            "must hold token ids", "eos_token_id");
            c->eos_ids[c->n_eos++] = (int)v->items[i].i;
        }
    } else {
        int id;
        if ((r = amk__model_json_int(o, "eos_token_id", 0, -1, 0, INT_MAX, &id, d))) return r;
        if (id >= 0) c->eos_ids[c->n_eos++] = id;
    }
    /* RoPE: rope_theta + rope_scaling, or (transformers v5) rope_parameters holding both */
    rope = amk__json_get(o, "rope_parameters");
    if (rope && rope->type != AMK__J_OBJECT && rope->type != AMK__J_NULL)
        return amk__model_json_fail(d, rope, AMK_ERR_PARSE, "config.json: '%s' must be an object",
                                    "rope_parameters");
    if (!rope || rope->type == AMK__J_NULL) {
        if ((r = amk__model_json_float(o, "rope_theta", 10000.0f, &c->rope_theta, d))) return r;
        rope = amk__json_get(o, "rope_scaling");
        if (rope && rope->type != AMK__J_OBJECT && rope->type != AMK__J_NULL)
            return amk__model_json_fail(d, rope, AMK_ERR_PARSE, "config.json: '%s' must be an "
                                        "object or null", "rope_scaling");
    } else {
        const amk__jval *t = amk__json_get(o, "rope_theta");
        if ((r = amk__model_json_float(rope, "rope_theta",
                                       t && (t->type == AMK__J_INT || t->type == AMK__J_REAL) ? (float)t->f : 10000.0f,
                                       &c->rope_theta, d)))
            return r;
    }
    if (rope && rope->type == AMK__J_OBJECT) {
        const char *rt = amk__model_json_str(rope, "rope_type");
        if (!rt) rt = amk__model_json_str(rope, "type");
        if (rt && strcmp(rt, "llama3") == 0) {
            static const char *const need[4] = {"factor", "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings"};
            for (i = 0; i < 4; i++)
                if (!amk__json_get(rope, need[i]))
                    return amk__fail(d, AMK_ERR_PARSE, "config.json: llama3 rope scaling lacks '%s'",
                                     need[i]);
            c->rope_llama3 = 1;
            if ((r = amk__model_json_float(rope, "factor", 0, &c->rope_factor, d)) ||
                (r = amk__model_json_float(rope, "low_freq_factor", 0, &c->rope_low_freq_factor, d)) ||
                (r = amk__model_json_float(rope, "high_freq_factor", 0, &c->rope_high_freq_factor, d)) ||
                (r = amk__model_json_int(rope, "original_max_position_embeddings", 1, 0, 1, INT_MAX,
                                         &c->rope_orig_ctx, d)))
                return r;
        } else if (rt && strcmp(rt, "default") != 0) {
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "RoPE scaling '%.100s' is not supported (only "
                             "llama3)", rt);
        }
    }
    return AMK_OK;
}

/* Rejects configs the Llama path cannot run or whose numbers are inconsistent. */
AMK__FN amk_result amk__model_check_config(const amk_llama_config *c, amk_diag *d) {
    if (c->attention_bias || c->mlp_bias)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "%s biases are not supported",
                         c->attention_bias ? "attention" : "MLP");
    if (c->n_heads % c->n_kv_heads != 0)
        return amk__fail(d, AMK_ERR_PARSE, "%d heads do not split into %d KV heads", c->n_heads,
                         c->n_kv_heads);
    if (c->head_dim < 2 || c->head_dim % 2 != 0)
        return amk__fail(d, AMK_ERR_PARSE, "head_dim %d is not a positive even number (RoPE "
                         "rotates pairs)", c->head_dim);
    if (!(c->rms_eps > 0.0f) || !(c->rope_theta > 0.0f) || c->rope_theta > FLT_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "rms_eps %g and rope_theta %g must be positive and "
                         "finite", (double)c->rms_eps, (double)c->rope_theta);
    if (c->rope_llama3 && !(c->rope_factor > 0.0f && c->rope_low_freq_factor > 0.0f &&
                            c->rope_high_freq_factor > c->rope_low_freq_factor))
        return amk__fail(d, AMK_ERR_PARSE, "llama3 RoPE scaling needs factor > 0 and "
                         "high_freq_factor > low_freq_factor > 0");
    return AMK_OK;
}

/* Checks that weight name exists with HF shape [rows] (cols 0) or [rows, cols] and a storage type
   the reader converts. */
AMK__FN amk_result amk__model_expect(const amk_model *m, const char *name, int64_t rows,
                                     int64_t cols, amk_diag *d) {
    amk__model_src s;
    amk_result r = amk__model_find(m, name, &s, d);
    char want[48], got[48];
    if (r != AMK_OK) return r;
    if (s.rank != (cols ? 2 : 1) || s.shape[0] != rows || (cols && s.shape[1] != cols)) {
        if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)rows);
        if (s.rank == 2) snprintf(got, sizeof got, "[%lld, %lld]", (long long)s.shape[0], (long long)s.shape[1]);
        else snprintf(got, sizeof got, "[%lld, ...] (rank %d)", (long long)s.shape[0], s.rank);
        return amk__fail(d, AMK_ERR_MISMATCH, "tensor '%s' has shape %s; the config implies %s",
                         name, got, want);
    }
    if (!amk__gguf_deq_for(s.type))
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "tensor '%s' is stored as %s, which cannot be "
                         "dequantized yet", name, amk_gguf_type_name(s.type));
    return AMK_OK;
}

/* Every weight the config implies must exist with its HF shape. */
AMK__FN amk_result amk__model_check_weights(const amk_model *m, amk_diag *d) {
    const amk_llama_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    /* [rows, cols] per entry of amk__model_layer_names, cols 0 for a vector */
    const int64_t shapes[AMK__MODEL_N_LAYER_NAMES][2] = {
        {c->hidden, 0}, {q, c->hidden}, {kv, c->hidden}, {kv, c->hidden}, {c->hidden, q},
        {c->hidden, 0}, {c->intermediate, c->hidden}, {c->intermediate, c->hidden},
        {c->hidden, c->intermediate}};
    char name[96];
    int layer, i;
    amk_result r;
    if ((r = amk__model_expect(m, "model.embed_tokens.weight", c->vocab, c->hidden, d)) ||
        (r = amk__model_expect(m, "model.norm.weight", c->hidden, 0, d)) ||
        (r = amk__model_expect(m, "lm_head.weight", c->vocab, c->hidden, d)))
        return r;
    for (layer = 0; layer < c->n_layers; layer++)
        for (i = 0; i < AMK__MODEL_N_LAYER_NAMES; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", layer, amk__model_layer_names[i].hf);
            if ((r = amk__model_expect(m, name, shapes[i][0], shapes[i][1], d))) return r;
        }
    return AMK_OK;
}

/* ---- opening ---------------------------------------------------------------------------------- */

AMK__FN char *amk__model_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)amk__malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}
AMK__FN char *amk__model_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
#ifdef _WIN32
    const char *bs = strrchr(path, '\\');
    if (bs && (!slash || bs > slash)) slash = bs;
#endif
    if (!slash) return amk__strdup(".");
    if (slash == path) return amk__strdup("/");
    return amk__strndup(path, (size_t)(slash - path));
}
AMK__FN int amk__model_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}
AMK__FN int amk__model_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Adds one more shard slot to m and opens path into it. */
AMK__FN amk_result amk__model_add_shard(amk_model *m, const char *path, amk_diag *d) {
    amk_safetensors *ns;
    amk_result r;
    ns = (amk_safetensors *)amk__realloc(m->shards, (size_t)(m->n_shards + 1) * sizeof *ns);
    if (!ns) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory opening '%s'", path);
    m->shards = ns;
    r = amk_safetensors_open(path, &m->shards[m->n_shards], d);
    if (r == AMK_OK) m->n_shards++;
    return r;
}

/* Opens every shard an index's weight_map names (each once) and checks each entry is there. */
AMK__FN amk_result amk__model_open_index(amk_model *m, const char *index_path, amk_diag *d) {
    char *text = NULL;
    size_t len;
    amk__jdoc doc;
    const amk__jval *map;
    const char **files = NULL;
    int n_files = 0, i, k;
    amk_result r = amk__read_file(index_path, &text, &len, d);
    if (r != AMK_OK) return r;
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) {
        amk__free(text);
        if (d) snprintf(d->path, sizeof d->path, "%s", index_path);
        return r;
    }
    map = amk__json_get(doc.root, "weight_map");
    if (!map || map->type != AMK__J_OBJECT || map->n == 0) {
        r = amk__fail(d, AMK_ERR_PARSE, "'%s': no weight_map object", index_path);
        goto done;
    }
    files = (const char **)amk__calloc((size_t)map->n, sizeof *files);
    if (!files) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); goto done; }
    for (i = 0; i < map->n && r == AMK_OK; i++) {
        const amk__jval *f = &map->items[i];
        char *p;
        if (f->type != AMK__J_STRING || f->slen == 0 || strlen(f->s) != f->slen || f->s[0] == '/' ||
            strstr(f->s, "..")) {
            r = amk__fail(d, AMK_ERR_PARSE, "'%s': weight_map['%.100s'] is not a plain file name",
                          index_path, map->keys[i]);
            break;
        }
        for (k = 0; k < n_files && strcmp(files[k], f->s) != 0; k++) {}
        if (k < n_files) continue;
        files[n_files++] = f->s;
        if (!(p = amk__model_join(m->dir, f->s))) { r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); break; }
        r = amk__model_add_shard(m, p, d);
        amk__free(p);
    }
    /* every entry must be in the shard the index names */
    for (i = 0; i < map->n && r == AMK_OK; i++) {
        for (k = 0; k < n_files && strcmp(files[k], map->items[i].s) != 0; k++) {}
        if (!amk_safetensors_find(&m->shards[k], map->keys[i]))
            r = amk__fail(d, AMK_ERR_NOT_FOUND, "'%s' maps tensor '%.150s' to '%.150s', which does "
                          "not hold it", index_path, map->keys[i], files[k]);
    }
done:
    amk__free(files);
    amk__json_free(&doc);
    amk__free(text);
    return r;
}

/* Reads dir/config.json into m->cfg. */
AMK__FN amk_result amk__model_read_config(amk_model *m, amk_diag *d) {
    char *path = amk__model_join(m->dir, "config.json"), *text = NULL;
    size_t len;
    amk__jdoc doc;
    amk_result r;
    if (!path) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    r = amk__read_file(path, &text, &len, d);
    if (r == AMK_OK) {
        r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
        if (r == AMK_OK) {
            r = amk__model_config_json(doc.root, &m->cfg, d);
            amk__json_free(&doc);
        }
        amk__free(text);
    }
    if (r != AMK_OK && d) {
        char msg[sizeof d->message];
        memcpy(msg, d->message, sizeof msg);
        amk__fail(d, r, "'%s': %s", path, msg);
        snprintf(d->path, sizeof d->path, "%s", path);
    }
    amk__free(path);
    return r;
}

AMK__FN amk_result amk__model_open_files(amk_model *m, const char *path, amk_diag *d) {
    char *p = amk__model_join(path, "config.json");
    unsigned char magic[4] = {0, 0, 0, 0};
    FILE *f;
    amk_result r;
    int is_dir;
    if (!p) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    is_dir = amk__model_exists(p); /* why: portable: a directory is a path with config.json in it */
    amk__free(p);
    if (is_dir) {
        if (!(m->dir = amk__strdup(path))) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if ((r = amk__model_read_config(m, d)) != AMK_OK) return r;
        if (!(p = amk__model_join(path, "model.safetensors.index.json")))
            return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if (amk__model_exists(p)) {
            r = amk__model_open_index(m, p, d);
        } else {
            amk__free(p);
            if (!(p = amk__model_join(path, "model.safetensors")))
                return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
            r = amk__model_add_shard(m, p, d);
        }
        amk__free(p);
        return r;
    }
    if (!(f = fopen(path, "rb")))
        return amk__fail(d, AMK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fread(magic, 1, 4, f) != 4) magic[0] = 0;
    fclose(f);
    if (!(m->dir = amk__model_dirname(path))) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (memcmp(magic, "GGUF", 4) == 0) {
        if ((r = amk_gguf_open(path, &m->gguf, d)) != AMK_OK) return r;
        if ((r = amk__model_config_gguf(m->gguf, &m->cfg, d)) != AMK_OK && d) {
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s': %s", path, msg);
        }
        return r;
    }
    if ((r = amk__model_read_config(m, d)) != AMK_OK) return r;
    if (amk__model_ends_with(path, ".json")) return amk__model_open_index(m, path, d);
    return amk__model_add_shard(m, path, d);
}

AMK_API amk_result amk_model_open(const char *path, amk_model **out, amk_diag *d) {
    amk_model *m;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_model_open: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_model_open: path is NULL");
    m = (amk_model *)amk__calloc(1, sizeof *m);
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    m->cfg.bos_id = -1;
    r = amk__model_open_files(m, path, d);
    if (r == AMK_OK) {
        r = amk__model_check_config(&m->cfg, d);
        if (r == AMK_OK) r = amk__model_check_weights(m, d);
        if (r != AMK_OK && d) { /* the files parsed: name the model in what they lack */
            char msg[sizeof d->message];
            memcpy(msg, d->message, sizeof msg);
            amk__fail(d, r, "'%s': %s", path, msg);
            snprintf(d->path, sizeof d->path, "%s", path);
        }
    }
    if (r == AMK_OK && !m->gguf && !m->cfg.tie_embeddings) {
        /* an untied config without lm_head reads the embedding, as tied models do */
        int k, has = 0;
        for (k = 0; k < m->n_shards; k++) has |= amk_safetensors_find(&m->shards[k], "lm_head.weight") != NULL;
        m->cfg.tie_embeddings = !has;
    }
    if (r != AMK_OK) { amk_model_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API void amk_model_close(amk_model *m) {
    int k;
    if (!m) return;
    amk_gguf_close(m->gguf);
    for (k = 0; k < m->n_shards; k++) amk_safetensors_close(&m->shards[k]);
    amk__free(m->shards);
    amk__free(m->dir);
    amk__free(m);
}

AMK_API const amk_llama_config *amk_model_config(const amk_model *m) { return m ? &m->cfg : NULL; }
AMK_API const amk_gguf *amk_model_gguf(const amk_model *m) { return m ? m->gguf : NULL; }
AMK_API const char *amk_model_dir(const amk_model *m) { return m ? m->dir : NULL; }

/* ==== >>impl_tokenizer ============================================================================== */
/* >>unicode_tables begin (scripts/gen_unicode_tables.py rewrites up to the end marker) */
/* The Unicode tables - GENERATED by scripts/gen_unicode_tables.py; do not edit.
   Source: unicodedata2 16.0.0 (Unicode 16.0.0).
   Sorted, disjoint code-point ranges with their class: 1 = L (General_Category L*),
   2 = N (N*), 3 = W (the White_Space property, which is Oniguruma's and Rust's Unicode \s).
   Code points in no range are 'other'. 677 L, 144 N, 10 W ranges. */
#define AMK__UNI_L 1
#define AMK__UNI_N 2
#define AMK__UNI_W 3
#define AMK__UNI_VERSION "16.0.0"
typedef struct amk__uni_range { uint32_t lo, hi; unsigned char cls; } amk__uni_range;
static const amk__uni_range amk__uni_ranges[831] = {
{0x9,0xD,3},{0x20,0x20,3},{0x30,0x39,2},{0x41,0x5A,1},{0x61,0x7A,1},{0x85,0x85,3},{0xA0,0xA0,3},
{0xAA,0xAA,1},{0xB2,0xB3,2},{0xB5,0xB5,1},{0xB9,0xB9,2},{0xBA,0xBA,1},{0xBC,0xBE,2},{0xC0,0xD6,1},
{0xD8,0xF6,1},{0xF8,0x2C1,1},{0x2C6,0x2D1,1},{0x2E0,0x2E4,1},{0x2EC,0x2EC,1},{0x2EE,0x2EE,1},
{0x370,0x374,1},{0x376,0x377,1},{0x37A,0x37D,1},{0x37F,0x37F,1},{0x386,0x386,1},{0x388,0x38A,1},
{0x38C,0x38C,1},{0x38E,0x3A1,1},{0x3A3,0x3F5,1},{0x3F7,0x481,1},{0x48A,0x52F,1},{0x531,0x556,1},
{0x559,0x559,1},{0x560,0x588,1},{0x5D0,0x5EA,1},{0x5EF,0x5F2,1},{0x620,0x64A,1},{0x660,0x669,2},
{0x66E,0x66F,1},{0x671,0x6D3,1},{0x6D5,0x6D5,1},{0x6E5,0x6E6,1},{0x6EE,0x6EF,1},{0x6F0,0x6F9,2},
{0x6FA,0x6FC,1},{0x6FF,0x6FF,1},{0x710,0x710,1},{0x712,0x72F,1},{0x74D,0x7A5,1},{0x7B1,0x7B1,1},
{0x7C0,0x7C9,2},{0x7CA,0x7EA,1},{0x7F4,0x7F5,1},{0x7FA,0x7FA,1},{0x800,0x815,1},{0x81A,0x81A,1},
{0x824,0x824,1},{0x828,0x828,1},{0x840,0x858,1},{0x860,0x86A,1},{0x870,0x887,1},{0x889,0x88E,1},
{0x8A0,0x8C9,1},{0x904,0x939,1},{0x93D,0x93D,1},{0x950,0x950,1},{0x958,0x961,1},{0x966,0x96F,2},
{0x971,0x980,1},{0x985,0x98C,1},{0x98F,0x990,1},{0x993,0x9A8,1},{0x9AA,0x9B0,1},{0x9B2,0x9B2,1},
{0x9B6,0x9B9,1},{0x9BD,0x9BD,1},{0x9CE,0x9CE,1},{0x9DC,0x9DD,1},{0x9DF,0x9E1,1},{0x9E6,0x9EF,2},
{0x9F0,0x9F1,1},{0x9F4,0x9F9,2},{0x9FC,0x9FC,1},{0xA05,0xA0A,1},{0xA0F,0xA10,1},{0xA13,0xA28,1},
{0xA2A,0xA30,1},{0xA32,0xA33,1},{0xA35,0xA36,1},{0xA38,0xA39,1},{0xA59,0xA5C,1},{0xA5E,0xA5E,1},
{0xA66,0xA6F,2},{0xA72,0xA74,1},{0xA85,0xA8D,1},{0xA8F,0xA91,1},{0xA93,0xAA8,1},{0xAAA,0xAB0,1},
{0xAB2,0xAB3,1},{0xAB5,0xAB9,1},{0xABD,0xABD,1},{0xAD0,0xAD0,1},{0xAE0,0xAE1,1},{0xAE6,0xAEF,2},
{0xAF9,0xAF9,1},{0xB05,0xB0C,1},{0xB0F,0xB10,1},{0xB13,0xB28,1},{0xB2A,0xB30,1},{0xB32,0xB33,1},
{0xB35,0xB39,1},{0xB3D,0xB3D,1},{0xB5C,0xB5D,1},{0xB5F,0xB61,1},{0xB66,0xB6F,2},{0xB71,0xB71,1},
{0xB72,0xB77,2},{0xB83,0xB83,1},{0xB85,0xB8A,1},{0xB8E,0xB90,1},{0xB92,0xB95,1},{0xB99,0xB9A,1},
{0xB9C,0xB9C,1},{0xB9E,0xB9F,1},{0xBA3,0xBA4,1},{0xBA8,0xBAA,1},{0xBAE,0xBB9,1},{0xBD0,0xBD0,1},
{0xBE6,0xBF2,2},{0xC05,0xC0C,1},{0xC0E,0xC10,1},{0xC12,0xC28,1},{0xC2A,0xC39,1},{0xC3D,0xC3D,1},
{0xC58,0xC5A,1},{0xC5D,0xC5D,1},{0xC60,0xC61,1},{0xC66,0xC6F,2},{0xC78,0xC7E,2},{0xC80,0xC80,1},
{0xC85,0xC8C,1},{0xC8E,0xC90,1},{0xC92,0xCA8,1},{0xCAA,0xCB3,1},{0xCB5,0xCB9,1},{0xCBD,0xCBD,1},
{0xCDD,0xCDE,1},{0xCE0,0xCE1,1},{0xCE6,0xCEF,2},{0xCF1,0xCF2,1},{0xD04,0xD0C,1},{0xD0E,0xD10,1},
{0xD12,0xD3A,1},{0xD3D,0xD3D,1},{0xD4E,0xD4E,1},{0xD54,0xD56,1},{0xD58,0xD5E,2},{0xD5F,0xD61,1},
{0xD66,0xD78,2},{0xD7A,0xD7F,1},{0xD85,0xD96,1},{0xD9A,0xDB1,1},{0xDB3,0xDBB,1},{0xDBD,0xDBD,1},
{0xDC0,0xDC6,1},{0xDE6,0xDEF,2},{0xE01,0xE30,1},{0xE32,0xE33,1},{0xE40,0xE46,1},{0xE50,0xE59,2},
{0xE81,0xE82,1},{0xE84,0xE84,1},{0xE86,0xE8A,1},{0xE8C,0xEA3,1},{0xEA5,0xEA5,1},{0xEA7,0xEB0,1},
{0xEB2,0xEB3,1},{0xEBD,0xEBD,1},{0xEC0,0xEC4,1},{0xEC6,0xEC6,1},{0xED0,0xED9,2},{0xEDC,0xEDF,1},
{0xF00,0xF00,1},{0xF20,0xF33,2},{0xF40,0xF47,1},{0xF49,0xF6C,1},{0xF88,0xF8C,1},{0x1000,0x102A,1},
{0x103F,0x103F,1},{0x1040,0x1049,2},{0x1050,0x1055,1},{0x105A,0x105D,1},{0x1061,0x1061,1},
{0x1065,0x1066,1},{0x106E,0x1070,1},{0x1075,0x1081,1},{0x108E,0x108E,1},{0x1090,0x1099,2},
{0x10A0,0x10C5,1},{0x10C7,0x10C7,1},{0x10CD,0x10CD,1},{0x10D0,0x10FA,1},{0x10FC,0x1248,1},
{0x124A,0x124D,1},{0x1250,0x1256,1},{0x1258,0x1258,1},{0x125A,0x125D,1},{0x1260,0x1288,1},
{0x128A,0x128D,1},{0x1290,0x12B0,1},{0x12B2,0x12B5,1},{0x12B8,0x12BE,1},{0x12C0,0x12C0,1},
{0x12C2,0x12C5,1},{0x12C8,0x12D6,1},{0x12D8,0x1310,1},{0x1312,0x1315,1},{0x1318,0x135A,1},
{0x1369,0x137C,2},{0x1380,0x138F,1},{0x13A0,0x13F5,1},{0x13F8,0x13FD,1},{0x1401,0x166C,1},
{0x166F,0x167F,1},{0x1680,0x1680,3},{0x1681,0x169A,1},{0x16A0,0x16EA,1},{0x16EE,0x16F0,2},
{0x16F1,0x16F8,1},{0x1700,0x1711,1},{0x171F,0x1731,1},{0x1740,0x1751,1},{0x1760,0x176C,1},
{0x176E,0x1770,1},{0x1780,0x17B3,1},{0x17D7,0x17D7,1},{0x17DC,0x17DC,1},{0x17E0,0x17E9,2},
{0x17F0,0x17F9,2},{0x1810,0x1819,2},{0x1820,0x1878,1},{0x1880,0x1884,1},{0x1887,0x18A8,1},
{0x18AA,0x18AA,1},{0x18B0,0x18F5,1},{0x1900,0x191E,1},{0x1946,0x194F,2},{0x1950,0x196D,1},
{0x1970,0x1974,1},{0x1980,0x19AB,1},{0x19B0,0x19C9,1},{0x19D0,0x19DA,2},{0x1A00,0x1A16,1},
{0x1A20,0x1A54,1},{0x1A80,0x1A89,2},{0x1A90,0x1A99,2},{0x1AA7,0x1AA7,1},{0x1B05,0x1B33,1},
{0x1B45,0x1B4C,1},{0x1B50,0x1B59,2},{0x1B83,0x1BA0,1},{0x1BAE,0x1BAF,1},{0x1BB0,0x1BB9,2},
{0x1BBA,0x1BE5,1},{0x1C00,0x1C23,1},{0x1C40,0x1C49,2},{0x1C4D,0x1C4F,1},{0x1C50,0x1C59,2},
{0x1C5A,0x1C7D,1},{0x1C80,0x1C8A,1},{0x1C90,0x1CBA,1},{0x1CBD,0x1CBF,1},{0x1CE9,0x1CEC,1},
{0x1CEE,0x1CF3,1},{0x1CF5,0x1CF6,1},{0x1CFA,0x1CFA,1},{0x1D00,0x1DBF,1},{0x1E00,0x1F15,1},
{0x1F18,0x1F1D,1},{0x1F20,0x1F45,1},{0x1F48,0x1F4D,1},{0x1F50,0x1F57,1},{0x1F59,0x1F59,1},
{0x1F5B,0x1F5B,1},{0x1F5D,0x1F5D,1},{0x1F5F,0x1F7D,1},{0x1F80,0x1FB4,1},{0x1FB6,0x1FBC,1},
{0x1FBE,0x1FBE,1},{0x1FC2,0x1FC4,1},{0x1FC6,0x1FCC,1},{0x1FD0,0x1FD3,1},{0x1FD6,0x1FDB,1},
{0x1FE0,0x1FEC,1},{0x1FF2,0x1FF4,1},{0x1FF6,0x1FFC,1},{0x2000,0x200A,3},{0x2028,0x2029,3},
{0x202F,0x202F,3},{0x205F,0x205F,3},{0x2070,0x2070,2},{0x2071,0x2071,1},{0x2074,0x2079,2},
{0x207F,0x207F,1},{0x2080,0x2089,2},{0x2090,0x209C,1},{0x2102,0x2102,1},{0x2107,0x2107,1},
{0x210A,0x2113,1},{0x2115,0x2115,1},{0x2119,0x211D,1},{0x2124,0x2124,1},{0x2126,0x2126,1},
{0x2128,0x2128,1},{0x212A,0x212D,1},{0x212F,0x2139,1},{0x213C,0x213F,1},{0x2145,0x2149,1},
{0x214E,0x214E,1},{0x2150,0x2182,2},{0x2183,0x2184,1},{0x2185,0x2189,2},{0x2460,0x249B,2},
{0x24EA,0x24FF,2},{0x2776,0x2793,2},{0x2C00,0x2CE4,1},{0x2CEB,0x2CEE,1},{0x2CF2,0x2CF3,1},
{0x2CFD,0x2CFD,2},{0x2D00,0x2D25,1},{0x2D27,0x2D27,1},{0x2D2D,0x2D2D,1},{0x2D30,0x2D67,1},
{0x2D6F,0x2D6F,1},{0x2D80,0x2D96,1},{0x2DA0,0x2DA6,1},{0x2DA8,0x2DAE,1},{0x2DB0,0x2DB6,1},
{0x2DB8,0x2DBE,1},{0x2DC0,0x2DC6,1},{0x2DC8,0x2DCE,1},{0x2DD0,0x2DD6,1},{0x2DD8,0x2DDE,1},
{0x2E2F,0x2E2F,1},{0x3000,0x3000,3},{0x3005,0x3006,1},{0x3007,0x3007,2},{0x3021,0x3029,2},
{0x3031,0x3035,1},{0x3038,0x303A,2},{0x303B,0x303C,1},{0x3041,0x3096,1},{0x309D,0x309F,1},
{0x30A1,0x30FA,1},{0x30FC,0x30FF,1},{0x3105,0x312F,1},{0x3131,0x318E,1},{0x3192,0x3195,2},
{0x31A0,0x31BF,1},{0x31F0,0x31FF,1},{0x3220,0x3229,2},{0x3248,0x324F,2},{0x3251,0x325F,2},
{0x3280,0x3289,2},{0x32B1,0x32BF,2},{0x3400,0x4DBF,1},{0x4E00,0xA48C,1},{0xA4D0,0xA4FD,1},
{0xA500,0xA60C,1},{0xA610,0xA61F,1},{0xA620,0xA629,2},{0xA62A,0xA62B,1},{0xA640,0xA66E,1},
{0xA67F,0xA69D,1},{0xA6A0,0xA6E5,1},{0xA6E6,0xA6EF,2},{0xA717,0xA71F,1},{0xA722,0xA788,1},
{0xA78B,0xA7CD,1},{0xA7D0,0xA7D1,1},{0xA7D3,0xA7D3,1},{0xA7D5,0xA7DC,1},{0xA7F2,0xA801,1},
{0xA803,0xA805,1},{0xA807,0xA80A,1},{0xA80C,0xA822,1},{0xA830,0xA835,2},{0xA840,0xA873,1},
{0xA882,0xA8B3,1},{0xA8D0,0xA8D9,2},{0xA8F2,0xA8F7,1},{0xA8FB,0xA8FB,1},{0xA8FD,0xA8FE,1},
{0xA900,0xA909,2},{0xA90A,0xA925,1},{0xA930,0xA946,1},{0xA960,0xA97C,1},{0xA984,0xA9B2,1},
{0xA9CF,0xA9CF,1},{0xA9D0,0xA9D9,2},{0xA9E0,0xA9E4,1},{0xA9E6,0xA9EF,1},{0xA9F0,0xA9F9,2},
{0xA9FA,0xA9FE,1},{0xAA00,0xAA28,1},{0xAA40,0xAA42,1},{0xAA44,0xAA4B,1},{0xAA50,0xAA59,2},
{0xAA60,0xAA76,1},{0xAA7A,0xAA7A,1},{0xAA7E,0xAAAF,1},{0xAAB1,0xAAB1,1},{0xAAB5,0xAAB6,1},
{0xAAB9,0xAABD,1},{0xAAC0,0xAAC0,1},{0xAAC2,0xAAC2,1},{0xAADB,0xAADD,1},{0xAAE0,0xAAEA,1},
{0xAAF2,0xAAF4,1},{0xAB01,0xAB06,1},{0xAB09,0xAB0E,1},{0xAB11,0xAB16,1},{0xAB20,0xAB26,1},
{0xAB28,0xAB2E,1},{0xAB30,0xAB5A,1},{0xAB5C,0xAB69,1},{0xAB70,0xABE2,1},{0xABF0,0xABF9,2},
{0xAC00,0xD7A3,1},{0xD7B0,0xD7C6,1},{0xD7CB,0xD7FB,1},{0xF900,0xFA6D,1},{0xFA70,0xFAD9,1},
{0xFB00,0xFB06,1},{0xFB13,0xFB17,1},{0xFB1D,0xFB1D,1},{0xFB1F,0xFB28,1},{0xFB2A,0xFB36,1},
{0xFB38,0xFB3C,1},{0xFB3E,0xFB3E,1},{0xFB40,0xFB41,1},{0xFB43,0xFB44,1},{0xFB46,0xFBB1,1},
{0xFBD3,0xFD3D,1},{0xFD50,0xFD8F,1},{0xFD92,0xFDC7,1},{0xFDF0,0xFDFB,1},{0xFE70,0xFE74,1},
{0xFE76,0xFEFC,1},{0xFF10,0xFF19,2},{0xFF21,0xFF3A,1},{0xFF41,0xFF5A,1},{0xFF66,0xFFBE,1},
{0xFFC2,0xFFC7,1},{0xFFCA,0xFFCF,1},{0xFFD2,0xFFD7,1},{0xFFDA,0xFFDC,1},{0x10000,0x1000B,1},
{0x1000D,0x10026,1},{0x10028,0x1003A,1},{0x1003C,0x1003D,1},{0x1003F,0x1004D,1},
{0x10050,0x1005D,1},{0x10080,0x100FA,1},{0x10107,0x10133,2},{0x10140,0x10178,2},
{0x1018A,0x1018B,2},{0x10280,0x1029C,1},{0x102A0,0x102D0,1},{0x102E1,0x102FB,2},
{0x10300,0x1031F,1},{0x10320,0x10323,2},{0x1032D,0x10340,1},{0x10341,0x10341,2},
{0x10342,0x10349,1},{0x1034A,0x1034A,2},{0x10350,0x10375,1},{0x10380,0x1039D,1},
{0x103A0,0x103C3,1},{0x103C8,0x103CF,1},{0x103D1,0x103D5,2},{0x10400,0x1049D,1},
{0x104A0,0x104A9,2},{0x104B0,0x104D3,1},{0x104D8,0x104FB,1},{0x10500,0x10527,1},
{0x10530,0x10563,1},{0x10570,0x1057A,1},{0x1057C,0x1058A,1},{0x1058C,0x10592,1},
{0x10594,0x10595,1},{0x10597,0x105A1,1},{0x105A3,0x105B1,1},{0x105B3,0x105B9,1},
{0x105BB,0x105BC,1},{0x105C0,0x105F3,1},{0x10600,0x10736,1},{0x10740,0x10755,1},
{0x10760,0x10767,1},{0x10780,0x10785,1},{0x10787,0x107B0,1},{0x107B2,0x107BA,1},
{0x10800,0x10805,1},{0x10808,0x10808,1},{0x1080A,0x10835,1},{0x10837,0x10838,1},
{0x1083C,0x1083C,1},{0x1083F,0x10855,1},{0x10858,0x1085F,2},{0x10860,0x10876,1},
{0x10879,0x1087F,2},{0x10880,0x1089E,1},{0x108A7,0x108AF,2},{0x108E0,0x108F2,1},
{0x108F4,0x108F5,1},{0x108FB,0x108FF,2},{0x10900,0x10915,1},{0x10916,0x1091B,2},
{0x10920,0x10939,1},{0x10980,0x109B7,1},{0x109BC,0x109BD,2},{0x109BE,0x109BF,1},
{0x109C0,0x109CF,2},{0x109D2,0x109FF,2},{0x10A00,0x10A00,1},{0x10A10,0x10A13,1},
{0x10A15,0x10A17,1},{0x10A19,0x10A35,1},{0x10A40,0x10A48,2},{0x10A60,0x10A7C,1},
{0x10A7D,0x10A7E,2},{0x10A80,0x10A9C,1},{0x10A9D,0x10A9F,2},{0x10AC0,0x10AC7,1},
{0x10AC9,0x10AE4,1},{0x10AEB,0x10AEF,2},{0x10B00,0x10B35,1},{0x10B40,0x10B55,1},
{0x10B58,0x10B5F,2},{0x10B60,0x10B72,1},{0x10B78,0x10B7F,2},{0x10B80,0x10B91,1},
{0x10BA9,0x10BAF,2},{0x10C00,0x10C48,1},{0x10C80,0x10CB2,1},{0x10CC0,0x10CF2,1},
{0x10CFA,0x10CFF,2},{0x10D00,0x10D23,1},{0x10D30,0x10D39,2},{0x10D40,0x10D49,2},
{0x10D4A,0x10D65,1},{0x10D6F,0x10D85,1},{0x10E60,0x10E7E,2},{0x10E80,0x10EA9,1},
{0x10EB0,0x10EB1,1},{0x10EC2,0x10EC4,1},{0x10F00,0x10F1C,1},{0x10F1D,0x10F26,2},
{0x10F27,0x10F27,1},{0x10F30,0x10F45,1},{0x10F51,0x10F54,2},{0x10F70,0x10F81,1},
{0x10FB0,0x10FC4,1},{0x10FC5,0x10FCB,2},{0x10FE0,0x10FF6,1},{0x11003,0x11037,1},
{0x11052,0x1106F,2},{0x11071,0x11072,1},{0x11075,0x11075,1},{0x11083,0x110AF,1},
{0x110D0,0x110E8,1},{0x110F0,0x110F9,2},{0x11103,0x11126,1},{0x11136,0x1113F,2},
{0x11144,0x11144,1},{0x11147,0x11147,1},{0x11150,0x11172,1},{0x11176,0x11176,1},
{0x11183,0x111B2,1},{0x111C1,0x111C4,1},{0x111D0,0x111D9,2},{0x111DA,0x111DA,1},
{0x111DC,0x111DC,1},{0x111E1,0x111F4,2},{0x11200,0x11211,1},{0x11213,0x1122B,1},
{0x1123F,0x11240,1},{0x11280,0x11286,1},{0x11288,0x11288,1},{0x1128A,0x1128D,1},
{0x1128F,0x1129D,1},{0x1129F,0x112A8,1},{0x112B0,0x112DE,1},{0x112F0,0x112F9,2},
{0x11305,0x1130C,1},{0x1130F,0x11310,1},{0x11313,0x11328,1},{0x1132A,0x11330,1},
{0x11332,0x11333,1},{0x11335,0x11339,1},{0x1133D,0x1133D,1},{0x11350,0x11350,1},
{0x1135D,0x11361,1},{0x11380,0x11389,1},{0x1138B,0x1138B,1},{0x1138E,0x1138E,1},
{0x11390,0x113B5,1},{0x113B7,0x113B7,1},{0x113D1,0x113D1,1},{0x113D3,0x113D3,1},
{0x11400,0x11434,1},{0x11447,0x1144A,1},{0x11450,0x11459,2},{0x1145F,0x11461,1},
{0x11480,0x114AF,1},{0x114C4,0x114C5,1},{0x114C7,0x114C7,1},{0x114D0,0x114D9,2},
{0x11580,0x115AE,1},{0x115D8,0x115DB,1},{0x11600,0x1162F,1},{0x11644,0x11644,1},
{0x11650,0x11659,2},{0x11680,0x116AA,1},{0x116B8,0x116B8,1},{0x116C0,0x116C9,2},
{0x116D0,0x116E3,2},{0x11700,0x1171A,1},{0x11730,0x1173B,2},{0x11740,0x11746,1},
{0x11800,0x1182B,1},{0x118A0,0x118DF,1},{0x118E0,0x118F2,2},{0x118FF,0x11906,1},
{0x11909,0x11909,1},{0x1190C,0x11913,1},{0x11915,0x11916,1},{0x11918,0x1192F,1},
{0x1193F,0x1193F,1},{0x11941,0x11941,1},{0x11950,0x11959,2},{0x119A0,0x119A7,1},
{0x119AA,0x119D0,1},{0x119E1,0x119E1,1},{0x119E3,0x119E3,1},{0x11A00,0x11A00,1},
{0x11A0B,0x11A32,1},{0x11A3A,0x11A3A,1},{0x11A50,0x11A50,1},{0x11A5C,0x11A89,1},
{0x11A9D,0x11A9D,1},{0x11AB0,0x11AF8,1},{0x11BC0,0x11BE0,1},{0x11BF0,0x11BF9,2},
{0x11C00,0x11C08,1},{0x11C0A,0x11C2E,1},{0x11C40,0x11C40,1},{0x11C50,0x11C6C,2},
{0x11C72,0x11C8F,1},{0x11D00,0x11D06,1},{0x11D08,0x11D09,1},{0x11D0B,0x11D30,1},
{0x11D46,0x11D46,1},{0x11D50,0x11D59,2},{0x11D60,0x11D65,1},{0x11D67,0x11D68,1},
{0x11D6A,0x11D89,1},{0x11D98,0x11D98,1},{0x11DA0,0x11DA9,2},{0x11EE0,0x11EF2,1},
{0x11F02,0x11F02,1},{0x11F04,0x11F10,1},{0x11F12,0x11F33,1},{0x11F50,0x11F59,2},
{0x11FB0,0x11FB0,1},{0x11FC0,0x11FD4,2},{0x12000,0x12399,1},{0x12400,0x1246E,2},
{0x12480,0x12543,1},{0x12F90,0x12FF0,1},{0x13000,0x1342F,1},{0x13441,0x13446,1},
{0x13460,0x143FA,1},{0x14400,0x14646,1},{0x16100,0x1611D,1},{0x16130,0x16139,2},
{0x16800,0x16A38,1},{0x16A40,0x16A5E,1},{0x16A60,0x16A69,2},{0x16A70,0x16ABE,1},
{0x16AC0,0x16AC9,2},{0x16AD0,0x16AED,1},{0x16B00,0x16B2F,1},{0x16B40,0x16B43,1},
{0x16B50,0x16B59,2},{0x16B5B,0x16B61,2},{0x16B63,0x16B77,1},{0x16B7D,0x16B8F,1},
{0x16D40,0x16D6C,1},{0x16D70,0x16D79,2},{0x16E40,0x16E7F,1},{0x16E80,0x16E96,2},
{0x16F00,0x16F4A,1},{0x16F50,0x16F50,1},{0x16F93,0x16F9F,1},{0x16FE0,0x16FE1,1},
{0x16FE3,0x16FE3,1},{0x17000,0x187F7,1},{0x18800,0x18CD5,1},{0x18CFF,0x18D08,1},
{0x1AFF0,0x1AFF3,1},{0x1AFF5,0x1AFFB,1},{0x1AFFD,0x1AFFE,1},{0x1B000,0x1B122,1},
{0x1B132,0x1B132,1},{0x1B150,0x1B152,1},{0x1B155,0x1B155,1},{0x1B164,0x1B167,1},
{0x1B170,0x1B2FB,1},{0x1BC00,0x1BC6A,1},{0x1BC70,0x1BC7C,1},{0x1BC80,0x1BC88,1},
{0x1BC90,0x1BC99,1},{0x1CCF0,0x1CCF9,2},{0x1D2C0,0x1D2D3,2},{0x1D2E0,0x1D2F3,2},
{0x1D360,0x1D378,2},{0x1D400,0x1D454,1},{0x1D456,0x1D49C,1},{0x1D49E,0x1D49F,1},
{0x1D4A2,0x1D4A2,1},{0x1D4A5,0x1D4A6,1},{0x1D4A9,0x1D4AC,1},{0x1D4AE,0x1D4B9,1},
{0x1D4BB,0x1D4BB,1},{0x1D4BD,0x1D4C3,1},{0x1D4C5,0x1D505,1},{0x1D507,0x1D50A,1},
{0x1D50D,0x1D514,1},{0x1D516,0x1D51C,1},{0x1D51E,0x1D539,1},{0x1D53B,0x1D53E,1},
{0x1D540,0x1D544,1},{0x1D546,0x1D546,1},{0x1D54A,0x1D550,1},{0x1D552,0x1D6A5,1},
{0x1D6A8,0x1D6C0,1},{0x1D6C2,0x1D6DA,1},{0x1D6DC,0x1D6FA,1},{0x1D6FC,0x1D714,1},
{0x1D716,0x1D734,1},{0x1D736,0x1D74E,1},{0x1D750,0x1D76E,1},{0x1D770,0x1D788,1},
{0x1D78A,0x1D7A8,1},{0x1D7AA,0x1D7C2,1},{0x1D7C4,0x1D7CB,1},{0x1D7CE,0x1D7FF,2},
{0x1DF00,0x1DF1E,1},{0x1DF25,0x1DF2A,1},{0x1E030,0x1E06D,1},{0x1E100,0x1E12C,1},
{0x1E137,0x1E13D,1},{0x1E140,0x1E149,2},{0x1E14E,0x1E14E,1},{0x1E290,0x1E2AD,1},
{0x1E2C0,0x1E2EB,1},{0x1E2F0,0x1E2F9,2},{0x1E4D0,0x1E4EB,1},{0x1E4F0,0x1E4F9,2},
{0x1E5D0,0x1E5ED,1},{0x1E5F0,0x1E5F0,1},{0x1E5F1,0x1E5FA,2},{0x1E7E0,0x1E7E6,1},
{0x1E7E8,0x1E7EB,1},{0x1E7ED,0x1E7EE,1},{0x1E7F0,0x1E7FE,1},{0x1E800,0x1E8C4,1},
{0x1E8C7,0x1E8CF,2},{0x1E900,0x1E943,1},{0x1E94B,0x1E94B,1},{0x1E950,0x1E959,2},
{0x1EC71,0x1ECAB,2},{0x1ECAD,0x1ECAF,2},{0x1ECB1,0x1ECB4,2},{0x1ED01,0x1ED2D,2},
{0x1ED2F,0x1ED3D,2},{0x1EE00,0x1EE03,1},{0x1EE05,0x1EE1F,1},{0x1EE21,0x1EE22,1},
{0x1EE24,0x1EE24,1},{0x1EE27,0x1EE27,1},{0x1EE29,0x1EE32,1},{0x1EE34,0x1EE37,1},
{0x1EE39,0x1EE39,1},{0x1EE3B,0x1EE3B,1},{0x1EE42,0x1EE42,1},{0x1EE47,0x1EE47,1},
{0x1EE49,0x1EE49,1},{0x1EE4B,0x1EE4B,1},{0x1EE4D,0x1EE4F,1},{0x1EE51,0x1EE52,1},
{0x1EE54,0x1EE54,1},{0x1EE57,0x1EE57,1},{0x1EE59,0x1EE59,1},{0x1EE5B,0x1EE5B,1},
{0x1EE5D,0x1EE5D,1},{0x1EE5F,0x1EE5F,1},{0x1EE61,0x1EE62,1},{0x1EE64,0x1EE64,1},
{0x1EE67,0x1EE6A,1},{0x1EE6C,0x1EE72,1},{0x1EE74,0x1EE77,1},{0x1EE79,0x1EE7C,1},
{0x1EE7E,0x1EE7E,1},{0x1EE80,0x1EE89,1},{0x1EE8B,0x1EE9B,1},{0x1EEA1,0x1EEA3,1},
{0x1EEA5,0x1EEA9,1},{0x1EEAB,0x1EEBB,1},{0x1F100,0x1F10C,2},{0x1FBF0,0x1FBF9,2},
{0x20000,0x2A6DF,1},{0x2A700,0x2B739,1},{0x2B740,0x2B81D,1},{0x2B820,0x2CEA1,1},
{0x2CEB0,0x2EBE0,1},{0x2EBF0,0x2EE5D,1},{0x2F800,0x2FA1D,1},{0x30000,0x3134A,1},
{0x31350,0x323AF,1}
};
/* >>unicode_tables end */
/* why: 2^24 ids is 64x the largest real vocab (256k) and keeps every id and count in an int */
#define AMK__TOK_MAX_TOKENS (1 << 24)
#define AMK__TOK_DEFAULT_SYSTEM "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
#define AMK__TOK_LLAMA3_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* A merge rule keyed by the ids of its two parts. rank < 0 marks an empty slot. */
typedef struct amk__tok_merge { uint64_t key; int rank, id; } amk__tok_merge;

struct amk_tokenizer {
    int n_tokens;
    char *arena;                 /* every token string, then every token's decoded bytes */
    size_t *str_off, *str_len;   /* [n_tokens] token string (byte alphabet) in arena */
    size_t *bytes_off, *bytes_len; /* [n_tokens] decoded bytes in arena */
    unsigned char *special;      /* [n_tokens] 1 = matched verbatim, decoded as its text */
    int *tok_slots; size_t tok_mask;           /* open addressing: string -> id, -1 empty */
    amk__tok_merge *merge_slots; size_t merge_mask; /* open addressing: (a, b) -> rank, result */
    int *specials; int n_specials; /* special ids grouped by first byte, longest first */
    int special_start[257];      /* specials[special_start[b] .. special_start[b+1]) start with b */
    int byte_id[256];            /* the one-byte token of each byte value, -1 if none */
    amk_pretok pretok;
    int bos, eos, add_bos, ignore_merges;
};

/* ---- the byte alphabet (GPT-2 encoder.py bytes_to_unicode) ----------------------------------- */

/* The code point standing for byte b: printable Latin-1 bytes stand for themselves, the other 68
   (0x00-0x20, 0x7F-0xA0, 0xAD) for U+0100, U+0101, ... in increasing byte order. */
AMK__FN uint32_t amk__tok_byte_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    if (b <= 0x20) return 0x100u + (uint32_t)b;             /* 33 bytes: U+0100..U+0120 */
    if (b <= 0xA0) return 0x121u + (uint32_t)(b - 0x7F);    /* 34 bytes: U+0121..U+0142 */
    return 0x143u;                                          /* 0xAD */
}
/* The byte a code point of the alphabet stands for, or -1. */
AMK__FN int amk__tok_cp_byte(uint32_t cp) {
    if (cp <= 0xFF) return amk__tok_byte_cp((int)cp) == cp ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* ---- UTF-8 and character classes ------------------------------------------------------------- */

#define AMK__TOK_INVALID 0xFFFFFFFFu /* the "code point" of a byte that is not valid UTF-8 */

/* Decodes the character at s[0..avail) (avail >= 1) strictly (>>impl_common's amk__utf8_seq_len: no
   overlongs, surrogates or values above U+10FFFF); returns its length, 1 for an invalid byte
   (*cp = AMK__TOK_INVALID). */
AMK__FN size_t amk__tok_utf8(const unsigned char *s, size_t avail, uint32_t *cp) {
    int n = amk__utf8_seq_len(s, avail), i;
    uint32_t v;
    if (n == 0) { *cp = AMK__TOK_INVALID; return 1; }
    v = n == 1 ? s[0] : s[0] & (0xFFu >> (n + 1)); /* the lead byte's payload bits */
    for (i = 1; i < n; i++) v = (v << 6) | (s[i] & 0x3Fu);
    *cp = v;
    return (size_t)n;
}

/* Character classes of the pre-tokenizer regexes. END is the end of the text (or, for SMOLLM's
   second pass, a \p{N} character, which the first pass already cut off). */
enum { AMK__TC_OTHER = 0, AMK__TC_L = AMK__UNI_L, AMK__TC_N = AMK__UNI_N, AMK__TC_W = AMK__UNI_W,
       AMK__TC_END = 4 };

AMK__FN int amk__tok_class_cp(uint32_t cp) {
    size_t lo = 0, hi = sizeof amk__uni_ranges / sizeof amk__uni_ranges[0];
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return AMK__TC_L;
        if (cp >= '0' && cp <= '9') return AMK__TC_N;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return AMK__TC_W;
        return AMK__TC_OTHER;
    }
    while (lo < hi) { /* the last range with lo <= cp */
        size_t mid = lo + (hi - lo) / 2;
        if (amk__uni_ranges[mid].lo <= cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && cp <= amk__uni_ranges[lo - 1].hi) return amk__uni_ranges[lo - 1].cls;
    return AMK__TC_OTHER;
}

/* A cursor over the text a pre-tokenizer matches. */
typedef struct amk__tok_text {
    const unsigned char *s;
    size_t len;
    int n_is_end; /* SMOLLM's second pass: \p{N} reads as the end */
} amk__tok_text;

/* The class of the character at pos (END past the text), its code point and length. */
AMK__FN int amk__tok_peek(const amk__tok_text *x, size_t pos, uint32_t *cp, size_t *n) {
    int c;
    if (pos >= x->len) { *cp = AMK__TOK_INVALID; *n = 0; return AMK__TC_END; }
    *n = amk__tok_utf8(x->s + pos, x->len - pos, cp);
    c = *cp == AMK__TOK_INVALID ? AMK__TC_OTHER : amk__tok_class_cp(*cp);
    if (c == AMK__TC_N && x->n_is_end) { *n = 0; return AMK__TC_END; }
    return c;
}

/* pos after the run of class-c characters starting at pos. */
AMK__FN size_t amk__tok_run(const amk__tok_text *x, size_t pos, int c) {
    uint32_t cp;
    size_t n;
    while (amk__tok_peek(x, pos, &cp, &n) == c) pos += n;
    return pos;
}

/* \s+(?!\S)|\s+ at pos (a whitespace character): the whole run when the text ends after it or
   the run is one character, else the run less its last character (left for the next piece). */
AMK__FN size_t amk__tok_space_run(const amk__tok_text *x, size_t pos) {
    uint32_t cp;
    size_t n, q = pos, last = pos;
    int c;
    while ((c = amk__tok_peek(x, q, &cp, &n)) == AMK__TC_W) { last = q; q += n; }
    if (c == AMK__TC_END || last == pos) return q;
    return last;
}

/* One match of 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at pos
   (not at the end); returns its end. */
AMK__FN size_t amk__tok_match_gpt2(const amk__tok_text *x, size_t pos) {
    const unsigned char *s = x->s;
    uint32_t cp, cp1;
    size_t n, n1, p = pos;
    int c = amk__tok_peek(x, pos, &cp, &n), c1;
    if (cp == '\'' && pos + 1 < x->len) {
        unsigned a = s[pos + 1], b = pos + 2 < x->len ? s[pos + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    }
    if (cp == ' ') {
        c1 = amk__tok_peek(x, pos + 1, &cp1, &n1);
        if (c1 == AMK__TC_L || c1 == AMK__TC_N || c1 == AMK__TC_OTHER) { c = c1; p = pos + 1; }
    }
    if (c == AMK__TC_L || c == AMK__TC_N || c == AMK__TC_OTHER) return amk__tok_run(x, p, c);
    return amk__tok_space_run(x, pos);
}

/* ASCII letter case fold for the (?i:...) contractions; U+017F LONG S folds to 's' in Unicode
   simple case folding, which the regex engines of HF tokenizers apply. */
AMK__FN uint32_t amk__tok_fold(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp == 0x17F) return 's';
    return cp;
}

/* One match of the Llama-3 regex (REFERENCE §3.3) at pos (not at the end); returns its end. */
AMK__FN size_t amk__tok_match_llama3(const amk__tok_text *x, size_t pos) {
    uint32_t cp, cp1, cp2;
    size_t n, n1, n2, p, q, nl_end = 0;
    int c = amk__tok_peek(x, pos, &cp, &n), c1, k;
    if (cp == '\'') { /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        amk__tok_peek(x, pos + 1, &cp1, &n1);
        cp1 = amk__tok_fold(cp1);
        if (cp1 == 's' || cp1 == 't' || cp1 == 'm' || cp1 == 'd') return pos + 1 + n1;
        if (cp1 == 'r' || cp1 == 'v' || cp1 == 'l') {
            amk__tok_peek(x, pos + 1 + n1, &cp2, &n2);
            cp2 = amk__tok_fold(cp2);
            if ((cp1 != 'l' && cp2 == 'e') || (cp1 == 'l' && cp2 == 'l')) return pos + 1 + n1 + n2;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c == AMK__TC_L) return amk__tok_run(x, pos, AMK__TC_L);
    if (c != AMK__TC_N && cp != '\r' && cp != '\n' &&
        amk__tok_peek(x, pos + n, &cp1, &n1) == AMK__TC_L)
        return amk__tok_run(x, pos + n, AMK__TC_L);
    /* \p{N}{1,3} */
    if (c == AMK__TC_N) {
        for (p = pos, k = 0; k < 3 && amk__tok_peek(x, p, &cp1, &n1) == AMK__TC_N; k++) p += n1;
        return p;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    p = pos;
    if (cp == ' ' && amk__tok_peek(x, pos + 1, &cp1, &n1) == AMK__TC_OTHER) { c = AMK__TC_OTHER; p = pos + 1; }
    if (c == AMK__TC_OTHER) {
        p = amk__tok_run(x, p, AMK__TC_OTHER);
        while (p < x->len && (x->s[p] == '\r' || x->s[p] == '\n')) p++;
        return p;
    }
    /* \s*[\r\n]+ : the whitespace run up to and including its last \r or \n */
    for (q = pos; (c1 = amk__tok_peek(x, q, &cp1, &n1)) == AMK__TC_W; q += n1)
        if (cp1 == '\r' || cp1 == '\n') nl_end = q + n1;
    if (nl_end) return nl_end;
    return amk__tok_space_run(x, pos);
}

/* The end of the pre-tokenizer piece that starts at pos < len. */
AMK__FN size_t amk__tok_next_piece(amk_pretok p, const unsigned char *s, size_t len, size_t pos) {
    amk__tok_text x;
    uint32_t cp;
    size_t n;
    x.s = s;
    x.len = len;
    x.n_is_end = 0;
    if (p == AMK_PRETOK_LLAMA3) return amk__tok_match_llama3(&x, pos);
    if (p == AMK_PRETOK_SMOLLM) {
        /* pass 1 (HF Digits, individual): every \p{N} alone; pass 2 sees the text between them */
        if (amk__tok_peek(&x, pos, &cp, &n) == AMK__TC_N) return pos + n;
        x.n_is_end = 1;
    }
    return amk__tok_match_gpt2(&x, pos);
}

AMK_API int amk_tokenizer_pretokenize(amk_pretok p, const char *text, size_t len, size_t *ends,
                                      int cap) {
    size_t pos = 0;
    int count = 0;
    if ((!text && len) || cap < 0 || (!ends && cap > 0)) return -1;
    if (p != AMK_PRETOK_SMOLLM && p != AMK_PRETOK_LLAMA3 && p != AMK_PRETOK_GPT2) return -1;
    while (pos < len) {
        pos = amk__tok_next_piece(p, (const unsigned char *)text, len, pos);
        if (count == INT_MAX) return -1;
        if (count < cap) ends[count] = pos;
        count++;
    }
    return count;
}

/* ---- hash maps ------------------------------------------------------------------------------- */

AMK__FN uint64_t amk__tok_hash(const char *s, size_t n) { /* FNV-1a */
    uint64_t h = 0xCBF29CE484222325ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}
AMK__FN size_t amk__tok_hash_pair(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull; /* why: Fibonacci hashing spreads consecutive ids */
    return (size_t)(key ^ (key >> 31));
}

/* Table size: a power of two at least twice n, so probes stay short. 0 on overflow. */
AMK__FN size_t amk__tok_table_size(size_t n) {
    size_t m = 16;
    while (m < 2 * n) {
        if (m > SIZE_MAX / 4) return 0;
        m *= 2;
    }
    return m;
}

AMK__FN int amk__tok_lookup(const amk_tokenizer *t, const char *s, size_t n) {
    size_t i = (size_t)amk__tok_hash(s, n) & t->tok_mask;
    int id;
    while ((id = t->tok_slots[i]) >= 0) {
        if (t->str_len[id] == n && memcmp(t->arena + t->str_off[id], s, n) == 0) return id;
        i = (i + 1) & t->tok_mask;
    }
    return -1;
}

AMK__FN const amk__tok_merge *amk__tok_merge_get(const amk_tokenizer *t, int a, int b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = amk__tok_hash_pair(key) & t->merge_mask;
    while (t->merge_slots[i].rank >= 0) {
        if (t->merge_slots[i].key == key) return &t->merge_slots[i];
        i = (i + 1) & t->merge_mask;
    }
    return NULL;
}

/* ---- building -------------------------------------------------------------------------------- */

/* One merge rule as two strings (not NUL-terminated). */
typedef struct amk__tok_pair { const char *a; size_t alen; const char *b; size_t blen; } amk__tok_pair;

/* What every front end (spec, tokenizer.json, GGUF) hands to amk__tok_build. */
typedef struct amk__tok_src {
    int n_tokens;
    const char *const *tokens; const size_t *token_lens; /* lens may be NULL: NUL-terminated */
    const unsigned char *special;                        /* [n_tokens] or NULL */
    int n_merges; const amk__tok_pair *merges;
    amk_pretok pretok;
    int bos, eos, add_bos, ignore_merges;
} amk__tok_src;

AMK_API void amk_tokenizer_free(amk_tokenizer *t) {
    if (!t) return;
    amk__free(t->arena);
    amk__free(t->str_off);
    amk__free(t->str_len);
    amk__free(t->bytes_off);
    amk__free(t->bytes_len);
    amk__free(t->special);
    amk__free(t->tok_slots);
    amk__free(t->merge_slots);
    amk__free(t->specials);
    amk__free(t);
}

/* Decodes token string s (byte alphabet) into out; a string with a character outside the
   alphabet decodes to itself, as HF's ByteLevel decoder does. Returns the length (<= n). */
AMK__FN size_t amk__tok_decode_string(const char *s, size_t n, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k = 0;
    while (i < n) {
        uint32_t cp;
        size_t m = amk__tok_utf8(u + i, n - i, &cp);
        int b = cp == AMK__TOK_INVALID ? -1 : amk__tok_cp_byte(cp);
        if (b < 0) {
            if (n) memcpy(out, s, n);
            return n;
        }
        out[k++] = (char)b;
        i += m;
    }
    return k;
}

/* Groups the special ids by first byte, longest first in each group, so encode tries the longest
   match at a position first. */
AMK__FN amk_result amk__tok_build_specials(amk_tokenizer *t) {
    int i, b, n = 0, *fill;
    int count[256];
    memset(count, 0, sizeof count);
    for (i = 0; i < t->n_tokens; i++)
        if (t->special[i] && t->bytes_len[i] > 0) { count[(unsigned char)t->arena[t->bytes_off[i]]]++; n++; }
    t->specials = (int *)amk__malloc((size_t)(n ? n : 1) * sizeof(int));
    fill = (int *)amk__malloc(256 * sizeof(int));
    if (!t->specials || !fill) { amk__free(fill); return AMK_ERR_OUT_OF_MEMORY; }
    t->special_start[0] = 0;
    for (b = 0; b < 256; b++) {
        t->special_start[b + 1] = t->special_start[b] + count[b];
        fill[b] = t->special_start[b];
    }
    for (i = 0; i < t->n_tokens; i++) {
        int j, lo;
        if (!t->special[i] || t->bytes_len[i] == 0) continue;
        b = (unsigned char)t->arena[t->bytes_off[i]];
        lo = t->special_start[b];
        /* insertion keeps the bucket longest first (buckets are tiny: a few specials share a byte) */
        for (j = fill[b]++; j > lo && t->bytes_len[t->specials[j - 1]] < t->bytes_len[i]; j--)
            t->specials[j] = t->specials[j - 1];
        t->specials[j] = i;
    }
    t->n_specials = n;
    amk__free(fill);
    return AMK_OK;
}

AMK__FN amk_result amk__tok_build(const amk__tok_src *src, amk_tokenizer **out, amk_diag *d) {
    amk_tokenizer *t;
    size_t total = 0, pos, m;
    int i, b;
    char *cat = NULL;
    size_t cat_cap = 0;
    *out = NULL;
    if (src->n_tokens <= 0 || src->n_tokens > AMK__TOK_MAX_TOKENS)
        return amk__fail(d, AMK_ERR_PARSE, "tokenizer: %d tokens (expected 1..%d)", src->n_tokens,
                         AMK__TOK_MAX_TOKENS);
    if (src->n_merges < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: negative merge count");
    if (src->bos < -1 || src->bos >= src->n_tokens || src->eos < -1 || src->eos >= src->n_tokens)
        return amk__fail(d, AMK_ERR_PARSE, "tokenizer: bos %d or eos %d is not a token id", src->bos,
                         src->eos);
    t = (amk_tokenizer *)amk__calloc(1, sizeof *t);
    if (!t) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    t->n_tokens = src->n_tokens;
    t->pretok = src->pretok;
    t->bos = src->bos;
    t->eos = src->eos;
    t->add_bos = src->add_bos ? 1 : 0;
    t->ignore_merges = src->ignore_merges ? 1 : 0;
    t->str_off = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->str_len = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->bytes_off = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->bytes_len = (size_t *)amk__calloc((size_t)t->n_tokens, sizeof(size_t));
    t->special = (unsigned char *)amk__calloc((size_t)t->n_tokens, 1);
    if (!t->str_off || !t->str_len || !t->bytes_off || !t->bytes_len || !t->special) goto oom;
    for (i = 0; i < t->n_tokens; i++) {
        const char *s = src->tokens[i];
        size_t n = src->token_lens ? src->token_lens[i] : (s ? strlen(s) : 0);
        uint64_t sum;
        if (!s && n) {
            amk_tokenizer_free(t);
            return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: token %d is NULL", i);
        }
        if (!amk__add_u64(total, n, &sum) || !amk__add_u64(sum, sum, &sum) || sum > SIZE_MAX - 1) {
            amk_tokenizer_free(t);
            return amk__fail(d, AMK_ERR_PARSE, "tokenizer: token strings too large");
        }
        t->str_len[i] = n;
        total += n;
        t->special[i] = (unsigned char)(src->special && src->special[i]);
    }
    /* strings, then decoded bytes (never longer than their string) */
    t->arena = (char *)amk__malloc(2 * total + 1);
    if (!t->arena) goto oom;
    for (i = 0, pos = 0; i < t->n_tokens; i++) {
        t->str_off[i] = pos;
        if (t->str_len[i]) memcpy(t->arena + pos, src->tokens[i], t->str_len[i]);
        pos += t->str_len[i];
    }
    for (i = 0; i < t->n_tokens; i++) {
        const char *s = t->arena + t->str_off[i];
        t->bytes_off[i] = pos;
        if (t->special[i]) {
            if (t->str_len[i]) memcpy(t->arena + pos, s, t->str_len[i]);
            t->bytes_len[i] = t->str_len[i];
        } else {
            t->bytes_len[i] = amk__tok_decode_string(s, t->str_len[i], t->arena + pos);
        }
        pos += t->bytes_len[i];
    }

    /* string -> id; on duplicates the lowest id wins */
    m = amk__tok_table_size((size_t)t->n_tokens);
    if (!m) goto oom;
    t->tok_mask = m - 1;
    t->tok_slots = (int *)amk__malloc(m * sizeof(int));
    if (!t->tok_slots) goto oom;
    memset(t->tok_slots, 0xFF, m * sizeof(int)); /* all -1 */
    for (i = 0; i < t->n_tokens; i++) {
        const char *s = t->arena + t->str_off[i];
        size_t h;
        if (amk__tok_lookup(t, s, t->str_len[i]) >= 0) continue;
        h = (size_t)amk__tok_hash(s, t->str_len[i]) & t->tok_mask;
        while (t->tok_slots[h] >= 0) h = (h + 1) & t->tok_mask;
        t->tok_slots[h] = i;
    }
    for (b = 0; b < 256; b++) {
        unsigned char u[4];
        size_t n = amk__utf8_put(u, amk__tok_byte_cp(b));
        t->byte_id[b] = amk__tok_lookup(t, (const char *)u, n);
    }

    /* (a, b) -> rank and result; a repeated pair keeps its first (lowest) rank */
    m = amk__tok_table_size((size_t)src->n_merges);
    if (!m) goto oom;
    t->merge_mask = m - 1;
    t->merge_slots = (amk__tok_merge *)amk__malloc(m * sizeof(amk__tok_merge));
    if (!t->merge_slots) goto oom;
    for (pos = 0; pos < m; pos++) {
        t->merge_slots[pos].key = 0;
        t->merge_slots[pos].rank = -1;
        t->merge_slots[pos].id = -1;
    }
    for (i = 0; i < src->n_merges; i++) {
        const amk__tok_pair *pr = &src->merges[i];
        int ia = amk__tok_lookup(t, pr->a, pr->alen), ib = amk__tok_lookup(t, pr->b, pr->blen), ir;
        uint64_t key;
        size_t h, need = pr->alen + pr->blen; /* both bounded by the input, no overflow */
        if (need > cat_cap) {
            char *nc = (char *)amk__realloc(cat, need);
            if (!nc) goto oom;
            cat = nc;
            cat_cap = need;
        }
        if (pr->alen) memcpy(cat, pr->a, pr->alen);
        if (pr->blen) memcpy(cat + pr->alen, pr->b, pr->blen);
        ir = amk__tok_lookup(t, cat, need);
        if (ia < 0 || ib < 0 || ir < 0) {
            amk__free(cat);
            amk_tokenizer_free(t);
            return amk__fail(d, AMK_ERR_PARSE, "tokenizer: merge %d ('%.*s' + '%.*s') names a token "
                             "not in the vocabulary", i, (int)(pr->alen > 64 ? 64 : pr->alen), pr->a,
                             (int)(pr->blen > 64 ? 64 : pr->blen), pr->b);
        }
        key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        if (amk__tok_merge_get(t, ia, ib)) continue;
        h = amk__tok_hash_pair(key) & t->merge_mask;
        while (t->merge_slots[h].rank >= 0) h = (h + 1) & t->merge_mask;
        t->merge_slots[h].key = key;
        t->merge_slots[h].rank = i;
        t->merge_slots[h].id = ir;
    }
    amk__free(cat);
    cat = NULL;
    if (amk__tok_build_specials(t) != AMK_OK) goto oom;
    *out = t;
    return AMK_OK;
oom:
    amk__free(cat);
    amk_tokenizer_free(t);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
}

/* Splits "A B" at the first space after the first byte (llama.cpp's rule; with exactly one space
   it is HF's too). 0 if there is none. */
AMK__FN int amk__tok_split_merge(const char *s, size_t n, amk__tok_pair *out) {
    size_t i;
    for (i = 1; i < n; i++) {
        if (s[i] == ' ') {
            out->a = s;
            out->alen = i;
            out->b = s + i + 1;
            out->blen = n - i - 1;
            return 1;
        }
    }
    return 0;
}

AMK_API amk_result amk_tokenizer_create(const amk_tokenizer_spec *s, amk_tokenizer **out,
                                        amk_diag *d) {
    amk__tok_src src;
    amk__tok_pair *pairs = NULL;
    unsigned char *special = NULL;
    amk_result r;
    int i;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!s || !s->tokens || s->n_tokens <= 0 || s->n_tokens > AMK__TOK_MAX_TOKENS ||
        s->n_merges < 0 || (s->n_merges > 0 && !s->merges))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: bad spec (NULL tokens or merges, or "
                         "a count out of range)");
    if (s->pretok != AMK_PRETOK_SMOLLM && s->pretok != AMK_PRETOK_LLAMA3 && s->pretok != AMK_PRETOK_GPT2)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: unknown pre-tokenizer %d", (int)s->pretok);
    pairs = (amk__tok_pair *)amk__malloc((size_t)(s->n_merges ? s->n_merges : 1) * sizeof *pairs);
    special = (unsigned char *)amk__calloc((size_t)s->n_tokens, 1);
    if (!pairs || !special) {
        amk__free(pairs);
        amk__free(special);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    for (i = 0; i < s->n_merges; i++) {
        const char *m = s->merges[i];
        size_t n = s->merge_lens ? s->merge_lens[i] : (m ? strlen(m) : 0);
        if (!m || !amk__tok_split_merge(m, n, &pairs[i])) {
            amk__free(pairs);
            amk__free(special);
            return amk__fail(d, AMK_ERR_PARSE, "tokenizer: merge %d is not \"A B\"", i);
        }
    }
    if (s->token_types)
        for (i = 0; i < s->n_tokens; i++) /* why: 3 control, 4 user-defined */
            special[i] = (unsigned char)(s->token_types[i] == 3 || s->token_types[i] == 4);
    src.n_tokens = s->n_tokens;
    src.tokens = s->tokens;
    src.token_lens = s->token_lens;
    src.special = special;
    src.n_merges = s->n_merges;
    src.merges = pairs;
    src.pretok = s->pretok;
    src.bos = s->bos_id;
    src.eos = s->eos_id;
    src.add_bos = s->add_bos;
    src.ignore_merges = s->ignore_merges;
    r = amk__tok_build(&src, out, d);
    amk__free(pairs);
    amk__free(special);
    return r;
}

/* ---- GGUF ------------------------------------------------------------------------------------ */

AMK_API amk_result amk_tokenizer_from_gguf(const amk_gguf *g, amk_tokenizer **out, amk_diag *d) {
    static const char *const k_tokens = "tokenizer.ggml.tokens", *const k_merges = "tokenizer.ggml.merges",
                             *const k_types = "tokenizer.ggml.token_type";
    amk__tok_src src;
    const char *model, *pre, **tokens = NULL;
    size_t len, *lens = NULL;
    unsigned char *special = NULL;
    amk__tok_pair *pairs = NULL;
    int64_t n_tok, n_merges, n_types, v;
    uint32_t et = 0;
    int i, flag;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!g) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: gguf is NULL");
    memset(&src, 0, sizeof src);
    model = amk_gguf_get_string(g, "tokenizer.ggml.model", &len);
    if (!model) return amk__fail(d, AMK_ERR_NOT_FOUND, "gguf: no tokenizer.ggml.model");
    if (len != 4 || memcmp(model, "gpt2", 4) != 0)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "gguf: tokenizer model '%.*s' is not supported "
                         "(only byte-level BPE, \"gpt2\")", (int)(len > 64 ? 64 : len), model);
    pre = amk_gguf_get_string(g, "tokenizer.ggml.pre", &len);
    if (!pre || (len == 4 && memcmp(pre, "gpt2", 4) == 0) || (len == 7 && memcmp(pre, "default", 7) == 0)) {
        src.pretok = AMK_PRETOK_GPT2;
    } else if (len == 6 && memcmp(pre, "smollm", 6) == 0) {
        src.pretok = AMK_PRETOK_SMOLLM;
    } else if ((len == 9 && memcmp(pre, "llama-bpe", 9) == 0) || (len == 6 && memcmp(pre, "llama3", 6) == 0) ||
               (len == 8 && memcmp(pre, "llama-v3", 8) == 0)) {
        src.pretok = AMK_PRETOK_LLAMA3;
        src.ignore_merges = 1;
    } else {
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "gguf: pre-tokenizer '%.*s' is not supported "
                         "(smollm, llama-bpe, gpt2)", (int)(len > 64 ? 64 : len), pre);
    }
    n_tok = amk_gguf_array_len(g, k_tokens, &et);
    if (n_tok < 1 || n_tok > AMK__TOK_MAX_TOKENS || et != AMK_GGUF_STRING)
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s is missing, empty, too long or not strings", k_tokens);
    n_merges = amk_gguf_array_len(g, k_merges, &et);
    if (n_merges < 0) n_merges = 0;
    else if (n_merges > INT_MAX || (n_merges > 0 && et != AMK_GGUF_STRING))
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s is too long or not strings", k_merges);
    n_types = amk_gguf_array_len(g, k_types, NULL);
    if (n_types >= 0 && n_types != n_tok)
        return amk__fail(d, AMK_ERR_PARSE, "gguf: %s has %lld entries for %lld tokens", k_types,
                         (long long)n_types, (long long)n_tok);
    tokens = (const char **)amk__malloc((size_t)n_tok * sizeof *tokens);
    lens = (size_t *)amk__malloc((size_t)n_tok * sizeof *lens);
    special = (unsigned char *)amk__calloc((size_t)n_tok, 1);
    pairs = (amk__tok_pair *)amk__malloc((size_t)(n_merges ? n_merges : 1) * sizeof *pairs);
    if (!tokens || !lens || !special || !pairs) {
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < (int)n_tok; i++) {
        tokens[i] = amk_gguf_array_string(g, k_tokens, i, &lens[i]);
        if (!tokens[i]) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is unreadable", k_tokens, i);
            goto done;
        }
        if (n_types < 0) continue;
        if (!amk_gguf_array_int(g, k_types, i, &v)) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is not an integer", k_types, i);
            goto done;
        }
        special[i] = (unsigned char)(v == 3 || v == 4); /* why: 3 control, 4 user-defined */
    }
    for (i = 0; i < (int)n_merges; i++) {
        const char *m = amk_gguf_array_string(g, k_merges, i, &len);
        if (!m || !amk__tok_split_merge(m, len, &pairs[i])) {
            r = amk__fail(d, AMK_ERR_PARSE, "gguf: %s[%d] is not \"A B\"", k_merges, i);
            goto done;
        }
    }
    src.n_tokens = (int)n_tok;
    src.tokens = tokens;
    src.token_lens = lens;
    src.special = special;
    src.n_merges = (int)n_merges;
    src.merges = pairs;
    src.bos = src.eos = -1;
    if (amk_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v)) src.bos = v >= 0 && v < n_tok ? (int)v : -2;
    if (amk_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v)) src.eos = v >= 0 && v < n_tok ? (int)v : -2;
    if (src.bos == -2 || src.eos == -2) {
        r = amk__fail(d, AMK_ERR_PARSE, "gguf: tokenizer.ggml.bos/eos_token_id is not a token id");
        goto done;
    }
    /* why: llama.cpp adds BOS for llama-bpe when the file does not say; others default to no */
    src.add_bos = src.pretok == AMK_PRETOK_LLAMA3;
    if (amk_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &flag)) src.add_bos = flag;
    r = amk__tok_build(&src, out, d);
done:
    amk__free(tokens);
    amk__free(lens);
    amk__free(special);
    amk__free(pairs);
    return r;
}

/* ---- tokenizer.json -------------------------------------------------------------------------- */

/* Fails with the location of JSON value v and a path. */
AMK__FN amk_result amk__tok_jfail(amk_diag *d, const amk__jval *v, const char *path, amk_result r,
                                  const char *fmt, ...) {
    if (d) {
        va_list ap;
        d->result = r;
        if (v) { d->line = v->line; d->col = v->col; }
        snprintf(d->path, sizeof d->path, "%s", path);
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return r;
}

AMK__FN int amk__tok_jstr_is(const amk__jval *v, const char *s) {
    return v && v->type == AMK__J_STRING && v->slen == strlen(s) && memcmp(v->s, s, v->slen) == 0;
}
/* obj[key] as a bool: 1/0, or def when absent or null. -1 when of another type. */
AMK__FN int amk__tok_jbool(const amk__jval *obj, const char *key, int def) {
    const amk__jval *v = amk__json_get(obj, key);
    if (!v || v->type == AMK__J_NULL) return def;
    return v->type == AMK__J_BOOL ? (int)v->i : -1;
}
/* obj[key] is absent, null, or an empty string. */
AMK__FN int amk__tok_jempty(const amk__jval *obj, const char *key) {
    const amk__jval *v = amk__json_get(obj, key);
    return !v || v->type == AMK__J_NULL || (v->type == AMK__J_STRING && v->slen == 0);
}

/* A ByteLevel pre-tokenizer object with add_prefix_space false and the given use_regex. */
AMK__FN int amk__tok_is_bytelevel(const amk__jval *v, int use_regex) {
    return v && amk__tok_jstr_is(amk__json_get(v, "type"), "ByteLevel") &&
           amk__tok_jbool(v, "add_prefix_space", 1) == 0 && amk__tok_jbool(v, "use_regex", 1) == use_regex;
}

/* Maps the pre_tokenizer object onto one of ours. */
AMK__FN amk_result amk__tok_json_pretok(const amk__jval *pt, amk_pretok *out, amk_diag *d) {
    const amk__jval *type = amk__json_get(pt, "type"), *list = amk__json_get(pt, "pretokenizers");
    if (amk__tok_is_bytelevel(pt, 1)) { *out = AMK_PRETOK_GPT2; return AMK_OK; }
    if (amk__tok_jstr_is(type, "Sequence") && list && list->type == AMK__J_ARRAY && list->n == 2) {
        const amk__jval *a = &list->items[0], *b = &list->items[1];
        if (amk__tok_jstr_is(amk__json_get(a, "type"), "Digits") &&
            amk__tok_jbool(a, "individual_digits", 0) == 1 && amk__tok_is_bytelevel(b, 1)) {
            *out = AMK_PRETOK_SMOLLM;
            return AMK_OK;
        }
        if (amk__tok_jstr_is(amk__json_get(a, "type"), "Split") &&
            amk__tok_jstr_is(amk__json_get(amk__json_get(a, "pattern"), "Regex"), AMK__TOK_LLAMA3_REGEX) &&
            amk__tok_jstr_is(amk__json_get(a, "behavior"), "Isolated") &&
            amk__tok_jbool(a, "invert", 0) == 0 && amk__tok_is_bytelevel(b, 0)) {
            *out = AMK_PRETOK_LLAMA3;
            return AMK_OK;
        }
    }
    return amk__tok_jfail(d, pt, "/pre_tokenizer", AMK_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer "
                          "'%.40s' is not supported (ByteLevel, Digits+ByteLevel, Llama-3 Split+ByteLevel)",
                          type && type->type == AMK__J_STRING ? type->s : "?");
}

/* The id of a special-token value of tokenizer_config.json: "text" or {"content": "text"}. */
AMK__FN int amk__tok_config_token(const amk_tokenizer *t, const amk__jval *v) {
    if (v && v->type == AMK__J_OBJECT) v = amk__json_get(v, "content");
    if (!v || v->type != AMK__J_STRING) return -1;
    return amk__tok_lookup(t, v->s, v->slen);
}

/* bos from a TemplateProcessing post-processor (possibly inside a Sequence) whose "single"
   template starts with a special token: Llama-3's way of adding <|begin_of_text|>. */
AMK__FN const amk__jval *amk__tok_template_bos(const amk__jval *pp) {
    const amk__jval *list, *single, *first;
    int i;
    if (!pp || pp->type != AMK__J_OBJECT) return NULL;
    list = amk__json_get(pp, "processors");
    if (amk__tok_jstr_is(amk__json_get(pp, "type"), "Sequence") && list && list->type == AMK__J_ARRAY) {
        for (i = 0; i < list->n; i++) {
            const amk__jval *r = amk__tok_template_bos(&list->items[i]);
            if (r) return r;
        }
        return NULL;
    }
    if (!amk__tok_jstr_is(amk__json_get(pp, "type"), "TemplateProcessing")) return NULL;
    single = amk__json_get(pp, "single");
    if (!single || single->type != AMK__J_ARRAY || single->n < 1) return NULL;
    first = amk__json_get(&single->items[0], "SpecialToken");
    return first ? amk__json_get(first, "id") : NULL;
}

AMK_API amk_result amk_tokenizer_from_json_text(const char *json, size_t json_len, const char *config,
                                                size_t config_len, amk_tokenizer **out, amk_diag *d) {
    amk__jdoc doc, cdoc;
    const amk__jval *root, *model, *vocab, *merges, *added, *pt, *v;
    amk__tok_src src;
    const char **tokens = NULL;
    size_t *lens = NULL;
    unsigned char *special = NULL;
    amk__tok_pair *pairs = NULL;
    int i, n_entries, max_id = -1, im;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!json) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: json is NULL");
    memset(&src, 0, sizeof src);
    memset(&cdoc, 0, sizeof cdoc);
    r = amk__json_parse(json, json_len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) return r;
    root = doc.root;
    model = amk__json_get(root, "model");
    if (!model || model->type != AMK__J_OBJECT) {
        r = amk__tok_jfail(d, root, "/model", AMK_ERR_PARSE, "tokenizer.json: no \"model\" object");
        goto done;
    }
    v = amk__json_get(model, "type");
    if ((v && !amk__tok_jstr_is(v, "BPE")) || amk__tok_jbool(model, "byte_fallback", 0) != 0 ||
        !amk__tok_jempty(model, "continuing_subword_prefix") ||
        !amk__tok_jempty(model, "end_of_word_suffix") ||
        !amk__tok_jempty(model, "dropout")) {
        r = amk__tok_jfail(d, model, "/model", AMK_ERR_UNSUPPORTED, "tokenizer.json: only a plain BPE model "
                           "is supported (no byte_fallback, subword prefix/suffix or dropout)");
        goto done;
    }
    v = amk__json_get(root, "normalizer");
    if (v && v->type != AMK__J_NULL) {
        r = amk__tok_jfail(d, v, "/normalizer", AMK_ERR_UNSUPPORTED,
                           "tokenizer.json: normalizers are not supported");
        goto done;
    }
    pt = amk__json_get(root, "pre_tokenizer");
    if (!pt || pt->type != AMK__J_OBJECT) {
        r = amk__tok_jfail(d, root, "/pre_tokenizer", AMK_ERR_UNSUPPORTED, "tokenizer.json: no pre_tokenizer "
                           "(a byte-level BPE needs one)");
        goto done;
    }
    if ((r = amk__tok_json_pretok(pt, &src.pretok, d)) != AMK_OK) goto done;
    im = amk__tok_jbool(model, "ignore_merges", 0);
    if (im < 0) {
        r = amk__tok_jfail(d, model, "/model/ignore_merges", AMK_ERR_PARSE,
                           "tokenizer.json: ignore_merges is not a bool");
        goto done;
    }
    src.ignore_merges = im;

    vocab = amk__json_get(model, "vocab");
    merges = amk__json_get(model, "merges");
    added = amk__json_get(root, "added_tokens");
    if (!vocab || vocab->type != AMK__J_OBJECT || (merges && merges->type != AMK__J_ARRAY) ||
        (added && added->type != AMK__J_ARRAY && added->type != AMK__J_NULL)) {
        r = amk__tok_jfail(d, model, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: model.vocab must be an "
                           "object, model.merges and added_tokens arrays");
        goto done;
    }
    if (vocab->n > AMK__TOK_MAX_TOKENS ||
        (added && added->type == AMK__J_ARRAY && added->n > AMK__TOK_MAX_TOKENS)) {
        r = amk__tok_jfail(d, vocab, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: more than %d tokens",
                           AMK__TOK_MAX_TOKENS);
        goto done;
    }
    n_entries = vocab->n + (added && added->type == AMK__J_ARRAY ? added->n : 0);
    for (i = 0; i < vocab->n; i++) {
        v = &vocab->items[i];
        if (v->type != AMK__J_INT || v->i < 0 || v->i >= n_entries) {
            r = amk__tok_jfail(d, v, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: id of token %d is not an "
                               "integer in [0, %d)", i, n_entries);
            goto done;
        }
        if (v->i > max_id) max_id = (int)v->i;
    }
    for (i = 0; added && added->type == AMK__J_ARRAY && i < added->n; i++) {
        const amk__jval *a = &added->items[i], *id = amk__json_get(a, "id"), *c = amk__json_get(a, "content");
        if (!id || id->type != AMK__J_INT || id->i < 0 || id->i >= n_entries || !c ||
            c->type != AMK__J_STRING) {
            r = amk__tok_jfail(d, a, "/added_tokens", AMK_ERR_PARSE, "tokenizer.json: added token %d "
                               "needs an id in [0, %d) and a string content", i, n_entries);
            goto done;
        }
        if (id->i > max_id) max_id = (int)id->i;
    }
    if (max_id < 0) {
        r = amk__tok_jfail(d, vocab, "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: empty vocabulary");
        goto done;
    }
    src.n_tokens = max_id + 1;
    tokens = (const char **)amk__calloc((size_t)src.n_tokens, sizeof *tokens);
    lens = (size_t *)amk__calloc((size_t)src.n_tokens, sizeof *lens);
    special = (unsigned char *)amk__calloc((size_t)src.n_tokens, 1);
    pairs = (amk__tok_pair *)amk__malloc((size_t)(merges && merges->n ? merges->n : 1) * sizeof *pairs);
    if (!tokens || !lens || !special || !pairs) {
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < vocab->n; i++) {
        int id = (int)vocab->items[i].i;
        if (tokens[id]) {
            r = amk__tok_jfail(d, &vocab->items[i], "/model/vocab", AMK_ERR_PARSE, "tokenizer.json: id %d is "
                               "given to two tokens", id);
            goto done;
        }
        tokens[id] = vocab->keys[i];
        lens[id] = vocab->key_lens[i];
    }
    for (i = 0; added && added->type == AMK__J_ARRAY && i < added->n; i++) {
        const amk__jval *a = &added->items[i], *c = amk__json_get(a, "content");
        int id = (int)amk__json_get(a, "id")->i;
        tokens[id] = c->s; /* an added token's content is its text, matched verbatim */
        lens[id] = c->slen;
        special[id] = 1;
    }
    for (i = 0; i < src.n_tokens; i++)
        if (!tokens[i]) tokens[i] = ""; /* a hole in the ids: an empty token encode never yields */
    for (i = 0; merges && i < merges->n; i++) {
        const amk__jval *m = &merges->items[i];
        if (m->type == AMK__J_STRING && amk__tok_split_merge(m->s, m->slen, &pairs[i])) continue;
        if (m->type == AMK__J_ARRAY && m->n == 2 && m->items[0].type == AMK__J_STRING &&
            m->items[1].type == AMK__J_STRING) {
            pairs[i].a = m->items[0].s;
            pairs[i].alen = m->items[0].slen;
            pairs[i].b = m->items[1].s;
            pairs[i].blen = m->items[1].slen;
            continue;
        }
        r = amk__tok_jfail(d, m, "/model/merges", AMK_ERR_PARSE, "tokenizer.json: merge %d is neither \"A B\" "
                           "nor [\"A\", \"B\"]", i);
        goto done;
    }
    src.tokens = tokens;
    src.token_lens = lens;
    src.special = special;
    src.n_merges = merges ? merges->n : 0;
    src.merges = pairs;
    src.bos = src.eos = -1;
    if ((r = amk__tok_build(&src, out, d)) != AMK_OK) goto done;

    v = amk__tok_template_bos(amk__json_get(root, "post_processor"));
    if (v && v->type == AMK__J_STRING) {
        (*out)->bos = amk__tok_lookup(*out, v->s, v->slen);
        (*out)->add_bos = (*out)->bos >= 0;
    }
    if (config) {
        const amk__jval *c;
        amk_diag cd;
        amk_diag_clear(&cd);
        if ((r = amk__json_parse(config, config_len, AMK_JSON_MAX_DEPTH, &cdoc, &cd)) != AMK_OK) {
            amk__tok_jfail(d, NULL, "tokenizer_config.json", r, "tokenizer_config.json:%d:%d: %s",
                           cd.line, cd.col, cd.message);
            if (d) { d->line = cd.line; d->col = cd.col; }
            goto fail_built;
        }
        c = cdoc.root;
        if (c->type != AMK__J_OBJECT) {
            r = amk__tok_jfail(d, c, "tokenizer_config.json", AMK_ERR_PARSE,
                               "tokenizer_config.json is not an object");
            goto fail_built;
        }
        if ((v = amk__json_get(c, "bos_token")) && v->type != AMK__J_NULL)
            (*out)->bos = amk__tok_config_token(*out, v);
        if ((v = amk__json_get(c, "eos_token")) && v->type != AMK__J_NULL)
            (*out)->eos = amk__tok_config_token(*out, v);
        im = amk__tok_jbool(c, "add_bos_token", (*out)->add_bos);
        if (im < 0) {
            r = amk__tok_jfail(d, amk__json_get(c, "add_bos_token"), "tokenizer_config.json/add_bos_token",
                               AMK_ERR_PARSE, "add_bos_token is not a bool");
            goto fail_built;
        }
        (*out)->add_bos = im;
    }
    goto done;
fail_built:
    amk_tokenizer_free(*out);
    *out = NULL;
done:
    amk__free(tokens);
    amk__free(lens);
    amk__free(special);
    amk__free(pairs);
    amk__json_free(&doc);
    if (cdoc.root || cdoc.arena) amk__json_free(&cdoc);
    return r;
}

AMK_API amk_result amk_tokenizer_from_json(const char *path, amk_tokenizer **out, amk_diag *d) {
    char *text = NULL, *ctext = NULL, *cpath;
    size_t n = 0, cn = 0, dir;
    const char *slash;
    amk_result r;
    FILE *f;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "tokenizer: path is NULL");
    if ((r = amk__read_file(path, &text, &n, d)) != AMK_OK) return r;
    slash = strrchr(path, '/');
    dir = slash ? (size_t)(slash - path) + 1 : 0;
    cpath = (char *)amk__malloc(dir + sizeof "tokenizer_config.json");
    if (!cpath) { amk__free(text); return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory"); }
    memcpy(cpath, path, dir);
    memcpy(cpath + dir, "tokenizer_config.json", sizeof "tokenizer_config.json");
    f = fopen(cpath, "rb"); /* optional: read it only when it is there */
    if (f) {
        fclose(f);
        r = amk__read_file(cpath, &ctext, &cn, d);
    }
    if (r == AMK_OK) r = amk_tokenizer_from_json_text(text, n, ctext, cn, out, d);
    if (r != AMK_OK && d && !d->path[0]) snprintf(d->path, sizeof d->path, "%s", ctext ? cpath : path);
    amk__free(cpath);
    amk__free(text);
    amk__free(ctext);
    return r;
}

/* ---- encoding -------------------------------------------------------------------------------- */

/* Scratch memory of one encode call, grown to the longest piece. */
typedef struct amk__tok_work {
    int *sym_id, *prev, *next;  /* [sym_cap] each: symbols in a linked list; sym_id -1 = merged away */
    int sym_cap;                /* prev and next point into sym_id's block */
    uint64_t *heap; int n_heap, heap_cap; /* candidate pairs: rank << 32 | left symbol, min first */
    char *str; int str_cap;     /* a piece in the byte alphabet (ignore_merges lookup) */
    int *ids; int cap;          /* the caller's output */
    int64_t total;              /* ids the full encoding has so far */
} amk__tok_work;

AMK__FN void amk__tok_emit(amk__tok_work *w, int id) {
    if (w->total < w->cap) w->ids[w->total] = id;
    w->total++;
}

/* Pushes the pair (left, next[left]) when a merge exists for it. 0 on out of memory. The key
   orders by rank, then leftmost (ties), as HF and llama.cpp do; 8 bytes keep the heap in cache. */
AMK__FN int amk__tok_push(const amk_tokenizer *t, amk__tok_work *w, int left) {
    const amk__tok_merge *m;
    uint64_t key;
    int i;
    if (left < 0 || w->next[left] < 0) return 1;
    m = amk__tok_merge_get(t, w->sym_id[left], w->sym_id[w->next[left]]);
    if (!m) return 1;
    if (!amk__grow((void **)&w->heap, &w->heap_cap, w->n_heap + 1, sizeof *w->heap)) return 0;
    key = ((uint64_t)(uint32_t)m->rank << 32) | (uint32_t)left;
    for (i = w->n_heap++; i > 0 && key < w->heap[(i - 1) / 4]; i = (i - 1) / 4) w->heap[i] = w->heap[(i - 1) / 4];
    w->heap[i] = key;
    return 1;
}

AMK__FN uint64_t amk__tok_pop(amk__tok_work *w) {
    uint64_t top = w->heap[0], last = w->heap[--w->n_heap];
    int i = 0, n = w->n_heap;
    for (;;) {
        int c = 4 * i + 1, j, end = c + 4 < n ? c + 4 : n;
        if (c >= n) break;
        for (j = c + 1; j < end; j++)
            if (w->heap[j] < w->heap[c]) c = j;
        if (w->heap[c] >= last) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

/* BPE of one piece: bytes -> one-byte symbols -> repeatedly merge the lowest-ranked adjacent pair
   (ties leftmost) -> ids. O(n log n) with a heap of candidate pairs, stale ones skipped. */
AMK__FN int amk__tok_bpe(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s, size_t n) {
    int i, k = 0;
    if (n > (size_t)INT_MAX / 4) return 0; /* why: keeps 2-byte-per-byte string sizes in an int */
    if (t->ignore_merges) {
        size_t j, m = 0;
        int id;
        if (!amk__grow((void **)&w->str, &w->str_cap, (int)(2 * n), 1)) return 0;
        for (j = 0; j < n; j++) m += amk__utf8_put((unsigned char *)w->str + m, amk__tok_byte_cp(s[j]));
        id = amk__tok_lookup(t, w->str, m);
        if (id >= 0 && !t->special[id]) { amk__tok_emit(w, id); return 1; }
    }
    if ((int)n > w->sym_cap) { /* sym_id, prev and next in one block of 3n ints */
        amk__free(w->sym_id);
        w->sym_id = (int *)amk__malloc(3 * n * sizeof(int));
        w->sym_cap = w->sym_id ? (int)n : 0;
        if (!w->sym_id) return 0;
    }
    w->prev = w->sym_id + w->sym_cap;
    w->next = w->prev + w->sym_cap;
    for (i = 0; i < (int)n; i++) { /* bytes with no token are dropped, as HF does with no unk */
        int id = t->byte_id[s[i]];
        if (id < 0) continue;
        w->sym_id[k] = id;
        w->prev[k] = k - 1;
        w->next[k] = k + 1;
        k++;
    }
    if (k == 0) return 1;
    w->next[k - 1] = -1;
    w->n_heap = 0;
    for (i = 0; i + 1 < k; i++)
        if (!amk__tok_push(t, w, i)) return 0;
    while (w->n_heap > 0) {
        uint64_t key = amk__tok_pop(w);
        int left = (int)(uint32_t)key, right = w->next[left];
        const amk__tok_merge *m;
        /* stale unless left still has a right neighbour and their merge is the one queued (a
           rank names one pair) */
        if (w->sym_id[left] < 0 || right < 0) continue;
        m = amk__tok_merge_get(t, w->sym_id[left], w->sym_id[right]);
        if (!m || (uint64_t)(uint32_t)m->rank != key >> 32) continue;
        w->sym_id[left] = m->id;
        w->sym_id[right] = -1;
        w->next[left] = w->next[right];
        if (w->next[right] >= 0) w->prev[w->next[right]] = left;
        if (!amk__tok_push(t, w, w->prev[left]) || !amk__tok_push(t, w, left)) return 0;
    }
    for (i = 0; i >= 0; i = w->next[i]) amk__tok_emit(w, w->sym_id[i]); /* symbol 0 is never merged away */
    return 1;
}

/* Pre-tokenizes and encodes a stretch of text that holds no special token. */
AMK__FN int amk__tok_encode_plain(const amk_tokenizer *t, amk__tok_work *w, const unsigned char *s,
                                  size_t len) {
    size_t pos = 0;
    while (pos < len) {
        size_t end = amk__tok_next_piece(t->pretok, s, len, pos);
        if (!amk__tok_bpe(t, w, s + pos, end - pos)) return 0;
        pos = end;
    }
    return 1;
}

/* The longest special token at s[0..avail), or -1. */
AMK__FN int amk__tok_special_at(const amk_tokenizer *t, const unsigned char *s, size_t avail) {
    int j, b = s[0];
    for (j = t->special_start[b]; j < t->special_start[b + 1]; j++) {
        int id = t->specials[j];
        size_t n = t->bytes_len[id];
        if (n <= avail && memcmp(s, t->arena + t->bytes_off[id], n) == 0) return id;
    }
    return -1;
}

AMK_API int amk_tokenizer_encode(const amk_tokenizer *t, const char *text, size_t len, int add_bos,
                                 int *ids, int cap) {
    const unsigned char *s = (const unsigned char *)text;
    amk__tok_work w;
    size_t pos = 0, start = 0;
    int ok = 1;
    if (!t || (!text && len) || cap < 0 || (!ids && cap > 0)) return -1;
    memset(&w, 0, sizeof w);
    w.ids = ids;
    w.cap = cap;
    if ((add_bos < 0 ? t->add_bos : add_bos) && t->bos >= 0) amk__tok_emit(&w, t->bos);
    while (ok && pos < len) {
        int id = t->n_specials ? amk__tok_special_at(t, s + pos, len - pos) : -1;
        if (id < 0) { pos++; continue; }
        ok = amk__tok_encode_plain(t, &w, s + start, pos - start);
        amk__tok_emit(&w, id);
        pos += t->bytes_len[id];
        start = pos;
    }
    if (ok) ok = amk__tok_encode_plain(t, &w, s + start, len - start);
    amk__free(w.sym_id);
    amk__free(w.heap);
    amk__free(w.str);
    if (!ok || w.total > INT_MAX) return -1;
    return (int)w.total;
}

/* ---- decoding and queries -------------------------------------------------------------------- */

AMK_API const char *amk_tokenizer_token_bytes(const amk_tokenizer *t, int id, size_t *len) {
    if (!t || id < 0 || id >= t->n_tokens) return NULL;
    if (len) *len = t->bytes_len[id];
    return t->arena + t->bytes_off[id];
}

AMK_API int amk_tokenizer_decode(const amk_tokenizer *t, int id, char *buf, size_t cap) {
    size_t n;
    const char *b = amk_tokenizer_token_bytes(t, id, &n);
    if (!b || n > cap || n > INT_MAX || (n && !buf)) return -1;
    if (n) memcpy(buf, b, n);
    return (int)n;
}

AMK_API int amk_tokenizer_n_vocab(const amk_tokenizer *t) { return t ? t->n_tokens : 0; }
AMK_API int amk_tokenizer_bos(const amk_tokenizer *t) { return t ? t->bos : -1; }
AMK_API int amk_tokenizer_eos(const amk_tokenizer *t) { return t ? t->eos : -1; }
AMK_API int amk_tokenizer_add_bos(const amk_tokenizer *t) { return t ? t->add_bos : 0; }
AMK_API amk_pretok amk_tokenizer_pretok(const amk_tokenizer *t) { return t ? t->pretok : AMK_PRETOK_GPT2; }
AMK_API int amk_tokenizer_is_special(const amk_tokenizer *t, int id) {
    return t && id >= 0 && id < t->n_tokens && t->special[id];
}
AMK_API int amk_tokenizer_token_id(const amk_tokenizer *t, const char *text) {
    if (!t || !text) return -1;
    return amk__tok_lookup(t, text, strlen(text));
}
AMK_API int amk_tokenizer_byte_token(const amk_tokenizer *t, int b) {
    return t && b >= 0 && b < 256 ? t->byte_id[b] : -1;
}

AMK_API int amk_tokenizer_chat_prompt(const amk_tokenizer *t, const char *system, const char *user,
                                      char *buf, size_t cap) {
    amk__sb sb;
    int n;
    if (!user || (t && amk_tokenizer_token_id(t, "<|im_start|>") < 0)) return -1;
    memset(&sb, 0, sizeof sb);
    amk__sb_puts(&sb, "<|im_start|>system\n");
    amk__sb_puts(&sb, system ? system : AMK__TOK_DEFAULT_SYSTEM);
    amk__sb_puts(&sb, "<|im_end|>\n<|im_start|>user\n");
    amk__sb_puts(&sb, user);
    amk__sb_puts(&sb, "<|im_end|>\n<|im_start|>assistant\n");
    if (sb.oom || sb.len > INT_MAX) { amk__sb_free(&sb); return -1; }
    n = (int)sb.len;
    if (buf && cap) {
        size_t k = sb.len < cap ? sb.len : cap - 1;
        memcpy(buf, sb.p, k);
        buf[k] = 0;
    }
    amk__sb_free(&sb);
    return n;
}

/* ==== >>impl_cuda ============================================================================= */
#if !defined(_WIN32)
#include <dlfcn.h>
#include <time.h>
#endif

/* The few driver types AMK needs (cuda.h is not included: hosts build without CUDA). */
typedef int amk__CUresult;
typedef int amk__CUdevice;
typedef void *amk__CUcontext;
typedef void *amk__CUmodule;
typedef void *amk__CUfunction;
typedef void *amk__CUstream;
typedef void *amk__CUevent;
typedef unsigned long long amk__CUdeviceptr;

/* cuda.h enum values (CUDA 12/13; stable ABI). */
#define AMK__CUDA_SUCCESS 0
#define AMK__CUDA_ERROR_NOT_READY 600
#define AMK__CU_DEV_ATTR_MAX_THREADS_PER_BLOCK 1
#define AMK__CU_DEV_ATTR_MULTIPROCESSOR_COUNT 16
#define AMK__CU_DEV_ATTR_CC_MAJOR 75
#define AMK__CU_DEV_ATTR_CC_MINOR 76
#define AMK__CU_DEV_ATTR_L2_CACHE_SIZE 38
#define AMK__CU_DEV_ATTR_COOPERATIVE_LAUNCH 95
#define AMK__CU_DEV_ATTR_SMEM_PER_BLOCK_OPTIN 97
#define AMK__CU_FUNC_ATTR_MAX_THREADS_PER_BLOCK 0
#define AMK__CU_FUNC_ATTR_SHARED_SIZE_BYTES 1
#define AMK__CU_FUNC_ATTR_NUM_REGS 4
#define AMK__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define AMK__CU_JIT_ERROR_LOG_BUFFER 5
#define AMK__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define AMK__CU_STREAM_NON_BLOCKING 1
#define AMK__CU_EVENT_DEFAULT 0

/* The device VM's limits (amk_vm.cuh, amk_ops.cuh); its status words and timing records are
   amk_ir.h's AMK_VM_STATUS_* and amk_vm_timing_t. */
#define AMK__VM_MAX_THREADS 512 /* AMK_VM_MAX_THREADS: the kernel's launch bound */
#define AMK__VM_ATTN_MAX_HEAD_DIM 256 /* 32 lanes x AMK_ATTN_DPL accumulators */
#define AMK__VM_BW_THREADS 1024 /* AMK_BW_THREADS: amk_bw_read/amk_bw_copy's launch bound */
#define AMK__VM_FILL_THREADS 256 /* AMK_FILL_THREADS: amk_fill_random/amk_fill_value's */

#define AMK__CUDA_ALIGN 256            /* why: every buffer 16-byte-vector and cache-line aligned */
#define AMK__CUDA_DEFAULT_TIMEOUT_MS 10000.0
#define AMK__CUDA_ABORT_GRACE_MS 5000.0 /* why: an aborted VM leaves in microseconds; be generous */

/* The driver entry points AMK uses: X(field, exported symbol, parameter list). */
#define AMK__CUDA_FNS(X) \
    X(Init, "cuInit", (unsigned int)) \
    X(DriverGetVersion, "cuDriverGetVersion", (int *)) \
    X(DeviceGetCount, "cuDeviceGetCount", (int *)) \
    X(DeviceGet, "cuDeviceGet", (amk__CUdevice *, int)) \
    X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, amk__CUdevice)) \
    X(DeviceGetName, "cuDeviceGetName", (char *, int, amk__CUdevice)) \
    X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (amk__CUcontext *, amk__CUdevice)) \
    X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (amk__CUdevice)) \
    X(CtxPushCurrent, "cuCtxPushCurrent_v2", (amk__CUcontext)) \
    X(CtxPopCurrent, "cuCtxPopCurrent_v2", (amk__CUcontext *)) \
    X(ModuleLoadDataEx, "cuModuleLoadDataEx", (amk__CUmodule *, const void *, unsigned int, int *, void **)) \
    X(ModuleUnload, "cuModuleUnload", (amk__CUmodule)) \
    X(ModuleGetFunction, "cuModuleGetFunction", (amk__CUfunction *, amk__CUmodule, const char *)) \
    X(FuncSetAttribute, "cuFuncSetAttribute", (amk__CUfunction, int, int)) \
    X(FuncGetAttribute, "cuFuncGetAttribute", (int *, int, amk__CUfunction)) \
    X(OccupancyMaxActiveBlocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor", (int *, amk__CUfunction, int, size_t)) \
    X(MemAlloc, "cuMemAlloc_v2", (amk__CUdeviceptr *, size_t)) \
    X(MemFree, "cuMemFree_v2", (amk__CUdeviceptr)) \
    X(MemAllocHost, "cuMemAllocHost_v2", (void **, size_t)) \
    X(MemFreeHost, "cuMemFreeHost", (void *)) \
    X(MemcpyHtoD, "cuMemcpyHtoD_v2", (amk__CUdeviceptr, const void *, size_t)) \
    X(MemcpyDtoH, "cuMemcpyDtoH_v2", (void *, amk__CUdeviceptr, size_t)) \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (amk__CUdeviceptr, const void *, size_t, amk__CUstream)) \
    X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, amk__CUdeviceptr, size_t, amk__CUstream)) \
    X(MemsetD8, "cuMemsetD8_v2", (amk__CUdeviceptr, unsigned char, size_t)) \
    X(MemsetD8Async, "cuMemsetD8Async", (amk__CUdeviceptr, unsigned char, size_t, amk__CUstream)) \
    X(StreamCreate, "cuStreamCreate", (amk__CUstream *, unsigned int)) \
    X(StreamDestroy, "cuStreamDestroy_v2", (amk__CUstream)) \
    X(StreamQuery, "cuStreamQuery", (amk__CUstream)) \
    X(StreamSynchronize, "cuStreamSynchronize", (amk__CUstream)) \
    X(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", (amk__CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, amk__CUstream, void **)) \
    X(LaunchKernel, "cuLaunchKernel", (amk__CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, amk__CUstream, void **, void **)) \
    X(EventCreate, "cuEventCreate", (amk__CUevent *, unsigned int)) \
    X(EventDestroy, "cuEventDestroy_v2", (amk__CUevent)) \
    X(EventRecord, "cuEventRecord", (amk__CUevent, amk__CUstream)) \
    X(EventSynchronize, "cuEventSynchronize", (amk__CUevent)) \
    X(EventElapsedTime, "cuEventElapsedTime_v2", (float *, amk__CUevent, amk__CUevent)) \
    X(GetErrorName, "cuGetErrorName", (amk__CUresult, const char **)) \
    X(GetErrorString, "cuGetErrorString", (amk__CUresult, const char **))

typedef struct amk__cuda_api {
#define AMK__CU_FIELD(name, sym, params) amk__CUresult (*name) params;
    AMK__CUDA_FNS(AMK__CU_FIELD)
#undef AMK__CU_FIELD
} amk__cuda_api;

/* One task's L2 prefetches ahead of a later task (amk__cuda_plan_ahead); bytes 0 = none. */
typedef struct amk__cuda_ahead {
    uint64_t addr[AMK_VM_PREFETCHES];
    uint32_t bytes[AMK_VM_PREFETCHES];
} amk__cuda_ahead;

struct amk_cuda {
    void *lib;                  /* dlopen handle */
    amk__cuda_api api;
    amk__CUdevice dev;
    amk__CUcontext ctx;         /* the primary context, retained */
    amk__CUmodule mod;
    amk__CUmodule mod_chain;    /* the chained-steps build of the same kind (NULL: none in the image) */
    amk__CUfunction fn_chain;   /* its amk_vm_chain, or NULL */
    amk__CUfunction fn;
    amk__CUfunction fn_bw_read, fn_bw_copy, fn_fill_random, fn_fill_value; /* NULL if the image lacks one */
    amk__CUstream stream;       /* the launch */
    amk__CUstream ctl;          /* the abort write: a second stream, so it passes the kernel */
    amk__CUdeviceptr arena;
    uint64_t arena_bytes;
    uint32_t *host_status;      /* pinned AMK_VM_STATUS_WORDS(num_sms): the status words after a run */
    uint32_t *host_abort;       /* pinned [1]: the value the watchdog writes */
    unsigned char *host_io;     /* pinned staging of amk_cuda_run_io, host_io_cap bytes (or NULL) */
    size_t host_io_cap;
    amk_program_t prog;         /* device addresses; the kernel's one parameter */
    int n_buffers, n_tasks, n_counters, num_sms, threads, timing_on, timed_run;
    /* the epoch scheme (amk_program_t.epoch): the last launch's epoch, and whether the counters
       and status words need zeroing before the next (no launch yet, or one not seen to finish
       cleanly) */
    uint32_t epoch;
    int counters_dirty;
    /* chained steps (amk_cuda_set_chain): the buffers, steps a launch (1: off), the block that
       feeds, the blocks with a queue, the step joins since the status words were zeroed, the
       tokens' device array ([cap] I32), the last amk_cuda_run_chain's start (have_start: one ran),
       and the last launch's first epoch and steps (the stuck report) */
    amk_cuda_chain chain;
    int chain_feeder, chain_blocks, chain_have_start;
    uint32_t chain_base;
    int32_t chain_token0, chain_pos0;
    amk__CUdeviceptr chain_dev;
    int chain_cap, launch_steps;
    uint32_t launch_epoch;
    int64_t smem_bytes;
    uint64_t *buf_off;          /* [n_buffers] offset of each buffer's storage in the arena */
    int64_t *buf_bytes;         /* [n_buffers] its size in its dtype */
    amk_buffer_t *bufs;         /* [n_buffers] host copy of the device buffer table */
    amk_instruction_t *ins;     /* [n_tasks] host copy of the instruction table */
    int32_t *queue_off;         /* [num_sms + 1] */
    int32_t *queue;             /* [n_tasks] */
    int32_t *queue_pos;         /* [n_tasks] task i's entry in queue */
    amk_vm_ctx_t *ctxs;         /* [n_tasks] host copy of the context table (queue order) */
    amk__cuda_ahead *ahead;     /* [n_tasks] the prefetch ahead's pieces, or NULL (AMK_VM_AHEAD_BYTES 0) */
    int no_prefetch;            /* the program's config has pipelining_depth 0: no L2 prefetches */
    uint64_t off_counters, off_status, off_timing, off_contexts;
    /* the lean attention's tensor maps (amk__cuda_kv_maps): cuTensorMapEncodeTiled (NULL: the
       driver lacks it), per task its pair of maps or -1, per pair its rows and first task */
    amk__CUresult (*TensorMapEncodeTiled)(void *, int, uint32_t, void *, const uint64_t *, const uint64_t *,
                                          const uint32_t *, const uint32_t *, int, int, int, int);
    int32_t *kv_pair;
    int32_t *kv_pair_task;      /* the first task of each pair (its geometry) */
    int32_t *kv_pair_rows;      /* the rows of each pair's box */
    int n_kv_pairs;
    uint64_t off_kv_maps;
    amk_cuda_info info;
};

/* ---- driver plumbing ------------------------------------------------------------------------ */

/* Fills d with a failed driver call's name and description. */
AMK__FN amk_result amk__cuda_err(const amk_cuda *c, amk_diag *d, amk__CUresult r, const char *what) {
    const char *name = NULL, *desc = NULL;
    if (c->api.GetErrorName) c->api.GetErrorName(r, &name);
    if (c->api.GetErrorString) c->api.GetErrorString(r, &desc);
    if (!name) name = "CUDA_ERROR_UNKNOWN";
    if (d) snprintf(d->cuda_error, sizeof d->cuda_error, "%s", name);
    return amk__fail(d, AMK_ERR_CUDA, "%s failed: %s (%d): %s", what, name, r, desc ? desc : "");
}

#define AMK__CU_TRY(c, d, call, what) do { amk__CUresult amk__r_ = (c)->api.call; \
    if (amk__r_ != AMK__CUDA_SUCCESS) return amk__cuda_err((c), (d), amk__r_, (what)); } while (0)
/* The same where cleanup is due (c, d and an amk_result r in scope): on failure r gets the error
   and control goes to label. */
#define AMK__CU_GOTO(call, what, label) do { amk__CUresult amk__g_ = c->api.call; \
    if (amk__g_ != AMK__CUDA_SUCCESS) { r = amk__cuda_err(c, d, amk__g_, (what)); goto label; } } while (0)

/* Opens libcuda and resolves every entry point; AMK_ERR_NO_DRIVER if it is not there. */
AMK__FN amk_result amk__cuda_open_driver(amk_cuda *c, amk_diag *d) {
#if defined(_WIN32)
    AMK__UNUSED(c);
    return amk__fail(d, AMK_ERR_NO_DRIVER, "the CUDA runtime is not ported to Windows yet");
#else
    const char *path = getenv("AMK_CUDA_LIBRARY");
    void *f;
    c->lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib && !(path && *path)) c->lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        const char *e = dlerror();
        return amk__fail(d, AMK_ERR_NO_DRIVER, "no CUDA driver: cannot open %s (%s)",
                         path && *path ? path : "libcuda.so.1", e ? e : "not found");
    }
    /* why: memcpy, not a cast: ISO C has no conversion from void * to a function pointer.
       cuEventElapsedTime_v2 is CUDA 12.8+; older drivers have the same call without the suffix */
#define AMK__CU_LOAD(name, sym, params) \
    f = dlsym(c->lib, sym); \
    if (!f && strcmp(sym, "cuEventElapsedTime_v2") == 0) f = dlsym(c->lib, "cuEventElapsedTime"); \
    if (!f) return amk__fail(d, AMK_ERR_NO_DRIVER, "the CUDA driver lacks %s (too old?)", sym); \
    memcpy(&c->api.name, &f, sizeof f);
    AMK__CUDA_FNS(AMK__CU_LOAD)
#undef AMK__CU_LOAD
    f = dlsym(c->lib, "cuTensorMapEncodeTiled"); /* optional (CUDA 12.0+): without it no task copies by tensor maps */
    if (f) memcpy(&c->TensorMapEncodeTiled, &f, sizeof f);
    return AMK_OK;
#endif
}

AMK__FN double amk__cuda_now_ms(void) {
#if defined(_WIN32)
    return 0.0;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
#endif
}

AMK__FN void amk__cuda_sleep_us(long us) {
#if !defined(_WIN32)
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    nanosleep(&ts, NULL);
#else
    AMK__UNUSED(us);
#endif
}

/* Makes c's context current for one public call; amk__cuda_leave restores the caller's. */
AMK__FN amk_result amk__cuda_enter(amk_cuda *c, amk_diag *d) {
    AMK__CU_TRY(c, d, CtxPushCurrent(c->ctx), "cuCtxPushCurrent");
    return AMK_OK;
}
AMK__FN void amk__cuda_leave(amk_cuda *c) {
    amk__CUcontext old;
    c->api.CtxPopCurrent(&old);
}

/* ---- checking a program for the device ---------------------------------------------------------- */

/* The bytes of an accumulating op's nt rows of H elements of dtype dt (RMSNORM_MLP's W_downT,
   ATTENTION_O's W_oT) that the device stages (AMK_ROWS_STAGE_BYTES, the device's rule too): F32,
   F16 or BF16 rows only. */
AMK__FN int64_t amk__rows_stage_bytes(int dt, int64_t H, int64_t nt) {
    const int64_t esz = dt == AMK_DTYPE_F32 || dt == AMK_DTYPE_F16 || dt == AMK_DTYPE_BF16 ? amk_dtype_bits(dt) / 8 : 0;
    return AMK_ROWS_STAGE_BYTES(esz, H, nt);
}

/* The bytes of ATTENTION_O task t's results in shared memory (its kv heads' query heads, F32). */
AMK__FN int64_t amk__attn_o_ys_bytes(const amk_task *t) {
    const int64_t nkv = amk__param_i(t, "n_kv_heads", 1), grp = amk__param_i(t, "n_heads", 0) / (nkv > 0 ? nkv : 1);
    return AMK_ATTN_O_YS_BYTES(amk__param_i(t, "head_dim", 0), amk__param_i(t, "N_tile", 0) * grp);
}

/* The least dynamic shared memory task t runs with (0: it stages nothing): a GEMV-family tile one
   staged row of x, + the tile and its RoPE cos/sin (amk_op_norm_gemv); decode attention one chunk
   of 32 rows at 4 bytes an element (ATTENTION_O: + its results); ATTENTION_TILE a head of q a
   warp. */
AMK__FN int64_t amk__cuda_smem_least(const amk_task *t, int threads) {
    const int64_t K = amk__param_i(t, "K", 0), hd = amk__param_i(t, "head_dim", 0);
    switch (t->op) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE: case AMK_OP_RMSNORM_SWIGLU: return 4 * K;
    case AMK_OP_RMSNORM_MLP: return 4 * (K + amk__param_i(t, "N_tile", 0)); /* + the tile's values */
    case AMK_OP_RMSNORM_GEMV:
        return 4 * (K + ((uint32_t)amk__param_i(t, "flags", 0) & AMK_GEMV_FLAG_ROPE ? 2 * amk__param_i(t, "N_tile", 0) : 0));
    case AMK_OP_ATTENTION_DECODE: return AMK_ATTN_DECODE_LEAST(hd, threads);
    case AMK_OP_ATTENTION_O: return AMK_ATTN_DECODE_LEAST(hd, threads) + amk__attn_o_ys_bytes(t) + 16;
    case AMK_OP_ATTENTION_TILE: return (int64_t)(threads / 32) * hd * 4;
    default: return 0;
    }
}

AMK__FN int64_t amk__cuda_lean_bytes(const amk_program *p, const amk_task *t, int threads);
AMK__FN int64_t amk__cuda_attn_pre_bytes(const amk_program *p, const amk_task *t, int threads);

/* 1 for the folded Q/K/V's forms: RMSNORM_MLP FOLD, ATTENTION_O PRENORM. */
AMK__FN int amk__cuda_folded(const amk_task *t) {
    const int64_t f = amk__param_i(t, "flags", 0);
    return (t->op == AMK_OP_RMSNORM_MLP && (f & AMK_MLP_FLAG_FOLD)) || (t->op == AMK_OP_ATTENTION_O && (f & AMK_ATTN_FLAG_PRENORM));
}

/* What the device code relies on for memory safety, checked for every task whatever validate
   said: ids in range, ABI caps, SMs assigned, the op's shapes (amk__op_check). threads and smem
   (0 before the device is known) add the VM's own limits. */
AMK__FN amk_result amk__cuda_check_task(const amk_program *p, int ti, int num_sms, int threads,
                                       int64_t smem, int image_kind, amk_diag *d) {
    const amk_task *t = &p->tasks[ti];
    amk_check which;
    char msg[256];
    int i, saved_task = d ? d->task : -1;
    if (d) d->task = ti; /* every failure below concerns task ti */
    if (t->op < 0 || t->op >= AMK_OP_COUNT)
        return amk__fail(d, AMK_ERR_REJECTED, "task %d: opcode %d is not defined", ti, t->op);
    if (t->n_inputs < 0 || t->n_inputs > AMK_MAX_INPUTS || t->n_outputs < 0 ||
        t->n_outputs > AMK_MAX_OUTPUTS || t->n_waits < 0 || t->n_waits > AMK_MAX_WAITS)
        return amk__fail(d, AMK_ERR_REJECTED, "task %d: more inputs, outputs or waits than the ABI holds", ti);
    for (i = 0; i < t->n_inputs; i++)
        if (t->inputs[i] < 0 || t->inputs[i] >= p->n_buffers)
            return amk__fail(d, AMK_ERR_REJECTED, "task %d: input buffer %d does not exist", ti, t->inputs[i]);
    for (i = 0; i < t->n_outputs; i++)
        if (t->outputs[i] < 0 || t->outputs[i] >= p->n_buffers)
            return amk__fail(d, AMK_ERR_REJECTED, "task %d: output buffer %d does not exist", ti, t->outputs[i]);
    if (t->out_counter < 0 || t->out_counter >= p->n_counters)
        return amk__fail(d, AMK_ERR_REJECTED, "task %d: out_counter %d does not exist", ti, t->out_counter);
    for (i = 0; i < t->n_waits; i++)
        if (t->waits[i].counter < 0 || t->waits[i].counter >= p->n_counters ||
            t->waits[i].threshold < 1 || t->waits[i].threshold > (int64_t)UINT32_MAX)
            return amk__fail(d, AMK_ERR_REJECTED, "task %d: wait %d (counter %d, threshold %lld) is out of range",
                             ti, i, t->waits[i].counter, (long long)t->waits[i].threshold);
    if (t->sm < 0 || t->sm >= num_sms)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "task %d has SM %d, outside [0, %d): lower the program first",
                         ti, t->sm, num_sms);
    if (!amk__op_check(p, t, &which, msg, sizeof msg)) {
        if (d) snprintf(d->check, sizeof d->check, "%s", amk_check_id(which));
        return amk__fail(d, AMK_ERR_REJECTED, "task %d: %s", ti, msg);
    }
    if (smem > 0) {
        const int64_t K = amk__param_i(t, "K", 0), hd = amk__param_i(t, "head_dim", 0);
        const int64_t need = amk__cuda_smem_least(t, threads);
        if ((t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE || t->op == AMK_OP_RMSNORM_GEMV ||
             t->op == AMK_OP_RMSNORM_SWIGLU || t->op == AMK_OP_RMSNORM_MLP) && need > smem)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: K = %lld needs %lld bytes of shared memory, the VM has %lld",
                             ti, (long long)K, (long long)need, (long long)smem);
        if ((t->op == AMK_OP_ATTENTION_TILE || t->op == AMK_OP_ATTENTION_DECODE || t->op == AMK_OP_ATTENTION_O) &&
            (hd > AMK__VM_ATTN_MAX_HEAD_DIM || need > smem))
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: head_dim %lld is above the VM's %d or its q staging "
                             "exceeds %lld bytes of shared memory", ti, (long long)hd, AMK__VM_ATTN_MAX_HEAD_DIM, (long long)smem);
        if (amk__cuda_folded(t)) { /* only the lean forms of the full build take them */
            const int64_t f = t->op == AMK_OP_RMSNORM_MLP ? amk__cuda_lean_bytes(p, t, threads) : amk__cuda_attn_pre_bytes(p, t, threads);
            if (image_kind == AMK_IMAGE_GENERAL || f == 0 || f > smem)
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: the VM takes %s %s only in its lean form (%s), which "
                                 "does not take this task", ti, amk_op_name(t->op),
                                 t->op == AMK_OP_RMSNORM_MLP ? "FOLD" : "PRENORM",
                                 image_kind == AMK_IMAGE_GENERAL ? "not in the general build" : "shapes, dtypes or shared memory");
        }
    }
    if (d) d->task = saved_task;
    return AMK_OK;
}

/* Input i of task t, or NULL when t has no such input or its id is not a buffer (a program
   created unchecked; amk__cuda_check_task reports it). */
AMK__FN const amk_buffer *amk__cuda_input(const amk_program *p, const amk_task *t, int i) {
    return i < t->n_inputs && t->inputs[i] >= 0 && t->inputs[i] < p->n_buffers ? &p->buffers[t->inputs[i]] : NULL;
}

/* 1 when the device runs ATTENTION_DECODE (or ATTENTION_O) task t on the tensor cores: q, K and V BF16, head_dim a
   multiple of 16 up to 256 (the first test of amk_attn_decode_mma in amk_ops.cuh, which also
   falls back when shared memory holds fewer than 16 rows). */
AMK__FN int amk__cuda_attn_mma(const amk_program *p, const amk_task *t) {
    const amk_buffer *q = amk__cuda_input(p, t, 0), *kc = amk__cuda_input(p, t, 1), *vc = amk__cuda_input(p, t, 2);
    const int64_t hd = amk__param_i(t, "head_dim", 0);
    return (t->op == AMK_OP_ATTENTION_DECODE || t->op == AMK_OP_ATTENTION_O) && q && kc && vc && q->dtype == AMK_DTYPE_BF16 && kc->dtype == AMK_DTYPE_BF16 &&
           vc->dtype == AMK_DTYPE_BF16 && hd > 0 && hd % 16 == 0 && hd <= 256;
}

/* 1 when task t meets the conditions the lean and ring forms share (the device's amk_short_rows_ok,
   where the host can see them): one row of F32 x, K a multiple of 8 up to kmax, F32 norm weights,
   bf16 W, and an RMSNORM_GEMV's output F32 or BF16. */
AMK__FN int amk__cuda_short_rows(const amk_program *p, const amk_task *t, int64_t kmax) {
    const amk_buffer *x = amk__cuda_input(p, t, 0), *nw = amk__cuda_input(p, t, 1), *W = amk__cuda_input(p, t, 2);
    const amk_buffer *o = t->n_outputs > 0 && t->outputs[0] >= 0 && t->outputs[0] < p->n_buffers ? &p->buffers[t->outputs[0]] : NULL;
    const int64_t K = amk__param_i(t, "K", 0);
    return x && nw && W && K >= 8 && K % 8 == 0 && K <= kmax && amk_buffer_numel(x) == K && x->dtype == AMK_DTYPE_F32 &&
           nw->dtype == AMK_DTYPE_F32 && W->dtype == AMK_DTYPE_BF16 &&
           (t->op == AMK_OP_RMSNORM_MLP || (o && (o->dtype == AMK_DTYPE_F32 || o->dtype == AMK_DTYPE_BF16)));
}

/* The shared memory of task t's lean form (amk_norm_gemv_lean in amk_ops.cuh, whose conditions this
   mirrors where the host can see them), or 0 when it has none: x, then an RMSNORM_GEMV tile its
   RoPE pairs' cos and sin, norm weights and rows of W, an RMSNORM_MLP tile its values, norm
   weights, gate and up rows and rows of W_downT (AMK_LEAN_BYTES). */
AMK__FN int64_t amk__cuda_lean_bytes(const amk_program *p, const amk_task *t, int threads) {
    const int mlp = t->op == AMK_OP_RMSNORM_MLP;
    const amk_buffer *Wu = mlp ? amk__cuda_input(p, t, 3) : NULL, *Wd = mlp ? amk__cuda_input(p, t, 4) : NULL;
    const int64_t K = amk__param_i(t, "K", 0), nt = amk__param_i(t, "N_tile", 0);
    int64_t rows;
    if ((t->op != AMK_OP_RMSNORM_GEMV && !mlp) || !amk__cuda_short_rows(p, t, 128 * AMK_LEAN_PPL) || nt < 1 ||
        (mlp ? nt : (nt + 1) / 2) > threads / 32 - (!mlp && (amk__param_i(t, "flags", 0) & AMK_GEMV_FLAG_ROPE) != 0) ||
        (!mlp && (amk__param_i(t, "flags", 0) & AMK_GEMV_FLAG_ARGMAX) != 0))
        return 0;
    rows = nt * K * 2; /* W's, or W_gate's and W_up's and W_downT's */
    if (mlp) {
        const int64_t wsb = Wu && Wd && Wu->dtype == AMK_DTYPE_BF16 && Wd->rank == 2 ? amk__rows_stage_bytes(Wd->dtype, Wd->shape[1], nt) : 0;
        if (!wsb) return 0;
        rows = 2 * rows + wsb;
        if (amk__param_i(t, "flags", 0) & AMK_MLP_FLAG_FOLD) { /* + W_cat's tile and base rows */
            const amk_buffer *Wc = amk__cuda_input(p, t, 5), *q = t->n_outputs == 2 ? &p->buffers[t->outputs[1]] : NULL;
            const int64_t N = Wu->shape[0], off = amk__param_i(t, "n_off", 0), F = Wc && Wc->rank == 2 ? Wc->shape[1] : 0;
            if (!Wc || !q || Wc->dtype != AMK_DTYPE_BF16 || F < 8 || F % 8 || Wc->shape[0] != N + K || q->dtype != AMK_DTYPE_F32 ||
                amk_buffer_numel(q) != F || (off + nt) * K > INT32_MAX) /* the device's 32-bit base-row arithmetic */
                return 0;
            rows += AMK_LEAN_FOLD_BYTES(nt + (off + nt) * K / N - off * K / N, F);
        }
    }
    return AMK_LEAN_BYTES(nt, K, rows);
}

/* The shared memory of ATTENTION_O PRENORM task t's lean form (amk_attn_o_lean in amk_ops.cuh, the
   only form that takes it; its conditions mirrored where the host can see them), for the larger of
   its two layouts (the tensor copies' aligned to AMK_ATTN_TMA_ALIGN, or rows by cp.async), or 0
   when the form does not take t. */
AMK__FN int64_t amk__cuda_attn_pre_bytes(const amk_program *p, const amk_task *t, int threads) {
    const amk_buffer *q = amk__cuda_input(p, t, 0), *kc = amk__cuda_input(p, t, 1), *vc = amk__cuda_input(p, t, 2);
    const amk_buffer *Wo = amk__cuda_input(p, t, 4), *x = amk__cuda_input(p, t, 5);
    const int64_t hd = amk__param_i(t, "head_dim", 0), nh_all = amk__param_i(t, "n_heads", 0);
    const int64_t nkv = amk__param_i(t, "n_kv_heads", 0), M = amk__param_i(t, "M_tile", 0), moff = amk__param_i(t, "m_off", 0);
    const int64_t n = amk__param_i(t, "kv_len", 0), g = amk__param_i(t, "n_off", 0);
    int64_t esz, h0, nh, grp, want, fixed, tma_rows, plain_rows;
    if (t->op != AMK_OP_ATTENTION_O || !q || !kc || !vc || !Wo || !x || Wo->rank != 2 || hd < 8 || hd > 64 || nkv < 1 ||
        nh_all % nkv || threads < 32)
        return 0;
    esz = kc->dtype == AMK_DTYPE_F32 ? 4 : kc->dtype == AMK_DTYPE_BF16 ? 2 : 0;
    grp = nh_all / nkv;
    h0 = moff / hd;
    nh = (moff + M - 1) / hd - h0 + 1;
    want = amk__rows_stage_bytes(Wo->dtype, Wo->shape[1], M);
    if (!esz || vc->dtype != kc->dtype || q->dtype != AMK_DTYPE_F32 || amk_buffer_numel(q) != (nh_all + 2 * nkv) * hd ||
        (hd * esz) % 16 || amk__param_i(t, "N_tile", 0) != 1 || M < 1 || M > AMK_ATTN_LEAN_DIMS || nh > 2 ||
        h0 < g * grp || h0 + nh > (g + 1) * grp || n < 1 || n > AMK_ATTN_SPEC_ROWS || n > threads / nh ||
        (threads / nh) % 32 || threads < 32 + nh * hd / 2 || x->dtype != AMK_DTYPE_F32 || amk_buffer_numel(x) != Wo->shape[1] ||
        amk_buffer_numel(x) > 128 * AMK_LEAN_PPL ||
        Wo->shape[1] % 4 || (t->n_outputs != 1 && t->n_outputs != 3) || !want)
        return 0;
    tma_rows = AMK_ATTN_TMA_ALIGN - 16 + 2 * ((n + 7) & ~(int64_t)7) * 128;
    plain_rows = 2 * n * AMK_ATTN_ROW_BYTES(hd, esz);
    fixed = (tma_rows > plain_rows ? tma_rows : plain_rows) + (nh * hd + 32 + nh * n + AMK_ATTN_LEAN_DIMS + 4 + 64) * 4;
    return fixed + want + 16; /* + the rows' 16-byte alignment */
}

/* The shared memory of task t's ring form (amk_norm_gemv_ring in amk_ops.cuh, whose conditions this
   mirrors where the host can see them; the lean form comes first), or 0 when it has none:
   AMK_RING_SLOTS slots of one row of W a warp (AMK_RING_BYTES). Of the flags it takes ARGMAX. */
AMK__FN int64_t amk__cuda_ring_bytes(const amk_program *p, const amk_task *t, int threads) {
    if (t->op != AMK_OP_RMSNORM_GEMV || (amk__param_i(t, "flags", 0) & ~(int64_t)AMK_GEMV_FLAG_ARGMAX) != 0 ||
        !amk__cuda_short_rows(p, t, 256 * AMK_RING_VPL) ||
        amk__param_i(t, "N_tile", 0) <= 2 * (threads / 32))
        return 0;
    return AMK_RING_BYTES(threads / 32, amk__param_i(t, "K", 0));
}

/* The dynamic shared memory task t would like: its fastest path, never less than
   amk__cuda_smem_least (the device ops adapt to anything in between). why not always the opt-in
   maximum: shared memory and L1 share one 256 KB array a SM, so every byte asked for leaves less
   L1 (the driver picks the configuration; the L1 size is not read back); with this rule the
   decode step at context 128 ran 1.5% (Llama-3-8B) and 1.2% (Llama-3.2-1B) faster than with the
   maximum (bench/RESULTS.md runs 81-82). */
AMK__FN int64_t amk__cuda_smem_want(const amk_program *p, const amk_task *t, int threads) {
    const int64_t K = amk__param_i(t, "K", 0), hd = amk__param_i(t, "head_dim", 0), least = amk__cuda_smem_least(t, threads);
    switch (t->op) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE: {
        /* the tensor-core path (tiles of AMK_MMA_MIN_ROWS rows and more) wants its full ring */
        const amk_buffer *x = amk__cuda_input(p, t, 0), *W = amk__cuda_input(p, t, 1);
        const int64_t M = t->op == AMK_OP_GEMM_TILE ? amk__param_i(t, "M_tile", 0)
                        : x && K > 0 ? amk_buffer_numel(x) / K : 0;
        if (M >= AMK_MMA_MIN_ROWS && x && W) /* + an x split in two, as in amk_mma_stages */
            return (x->dtype == W->dtype ? 0 : 2 * AMK_MMA_TILE) +
                   AMK_MMA_STAGES * AMK_MMA_STAGE_BYTES(x->dtype == AMK_DTYPE_F32 ? 4 : 2, threads / 128);
        return least;
    }
    case AMK_OP_ATTENTION_DECODE: case AMK_OP_ATTENTION_O: { /* one chunk for the task's whole key range, up to 512 rows */
        const amk_buffer *kc = amk__cuda_input(p, t, 1), *vc = amk__cuda_input(p, t, 2);
        const int dt = kc && vc ? kc->dtype : -1;
        const int64_t e = dt == AMK_DTYPE_F32 ? 4 : dt == AMK_DTYPE_F16 || dt == AMK_DTYPE_BF16 ? 2 : 0;
        const int64_t esz = e && vc->dtype == dt && (hd * e) % 16 == 0 ? e : 4; /* the device's staging format */
        const int mma = amk__cuda_attn_mma(p, t);
        const int64_t step = mma ? 16 : 32; /* a chunk's rows come in 16s (tensor cores) or 32s */
        int64_t C = (amk__param_i(t, "kv_len", 0) + step - 1) / step * step, w;
        if (C > 512) C = 512;
        if (C < step) C = step;
        if (mma) { /* amk_attn_decode_mma's layout */
            const int64_t nkv = amk__param_i(t, "n_kv_heads", 1), grp = amk__param_i(t, "n_heads", 0) / (nkv > 0 ? nkv : 1);
            w = AMK_ATTN_MMA_SMEM(hd, grp < AMK_ATTN_MMA_ROWS ? grp : AMK_ATTN_MMA_ROWS, C);
        } else {
            w = AMK_ATTN_DECODE_SMEM(hd, AMK_ATTN_ROW_BYTES(hd, esz), AMK_ATTN_KEY_GROUPS(hd, threads), C);
        }
        if (t->op == AMK_OP_ATTENTION_O) { /* + its results, + its rows of W_oT when they stage */
            const amk_buffer *Wo = amk__cuda_input(p, t, 4);
            const int64_t b = Wo && Wo->rank == 2 ? amk__rows_stage_bytes(Wo->dtype, Wo->shape[1], amk__param_i(t, "M_tile", 0)) : 0;
            if (w < AMK_ATTN_DECODE_LEAST(hd, threads)) w = AMK_ATTN_DECODE_LEAST(hd, threads); /* why: the rows stage only above it */
            w += amk__attn_o_ys_bytes(t) + 16 + (b ? b + 16 : 0); /* + each part's 16-byte alignment */
            if (amk__param_i(t, "flags", 0) & AMK_ATTN_FLAG_PRENORM) {
                const int64_t pre = amk__cuda_attn_pre_bytes(p, t, threads);
                if (pre > w) w = pre;
            }
        }
        return w > least ? w : least;
    }
    case AMK_OP_RMSNORM_MLP: { /* + its rows of W_downT, when they stage (amk__rows_stage_bytes) */
        const amk_buffer *Wd = amk__cuda_input(p, t, 4);
        const int64_t nt = amk__param_i(t, "N_tile", 0);
        const int64_t b = Wd && Wd->rank == 2 ? amk__rows_stage_bytes(Wd->dtype, Wd->shape[1], nt) : 0;
        const int64_t lean = amk__cuda_lean_bytes(p, t, threads);
        return lean > least + (b ? b + 16 : 0) ? lean : least + (b ? b + 16 : 0); /* + the rows' 16-byte alignment */
    }
    case AMK_OP_RMSNORM_GEMV: { /* its lean form's, else its ring form's */
        int64_t form = amk__cuda_lean_bytes(p, t, threads);
        if (!form) form = amk__cuda_ring_bytes(p, t, threads);
        return form > least ? form : least;
    }
    case AMK_OP_ATTENTION_COMBINE: { /* the heads' weights staged (else it recomputes them) */
        const amk_buffer *part = amk__cuda_input(p, t, 0);
        return part && hd > 0 ? amk_buffer_numel(part) / (hd + 2) * (AMK_MAX_INPUTS + 1) * 4 : 0;
    }
    default: return least;
    }
}

/* The instruction of task ti (params marshalled with defaults). */
AMK__FN void amk__cuda_instruction(const amk_task *t, amk_instruction_t *in) {
    int i;
    memset(in, 0, sizeof *in);
    in->op = t->op;
    in->sm = t->sm;
    in->out_counter = t->out_counter;
    in->id = t->id;
    in->n_inputs = t->n_inputs;
    in->n_outputs = t->n_outputs;
    in->n_waits = t->n_waits;
    for (i = 0; i < AMK_MAX_INPUTS; i++) in->inputs[i] = i < t->n_inputs ? t->inputs[i] : -1;
    for (i = 0; i < AMK_MAX_OUTPUTS; i++) in->outputs[i] = i < t->n_outputs ? t->outputs[i] : -1;
    for (i = 0; i < AMK_MAX_WAITS; i++) {
        in->wait_counter[i] = i < t->n_waits ? t->waits[i].counter : -1;
        in->wait_threshold[i] = i < t->n_waits ? (uint32_t)t->waits[i].threshold : 0u;
    }
    amk_task_marshal_params(t, &in->params);
}

/* Input slot wi of instruction in in the device's buffer table bt, when it is a read-only kind
   (WEIGHT or CONST: nothing writes it during a launch, so L2 may hold it early); else NULL. */
AMK__FN const amk_buffer_t *amk__cuda_readonly_input(const amk_buffer_t *bt, int n_buffers,
                                                     const amk_instruction_t *in, int wi) {
    const amk_buffer_t *b = wi < in->n_inputs && in->inputs[wi] >= 0 && in->inputs[wi] < n_buffers ? &bt[in->inputs[wi]] : NULL;
    return b && (b->kind == AMK_KIND_WEIGHT || b->kind == AMK_KIND_CONST) ? b : NULL;
}

/* The byte range [*start, *end) of the rows [n_off, n_off + N_tile) of the read-only [N, K] weight
   in input slot wi of instruction in, offsets into that buffer: start 16-byte aligned down, end
   never past the buffer. Returns the buffer, or NULL (no such weight, no rows). */
AMK__FN const amk_buffer_t *amk__cuda_rows_range(const amk_buffer_t *bt, int n_buffers, const amk_instruction_t *in,
                                                 int wi, uint64_t *start, uint64_t *end) {
    const amk_buffer_t *W = amk__cuda_readonly_input(bt, n_buffers, in, wi);
    uint64_t bits, limit;
    if (!W) return NULL;
    bits = (uint64_t)amk_dtype_bits(W->dtype);
    if (bits == 8 && in->params.qdtype == AMK_DTYPE_I4) bits = 4; /* I4 packed in a byte buffer */
    if (in->params.n_off < 0 || in->params.N_tile < 1 || in->params.K < 1) return NULL;
    *start = (uint64_t)in->params.n_off * (uint64_t)in->params.K * bits / 8 & ~(uint64_t)15;
    *end = ((uint64_t)in->params.n_off + (uint64_t)in->params.N_tile) * (uint64_t)in->params.K * bits / 8;
    limit = (uint64_t)W->numel * (W->dtype == AMK_DTYPE_U8 ? 8 : bits) / 8; /* never past the buffer */
    if (*end > limit) *end = limit;
    return *end > *start ? W : NULL;
}

/* L2 prefetch range f of instruction in: the first `budget` bytes of the rows [n_off, n_off +
   N_tile) of the read-only [N, K] weight in input slot wi; 16-byte aligned, never past the buffer. */
AMK__FN void amk__cuda_prefetch_rows(const amk_buffer_t *bt, int n_buffers, amk_instruction_t *in, int f, int wi,
                                     uint64_t budget) {
    uint64_t start, end;
    const amk_buffer_t *W = amk__cuda_rows_range(bt, n_buffers, in, wi, &start, &end);
    if (!W) return;
    if (end > start + budget) end = start + budget;
    end &= ~(uint64_t)15;
    if (end <= start) return;
    in->prefetch_addr[f] = W->ptr + start;
    in->prefetch_bytes[f] = (uint32_t)(end - start);
}

/* No L2 prefetches in instruction in. */
AMK__FN void amk__cuda_prefetch_clear(amk_instruction_t *in) {
    int f;
    for (f = 0; f < AMK_VM_PREFETCHES; f++) { in->prefetch_addr[f] = 0; in->prefetch_bytes[f] = 0; }
    in->prefetch_keep = 0;
}

/* The L2 prefetches the VM issues while instruction in waits (amk_vm.cuh): a GEMV/GEMM tile's
   first AMK_VM_PREFETCH_BYTES of weight rows; a fused RMSNORM_* tile's norm weight too, with
   RMSNORM_SWIGLU's and RMSNORM_MLP's gate and up rows sharing the budget (RMSNORM_MLP stages
   its rows of W_downT itself). None for a tile of fewer than
   AMK_VM_PREFETCH_MIN_ELEMS weight elements (one round of loads). */
AMK__FN void amk__cuda_prefetches(const amk_buffer_t *bt, int n_buffers, amk_instruction_t *in) {
    amk__cuda_prefetch_clear(in);
    if (AMK_VM_PREFETCH_BYTES == 0u || (int64_t)in->params.N_tile * in->params.K < (int64_t)AMK_VM_PREFETCH_MIN_ELEMS)
        return;
    if (in->op == AMK_OP_GEMV_TILE || in->op == AMK_OP_GEMM_TILE) {
        amk__cuda_prefetch_rows(bt, n_buffers, in, 0, 1, AMK_VM_PREFETCH_BYTES);
    } else if (in->op == AMK_OP_RMSNORM_GEMV || in->op == AMK_OP_RMSNORM_SWIGLU || in->op == AMK_OP_RMSNORM_MLP) {
        const amk_buffer_t *nw = amk__cuda_readonly_input(bt, n_buffers, in, 1); /* the norm weight: K floats, staged first */
        const uint64_t nb = nw ? (uint64_t)nw->numel * 4u & ~(uint64_t)15 : 0;
        if (nw && nw->dtype == AMK_DTYPE_F32 && nb) {
            in->prefetch_addr[0] = nw->ptr;
            in->prefetch_bytes[0] = (uint32_t)(nb < AMK_VM_PREFETCH_BYTES ? nb : AMK_VM_PREFETCH_BYTES);
        }
        if (in->op == AMK_OP_RMSNORM_GEMV) {
            amk__cuda_prefetch_rows(bt, n_buffers, in, 1, 2, AMK_VM_PREFETCH_BYTES);
        } else {
            amk__cuda_prefetch_rows(bt, n_buffers, in, 1, 2, AMK_VM_PREFETCH_BYTES / 2);
            amk__cuda_prefetch_rows(bt, n_buffers, in, 2, 3, AMK_VM_PREFETCH_BYTES / 2);
        }
    }
}

/* The weight input slot of a GEMV-family tile that streams rows (GEMV_TILE's W, RMSNORM_GEMV's),
   or -1. */
AMK__FN int amk__cuda_rows_slot(int op) {
    return op == AMK_OP_GEMV_TILE ? 1 : op == AMK_OP_RMSNORM_GEMV ? 2 : -1;
}

/* That slot when instruction in streams the rows of buffer wid, else -1. */
AMK__FN int amk__cuda_reads_rows(const amk_instruction_t *in, int wid) {
    const int wi = amk__cuda_rows_slot(in->op);
    return wi >= 0 && wi < in->n_inputs && in->inputs[wi] == wid ? wi : -1;
}

/* The L2 prefetch ahead (AMK_VM_AHEAD_BYTES, amk_ir.h), planned over the n instructions ins in
   list order (their own prefetches already in place): the targets are the tiles that read the
   weight of the last row-streaming tile (GEMV_TILE, RMSNORM_GEMV) in list order, e.g. the LM
   head's. Each target's rows after its own prefetch, up to budget / (number of targets) bytes,
   are cut into pieces of at most `piece` bytes (16-byte aligned), and the pieces, targets in list
   order, go into the free prefetch ranges of the tasks before the first target, nearest first.
   plan[i] receives task i's pieces (zeroed first). Returns the bytes planned: less than asked
   when the targets' rows or the free ranges run out. */
AMK__FN uint64_t amk__cuda_plan_ahead(const amk_buffer_t *bt, int n_buffers, const amk_instruction_t *ins, int n,
                                      uint64_t budget, uint64_t piece, amk__cuda_ahead *plan) {
    const amk_buffer_t *W = NULL;
    uint64_t share, total = 0;
    int i, wid = -1, first = -1, n_t = 0, carrier, f = 0;
    if (n < 1 || !plan) return 0;
    memset(plan, 0, (size_t)n * sizeof *plan);
    if (piece > ((uint64_t)1 << 30)) piece = (uint64_t)1 << 30; /* why: a range's bytes are a uint32 */
    piece &= ~(uint64_t)15;
    if (budget < 16 || piece == 0) return 0;
    for (i = n - 1; i >= 0 && wid < 0; i--) { /* the last row-streaming tile's weight */
        const int wi = amk__cuda_rows_slot(ins[i].op);
        if (wi >= 0 && amk__cuda_readonly_input(bt, n_buffers, &ins[i], wi)) wid = ins[i].inputs[wi];
    }
    if (wid < 0) return 0;
    for (i = 0; i < n; i++) {
        if (amk__cuda_reads_rows(&ins[i], wid) < 0) continue;
        if (first < 0) first = i;
        n_t++;
    }
    share = budget / (uint64_t)n_t & ~(uint64_t)15;
    if (share == 0) return 0;
    carrier = first - 1;
    for (i = first; i < n; i++) {
        const int wi = amk__cuda_reads_rows(&ins[i], wid);
        uint64_t a, b, e;
        int g;
        if (wi < 0 || !(W = amk__cuda_rows_range(bt, n_buffers, &ins[i], wi, &a, &e))) continue;
        for (g = 0; g < AMK_VM_PREFETCHES; g++) { /* past the tile's own prefetch of its rows */
            const uint64_t pa = ins[i].prefetch_addr[g], pb = ins[i].prefetch_bytes[g];
            if (pb && pa >= W->ptr + a && pa < W->ptr + e && pa + pb - W->ptr > a) a = pa + pb - W->ptr;
        }
        a = (a + 15) & ~(uint64_t)15;
        if (a >= e) continue; /* the own prefetch took every row */
        b = (e - a > share ? a + share : e) & ~(uint64_t)15;
        while (a < b) {
            const uint64_t len = b - a < piece ? b - a : piece;
            while (carrier >= 0 && (f >= AMK_VM_PREFETCHES || ins[carrier].prefetch_bytes[f] || plan[carrier].bytes[f])) {
                if (++f >= AMK_VM_PREFETCHES) { carrier--; f = 0; }
            }
            if (carrier < 0) return total;
            plan[carrier].addr[f] = W->ptr + a;
            plan[carrier].bytes[f] = (uint32_t)len;
            total += len;
            a += len;
        }
    }
    return total;
}

/* Puts task i's planned pieces (amk__cuda_plan_ahead) into the free prefetch ranges of its
   instruction, flagged in prefetch_keep; a piece that finds no free range (an update gave the
   task prefetches of its own) is dropped: it is only a hint. */
AMK__FN void amk__cuda_apply_ahead(amk_instruction_t *in, const amk__cuda_ahead *a) {
    int f, g = 0;
    for (f = 0; f < AMK_VM_PREFETCHES; f++) {
        if (!a->bytes[f]) continue;
        while (g < AMK_VM_PREFETCHES && in->prefetch_bytes[g]) g++;
        if (g == AMK_VM_PREFETCHES) return;
        in->prefetch_addr[g] = a->addr[f];
        in->prefetch_bytes[g] = a->bytes[f];
        in->prefetch_keep |= 1u << g;
    }
}

/* Task i's L2 prefetches in its instruction: its own (amk__cuda_prefetches) and its pieces of the
   prefetch ahead (c->ahead, once planned); none when the program's config sets pipelining_depth
   0 (spec §5: "0 = no prefetch"). */
AMK__FN void amk__cuda_task_prefetches(amk_cuda *c, int i) {
    amk_instruction_t *in = &c->ins[i];
    if (c->no_prefetch) {
        amk__cuda_prefetch_clear(in);
        return;
    }
    amk__cuda_prefetches(c->bufs, c->n_buffers, in);
    if (c->ahead) amk__cuda_apply_ahead(in, &c->ahead[i]);
}

/* AMK_VM_HINT_KV_EARLY (amk_ir.h) in ins[i] (p's task i) for the ATTENTION_O tasks it holds for:
   the position buffer is an IO_INPUT (nothing writes it: the validator's WRITE_READONLY), the
   caches are KV_CACHE buffers (never in a page) and every task that writes one writes only the row
   at that same position buffer (amk__v_kv_row_writer_pos: an RMSNORM_GEMV with KV_ROW over one row
   of x, or an ATTENTION_O PRENORM's outputs 2 and 3). Returns the number of instructions
   whose hints changed. why one pass over the writers first: the step has thousands of tasks. */
AMK__FN int amk__cuda_kv_hints(const amk_program *p, amk_instruction_t *ins) {
    /* per buffer: -1 no writer, else the position buffer of its writers (all alike), -2 another writer */
    int *wpos = (int *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(int));
    int i, k, changed = 0;
    if (!wpos) return -1;
    for (i = 0; i < p->n_buffers; i++) wpos[i] = -1;
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *u = &p->tasks[i];
        for (k = 0; k < u->n_outputs; k++) {
            const int o = u->outputs[k];
            int want;
            if (o < 0 || o >= p->n_buffers) continue;
            want = amk__v_kv_row_writer_pos(p, u, o); /* the validator's writer of only row pos */
            if (want < 0) want = -2;
            wpos[o] = wpos[o] == -1 || wpos[o] == want ? want : -2;
        }
    }
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        uint32_t h = 0;
        if (t->op == AMK_OP_ATTENTION_O && t->n_inputs >= 4) {
            const int kc = t->inputs[1], vc = t->inputs[2], pb = t->inputs[3];
            if (kc != vc && p->buffers[pb].kind == AMK_KIND_IO_INPUT && wpos[pb] == -1 &&
                p->buffers[kc].kind == AMK_KIND_KV_CACHE && p->buffers[vc].kind == AMK_KIND_KV_CACHE &&
                (wpos[kc] == -1 || wpos[kc] == pb) && (wpos[vc] == -1 || wpos[vc] == pb))
                h = AMK_VM_HINT_KV_EARLY;
        }
        if (ins[i].hints != h) changed++;
        ins[i].hints = h;
    }
    amk__free(wpos);
    return changed;
}

/* The lean attention's cache rows by tensor copies (AMK_ATTN_KV_TMA, amk_ops.cuh). A pair is two
   2-D tensor maps, of a K and a V cache buffer each viewed as [rows, n_kv * head_dim] bf16 with a
   box of head_dim x kv_len elements, 128-byte swizzle; the ATTENTION_O tasks of one geometry share
   it. amk__cuda_kv_pairs assigns the pairs (c->kv_pair[task], -1 for a task the device form does
   not take: not bf16 caches of head_dim 64, kv_len outside 1..AMK_ATTN_SPEC_ROWS, or the same
   buffer twice; none with the general build loaded) before the arena is planned; amk__cuda_kv_maps encodes and uploads them once it
   exists. A task uses its pair only while it carries AMK_VM_HINT_KV_EARLY (amk__cuda_context).
   Returns 0, or -1 out of memory. */
#define AMK__CUDA_TMAP_BYTES 128 /* CUtensorMap: 128 bytes, 64-byte aligned */
/* a task's timing record and its marks (amk_ir.h: the marks array follows the records') */
#define AMK__CUDA_TIMING_BYTES (sizeof(amk_vm_timing_t) + sizeof(amk_vm_marks_t))
AMK__FN int amk__cuda_kv_pairs(amk_cuda *c, const amk_program *p) {
    int i, k;
    c->n_kv_pairs = 0;
    /* why not for the general build: it has no lean attention, nothing would read the maps */
    if (!c->TensorMapEncodeTiled || p->n_tasks < 1 || c->info.image_kind == AMK_IMAGE_GENERAL) return 0;
    c->kv_pair = (int32_t *)amk__calloc((size_t)p->n_tasks, sizeof(int32_t));
    c->kv_pair_task = (int32_t *)amk__calloc((size_t)p->n_tasks, sizeof(int32_t));
    c->kv_pair_rows = (int32_t *)amk__calloc((size_t)p->n_tasks, sizeof(int32_t));
    if (!c->kv_pair || !c->kv_pair_task || !c->kv_pair_rows) return -1;
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        const amk_buffer *kb, *vb;
        int64_t hd, nkv, n, w;
        c->kv_pair[i] = -1;
        if (t->op != AMK_OP_ATTENTION_O || t->n_inputs < 4 || t->inputs[1] == t->inputs[2]) continue;
        kb = &p->buffers[t->inputs[1]];
        vb = &p->buffers[t->inputs[2]];
        hd = amk__param_i(t, "head_dim", 0);
        nkv = amk__param_i(t, "n_kv_heads", 0);
        n = amk__param_i(t, "kv_len", 0);
        w = hd * nkv;
        if (kb->dtype != AMK_DTYPE_BF16 || vb->dtype != AMK_DTYPE_BF16 || hd != 64 || nkv < 1 || nkv > 1024 || n < 1 ||
            n > AMK_ATTN_SPEC_ROWS || kb->kind != AMK_KIND_KV_CACHE || vb->kind != AMK_KIND_KV_CACHE ||
            amk_buffer_numel(kb) % w != 0 || amk_buffer_numel(vb) != amk_buffer_numel(kb) ||
            amk_buffer_numel(kb) / w > INT32_MAX)
            continue;
        for (k = 0; k < c->n_kv_pairs; k++) {
            const amk_task *u = &p->tasks[c->kv_pair_task[k]];
            if (u->inputs[1] == t->inputs[1] && u->inputs[2] == t->inputs[2] && c->kv_pair_rows[k] == n &&
                amk__param_i(u, "n_kv_heads", 0) == nkv)
                break;
        }
        if (k == c->n_kv_pairs) {
            c->kv_pair_task[k] = i;
            c->kv_pair_rows[k] = (int32_t)n;
            c->n_kv_pairs++;
        }
        c->kv_pair[i] = k;
    }
    return 0;
}

/* The pairs' maps into the arena (after amk__cuda_plan placed them at off_kv_maps). A map the
   driver refuses leaves its tasks without one (they stage their rows by cp.async). */
AMK__FN amk_result amk__cuda_kv_maps(amk_cuda *c, const amk_program *p, amk_diag *d) {
    unsigned char *raw, *maps;
    int i, k;
    if (c->n_kv_pairs < 1) return AMK_OK;
    raw = (unsigned char *)amk__calloc((size_t)c->n_kv_pairs * 2 * AMK__CUDA_TMAP_BYTES + 64, 1);
    if (!raw) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    maps = raw + (64 - (uintptr_t)raw % 64) % 64; /* why: the driver wants the map 64-byte aligned */
    for (k = 0; k < c->n_kv_pairs; k++) {
        const amk_task *t = &p->tasks[c->kv_pair_task[k]];
        const int64_t w = amk__param_i(t, "head_dim", 0) * amk__param_i(t, "n_kv_heads", 0);
        int e, ok = 1;
        for (e = 0; e < 2; e++) {
            const int b = t->inputs[1 + e];
            const uint64_t dim[2] = {(uint64_t)w, (uint64_t)(amk_buffer_numel(&p->buffers[b]) / w)};
            const uint64_t stride[1] = {(uint64_t)w * 2};
            const uint32_t box[2] = {64u, (uint32_t)c->kv_pair_rows[k]}, one[2] = {1u, 1u};
            /* UINT16 (the bytes, no float fill), no interleave, 128-byte swizzle, no L2 promotion */
            if (c->TensorMapEncodeTiled(maps + (size_t)(2 * k + e) * AMK__CUDA_TMAP_BYTES, 1, 2u,
                                        (void *)(uintptr_t)c->bufs[b].ptr, dim, stride, box, one, 0, 3, 0, 0) !=
                AMK__CUDA_SUCCESS)
                ok = 0;
        }
        if (!ok)
            for (i = 0; i < p->n_tasks; i++)
                if (c->kv_pair[i] == k) c->kv_pair[i] = -1;
    }
    {
        const amk__CUresult cr = c->api.MemcpyHtoD(c->arena + c->off_kv_maps, maps,
                                                   (size_t)c->n_kv_pairs * 2 * AMK__CUDA_TMAP_BYTES);
        amk__free(raw);
        if (cr != AMK__CUDA_SUCCESS) return amk__cuda_err(c, d, cr, "cuMemcpyHtoD (tensor maps)");
    }
    return AMK_OK;
}

/* Entry q of the context table (amk_vm_ctx_t, amk_ir.h) from the instruction and buffer tables:
   task c->queue[q]'s instruction, its inputs' and outputs' descriptors (ids checked by
   amk__cuda_check_task), the rest zero. */
AMK__FN void amk__cuda_context(amk_cuda *c, int q) {
    amk_vm_ctx_t *x = &c->ctxs[q];
    const int i = c->queue[q];
    int j;
    memset(x, 0, sizeof *x);
    x->ins = c->ins[i];
    x->index = i;
    for (j = 0; j < x->ins.n_inputs && j < AMK_MAX_INPUTS; j++) x->in[j] = c->bufs[x->ins.inputs[j]];
    for (j = 0; j < x->ins.n_outputs && j < AMK_MAX_OUTPUTS; j++) x->out[j] = c->bufs[x->ins.outputs[j]];
    if (c->kv_pair && c->kv_pair[i] >= 0 && (x->ins.hints & AMK_VM_HINT_KV_EARLY)) {
        /* why the pair's rows, not the task's kv_len: an update may change kv_len; the device then
           sees the mismatch and stages the rows itself */
        x->kv_rows = c->kv_pair_rows[c->kv_pair[i]];
        x->kv_maps = c->arena + c->off_kv_maps + (uint64_t)c->kv_pair[i] * 2 * AMK__CUDA_TMAP_BYTES;
    }
}

/* Reserves n bytes at the arena's end (AMK__CUDA_ALIGN aligned, rounded up to 16); 0 on
   overflow. */
AMK__FN int amk__cuda_reserve(uint64_t *top, uint64_t n, uint64_t *off) {
    uint64_t start = (*top + (AMK__CUDA_ALIGN - 1)) & ~(uint64_t)(AMK__CUDA_ALIGN - 1), end;
    if (start < *top) return 0;
    if (n < 16) n = 16; /* why: distinct, vector-safe storage even for empty buffers */
    n = (n + 15) & ~(uint64_t)15;
    if (!amk__add_u64(start, n, &end)) return 0;
    *off = start;
    *top = end;
    return 1;
}

/* Plans the arena: weights and consts, KV caches, IO, then activations (paged ones share their
   page), counters + status (adjacent: one memset per run), the tables, timing, the contexts. */
AMK__FN amk_result amk__cuda_plan(amk_cuda *c, const amk_program *p, amk_diag *d) {
    static const int kind_order[] = {AMK_KIND_WEIGHT, AMK_KIND_CONST, AMK_KIND_KV_CACHE,
                                     AMK_KIND_IO_INPUT, AMK_KIND_IO_OUTPUT, AMK_KIND_ACTIVATION};
    uint64_t top = 0, n, *page_off = NULL, *page_bytes = NULL, off_buffers, off_qoff;
    int k, b, pg, n_pages = p->has_pages && p->buffer_page ? p->n_pages : 0;
    for (b = 0; b < p->n_buffers; b++) {
        c->buf_bytes[b] = amk__buffer_nbytes(&p->buffers[b]);
        if (c->buf_bytes[b] < 0 || p->buffers[b].dtype < 0 || p->buffers[b].dtype >= AMK_DTYPE_COUNT)
            return amk__fail(d, AMK_ERR_REJECTED, "buffer %d has a bad dtype or shape", b);
    }
    if (n_pages > 0) {
        page_off = (uint64_t *)amk__calloc((size_t)n_pages, sizeof(uint64_t));
        page_bytes = (uint64_t *)amk__calloc((size_t)n_pages, sizeof(uint64_t));
        if (!page_off || !page_bytes) { amk__free(page_off); amk__free(page_bytes); return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory"); }
        for (pg = 0; pg < n_pages; pg++) page_bytes[pg] = p->pages[pg].nbytes > 0 ? (uint64_t)p->pages[pg].nbytes : 0;
        for (b = 0; b < p->n_buffers; b++) {
            pg = p->buffer_page[b];
            if (pg < -1 || pg >= n_pages) {
                amk__free(page_off); amk__free(page_bytes);
                return amk__fail(d, AMK_ERR_REJECTED, "buffer %d is bound to page %d, which does not exist", b, pg);
            }
            /* why: the reference VM sizes a page max(page nbytes, largest buffer on it) too */
            if (pg >= 0 && (uint64_t)c->buf_bytes[b] > page_bytes[pg]) page_bytes[pg] = (uint64_t)c->buf_bytes[b];
        }
    }
    for (k = 0; k < (int)(sizeof kind_order / sizeof kind_order[0]); k++)
        for (b = 0; b < p->n_buffers; b++) {
            if (p->buffers[b].kind != kind_order[k] && !(k == 5 && (p->buffers[b].kind < 0 || p->buffers[b].kind >= AMK_KIND_COUNT)))
                continue;
            if (n_pages > 0 && p->buffer_page[b] >= 0) continue;
            if (!amk__cuda_reserve(&top, (uint64_t)c->buf_bytes[b], &c->buf_off[b])) goto overflow;
        }
    for (pg = 0; pg < n_pages; pg++)
        if (!amk__cuda_reserve(&top, page_bytes[pg], &page_off[pg])) goto overflow;
    for (b = 0; b < p->n_buffers; b++)
        if (n_pages > 0 && p->buffer_page[b] >= 0) c->buf_off[b] = page_off[p->buffer_page[b]];
    if (!amk__cuda_reserve(&top, (uint64_t)c->n_counters * 4, &c->off_counters) ||
        !amk__cuda_reserve(&top, (uint64_t)AMK_VM_STATUS_WORDS(c->num_sms) * 4, &c->off_status) ||
        !amk__mul_u64((uint64_t)p->n_buffers, sizeof(amk_buffer_t), &n) || !amk__cuda_reserve(&top, n, &off_buffers) ||
        !amk__cuda_reserve(&top, (uint64_t)(c->num_sms + 1) * 4, &off_qoff) ||
        !amk__mul_u64((uint64_t)c->n_tasks, AMK__CUDA_TIMING_BYTES, &n) || !amk__cuda_reserve(&top, n, &c->off_timing) ||
        !amk__mul_u64((uint64_t)c->n_tasks, sizeof(amk_vm_ctx_t), &n) || !amk__cuda_reserve(&top, n, &c->off_contexts) ||
        !amk__mul_u64((uint64_t)c->n_kv_pairs, 2 * AMK__CUDA_TMAP_BYTES, &n) || !amk__cuda_reserve(&top, n, &c->off_kv_maps))
        goto overflow;
    amk__free(page_off);
    amk__free(page_bytes);
    c->arena_bytes = top;
    memset(&c->prog, 0, sizeof c->prog);
    c->prog.buffers = off_buffers;           /* offsets for now: amk__cuda_create rebases them */
    c->prog.counters = c->off_counters;
    c->prog.instructions = 0; /* why 0: the VM reads each entry's instruction from its context */
    c->prog.sm_queue_offset = off_qoff;
    c->prog.sm_queue = 0;     /* and walks the contexts in queue order */
    c->prog.scratch = 0;
    c->prog.abort_flag = c->off_status;
    c->prog.timing = 0;
    c->prog.contexts = c->off_contexts;
    c->prog.n_buffers = p->n_buffers;
    c->prog.n_counters = c->n_counters;
    c->prog.n_instructions = c->n_tasks;
    c->prog.num_sms = c->num_sms;
    c->prog.abi_major = AMK_ABI_VERSION_MAJOR;
    c->prog.abi_minor = AMK_ABI_VERSION_MINOR;
    return AMK_OK;
overflow:
    amk__free(page_off);
    amk__free(page_bytes);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "the device arena's size overflows");
}

/* ---- the device image set (amk_image_set_find) ---- */
#define AMK__IMAGE_SET_MAGIC "AMKIMGS1"
#define AMK__IMAGE_SET_HEAD 16  /* magic, count, reserved */
#define AMK__IMAGE_SET_ENTRY 24 /* kind, reserved, offset, size */

AMK_API int amk_image_set_is(const void *blob, size_t size) {
    return blob && size >= 8 && memcmp(blob, AMK__IMAGE_SET_MAGIC, 8) == 0;
}

AMK_API amk_result amk_image_set_find(const void *blob, size_t size, amk_image_kind kind, const void **image,
                                      size_t *image_size, amk_diag *d) {
    const uint8_t *b = (const uint8_t *)blob, *found = NULL;
    size_t found_size = 0;
    uint32_t count, i;
    if (image) *image = NULL;
    if (image_size) *image_size = 0;
    if (!blob || !image || !image_size) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_image_set_find: NULL argument");
    if (!amk_image_set_is(blob, size)) return amk__fail(d, AMK_ERR_PARSE, "not a device image set (no AMKIMGS1 magic)");
    if (size < AMK__IMAGE_SET_HEAD) return amk__fail(d, AMK_ERR_PARSE, "device image set: %zu bytes, shorter than its header", size);
    count = (uint32_t)amk__gguf_le64(b + 8); /* the low word: the count; the high one reserved */
    if (count < 1 || count > AMK_IMAGE_SET_MAX)
        return amk__fail(d, AMK_ERR_PARSE, "device image set: %u images (1..%d)", count, AMK_IMAGE_SET_MAX);
    if ((size - AMK__IMAGE_SET_HEAD) / AMK__IMAGE_SET_ENTRY < count)
        return amk__fail(d, AMK_ERR_PARSE, "device image set: %u entries do not fit in %zu bytes", count, size);
    for (i = 0; i < count; i++) { /* every entry is checked, the one returned or not */
        const uint8_t *e = b + AMK__IMAGE_SET_HEAD + (size_t)i * AMK__IMAGE_SET_ENTRY;
        const uint64_t off = amk__gguf_le64(e + 8), n = amk__gguf_le64(e + 16);
        if (n == 0 || off > size || n > size - off)
            return amk__fail(d, AMK_ERR_PARSE, "device image set: image %u (offset %llu, %llu bytes) is not inside the %zu-byte set", i,
                             (unsigned long long)off, (unsigned long long)n, size);
        if ((uint32_t)amk__gguf_le64(e) == (uint32_t)kind && !found) {
            found = b + off;
            found_size = (size_t)n;
        }
    }
    if (!found) return amk__fail(d, AMK_ERR_NOT_FOUND, "device image set: no image of kind %d", (int)kind);
    *image = found; /* only now: a malformed later entry leaves the outputs empty */
    *image_size = found_size;
    return AMK_OK;
}

AMK_API int amk_cuda_wants_full(const amk_program *p) {
    /* why the wider of the lean and ring limits: a false yes costs speed, never a result */
    const int64_t kmax = 128 * AMK_LEAN_PPL > 256 * AMK_RING_VPL ? 128 * AMK_LEAN_PPL : 256 * AMK_RING_VPL;
    int i;
    if (!p) return 0;
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        if (t->op == AMK_OP_ATTENTION_O ||
            ((t->op == AMK_OP_RMSNORM_GEMV || t->op == AMK_OP_RMSNORM_MLP) && amk__cuda_short_rows(p, t, kmax)))
            return 1;
    }
    return 0;
}

/* The image amk__cuda_load_image loads from what the caller passed: itself, or from a set the
   build AMK_CUDA_IMAGE names, else the general build when p takes no small-model form and the
   set has one, else the full build. *kind gets the kind loaded. */
AMK__FN amk_result amk__cuda_pick_image(const amk_program *p, const void **image, size_t *size, int *kind, amk_diag *d) {
    const char *force = getenv("AMK_CUDA_IMAGE");
    const void *blob = *image;
    const size_t n = *size;
    *kind = AMK_IMAGE_FULL;
    if (!amk_image_set_is(blob, n)) return AMK_OK;
    if (force && *force) {
        if (strcmp(force, "full") != 0 && strcmp(force, "general") != 0)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "AMK_CUDA_IMAGE is '%s': full or general", force);
        *kind = strcmp(force, "full") == 0 ? AMK_IMAGE_FULL : AMK_IMAGE_GENERAL;
    } else if (!amk_cuda_wants_full(p) && amk_image_set_find(blob, n, AMK_IMAGE_GENERAL, image, size, NULL) == AMK_OK) {
        *kind = AMK_IMAGE_GENERAL;
        return AMK_OK;
    }
    return amk_image_set_find(blob, n, (amk_image_kind)*kind, image, size, d);
}

/* Loads the image: cubin/fatbin as is, PTX NUL-terminated; ptxas/JIT errors into d->jit_log. */
AMK__FN amk_result amk__cuda_load_module(amk_cuda *c, const void *image, size_t size, amk__CUmodule *mod, amk_diag *d) {
    const unsigned char *b = (const unsigned char *)image;
    char local_log[512];
    char *log = d ? d->jit_log : local_log;
    size_t log_size = d ? sizeof d->jit_log : sizeof local_log;
    int opts[2] = {AMK__CU_JIT_ERROR_LOG_BUFFER, AMK__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2];
    char *copy = NULL;
    amk__CUresult r;
    int is_binary = size >= 4 && ((b[0] == 0x7F && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') ||
                                  (b[0] == 0x50 && b[1] == 0xED && b[2] == 0x55 && b[3] == 0xBA)); /* ELF or fatbin magic */
    log[0] = 0;
    vals[0] = log;
    vals[1] = (void *)(uintptr_t)log_size;
    if (!is_binary && b[size - 1] != 0) { /* PTX text the caller did not terminate */
        copy = (char *)amk__malloc(size + 1);
        if (!copy) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory copying the PTX image");
        memcpy(copy, image, size);
        copy[size] = 0;
        image = copy;
    }
    r = c->api.ModuleLoadDataEx(mod, image, 2, opts, vals);
    amk__free(copy);
    if (r != AMK__CUDA_SUCCESS) {
        *mod = NULL;
        return amk__cuda_err(c, d, r, "cuModuleLoadDataEx (see jit_log)");
    }
    return AMK_OK;
}

/* Loads the VM image (c->mod, c->fn and the service kernels the image has). */
AMK__FN amk_result amk__cuda_load_image(amk_cuda *c, const void *image, size_t size, amk_diag *d) {
    amk_result r = amk__cuda_load_module(c, image, size, &c->mod, d);
    if (r != AMK_OK) return r;
    AMK__CU_TRY(c, d, ModuleGetFunction(&c->fn, c->mod, "amk_vm_main"), "cuModuleGetFunction(amk_vm_main)");
    /* the service kernels are optional: an image without them still runs programs */
    if (c->api.ModuleGetFunction(&c->fn_bw_read, c->mod, "amk_bw_read") != AMK__CUDA_SUCCESS) c->fn_bw_read = NULL;
    if (c->api.ModuleGetFunction(&c->fn_bw_copy, c->mod, "amk_bw_copy") != AMK__CUDA_SUCCESS) c->fn_bw_copy = NULL;
    if (c->api.ModuleGetFunction(&c->fn_fill_random, c->mod, "amk_fill_random") != AMK__CUDA_SUCCESS) c->fn_fill_random = NULL;
    if (c->api.ModuleGetFunction(&c->fn_fill_value, c->mod, "amk_fill_value") != AMK__CUDA_SUCCESS) c->fn_fill_value = NULL;
    return AMK_OK;
}

/* The chained-steps build of the kind c loaded (c->mod_chain, c->fn_chain), when image is a set
   that has one; none is no error (amk_cuda_set_chain then says UNSUPPORTED). */
AMK__FN amk_result amk__cuda_load_chain(amk_cuda *c, const void *image, size_t size, amk_diag *d) {
    const void *one;
    size_t one_size;
    amk_result r;
    if (!amk_image_set_is(image, size) ||
        amk_image_set_find(image, size, (amk_image_kind)(c->info.image_kind + AMK_IMAGE_FULL_CHAIN), &one, &one_size, NULL) != AMK_OK)
        return AMK_OK;
    if ((r = amk__cuda_load_module(c, one, one_size, &c->mod_chain, d)) != AMK_OK) return r;
    AMK__CU_TRY(c, d, ModuleGetFunction(&c->fn_chain, c->mod_chain, "amk_vm_chain"), "cuModuleGetFunction(amk_vm_chain)");
    return AMK_OK;
}

/* Everything after the driver is up: launch shape, arena, tables. */
AMK__FN amk_result amk__cuda_setup(amk_cuda *c, const amk_program *p, amk_diag *d) {
    int optin = 0, static_smem = 0, fn_max_threads = 0, nb = 0, coop = 0, i, s;
    amk_buffer_t *bt;
    amk_result r;
    AMK__CU_TRY(c, d, DeviceGetAttribute(&optin, AMK__CU_DEV_ATTR_SMEM_PER_BLOCK_OPTIN, c->dev), "cuDeviceGetAttribute");
    AMK__CU_TRY(c, d, DeviceGetAttribute(&coop, AMK__CU_DEV_ATTR_COOPERATIVE_LAUNCH, c->dev), "cuDeviceGetAttribute");
    AMK__CU_TRY(c, d, FuncGetAttribute(&static_smem, AMK__CU_FUNC_ATTR_SHARED_SIZE_BYTES, c->fn), "cuFuncGetAttribute");
    AMK__CU_TRY(c, d, FuncGetAttribute(&fn_max_threads, AMK__CU_FUNC_ATTR_MAX_THREADS_PER_BLOCK, c->fn), "cuFuncGetAttribute");
    AMK__CU_TRY(c, d, FuncGetAttribute(&c->info.regs_per_thread, AMK__CU_FUNC_ATTR_NUM_REGS, c->fn), "cuFuncGetAttribute");
    if (!coop) return amk__fail(d, AMK_ERR_UNSUPPORTED, "device %s does not support cooperative launch", c->info.device_name);
    c->threads = p->has_config && p->config.threads_per_block > 0 ? p->config.threads_per_block : 256;
    if (c->threads > AMK__VM_MAX_THREADS) c->threads = AMK__VM_MAX_THREADS;
    if (c->threads > fn_max_threads) c->threads = fn_max_threads;
    c->threads &= ~31;
    if (c->threads < 32) return amk__fail(d, AMK_ERR_UNSUPPORTED, "the VM kernel allows %d threads a block", fn_max_threads);
    if (p->has_config && p->config.smem_bytes_per_block > 0) {
        c->smem_bytes = p->config.smem_bytes_per_block;
    } else { /* what the tasks would like, at most what the device allows; the driver then sizes L1 */
        c->smem_bytes = 16; /* why not 0: a valid, 16-byte area even when no task stages anything */
        for (i = 0; i < p->n_tasks; i++) {
            const int64_t w = amk__cuda_smem_want(p, &p->tasks[i], c->threads);
            if (w > c->smem_bytes) c->smem_bytes = w;
        }
        if (c->smem_bytes > (int64_t)optin - static_smem) c->smem_bytes = (int64_t)optin - static_smem;
    }
    if (c->smem_bytes + static_smem > optin || c->smem_bytes < 1)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "%lld bytes of dynamic shared memory (+%d static) exceed the device's %d",
                         (long long)c->smem_bytes, static_smem, optin);
    for (i = 0; i < p->n_tasks; i++)
        if ((r = amk__cuda_check_task(p, i, c->num_sms, c->threads, c->smem_bytes, c->info.image_kind, d)) != AMK_OK) return r;
    /* why: without raising the limit first, occupancy reads 0 above 48 KB (REFERENCE.md §4.3) */
    AMK__CU_TRY(c, d, FuncSetAttribute(c->fn, AMK__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)c->smem_bytes), "cuFuncSetAttribute");
    AMK__CU_TRY(c, d, OccupancyMaxActiveBlocks(&nb, c->fn, c->threads, (size_t)c->smem_bytes), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (nb < 1 || (int64_t)c->num_sms > (int64_t)nb * c->info.device_sms)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "the program needs %d co-resident blocks of %d threads and %lld bytes of "
                         "shared memory; device %s holds %d a SM x %d SMs", c->num_sms, c->threads,
                         (long long)c->smem_bytes, c->info.device_name, nb, c->info.device_sms);
    if (c->fn_chain) { /* optional: a chain kernel that does not fit the same launch is not used */
        int chain_static = 0;
        if (c->api.FuncGetAttribute(&chain_static, AMK__CU_FUNC_ATTR_SHARED_SIZE_BYTES, c->fn_chain) != AMK__CUDA_SUCCESS ||
            c->smem_bytes + chain_static > optin ||
            c->api.FuncSetAttribute(c->fn_chain, AMK__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)c->smem_bytes) != AMK__CUDA_SUCCESS ||
            c->api.OccupancyMaxActiveBlocks(&nb, c->fn_chain, c->threads, (size_t)c->smem_bytes) != AMK__CUDA_SUCCESS ||
            nb < 1 || (int64_t)c->num_sms > (int64_t)nb * c->info.device_sms)
            c->fn_chain = NULL;
    }
    c->info.can_chain = c->fn_chain != NULL;
    if (amk__cuda_kv_pairs(c, p) < 0) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_plan(c, p, d)) != AMK_OK) return r;
    if (c->arena_bytes > (uint64_t)SIZE_MAX) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "the device arena is too large");
    AMK__CU_TRY(c, d, MemAlloc(&c->arena, (size_t)c->arena_bytes), "cuMemAlloc (the arena)");
    AMK__CU_TRY(c, d, MemsetD8(c->arena, 0, (size_t)c->arena_bytes), "cuMemsetD8");
    c->prog.buffers += c->arena;
    c->prog.counters += c->arena;
    c->prog.sm_queue_offset += c->arena;
    c->prog.abort_flag += c->arena;
    c->prog.contexts += c->arena;
    /* tables: buffers, instructions and queues (task-list order filtered by SM: spec §3.1) on the
       host, resolved into the contexts the device reads */
    bt = c->bufs = (amk_buffer_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(amk_buffer_t));
    if (!bt) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < p->n_buffers; i++) {
        const amk_buffer *b = &p->buffers[i];
        int64_t stride = 1;
        bt[i].ptr = c->arena + c->buf_off[i];
        bt[i].numel = amk_buffer_numel(b);
        bt[i].rank = b->rank;
        bt[i].dtype = b->dtype;
        bt[i].space = b->space;
        bt[i].kind = b->kind;
        for (s = b->rank - 1; s >= 0; s--) {
            bt[i].shape[s] = b->shape[s];
            bt[i].stride[s] = stride;
            stride *= b->shape[s] > 0 ? b->shape[s] : 1; /* why: numel fits int64, so this does */
        }
    }
    c->no_prefetch = p->has_config && p->config.pipelining_depth == 0;
    for (i = 0; i < p->n_tasks; i++) {
        amk__cuda_instruction(&p->tasks[i], &c->ins[i]);
        amk__cuda_task_prefetches(c, i); /* its own: the plan ahead below needs them */
    }
    if (amk__cuda_kv_hints(p, c->ins) < 0) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_kv_maps(c, p, d)) != AMK_OK) return r;
    if (AMK_VM_AHEAD_BYTES > 0u && !c->no_prefetch && p->n_tasks > 0) {
        c->ahead = (amk__cuda_ahead *)amk__calloc((size_t)p->n_tasks, sizeof(amk__cuda_ahead));
        if (!c->ahead) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        (void)amk__cuda_plan_ahead(bt, p->n_buffers, c->ins, p->n_tasks, AMK_VM_AHEAD_BYTES, AMK_VM_AHEAD_PIECE,
                                   c->ahead);
        for (i = 0; i < p->n_tasks; i++) amk__cuda_apply_ahead(&c->ins[i], &c->ahead[i]);
    }
    for (i = 0; i < p->n_tasks; i++) c->queue_off[p->tasks[i].sm + 1]++;
    for (s = 0; s < c->num_sms; s++) c->queue_off[s + 1] += c->queue_off[s];
    {
        int32_t *fill = (int32_t *)amk__calloc((size_t)c->num_sms, sizeof(int32_t));
        if (!fill) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        for (i = 0; i < p->n_tasks; i++) c->queue[c->queue_off[p->tasks[i].sm] + fill[p->tasks[i].sm]++] = i;
        amk__free(fill);
    }
    for (i = 0; i < p->n_tasks; i++) {
        c->queue_pos[c->queue[i]] = i;
        amk__cuda_context(c, i);
    }
    if (p->n_buffers)
        AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.buffers, bt, (size_t)p->n_buffers * sizeof(amk_buffer_t)), "cuMemcpyHtoD (buffer table)");
    if (c->n_tasks) {
        AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.contexts, c->ctxs, (size_t)c->n_tasks * sizeof(amk_vm_ctx_t)),
                    "cuMemcpyHtoD (context table)");
    }
    AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.sm_queue_offset, c->queue_off, (size_t)(c->num_sms + 1) * 4), "cuMemcpyHtoD");
    AMK__CU_TRY(c, d, MemAllocHost((void **)&c->host_status, (size_t)(AMK_VM_STATUS_WORDS(c->num_sms) + 1) * 4), "cuMemAllocHost");
    c->host_abort = c->host_status + AMK_VM_STATUS_WORDS(c->num_sms);
    AMK__CU_TRY(c, d, StreamCreate(&c->stream, AMK__CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    AMK__CU_TRY(c, d, StreamCreate(&c->ctl, AMK__CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    c->info.grid = c->num_sms;
    c->info.threads = c->threads;
    c->info.smem_bytes = c->smem_bytes;
    c->info.arena_bytes = (int64_t)c->arena_bytes;
    return AMK_OK;
}

/* amk_cuda_create without amk_program_validate (the memory-safety checks still run): the test
   suite uses it to launch programs validate would refuse (a wait that can never be met). */
AMK__FN amk_result amk__cuda_create_unchecked(const amk_program *p, const void *image,
                                             size_t image_size, amk_cuda **out, amk_diag *d) {
    amk_cuda *c;
    amk_result r;
    int i, num_sms = 0, n_dev = 0;
    if (out) *out = NULL;
    if (!p || !image || !image_size || !out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create: NULL or empty argument");
    if (p->n_tasks < 0 || p->n_buffers < 0 || p->n_counters < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create: negative counts");
    for (i = 0; i < p->n_tasks; i++)
        if (p->tasks[i].sm + 1 > num_sms) num_sms = p->tasks[i].sm + 1;
    if (p->has_target) {
        if (p->target.num_sms < num_sms || p->target.num_sms < 1)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "target %s has %d SMs; tasks use %d", p->target.name, p->target.num_sms, num_sms);
        num_sms = p->target.num_sms;
    }
    if (num_sms < 1) num_sms = 1;
    for (i = 0; i < p->n_tasks; i++) /* before the driver: no GPU needed to report a bad program */
        if ((r = amk__cuda_check_task(p, i, num_sms, 0, 0, AMK_IMAGE_FULL, d)) != AMK_OK) return r;
    c = (amk_cuda *)amk__calloc(1, sizeof(amk_cuda));
    if (!c) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    c->n_buffers = p->n_buffers;
    c->n_tasks = p->n_tasks;
    c->n_counters = p->n_counters;
    c->num_sms = num_sms;
    c->counters_dirty = 1; /* the arena's counters are not zeroed yet */
    c->buf_off = (uint64_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(uint64_t));
    c->buf_bytes = (int64_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(int64_t));
    c->ins = (amk_instruction_t *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(amk_instruction_t));
    c->queue = (int32_t *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(int32_t));
    c->queue_off = (int32_t *)amk__calloc((size_t)num_sms + 1, sizeof(int32_t));
    c->queue_pos = (int32_t *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(int32_t));
    c->ctxs = (amk_vm_ctx_t *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(amk_vm_ctx_t));
    if (!c->buf_off || !c->buf_bytes || !c->ins || !c->queue || !c->queue_off || !c->queue_pos || !c->ctxs) {
        amk_cuda_free(c);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if ((r = amk__cuda_open_driver(c, d)) != AMK_OK) { amk_cuda_free(c); return r; }
    {
        amk__CUresult cr = c->api.Init(0);
        if (cr != AMK__CUDA_SUCCESS) {
            amk__cuda_err(c, d, cr, "cuInit");
            amk_cuda_free(c);
            return amk__fail(d, AMK_ERR_NO_DRIVER, "no usable CUDA device: cuInit failed with %s", d ? d->cuda_error : "an error");
        }
    }
    if (c->api.DeviceGetCount(&n_dev) != AMK__CUDA_SUCCESS || n_dev < 1) {
        amk_cuda_free(c);
        return amk__fail(d, AMK_ERR_NO_DRIVER, "the CUDA driver sees no device");
    }
    r = AMK_OK;
    AMK__CU_GOTO(DeviceGet(&c->dev, 0), "cuDeviceGet", fail);
    AMK__CU_GOTO(DeviceGetName(c->info.device_name, (int)sizeof c->info.device_name, c->dev), "cuDeviceGetName", fail);
    AMK__CU_GOTO(DeviceGetAttribute(&c->info.cc_major, AMK__CU_DEV_ATTR_CC_MAJOR, c->dev), "cuDeviceGetAttribute", fail);
    AMK__CU_GOTO(DeviceGetAttribute(&c->info.cc_minor, AMK__CU_DEV_ATTR_CC_MINOR, c->dev), "cuDeviceGetAttribute", fail);
    AMK__CU_GOTO(DeviceGetAttribute(&c->info.device_sms, AMK__CU_DEV_ATTR_MULTIPROCESSOR_COUNT, c->dev), "cuDeviceGetAttribute", fail);
    AMK__CU_GOTO(DriverGetVersion(&c->info.driver_version), "cuDriverGetVersion", fail);
    AMK__CU_GOTO(PrimaryCtxRetain(&c->ctx, c->dev), "cuDevicePrimaryCtxRetain", fail);
    AMK__CU_GOTO(CtxPushCurrent(c->ctx), "cuCtxPushCurrent", fail);
    {
        const void *one = image;
        size_t one_size = image_size;
        r = amk__cuda_pick_image(p, &one, &one_size, &c->info.image_kind, d);
        if (r == AMK_OK) r = amk__cuda_load_image(c, one, one_size, d);
        if (r == AMK_OK) r = amk__cuda_load_chain(c, image, image_size, d);
        if (r == AMK_OK) r = amk__cuda_setup(c, p, d);
    }
    amk__cuda_leave(c);
    if (r != AMK_OK) goto fail;
    *out = c;
    return AMK_OK;
fail:
    amk_cuda_free(c);
    return r;
}

/* ---- public functions --------------------------------------------------------------------------- */

AMK_API amk_result amk_cuda_create(const amk_program *p, const void *image, size_t image_size,
                                   amk_cuda **out, amk_diag *d) {
    amk_report rep;
    amk_result r;
    if (out) *out = NULL;
    if (!p) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create: NULL program");
    memset(&rep, 0, sizeof rep);
    r = amk_program_validate(p, &rep);
    if (r == AMK_ERR_REJECTED) {
        int i;
        for (i = 0; i < rep.n_items; i++) {
            if (!rep.items[i].is_error) continue;
            if (d) {
                snprintf(d->check, sizeof d->check, "%s", amk_check_id(rep.items[i].check));
                d->task = rep.items[i].task;
                d->buffer = rep.items[i].buffer;
                d->counter = rep.items[i].counter;
            }
            amk__fail(d, AMK_ERR_REJECTED, "validate: %s", rep.items[i].message);
            break;
        }
        if (i == rep.n_items) amk__fail(d, AMK_ERR_REJECTED, "validate rejected the program");
        amk_report_free(&rep);
        return AMK_ERR_REJECTED;
    }
    amk_report_free(&rep);
    if (r == AMK_ERR_OUT_OF_MEMORY) return amk__fail(d, r, "out of memory validating the program");
    return amk__cuda_create_unchecked(p, image, image_size, out, d);
}

AMK_API void amk_cuda_free(amk_cuda *c) {
    if (!c) return;
    if (c->lib && c->ctx) {
        amk__CUcontext old;
        if (c->api.CtxPushCurrent(c->ctx) == AMK__CUDA_SUCCESS) {
            if (c->stream) c->api.StreamDestroy(c->stream);
            if (c->ctl) c->api.StreamDestroy(c->ctl);
            if (c->host_status) c->api.MemFreeHost(c->host_status);
            if (c->host_io) c->api.MemFreeHost(c->host_io);
            if (c->chain_dev) c->api.MemFree(c->chain_dev);
            if (c->arena) c->api.MemFree(c->arena);
            if (c->mod) c->api.ModuleUnload(c->mod);
            if (c->mod_chain) c->api.ModuleUnload(c->mod_chain);
            c->api.CtxPopCurrent(&old);
        }
        c->api.PrimaryCtxRelease(c->dev);
    }
#if !defined(_WIN32)
    if (c->lib) dlclose(c->lib);
#endif
    amk__free(c->buf_off);
    amk__free(c->buf_bytes);
    amk__free(c->bufs);
    amk__free(c->ins);
    amk__free(c->queue);
    amk__free(c->queue_off);
    amk__free(c->queue_pos);
    amk__free(c->ctxs);
    amk__free(c->ahead);
    amk__free(c->kv_pair);
    amk__free(c->kv_pair_task);
    amk__free(c->kv_pair_rows);
    amk__free(c);
}

/* The checks of a whole-buffer copy: c given, host given unless nbytes is 0, buffer id exists and
   holds exactly nbytes. */
AMK__FN amk_result amk__cuda_check_copy(const amk_cuda *c, int id, const void *host, size_t nbytes, int up,
                                        amk_diag *d) {
    if (!c || (!host && nbytes)) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_%s: NULL argument", up ? "upload" : "download");
    if (id < 0 || id >= c->n_buffers) {
        if (d) d->buffer = id;
        return amk__fail(d, AMK_ERR_INVALID_ARG, "buffer %d does not exist", id);
    }
    if ((uint64_t)nbytes != (uint64_t)c->buf_bytes[id]) {
        if (d) d->buffer = id;
        return amk__fail(d, AMK_ERR_MISMATCH, "buffer %d holds %lld bytes, not %llu", id,
                         (long long)c->buf_bytes[id], (unsigned long long)nbytes);
    }
    return AMK_OK;
}

AMK__FN amk_result amk__cuda_copy(amk_cuda *c, int id, void *host, size_t nbytes, int up, amk_diag *d) {
    amk_result r;
    amk__CUresult cr;
    if ((r = amk__cuda_check_copy(c, id, host, nbytes, up, d)) != AMK_OK) return r;
    if (!nbytes) return AMK_OK;
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    cr = up ? c->api.MemcpyHtoD(c->arena + c->buf_off[id], host, nbytes)
            : c->api.MemcpyDtoH(host, c->arena + c->buf_off[id], nbytes);
    amk__cuda_leave(c);
    return cr == AMK__CUDA_SUCCESS ? AMK_OK : amk__cuda_err(c, d, cr, up ? "cuMemcpyHtoD" : "cuMemcpyDtoH");
}

AMK_API amk_result amk_cuda_upload(amk_cuda *c, int buffer_id, const void *host, size_t nbytes,
                                   amk_diag *d) {
    return amk__cuda_copy(c, buffer_id, (void *)(uintptr_t)host, nbytes, 1, d);
}
AMK_API amk_result amk_cuda_download(amk_cuda *c, int buffer_id, void *host, size_t nbytes,
                                     amk_diag *d) {
    return amk__cuda_copy(c, buffer_id, host, nbytes, 0, d);
}

/* Re-checks and re-marshals every task (all) or the n_list listed, then uploads the table. */
AMK__FN amk_result amk__cuda_update(amk_cuda *c, const amk_program *p, int all, const int *list,
                                    int n_list, amk_diag *d) {
    amk_result r;
    amk__CUresult cr;
    int k, j, n, lo, hi, kv = 0;
    if (!c || !p || (!all && (n_list < 0 || (n_list > 0 && !list))))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_update_params: bad argument");
    if (p->n_tasks != c->n_tasks || p->n_buffers != c->n_buffers || p->n_counters != c->n_counters)
        return amk__fail(d, AMK_ERR_MISMATCH, "not the program this amk_cuda was created from (task, buffer or counter count)");
    n = all ? p->n_tasks : n_list;
    for (k = 0; k < n; k++) {
        const int i = all ? k : list[k];
        const amk_task *t;
        const amk_instruction_t *in;
        int same;
        if (i < 0 || i >= p->n_tasks) return amk__fail(d, AMK_ERR_INVALID_ARG, "task index %d out of range", i);
        t = &p->tasks[i];
        in = &c->ins[i];
        same = t->op == in->op && t->sm == in->sm && t->out_counter == in->out_counter &&
               t->n_inputs == in->n_inputs && t->n_outputs == in->n_outputs && t->n_waits == in->n_waits;
        for (j = 0; same && j < t->n_inputs; j++) same = t->inputs[j] == in->inputs[j];
        for (j = 0; same && j < t->n_outputs; j++) same = t->outputs[j] == in->outputs[j];
        for (j = 0; same && j < t->n_waits; j++)
            same = t->waits[j].counter == in->wait_counter[j] && t->waits[j].threshold == (int64_t)in->wait_threshold[j];
        if (!same) {
            if (d) d->task = i;
            return amk__fail(d, AMK_ERR_MISMATCH, "task %d differs from the program this amk_cuda was created from", i);
        }
        if ((r = amk__cuda_check_task(p, i, c->num_sms, c->threads, c->smem_bytes, c->info.image_kind, d)) != AMK_OK) return r;
    }
    lo = c->n_tasks;
    hi = -1;
    for (k = 0; k < n; k++) { /* the params, the prefetches that follow from them, the contexts */
        const int i = all ? k : list[k], q = c->queue_pos[i];
        const int32_t was = c->ins[i].params.flags;
        amk_task_marshal_params(&p->tasks[i], &c->ins[i].params);
        amk__cuda_task_prefetches(c, i);
        amk__cuda_context(c, q);
        if (q < lo) lo = q;
        if (q > hi) hi = q;
        if (c->ins[i].op == AMK_OP_RMSNORM_GEMV && ((uint32_t)(was ^ c->ins[i].params.flags) & AMK_GEMV_FLAG_KV_ROW)) kv = 1;
    }
    if (kv) { /* why only then: the hints follow from the writers' KV_ROW flag, the rest is fixed */
        const int changed = amk__cuda_kv_hints(p, c->ins);
        if (changed < 0) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        if (changed > 0) {
            for (k = 0; k < c->n_tasks; k++) amk__cuda_context(c, k);
            lo = 0;
            hi = c->n_tasks - 1;
        }
    }
    if (!c->n_tasks || n == 0) return AMK_OK;
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    /* why the span: a step's update (the spec path's positions) is a few tasks */
    cr = c->api.MemcpyHtoD(c->prog.contexts + (uint64_t)lo * sizeof(amk_vm_ctx_t), c->ctxs + lo,
                           (size_t)(hi - lo + 1) * sizeof(amk_vm_ctx_t));
    amk__cuda_leave(c);
    return cr == AMK__CUDA_SUCCESS ? AMK_OK : amk__cuda_err(c, d, cr, "cuMemcpyHtoD (context table)");
}

AMK_API amk_result amk_cuda_update_params(amk_cuda *c, const amk_program *p, amk_diag *d) {
    return amk__cuda_update(c, p, 1, NULL, 0, d);
}

AMK_API amk_result amk_cuda_update_task_params(amk_cuda *c, const amk_program *p, const int *tasks,
                                               int n_tasks, amk_diag *d) {
    return amk__cuda_update(c, p, 0, tasks, n_tasks, d);
}

AMK_API void amk_cuda_set_timing(amk_cuda *c, int on) {
    if (c) c->timing_on = on != 0;
}

AMK_API void amk_cuda_get_info(const amk_cuda *c, amk_cuda_info *info) {
    if (!info) return;
    if (!c) { memset(info, 0, sizeof *info); return; }
    *info = c->info;
}

/* Waits for the launch stream until deadline_ms (monotonic). 1 done, 0 still running, or an
   error (the kernel faulted). Polls hard for the first 2 ms, then every 50 us. */
AMK__FN int amk__cuda_wait_stream(amk_cuda *c, double deadline_ms, amk__CUresult *err) {
    const double t0 = amk__cuda_now_ms();
    for (;;) {
        amk__CUresult r = c->api.StreamQuery(c->stream);
        double now;
        if (r == AMK__CUDA_SUCCESS) return 1;
        if (r != AMK__CUDA_ERROR_NOT_READY) { *err = r; return -1; }
        now = amk__cuda_now_ms();
        if (now >= deadline_ms) return 0;
        if (now - t0 > 2.0) amk__cuda_sleep_us(50); /* why: keep short launches' latency low */
    }
}

/* After an aborted launch: which blocks had not finished, where, and on what. */
AMK__FN amk_result amk__cuda_report_stuck(amk_cuda *c, double timeout_ms, amk_diag *d) {
    uint32_t *ctr = (uint32_t *)amk__calloc((size_t)(c->n_counters ? c->n_counters : 1), 4);
    amk__sb sb;
    int s, n_stuck = 0, first = 1;
    memset(&sb, 0, sizeof sb);
    if (ctr && c->n_counters)
        c->api.MemcpyDtoH(ctr, c->prog.counters, (size_t)c->n_counters * 4);
    for (s = 0; s < c->num_sms; s++) {
        const int len = c->queue_off[s + 1] - c->queue_off[s];
        const int done = (int)c->host_status[AMK_VM_STATUS_PROGRESS + s]; /* over the launch's steps */
        if (done >= len * c->launch_steps) continue;
        n_stuck++;
        if (n_stuck <= 4 && done >= 0) { /* len > 0 here */
            const int ti = c->queue[c->queue_off[s] + done % len], step = done / len;
            const uint32_t ep = c->launch_epoch + (uint32_t)step; /* the stuck step's epoch */
            const amk_instruction_t *in = &c->ins[ti];
            char at[32] = "";
            int w, wc = -1;
            if (c->launch_steps > 1) snprintf(at, sizeof at, " in chained step %d", step);
            for (w = 0; w < in->n_waits && ctr; w++)
                if ((int32_t)(ctr[in->wait_counter[w]] - in->wait_threshold[w] * ep) < 0) { wc = w; break; }
            if (wc >= 0) /* the counts of this step: the epochs before it added threshold each */
                amk__sb_printf(&sb, "%sSM %d at task %d (id %d, %s)%s waits on counter %d (%u < %u)", first ? "" : "; ",
                               s, ti, in->id, amk_op_name(in->op), at, in->wait_counter[wc],
                               ctr[in->wait_counter[wc]] - in->wait_threshold[wc] * (ep - 1u), in->wait_threshold[wc]);
            else
                amk__sb_printf(&sb, "%sSM %d at task %d (id %d, %s)%s, running", first ? "" : "; ", s, ti, in->id,
                               amk_op_name(in->op), at);
            if (first && d) {
                d->task = ti;
                d->counter = wc >= 0 ? in->wait_counter[wc] : -1;
            }
            first = 0;
        }
    }
    amk__fail(d, AMK_ERR_TIMEOUT, "launch exceeded %.0f ms and was aborted; %d of %d SMs had not finished: %s%s",
              timeout_ms, n_stuck, c->num_sms, sb.p ? sb.p : "", n_stuck > 4 ? "; ..." : "");
    amk__sb_free(&sb);
    amk__free(ctr);
    return AMK_ERR_TIMEOUT;
}

/* Enqueues one launch on c->stream (c's context current): the next epoch (amk_program_t.epoch; the
   counters and status words zeroed first when the last launch did not complete cleanly, or the
   epoch would pass 2^30), the timing records zeroed when timing is on, then the cooperative
   launch. *prog gets the launch's parameters. The launch counts as unfinished until
   amk__cuda_complete sees it end cleanly. why epochs, not a memset before every launch (spec §8:
   host-memset 0; the issue allows an epoch scheme): the memset is one more small operation on the
   stream before every step: with it SmolLM2's step was ~1-1.5 us slower (bench/RESULTS.md runs 236
   and 238; 1B and 8B inside the spread; the harness resolves ~0.5%, run 244) */
#define AMK__CUDA_EPOCH_MAX (1u << 30)
AMK__FN amk_result amk__cuda_launch(amk_cuda *c, amk_program_t *prog, int steps, amk_diag *d) {
    const size_t status_bytes = (size_t)AMK_VM_STATUS_WORDS(c->num_sms) * 4;
    amk_vm_chain_t chain;
    void *args[2];
    *prog = c->prog;
    prog->timing = c->timing_on ? c->arena + c->off_timing : 0;
    if (c->counters_dirty || c->epoch >= AMK__CUDA_EPOCH_MAX - (uint32_t)steps) { /* counters and status words are adjacent: one memset */
        AMK__CU_TRY(c, d, MemsetD8Async(prog->counters, 0, (size_t)(c->off_status - c->off_counters) + status_bytes, c->stream), "cuMemsetD8Async");
        c->epoch = 0;
        c->chain_base = 0;
    }
    c->counters_dirty = 1; /* until amk__cuda_complete sees this launch end cleanly */
    prog->epoch = c->launch_epoch = c->epoch + 1u;
    c->epoch += (uint32_t)steps; /* step s of the launch runs on epoch prog->epoch + s */
    c->launch_steps = steps;
    memset(&chain, 0, sizeof chain);
    if (steps > 1) { /* amk_vm_chain's second parameter */
        chain.n_steps = steps;
        chain.blocks = c->chain_blocks;
        chain.feeder = c->chain_feeder;
        chain.base = c->chain_base;
        chain.next = c->arena + c->buf_off[c->chain.next_buf];
        chain.token = c->arena + c->buf_off[c->chain.token_buf];
        chain.pos = c->arena + c->buf_off[c->chain.pos_buf];
        chain.tokens = c->chain_dev;
        c->chain_base += (uint32_t)steps - 1u; /* the joins once the launch completes (else all is zeroed) */
    }
    if (c->timing_on && c->n_tasks)
        AMK__CU_TRY(c, d, MemsetD8Async(prog->timing, 0, (size_t)c->n_tasks * AMK__CUDA_TIMING_BYTES, c->stream), "cuMemsetD8Async");
    args[0] = prog;
    args[1] = &chain;
    AMK__CU_TRY(c, d, LaunchCooperativeKernel(steps > 1 ? c->fn_chain : c->fn, (unsigned)c->num_sms, 1, 1, (unsigned)c->threads,
                                              1, 1, (unsigned)c->smem_bytes, c->stream, args), "cuLaunchCooperativeKernel");
    c->timed_run = c->timing_on;
    return AMK_OK;
}

/* After amk__cuda_launch: copies the status words back, waits for the stream (past timeout_ms,
   <= 0: the default, the watchdog raises the abort flag) and turns the status into a result. */
AMK__FN amk_result amk__cuda_complete(amk_cuda *c, const amk_program_t *prog, double timeout_ms, amk_diag *d) {
    const size_t status_bytes = (size_t)AMK_VM_STATUS_WORDS(c->num_sms) * 4;
    const uint32_t *st_words = c->host_status;
    amk__CUresult cr = AMK__CUDA_SUCCESS;
    int s, st;
    if (timeout_ms <= 0) timeout_ms = AMK__CUDA_DEFAULT_TIMEOUT_MS;
    AMK__CU_TRY(c, d, MemcpyDtoHAsync(c->host_status, prog->abort_flag, status_bytes, c->stream), "cuMemcpyDtoHAsync");
    st = amk__cuda_wait_stream(c, amk__cuda_now_ms() + timeout_ms, &cr);
    if (st < 0) return amk__cuda_err(c, d, cr, "the megakernel launch");
    if (st == 0) { /* watchdog: raise the abort flag through the second stream */
        *c->host_abort = AMK_VM_ABORT_HOST;
        AMK__CU_TRY(c, d, MemcpyHtoDAsync(prog->abort_flag, c->host_abort, 4, c->ctl), "cuMemcpyHtoDAsync (abort)");
        AMK__CU_TRY(c, d, StreamSynchronize(c->ctl), "cuStreamSynchronize (abort)");
        st = amk__cuda_wait_stream(c, amk__cuda_now_ms() + AMK__CUDA_ABORT_GRACE_MS, &cr);
        if (st < 0) return amk__cuda_err(c, d, cr, "the aborted megakernel launch");
        if (st == 0)
            return amk__fail(d, AMK_ERR_TIMEOUT, "launch exceeded %.0f ms and did not stop %.0f ms after the abort flag; "
                             "the GPU context may be unusable", timeout_ms, AMK__CUDA_ABORT_GRACE_MS);
        return amk__cuda_report_stuck(c, timeout_ms, d);
    }
    if (st_words[AMK_VM_STATUS_ABORT] == AMK_VM_ABORT_ERROR) {
        const uint32_t ti = st_words[AMK_VM_STATUS_ERR_TASK], code = st_words[AMK_VM_STATUS_ERR_CODE];
        const int32_t val = (int32_t)st_words[AMK_VM_STATUS_ERR_VALUE];
        if (d) d->task = ti < (uint32_t)c->n_tasks ? (int)ti : -1;
        return amk__fail(d, AMK_ERR_RUNTIME, "task %u (%s): %s %d", ti,
                         ti < (uint32_t)c->n_tasks ? amk_op_name(c->ins[ti].op) : "?",
                         code == AMK_VM_ERR_EMBED_ID ? "token id out of range:" : code == AMK_VM_ERR_ROPE_POS ? "negative position:"
                         : code == AMK_VM_ERR_SMEM ? "shared memory too small for" : code == AMK_VM_ERR_BAD_OP ? "bad opcode"
                         : "device error", (int)val);
    }
    for (s = 0; s < c->num_sms; s++) /* a clean exit must have run every queue to its end, each step */
        if ((int64_t)st_words[AMK_VM_STATUS_PROGRESS + s] != (int64_t)(c->queue_off[s + 1] - c->queue_off[s]) * c->launch_steps)
            return amk__fail(d, AMK_ERR_RUNTIME, "the VM left SM %d's queue after %u of %lld tasks (abort word %u)", s,
                             st_words[AMK_VM_STATUS_PROGRESS + s],
                             (long long)(c->queue_off[s + 1] - c->queue_off[s]) * c->launch_steps, st_words[AMK_VM_STATUS_ABORT]);
    c->counters_dirty = 0; /* every task ran once a step: each counter holds epoch * its producer count */
    return AMK_OK;
}

AMK_API amk_result amk_cuda_run(amk_cuda *c, double timeout_ms, amk_diag *d) {
    amk_program_t prog;
    amk_result r;
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_run: NULL");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    r = amk__cuda_launch(c, &prog, 1, d);
    if (r == AMK_OK) r = amk__cuda_complete(c, &prog, timeout_ms, d);
    amk__cuda_leave(c);
    return r;
}

/* n rounded up to 16: run_io's staging slots start 16-byte aligned (pinned memory, DMA) */
AMK__FN size_t amk__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* amk_cuda_run_io for a launch of steps steps; with steps > 1 (a chain set) the chain's first
   steps - 1 tokens come back into tokens too, in the same wait. */
AMK__FN amk_result amk__cuda_run_io(amk_cuda *c, const amk_cuda_in *in, int n_in, const amk_cuda_out *out,
                                    int n_out, int steps, int32_t *tokens, double timeout_ms, amk_diag *d) {
    amk_program_t prog;
    amk_result r;
    const size_t tok_bytes = steps > 1 ? (size_t)(steps - 1) * 4 : 0;
    size_t need = amk__pad16(tok_bytes), off, out_base;
    int i;
    if (!c || n_in < 0 || n_out < 0 || (n_in && !in) || (n_out && !out))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_run_io: NULL argument or negative count");
    for (i = 0; i < n_in + n_out; i++) { /* why the sum cannot overflow: each is a buffer's size */
        const int up = i < n_in, id = up ? in[i].buffer_id : out[i - n_in].buffer_id;
        const void *host = up ? in[i].host : (const void *)out[i - n_in].host;
        const size_t nb = up ? in[i].nbytes : out[i - n_in].nbytes;
        if ((r = amk__cuda_check_copy(c, id, host, nb, up, d)) != AMK_OK) return r;
        need += amk__pad16(nb);
    }
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    if (need > c->host_io_cap) {
        void *p = NULL;
        amk__CUresult cr;
        if (c->host_io) c->api.MemFreeHost(c->host_io);
        c->host_io = NULL;
        c->host_io_cap = 0;
        if ((cr = c->api.MemAllocHost(&p, need)) != AMK__CUDA_SUCCESS) {
            amk__cuda_leave(c);
            return amk__cuda_err(c, d, cr, "cuMemAllocHost (run_io staging)");
        }
        c->host_io = (unsigned char *)p;
        c->host_io_cap = need;
    }
    for (i = 0, off = 0; i < n_in; off += amk__pad16(in[i].nbytes), i++) {
        if (!in[i].nbytes) continue;
        memcpy(c->host_io + off, in[i].host, in[i].nbytes);
        AMK__CU_GOTO(MemcpyHtoDAsync(c->arena + c->buf_off[in[i].buffer_id], c->host_io + off, in[i].nbytes, c->stream),
                     "cuMemcpyHtoDAsync (run_io)", done);
    }
    out_base = off; /* the outputs' staging follows the inputs', the chain's tokens last */
    if ((r = amk__cuda_launch(c, &prog, steps, d)) != AMK_OK) goto done;
    for (i = 0; i < n_out; off += amk__pad16(out[i].nbytes), i++)
        if (out[i].nbytes)
            AMK__CU_GOTO(MemcpyDtoHAsync(c->host_io + off, c->arena + c->buf_off[out[i].buffer_id], out[i].nbytes, c->stream),
                         "cuMemcpyDtoHAsync (run_io)", done);
    if (tok_bytes)
        AMK__CU_GOTO(MemcpyDtoHAsync(c->host_io + off, c->chain_dev, tok_bytes, c->stream), "cuMemcpyDtoHAsync (chain)", done);
    if ((r = amk__cuda_complete(c, &prog, timeout_ms, d)) != AMK_OK) goto done;
    for (i = 0, off = out_base; i < n_out; off += amk__pad16(out[i].nbytes), i++)
        if (out[i].nbytes) memcpy(out[i].host, c->host_io + off, out[i].nbytes);
    if (tok_bytes) memcpy(tokens, c->host_io + off, tok_bytes);
done:
    amk__cuda_leave(c);
    return r;
}

AMK_API amk_result amk_cuda_run_io(amk_cuda *c, const amk_cuda_in *in, int n_in, const amk_cuda_out *out,
                                   int n_out, double timeout_ms, amk_diag *d) {
    return amk__cuda_run_io(c, in, n_in, out, n_out, 1, NULL, timeout_ms, d);
}

AMK_API amk_result amk_cuda_set_chain(amk_cuda *c, const amk_cuda_chain *ch, amk_diag *d) {
    const int ids[3] = {ch ? ch->token_buf : -1, ch ? ch->pos_buf : -1, ch ? ch->next_buf : -1};
    int i, s, feeder = -1, blocks = 0;
    int64_t longest = 0;
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: NULL");
    c->chain_have_start = 0;
    if (!ch || ch->n_steps == 1) {
        c->chain.n_steps = 1;
        return AMK_OK;
    }
    if (!c->fn_chain)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "amk_cuda_set_chain: the device image has no chained-steps kernel for this "
                         "program's build (amk_vm_chain)");
    if (ch->n_steps < 1 || ch->n_steps > AMK_CUDA_MAX_CHAIN)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: n_steps %d is outside [1, %d]", ch->n_steps,
                         AMK_CUDA_MAX_CHAIN);
    for (i = 0; i < 3; i++) {
        const amk_buffer_t *b;
        if (ids[i] < 0 || ids[i] >= c->n_buffers)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: buffer id %d is out of range", ids[i]);
        b = &c->bufs[ids[i]];
        if (b->dtype != AMK_DTYPE_I32 || b->numel != 1 ||
            (i < 2 ? b->kind != AMK_KIND_IO_INPUT : b->kind != AMK_KIND_IO_OUTPUT && b->kind != AMK_KIND_ACTIVATION))
            return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: the %s buffer (id %d) must be %s", i == 0 ? "token"
                             : i == 1 ? "position" : "next-token", ids[i],
                             i < 2 ? "an IO_INPUT of one I32" : "an IO_OUTPUT or ACTIVATION of one I32");
    }
    if (ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2])
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: the token, position and next-token buffers must differ");
    for (i = 0; i < c->n_tasks && feeder < 0; i++) { /* the SM of next_buf's writer feeds: it finishes the step */
        int o;
        for (o = 0; o < c->ins[i].n_outputs; o++)
            if (c->ins[i].outputs[o] == ids[2]) feeder = c->ins[i].sm;
    }
    if (feeder < 0 || feeder >= c->num_sms)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: no task writes the next-token buffer (id %d)", ids[2]);
    for (s = 0; s < c->num_sms; s++) {
        const int64_t len = c->queue_off[s + 1] - c->queue_off[s];
        blocks += len > 0;
        if (len > longest) longest = len;
    }
    if (longest * ch->n_steps > INT32_MAX) /* the VM walks positions and counts progress in 32 bits */
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_set_chain: %d steps of a %lld-task queue are too many",
                         ch->n_steps, (long long)longest);
    if (ch->n_steps - 1 > c->chain_cap) {
        amk_result r;
        if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
        if (c->chain_dev) c->api.MemFree(c->chain_dev);
        c->chain_dev = 0;
        c->chain_cap = 0;
        r = AMK_OK;
        AMK__CU_GOTO(MemAlloc(&c->chain_dev, (size_t)(ch->n_steps - 1) * 4), "cuMemAlloc (chain tokens)", out);
        c->chain_cap = ch->n_steps - 1;
    out:
        amk__cuda_leave(c);
        if (r != AMK_OK) {
            c->chain.n_steps = 1;
            return r;
        }
    }
    c->chain = *ch;
    c->chain_feeder = feeder;
    c->chain_blocks = blocks;
    return AMK_OK;
}

AMK_API amk_result amk_cuda_run_chain(amk_cuda *c, int32_t token, int32_t pos, int32_t *tokens, double timeout_ms,
                                      amk_diag *d) {
    amk_cuda_in in[2];
    amk_cuda_out out[1];
    int n;
    if (!c || !tokens) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_run_chain: NULL argument");
    n = c->chain.n_steps;
    if (n < 2) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_run_chain: no chain set (amk_cuda_set_chain)");
    if (pos > INT32_MAX - (n - 1))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_run_chain: position %d plus %d steps passes INT32_MAX", (int)pos, n);
    c->chain_token0 = token;
    c->chain_pos0 = pos;
    c->chain_have_start = 1;
    in[0].buffer_id = c->chain.token_buf; in[0].host = &c->chain_token0; in[0].nbytes = 4;
    in[1].buffer_id = c->chain.pos_buf; in[1].host = &c->chain_pos0; in[1].nbytes = 4;
    out[0].buffer_id = c->chain.next_buf; out[0].host = &tokens[n - 1]; out[0].nbytes = 4;
    return amk__cuda_run_io(c, in, 2, out, 1, n, tokens, timeout_ms > 0 ? timeout_ms : AMK__CUDA_DEFAULT_TIMEOUT_MS * n, d);
}

AMK_API amk_result amk_cuda_timing(amk_cuda *c, amk_cuda_timing_record *records, int cap,
                                   int *n_out, amk_diag *d) {
    amk_vm_timing_t *raw;
    const amk_vm_marks_t *marks;
    amk__CUresult cr;
    amk_result r;
    uint64_t t0 = UINT64_MAX;
    int i, k, n;
    if (n_out) *n_out = 0;
    if (!c || (!records && cap > 0) || cap < 0) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_timing: bad argument");
    if (!c->timed_run) return amk__fail(d, AMK_ERR_INVALID_ARG, "the last run did not record timing (amk_cuda_set_timing)");
    n = cap < c->n_tasks ? cap : c->n_tasks;
    if (n == 0) return AMK_OK;
    /* the records, then the marks (AMK__CUDA_TIMING_BYTES a task) */
    raw = (amk_vm_timing_t *)amk__calloc((size_t)c->n_tasks, AMK__CUDA_TIMING_BYTES);
    if (!raw) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    marks = (const amk_vm_marks_t *)(raw + c->n_tasks);
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) { amk__free(raw); return r; }
    cr = c->api.MemcpyDtoH(raw, c->arena + c->off_timing, (size_t)c->n_tasks * AMK__CUDA_TIMING_BYTES);
    amk__cuda_leave(c);
    if (cr != AMK__CUDA_SUCCESS) { amk__free(raw); return amk__cuda_err(c, d, cr, "cuMemcpyDtoH (timing)"); }
    for (i = 0; i < c->n_tasks; i++)
        if (raw[i].done && raw[i].t_wait < t0) t0 = raw[i].t_wait;
    for (i = 0; i < n; i++) {
        amk_cuda_timing_record *o = &records[i];
        o->task = i;
        o->op = c->ins[i].op;
        o->sm = c->ins[i].sm;
        o->done = raw[i].done != 0;
        o->hw_sm = o->done ? (int)raw[i].smid : -1;
        o->wait_us = o->done ? (double)(raw[i].t_start - raw[i].t_wait) * 1e-3 : 0.0;
        o->start_us = o->done ? (double)(raw[i].t_start - t0) * 1e-3 : -1.0;
        o->end_us = o->done ? (double)(raw[i].t_end - t0) * 1e-3 : -1.0;
        for (k = 0; k < AMK_VM_MARKS_N; k++) o->mark_us[k] = o->done ? (double)marks[i].ns[k] * 1e-3 : 0.0;
    }
    amk__free(raw);
    if (n_out) *n_out = n;
    return AMK_OK;
}

/* ---- service kernels: bandwidth, fills, timed runs --------------------------------------------- */

#define AMK__CUDA_BW_WARMUP 2     /* why: the first launch pays for module and TLB setup */
#define AMK__CUDA_MAX_ITERS 10000 /* why: bounds the medians' scratch; far beyond any useful count */
#define AMK__CUDA_MAX_RUNS 100000

AMK__FN int amk__cuda_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorted in place); n >= 1. */
AMK__FN double amk__cuda_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), amk__cuda_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Launches fn (normal launch, grid x threads, no dynamic shared memory) AMK__CUDA_BW_WARMUP + iters
   times on c->stream, each timed with events; *ms gets the median of the timed ones. c's
   context is current; times is scratch of iters doubles. */
AMK__FN amk_result amk__cuda_time_kernel(amk_cuda *c, amk__CUfunction fn, unsigned grid, unsigned threads,
                                         void **args, int iters, amk__CUevent e0, amk__CUevent e1,
                                         double *times, double *ms, amk_diag *d) {
    int i;
    for (i = 0; i < AMK__CUDA_BW_WARMUP + iters; i++) {
        float t = 0.0f;
        AMK__CU_TRY(c, d, EventRecord(e0, c->stream), "cuEventRecord");
        AMK__CU_TRY(c, d, LaunchKernel(fn, grid, 1, 1, threads, 1, 1, 0, c->stream, args, NULL), "cuLaunchKernel");
        AMK__CU_TRY(c, d, EventRecord(e1, c->stream), "cuEventRecord");
        AMK__CU_TRY(c, d, EventSynchronize(e1), "cuEventSynchronize");
        AMK__CU_TRY(c, d, EventElapsedTime(&t, e0, e1), "cuEventElapsedTime");
        if (i >= AMK__CUDA_BW_WARMUP) times[i - AMK__CUDA_BW_WARMUP] = (double)t;
    }
    *ms = amk__cuda_median(times, iters);
    return AMK_OK;
}

/* One bandwidth configuration: copy == 0 reads `bytes` with amk_bw_read, copy != 0 copies the
   first half into the second with amk_bw_copy; blocks_per_sm <= 0 means as many as fit. *gbs
   gets the median in GB/s (read bytes, or read + write bytes). bytes is raised to 4x L2. */
AMK__FN amk_result amk__cuda_bw_measure(amk_cuda *c, size_t bytes, int iters, int copy, int blocks_per_sm,
                                        double *gbs, amk_diag *d) {
    amk__CUfunction fn = copy ? c->fn_bw_copy : c->fn_bw_read;
    amk__CUdeviceptr scratch = 0;
    amk__CUevent e0 = NULL, e1 = NULL;
    amk_result r;
    double *times, ms = 0.0;
    uint64_t n16, src, dst, sink;
    void *args[3];
    int l2 = 0, fit = 0;
    unsigned grid;
    *gbs = 0.0;
    if (!fn) return amk__fail(d, AMK_ERR_UNSUPPORTED, "the device image has no %s kernel (rebuild it)", copy ? "amk_bw_copy" : "amk_bw_read");
    if (iters < 1 || iters > AMK__CUDA_MAX_ITERS) return amk__fail(d, AMK_ERR_INVALID_ARG, "iters %d is outside [1, %d]", iters, AMK__CUDA_MAX_ITERS);
    times = (double *)amk__malloc((size_t)iters * sizeof(double));
    if (!times) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) { amk__free(times); return r; }
    AMK__CU_GOTO(DeviceGetAttribute(&l2, AMK__CU_DEV_ATTR_L2_CACHE_SIZE, c->dev), "cuDeviceGetAttribute", done);
    AMK__CU_GOTO(OccupancyMaxActiveBlocks(&fit, fn, AMK__VM_BW_THREADS, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor", done);
    if (fit < 1) { r = amk__fail(d, AMK_ERR_UNSUPPORTED, "the bandwidth kernel does not fit a SM"); goto done; }
    if (bytes > SIZE_MAX / 2) { r = amk__fail(d, AMK_ERR_INVALID_ARG, "a %llu-byte scratch buffer is too large", (unsigned long long)bytes); goto done; }
    if (bytes / 4 < (size_t)l2) bytes = (size_t)l2 * 4;
    bytes &= ~(size_t)31; /* why: whole 16-byte vectors in each half */
    grid = (unsigned)c->info.device_sms * (unsigned)(blocks_per_sm > 0 && blocks_per_sm < fit ? blocks_per_sm : fit);
    AMK__CU_GOTO(MemAlloc(&scratch, bytes + 256), "cuMemAlloc (bandwidth scratch)", done);
    AMK__CU_GOTO(MemsetD8Async(scratch, 0, bytes + 256, c->stream), "cuMemsetD8Async", done);
    AMK__CU_GOTO(EventCreate(&e0, AMK__CU_EVENT_DEFAULT), "cuEventCreate", done);
    AMK__CU_GOTO(EventCreate(&e1, AMK__CU_EVENT_DEFAULT), "cuEventCreate", done);
    sink = scratch + bytes; /* past what the kernels read */
    if (copy) {
        n16 = bytes / 32;
        dst = scratch + bytes / 2;
        src = scratch;
        args[0] = &dst; args[1] = &src; args[2] = &n16;
    } else {
        n16 = bytes / 16;
        src = scratch;
        args[0] = &src; args[1] = &n16; args[2] = &sink;
    }
    r = amk__cuda_time_kernel(c, fn, grid, AMK__VM_BW_THREADS, args, iters, e0, e1, times, &ms, d);
    if (r == AMK_OK && ms > 0.0) *gbs = (double)bytes / (ms * 1e-3) * 1e-9;
    else if (r == AMK_OK) r = amk__fail(d, AMK_ERR_CUDA, "the bandwidth kernel's time read 0 ms");
done:
    if (e0) c->api.EventDestroy(e0);
    if (e1) c->api.EventDestroy(e1);
    if (scratch) {
        c->api.StreamSynchronize(c->stream);
        c->api.MemFree(scratch);
    }
    amk__cuda_leave(c);
    amk__free(times);
    return r;
}

AMK_API amk_result amk_cuda_read_bandwidth(amk_cuda *c, size_t bytes, int iters, double *gbs,
                                           double *copy_gbs, amk_diag *d) {
    static const int per_sm[2] = {1, 0}; /* why: one block of 1024 a SM, and full occupancy */
    amk_result r;
    double g;
    int k;
    if (gbs) *gbs = 0.0;
    if (copy_gbs) *copy_gbs = 0.0;
    if (!c || !gbs) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_read_bandwidth: NULL argument");
    if (iters < 1 || iters > AMK__CUDA_MAX_ITERS) return amk__fail(d, AMK_ERR_INVALID_ARG, "iters %d is outside [1, %d]", iters, AMK__CUDA_MAX_ITERS);
    for (k = 0; k < 2; k++) {
        if ((r = amk__cuda_bw_measure(c, bytes, iters, 0, per_sm[k], &g, d)) != AMK_OK) return r;
        if (g > *gbs) *gbs = g;
        if (!copy_gbs) continue;
        if ((r = amk__cuda_bw_measure(c, bytes, iters, 1, per_sm[k], &g, d)) != AMK_OK) return r;
        if (g > *copy_gbs) *copy_gbs = g;
    }
    return AMK_OK;
}

/* The seed of buffer_id's stream: distinct buffers filled with one seed get unrelated values. */
AMK__FN uint64_t amk__cuda_fill_seed(uint64_t seed, int buffer_id) {
    uint64_t x = seed ^ ((uint64_t)(uint32_t)buffer_id * 0xD1B54A32D192ED03ull); /* why: an odd 64-bit constant */
    return amk__splitmix64(&x);
}

/* Launches a fill kernel over buffer id (random != 0: amk_fill_random) and waits for it. */
AMK__FN amk_result amk__cuda_fill(amk_cuda *c, int id, int random, uint64_t seed, float v, amk_diag *d) {
    const char *name = random ? "amk_cuda_fill_random" : "amk_cuda_fill_value";
    amk__CUfunction fn;
    amk__CUresult cr;
    amk_result r;
    uint64_t ptr, nbytes, chunks, blocks, kseed;
    int64_t numel;
    int32_t dtype;
    uint32_t count = 0;
    void *args[7];
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "%s: NULL", name);
    if (id < 0 || id >= c->n_buffers) {
        if (d) d->buffer = id;
        return amk__fail(d, AMK_ERR_INVALID_ARG, "buffer %d does not exist", id);
    }
    fn = random ? c->fn_fill_random : c->fn_fill_value;
    if (!fn) return amk__fail(d, AMK_ERR_UNSUPPORTED, "the device image has no %s kernel (rebuild it)", random ? "amk_fill_random" : "amk_fill_value");
    dtype = c->bufs[id].dtype;
    numel = c->bufs[id].numel;
    ptr = c->bufs[id].ptr;
    nbytes = (uint64_t)c->buf_bytes[id];
    if (random && amk_dtype_is_float(dtype) && !(v >= 0.0f && v <= FLT_MAX)) {
        if (d) d->buffer = id;
        return amk__fail(d, AMK_ERR_INVALID_ARG, "%s: scale %g must be finite and >= 0 for buffer %d (%s)", name, (double)v, id, amk_dtype_name(dtype));
    }
    if (random && !amk_dtype_is_float(dtype)) {
        /* why: the number of non-negative values each integer dtype holds */
        const double cap = dtype == AMK_DTYPE_I8 ? 128.0 : dtype == AMK_DTYPE_U8 ? 256.0 : dtype == AMK_DTYPE_I4 ? 8.0
                         : dtype == AMK_DTYPE_BOOL ? 2.0 : 2147483647.0;
        if (!(v >= 1.0f)) {
            if (d) d->buffer = id;
            return amk__fail(d, AMK_ERR_INVALID_ARG, "%s: buffer %d is %s: values in [0, (int)scale) need scale >= 1, not %g",
                             name, id, amk_dtype_name(dtype), (double)v);
        }
        count = (uint32_t)((double)v < cap ? floor((double)v) : cap);
    }
    if (nbytes == 0) return AMK_OK;
    kseed = amk__cuda_fill_seed(seed, id);
    chunks = (nbytes + 15) / 16;
    blocks = (chunks + AMK__VM_FILL_THREADS - 1) / AMK__VM_FILL_THREADS;
    if (blocks > (uint64_t)c->info.device_sms * 8) blocks = (uint64_t)c->info.device_sms * 8; /* why: 2048 threads a SM, grid-strided */
    args[0] = &ptr; args[1] = &nbytes; args[2] = &numel; args[3] = &dtype;
    if (random) { args[4] = &kseed; args[5] = &v; args[6] = &count; }
    else args[4] = &v;
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    cr = c->api.LaunchKernel(fn, (unsigned)blocks, 1, 1, AMK__VM_FILL_THREADS, 1, 1, 0, c->stream, args, NULL);
    if (cr == AMK__CUDA_SUCCESS) cr = c->api.StreamSynchronize(c->stream);
    amk__cuda_leave(c);
    return cr == AMK__CUDA_SUCCESS ? AMK_OK : amk__cuda_err(c, d, cr, random ? "amk_fill_random" : "amk_fill_value");
}

AMK_API amk_result amk_cuda_fill_random(amk_cuda *c, int buffer_id, uint64_t seed, float scale,
                                        amk_diag *d) {
    return amk__cuda_fill(c, buffer_id, 1, seed, scale, d);
}

AMK_API amk_result amk_cuda_fill_value(amk_cuda *c, int buffer_id, float value, amk_diag *d) {
    return amk__cuda_fill(c, buffer_id, 0, 0, value, d);
}

AMK_API amk_result amk_cuda_time_runs(amk_cuda *c, int warmup, int n, double *median_us,
                                      double *times_us, amk_diag *d) {
    amk__CUevent e0 = NULL, e1 = NULL;
    amk_program_t prog;
    amk_result r;
    double *sorted;
    int i, steps;
    if (median_us) *median_us = 0.0;
    if (!c || !median_us) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_time_runs: NULL argument");
    steps = c->chain.n_steps > 1 ? c->chain.n_steps : 1;
    if (n < 1 || n > AMK__CUDA_MAX_RUNS || warmup < 0 || warmup > AMK__CUDA_MAX_RUNS)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_time_runs: n %d or warmup %d is outside its range", n, warmup);
    if (steps > 1 && !c->chain_have_start)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_time_runs: a chain is set but no amk_cuda_run_chain ran");
    sorted = (double *)amk__malloc((size_t)n * sizeof(double));
    if (!sorted) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) { amk__free(sorted); return r; }
    AMK__CU_GOTO(EventCreate(&e0, AMK__CU_EVENT_DEFAULT), "cuEventCreate", done);
    AMK__CU_GOTO(EventCreate(&e1, AMK__CU_EVENT_DEFAULT), "cuEventCreate", done);
    for (i = 0; i < warmup + n; i++) {
        float ms = 0.0f;
        if (steps > 1) { /* the chain's start again: the last launch advanced the token and position */
            AMK__CU_GOTO(MemcpyHtoDAsync(c->arena + c->buf_off[c->chain.token_buf], &c->chain_token0, 4, c->stream),
                         "cuMemcpyHtoDAsync (chain start)", done);
            AMK__CU_GOTO(MemcpyHtoDAsync(c->arena + c->buf_off[c->chain.pos_buf], &c->chain_pos0, 4, c->stream),
                         "cuMemcpyHtoDAsync (chain start)", done);
        }
        AMK__CU_GOTO(EventRecord(e0, c->stream), "cuEventRecord", done);
        if ((r = amk__cuda_launch(c, &prog, steps, d)) != AMK_OK) goto done;
        AMK__CU_GOTO(EventRecord(e1, c->stream), "cuEventRecord", done);
        if ((r = amk__cuda_complete(c, &prog, 0.0, d)) != AMK_OK) goto done;
        if (i < warmup) continue;
        AMK__CU_GOTO(EventElapsedTime(&ms, e0, e1), "cuEventElapsedTime", done);
        sorted[i - warmup] = (double)ms * 1e3;
        if (times_us) times_us[i - warmup] = sorted[i - warmup];
    }
    *median_us = amk__cuda_median(sorted, n);
    r = AMK_OK;
done:
    if (e0) c->api.EventDestroy(e0);
    if (e1) c->api.EventDestroy(e1);
    amk__cuda_leave(c);
    amk__free(sorted);
    return r;
}

/* ==== >>impl_llama ================================================================================== */
AMK_API void amk_llama_build_opts_default(amk_llama_build_opts *o) {
    memset(o, 0, sizeof *o);
    o->weight_dtype = AMK_DTYPE_F32;
    o->act_dtype = AMK_DTYPE_F32;
    o->num_sms = 132; /* why: an H100 SXM has 132 SMs */
    o->kv_splits = 0;
    o->mlp_accum = -1;
    o->attn_o = -1;
    o->qkv_fold = -1;
}

AMK_API amk_result amk_llama_config_preset(const char *name, amk_llama_config *c) {
    if (!name || !c) return AMK_ERR_INVALID_ARG;
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "llama");
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rms_eps = 1e-5f;
    c->n_eos = 1;
    if (strcmp(name, "llama3-8b") == 0) { /* REFERENCE §3.3 */
        c->n_layers = 32; c->hidden = 4096; c->intermediate = 14336; c->n_heads = 32;
        c->n_kv_heads = 8; c->head_dim = 128; c->vocab = 128256; c->max_pos = 8192;
        c->rope_theta = 500000.0f; c->bos_id = 128000; c->eos_ids[0] = 128001;
        return AMK_OK;
    }
    if (strcmp(name, "llama3.2-1b") == 0) {
        c->n_layers = 16; c->hidden = 2048; c->intermediate = 8192; c->n_heads = 32;
        c->n_kv_heads = 8; c->head_dim = 64; c->vocab = 128256; c->max_pos = 131072;
        c->rope_theta = 500000.0f; c->rope_llama3 = 1; c->rope_factor = 32.0f;
        c->rope_low_freq_factor = 1.0f; c->rope_high_freq_factor = 4.0f; c->rope_orig_ctx = 8192;
        c->tie_embeddings = 1; c->bos_id = 128000; c->eos_ids[0] = 128001;
        return AMK_OK;
    }
    if (strcmp(name, "smollm2-135m") == 0) { /* REFERENCE §3.1 */
        c->n_layers = 30; c->hidden = 576; c->intermediate = 1536; c->n_heads = 9;
        c->n_kv_heads = 3; c->head_dim = 64; c->vocab = 49152; c->max_pos = 8192;
        c->rope_theta = 100000.0f; c->tie_embeddings = 1; c->bos_id = 1; c->eos_ids[0] = 2;
        return AMK_OK;
    }
    return AMK_ERR_NOT_FOUND;
}

AMK_API amk_result amk_llama_config_load_json(const char *path, amk_llama_config *cfg, amk_diag *d) {
    char *text = NULL;
    size_t len = 0;
    amk__jdoc doc;
    amk_result r;
    if (!path || !cfg) return AMK_ERR_INVALID_ARG;
    memset(cfg, 0, sizeof *cfg);
    r = amk__read_file(path, &text, &len, d);
    if (r != AMK_OK) return r;
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r == AMK_OK) {
        r = amk__model_config_json(doc.root, cfg, d);
        if (r == AMK_OK) r = amk__model_check_config(cfg, d);
        amk__json_free(&doc);
    }
    amk__free(text);
    if (r != AMK_OK && d && !strstr(d->message, path)) {
        char msg[sizeof d->message];
        memcpy(msg, d->message, sizeof msg);
        snprintf(d->message, sizeof d->message, "%.200s: %.300s", path, msg);
    }
    return r;
}

/* ---- the builder ---------------------------------------------------------------------------- */

typedef struct amk__lb {
    amk_program *p;
    const amk_llama_config *c;
    amk_llama_build_opts o;
    char name[160];
} amk__lb;

AMK__FN int amk__lb_buf(amk__lb *b, int kind, int dtype, int64_t d0, int64_t d1, int64_t d2,
                       int rank, const char *source, const char *fmt, ...) {
    int64_t shape[3];
    va_list ap;
    shape[0] = d0; shape[1] = d1; shape[2] = d2;
    va_start(ap, fmt);
    vsnprintf(b->name, sizeof b->name, fmt, ap);
    va_end(ap);
    return amk_program_add_buffer(b->p, b->name, (amk_buffer_kind)kind, (amk_dtype)dtype, rank,
                                  shape, kind == AMK_KIND_ACTIVATION ? AMK_SPACE_GLOBAL_SCRATCH
                                                                     : AMK_SPACE_HBM, source);
}

/* One task waiting for all producers of each listed counter (count in *_n). */
AMK__FN int amk__lb_task(amk__lb *b, int op, const int *ins, int n_in, int out, int counter,
                        const int *wait_c, const int *wait_n, int n_wait, int64_t est_bytes,
                        const char *label) {
    int t = amk_program_add_task(b->p, op, ins, n_in, &out, 1, counter, label), i;
    if (t < 0) return -1;
    for (i = 0; i < n_wait; i++) amk_task_add_wait(b->p, t, wait_c[i], wait_n[i]);
    b->p->tasks[t].est_bytes = est_bytes;
    return t;
}

/* Task t gets buffer x as one more output (an RMSNORM_GEMV tile's argmax partials, an RMSNORM_MLP
   tile's qkv, a PRENORM ATTENTION_O's caches); -1 when out of memory. */
AMK__FN int amk__lb_add_output(amk__lb *b, int t, int x) {
    amk_task *tk = &b->p->tasks[t];
    int *o = (int *)amk__realloc(tk->outputs, (size_t)(tk->n_outputs + 1) * sizeof(int));
    if (!o) return -1;
    o[tk->n_outputs++] = x;
    tk->outputs = o;
    return 0;
}

/* Rows per tile so that the rows of one phase (matrices read together, same K) spread over the
   SMs: ceil(total_rows / num_sms). */
AMK__FN int amk__lb_tile_rows(int64_t total_rows, int num_sms) {
    int64_t r = (total_rows + num_sms - 1) / num_sms;
    return r < 1 ? 1 : (int)r;
}

/* RMSNORM of x [1, H] by w into out, after all producers (n_wait) of wait_c. */
AMK__FN int amk__lb_rmsnorm(amk__lb *b, int x, int w, int out, int counter, int wait_c, int n_wait,
                           const char *label) {
    int ins[2], t;
    ins[0] = x; ins[1] = w;
    t = amk__lb_task(b, AMK_OP_RMSNORM, ins, 2, out, counter, &wait_c, &n_wait, 1, (int64_t)b->c->hidden * 4, label);
    amk_task_set_real(b->p, t, "eps", b->c->rms_eps);
    amk_task_set_int(b->p, t, "hidden", b->c->hidden);
    return t;
}

/* Task t's RoPE params: head_dim, the config's theta and llama3 scaling. */
AMK__FN void amk__lb_rope_params(amk__lb *b, int t) {
    const amk_llama_config *c = b->c;
    amk_task_set_int(b->p, t, "head_dim", c->head_dim);
    amk_task_set_real(b->p, t, "theta", c->rope_theta);
    if (c->rope_llama3) {
        amk_task_set_real(b->p, t, "rope_factor", c->rope_factor);
        amk_task_set_real(b->p, t, "rope_low_freq_factor", c->rope_low_freq_factor);
        amk_task_set_real(b->p, t, "rope_high_freq_factor", c->rope_high_freq_factor);
        amk_task_set_int(b->p, t, "rope_orig_ctx", c->rope_orig_ctx);
    }
}

/* ROPE of x [1, heads*head_dim] at the position in buffer pos into out (the config's theta and
   llama3 scaling), after all producers (n_wait) of wait_c. */
AMK__FN int amk__lb_rope(amk__lb *b, int x, int pos, int out, int counter, int wait_c, int n_wait,
                        const char *label) {
    int ins[2], t;
    ins[0] = x; ins[1] = pos;
    t = amk__lb_task(b, AMK_OP_ROPE, ins, 2, out, counter, &wait_c, &n_wait, 1, 0, label);
    amk__lb_rope_params(b, t);
    return t;
}

/* Tiles of opcode op over N weight rows of K columns: ins[0..n_in) are the task inputs (the
   matrices among them count n_mats times in est_bytes; RMSNORM_MLP's last, the residual, goes to
   the first tile only: it is added once), rows per tile; all signal counter after all wait_n[k]
   producers of each wait_c[k], k < n_wait, in that order. Tasks get K, N_tile, n_off (and eps for
   the fused RMSNORM_* ops); flags != 0 is set on each too. Returns the tile count, or -1. The
   tiles are the last tasks of the program. */
AMK__FN int amk__lb_tiles(amk__lb *b, int op, const int *ins, int n_in, int n_mats, int out, int counter,
                         int64_t N, int64_t K, int rows, const int *wait_c, const int *wait_n, int n_wait,
                         int flags, const char *what, int layer) {
    int n_tiles = 0;
    int64_t off;
    int wbytes = amk_dtype_bits(b->o.weight_dtype) / 8;
    for (off = 0; off < N; off += rows) {
        int64_t nt = N - off < rows ? N - off : rows;
        int t;
        char label[64];
        snprintf(label, sizeof label, "L%d %s[%lld:%lld]", layer, what, (long long)off, (long long)(off + nt));
        t = amk__lb_task(b, op, ins, op == AMK_OP_RMSNORM_MLP && off > 0 ? n_in - 1 : n_in, out, counter, wait_c, wait_n,
                         n_wait, n_mats * nt * K * wbytes, label);
        if (t < 0) return -1;
        amk_task_set_int(b->p, t, "K", K);
        amk_task_set_int(b->p, t, "N_tile", nt);
        amk_task_set_int(b->p, t, "n_off", off);
        if (op == AMK_OP_RMSNORM_GEMV || op == AMK_OP_RMSNORM_SWIGLU || op == AMK_OP_RMSNORM_MLP)
            amk_task_set_real(b->p, t, "eps", b->c->rms_eps);
        if (flags) amk_task_set_int(b->p, t, "flags", flags);
        if (op == AMK_OP_RMSNORM_GEMV && (flags & AMK_GEMV_FLAG_ROPE)) amk__lb_rope_params(b, t);
        n_tiles++;
    }
    return n_tiles;
}

/* GEMV tiles of W [N, K] over x into out; all signal counter; returns the tile count. */
AMK__FN int amk__lb_gemv(amk__lb *b, int x, int w, int out, int counter, int64_t N, int64_t K,
                        int rows, int wait_c, int wait_n, const char *what, int layer) {
    int ins[2];
    ins[0] = x; ins[1] = w;
    return amk__lb_tiles(b, AMK_OP_GEMV_TILE, ins, 2, 1, out, counter, N, K, rows, &wait_c, &wait_n, 1, 0, what, layer);
}

/* out = resid + a @ w.T ([N, K] tiles after the n_wait waits of wait_c/wait_n, as amk__lb_tiles):
   fused, the tiles add resid as their bias; spec_ops, GEMV tiles into a scratch buffer and an
   ADD. Returns the counter that marks out complete (its producer count in *n_done), or -1. */
AMK__FN int amk__lb_proj_residual(amk__lb *b, int a, int w, int resid, int out, int64_t N, int64_t K,
                                  const int *wait_c, const int *wait_n, int n_wait, const char *what, int layer,
                                  int *n_done) {
    const int rows = amk__lb_tile_rows(N, b->o.num_sms);
    int c = amk_program_add_counter(b->p, b->o.spec_ops ? "projection tiles" : "projection + residual tiles");
    int ins[3], n, tmp, c_add;
    char label[64];
    if (!b->o.spec_ops) {
        ins[0] = a; ins[1] = w; ins[2] = resid;
        n = amk__lb_tiles(b, AMK_OP_GEMV_TILE, ins, 3, 1, out, c, N, K, rows, wait_c, wait_n, n_wait, 0, what, layer);
        *n_done = n;
        return n < 0 ? -1 : c;
    }
    tmp = amk__lb_buf(b, AMK_KIND_ACTIVATION, b->o.act_dtype, 1, N, 0, 2, NULL, "%s.%d", what, layer);
    ins[0] = a; ins[1] = w;
    n = amk__lb_tiles(b, AMK_OP_GEMV_TILE, ins, 2, 1, tmp, c, N, K, rows, wait_c, wait_n, n_wait, 0, what, layer);
    if (n < 0) return -1;
    c_add = amk_program_add_counter(b->p, "residual");
    ins[0] = resid; ins[1] = tmp;
    snprintf(label, sizeof label, "L%d residual %s", layer, what);
    amk__lb_task(b, AMK_OP_ADD, ins, 2, out, c_add, &c, &n, 1, 0, label);
    *n_done = 1;
    return c_add;
}

/* Decode attention task t's params: the config's heads, the window [start, start + len), scale
   1/sqrt(head_dim); with g >= 0 (ATTENTION_DECODE, ATTENTION_O) kv head g alone. */
AMK__FN void amk__lb_attn_params(amk__lb *b, int t, int64_t start, int64_t len, int g) {
    const amk_llama_config *c = b->c;
    amk_task_set_int(b->p, t, "head_dim", c->head_dim);
    amk_task_set_int(b->p, t, "kv_start", start);
    amk_task_set_int(b->p, t, "kv_len", len);
    amk_task_set_real(b->p, t, "scale", 1.0 / sqrt((double)c->head_dim));
    amk_task_set_int(b->p, t, "n_heads", c->n_heads);
    amk_task_set_int(b->p, t, "n_kv_heads", c->n_kv_heads);
    if (g >= 0) { amk_task_set_int(b->p, t, "n_off", g); amk_task_set_int(b->p, t, "N_tile", 1); }
}

/* A FILL of out with 0 (the start of a sum) after the n_wait waits of wait_c/wait_n, signalling
   counter. Returns the task, or -1. */
AMK__FN int amk__lb_zero(amk__lb *b, int out, int counter, const int *wait_c, const int *wait_n, int n_wait,
                        const char *label) {
    const int t = amk__lb_task(b, AMK_OP_FILL, NULL, 0, out, counter, wait_c, wait_n, n_wait, 0, label);
    if (t >= 0) amk_task_set_real(b->p, t, "scale", 0.0);
    return t;
}

/* The attention tasks of one layer (S KV splits of window rows) reading q and the caches; each
   signals c_att after wc/wn. Fused: ATTENTION_DECODE per kv head and split (kv_len the full
   window, cut at pos on the device); else ATTENTION_TILE per split (kv_len set per step by
   amk_llama_set_pos). With S > 1 they write partials parts[j] (made here), else attn. */
AMK__FN int amk__lb_attention(amk__lb *b, int layer, int q, int kc, int vc, int pos, int attn, int S,
                             int window, int max_seq, int c_att, const int *wc, const int *wn, int nwait,
                             int *parts) {
    const amk_llama_config *c = b->c;
    const int fused = !b->o.spec_ops, ad = b->o.act_dtype;
    const int64_t kv_rows = (int64_t)c->n_kv_heads * c->head_dim;
    int j, g, t, ins[4];
    char label[64];
    for (j = 0; j < S; j++) {
        const int64_t start = (int64_t)j * window, len = max_seq - start < window ? max_seq - start : window;
        parts[j] = S > 1 ? amk__lb_buf(b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, c->n_heads, c->head_dim + 2, 0, 2, NULL,
                                       "attn_part.%d.%d", layer, j)
                         : attn;
        ins[0] = q; ins[1] = kc; ins[2] = vc; ins[3] = pos;
        for (g = 0; g < (fused ? c->n_kv_heads : 1); g++) {
            if (fused) snprintf(label, sizeof label, "L%d attention[%d] kv%d", layer, j, g);
            else snprintf(label, sizeof label, "L%d attention[%d]", layer, j);
            t = amk__lb_task(b, fused ? AMK_OP_ATTENTION_DECODE : AMK_OP_ATTENTION_TILE, ins, fused ? 4 : 3, parts[j],
                             c_att, wc, wn, nwait, 2LL * len * (fused ? c->head_dim : kv_rows) * (amk_dtype_bits(ad) / 8),
                             label);
            if (t < 0) return -1;
            amk__lb_attn_params(b, t, start, fused ? len : 0, fused ? g : -1);
            if (S > 1) amk_task_set_int(b->p, t, "flags", AMK_ATTN_FLAG_PARTIAL);
        }
    }
    return fused ? S * c->n_kv_heads : S;
}

/* The ATTENTION_O tasks of one layer (one KV split: the whole cache): per kv head, tasks of `rows`
   rows of W_oT (the last of a head shorter), each the head's attention and its rows' share of O,
   adding into h; the first also adds the residual x. All wait for the n_wait producers of wait_c
   and signal c_att. With prenorm (a folded layer) q is the raw projections qkv and the tasks are
   PRENORM: they scale by x's rms and rotate themselves, and a head's first task stores its k and v
   into the caches' row pos. Returns the task count, or -1. */
AMK__FN int amk__lb_attention_o(amk__lb *b, int layer, int q, int kc, int vc, int pos, int w_o, int x, int h,
                               int rows, int max_seq, int c_att, int wait_c, int n_wait, int prenorm) {
    const amk_llama_config *c = b->c;
    const int64_t per_head = (int64_t)(c->n_heads / c->n_kv_heads) * c->head_dim; /* W_oT rows a kv head */
    const int64_t kv_bytes = 2LL * max_seq * c->head_dim * (amk_dtype_bits(b->o.act_dtype) / 8);
    int g, t, n = 0, ins[7];
    int64_t off;
    char label[96]; /* why 96: four numbers of up to 20 digits each fit */
    ins[0] = q; ins[1] = kc; ins[2] = vc; ins[3] = pos; ins[4] = w_o; ins[5] = x; ins[6] = x; /* PRENORM: x, resid */
    for (g = 0; g < c->n_kv_heads; g++)
        for (off = g * per_head; off < (g + 1) * per_head; off += rows) {
            const int64_t nt = (g + 1) * per_head - off < rows ? (g + 1) * per_head - off : rows;
            snprintf(label, sizeof label, "L%d attention_o[%lld:%lld] kv%d", layer, (long long)off,
                     (long long)(off + nt), g);
            t = amk__lb_task(b, AMK_OP_ATTENTION_O, ins, (n == 0 ? 6 : 5) + prenorm, h, c_att, &wait_c, &n_wait, 1,
                             kv_bytes + nt * c->hidden * (amk_dtype_bits(b->o.weight_dtype) / 8), label);
            if (t < 0) return -1;
            amk__lb_attn_params(b, t, 0, max_seq, g);
            amk_task_set_int(b->p, t, "m_off", off);
            amk_task_set_int(b->p, t, "M_tile", nt);
            if (prenorm) {
                amk_task_set_int(b->p, t, "flags", AMK_ATTN_FLAG_PRENORM);
                amk_task_set_real(b->p, t, "eps", c->rms_eps);
                amk__lb_rope_params(b, t);
                if (off == g * per_head && (amk__lb_add_output(b, t, kc) < 0 || amk__lb_add_output(b, t, vc) < 0))
                    return -1;
            }
            n++;
        }
    return n;
}

AMK_API amk_result amk_llama_build(const amk_llama_config *c, const amk_llama_build_opts *opts,
                                   amk_program **out, amk_diag *d) {
    amk__lb b;
    amk_program *p;
    int L, H, I, NH, NKV, HD, V, S, max_seq, window, ad, wd, fused, accum, rd, mlp_rows, ao, ao_rows;
    int set_y, set_z, qkv_rows, fold;
    int token, pos, embed, lm_w, x, cx, n_cx, t, i, one = 1, h_next = -1, qkv_prev = -1;
    char meta[32];
    int64_t q_rows, kv_rows, F;
    *out = NULL;
    memset(&b, 0, sizeof b);
    if (opts) b.o = *opts; else amk_llama_build_opts_default(&b.o);
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: no config");
    mlp_rows = amk__lb_tile_rows(c->intermediate, b.o.num_sms > 0 ? b.o.num_sms : 1); /* an RMSNORM_MLP tile's */
    if (b.o.mlp_accum >= 0) accum = b.o.mlp_accum != 0;
    else /* do one tile's rows of W_downT stage on the device? */
        accum = AMK_LLAMA_MLP_ACCUM == 2 ||
                (AMK_LLAMA_MLP_ACCUM == 1 && amk__rows_stage_bytes(b.o.weight_dtype, c->hidden, mlp_rows) > 0);
    accum = accum && !b.o.spec_ops;
    rd = accum ? AMK_DTYPE_F32 : b.o.act_dtype; /* why: atomic adds need F32; the residual is 2-16 KB */
    L = c->n_layers; H = c->hidden; I = c->intermediate; NH = c->n_heads; NKV = c->n_kv_heads;
    HD = c->head_dim; V = c->vocab;
    if (L < 1 || H < 1 || I < 1 || NH < 1 || NKV < 1 || HD < 2 || HD % 2 || V < 1 || NH % NKV)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "llama build: bad shape (layers %d hidden %d ffn %d heads %d/%d head_dim %d vocab %d)",
                         L, H, I, NH, NKV, HD, V);
    max_seq = b.o.max_seq > 0 ? b.o.max_seq
            : (c->max_pos > 0 && c->max_pos < AMK_LLAMA_DEFAULT_MAX_SEQ ? c->max_pos : AMK_LLAMA_DEFAULT_MAX_SEQ);
    /* why: the device's ATTENTION_DECODE loads a chunk of up to 512 rows in one round trip, so
       a split of 512 rows costs about what a split of 16 does, while a split needs a COMBINE
       step (a whole dependent step a layer). So one split per 512 rows; COMBINE takes <= 8. */
    S = b.o.kv_splits > 0 ? b.o.kv_splits : (max_seq + 511) / 512;
    S = S > 8 ? 8 : S;
    if (S > max_seq) S = max_seq;
    window = (max_seq + S - 1) / S;
    S = (max_seq + window - 1) / window; /* why: no split may start past the cache */
    ad = b.o.act_dtype; wd = b.o.weight_dtype;
    fused = !b.o.spec_ops;
    if (!amk_dtype_is_float(ad) || !amk_dtype_is_float(wd) || b.o.num_sms < 1)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: dtypes must be float, num_sms >= 1");
    ao_rows = amk__lb_tile_rows((int64_t)NH * HD, b.o.num_sms); /* an ATTENTION_O task's rows of W_oT */
    if (ao_rows < AMK_LLAMA_ATTN_O_MIN_ROWS) ao_rows = AMK_LLAMA_ATTN_O_MIN_ROWS;
    if (b.o.attn_o >= 0) ao = b.o.attn_o != 0;
    else /* do a task's rows of W_oT stage on the device? */
        ao = AMK_LLAMA_ATTN_O == 2 || (AMK_LLAMA_ATTN_O == 1 && accum && amk__rows_stage_bytes(wd, H, ao_rows) > 0);
    ao = ao && fused && S == 1;
    q_rows = (int64_t)NH * HD;
    kv_rows = (int64_t)NKV * HD;
    set_y = set_z = 0;
    if (ao && AMK_LLAMA_SM_SETS) { /* set Y: one SM an ATTENTION_O task, also the Q/K/V tiles; set Z: the MLP tiles */
        const int64_t per_head = (int64_t)(NH / NKV) * HD, ar = AMK_LLAMA_SETS_ATTN_ROWS;
        const int64_t ny = (int64_t)NKV * ((per_head + ar - 1) / ar), nz = b.o.num_sms - ny;
        /* why these bounds: the tasks keep their fast forms at 512 threads (amk_llama_build_lowered's):
           an MLP tile a row a warp, a Q/K/V tile a RoPE pair a warp beside the trig warp (30 rows),
           an attention task's rows of W_oT staged */
        if (ny < b.o.num_sms && nz >= 1 && (I + nz - 1) / nz <= AMK_LLAMA_MLP_MAX_ROWS &&
            amk__rows_stage_bytes(wd, H, ar) > 0) {
            int r = amk__lb_tile_rows(q_rows + 2 * kv_rows, (int)ny);
            r += r % 2;
            if (r <= 30 && 2 * ((kv_rows + r - 1) / r) + (q_rows + r - 1) / r <= ny) {
                set_y = (int)ny;
                set_z = (int)nz;
                ao_rows = (int)ar;
                mlp_rows = amk__lb_tile_rows(I, set_z);
                qkv_rows = r;
            }
        }
    }
    /* a Q/K/V tile's rows, with the sets one a set-Y SM (above). why two thirds of the SMs with
       ATTENTION_O (a tiny model's step): SmolLM2's 80 Q/K/V tiles of 12 rows made the step ~1%
       faster than 120 of 8 (bench/RESULTS.md run 205; 60 of 16 the same): the tiles start closer
       together, and the attention tasks find more SMs idle. With AMK's opcodes even: RoPE pairs
       (2i, 2i+1) stay inside one tile */
    if (!set_y) {
        qkv_rows = amk__lb_tile_rows(q_rows + 2 * kv_rows, ao ? (b.o.num_sms * 2 + 2) / 3 : b.o.num_sms);
        if (fused) qkv_rows += qkv_rows % 2;
    }
    /* the folded Q/K/V: the MLP tiles build the next layer's projections and its ATTENTION_O tasks
       take them, so it needs both one-step forms, and a next layer */
    if (b.o.qkv_fold >= 0) fold = b.o.qkv_fold != 0;
    else fold = AMK_LLAMA_QKV_FOLD == 2 || (AMK_LLAMA_QKV_FOLD == 1 && wd == AMK_DTYPE_BF16 && set_y);
    fold = fold && ao && accum && L > 1;
    F = q_rows + 2 * kv_rows; /* a row of qkv: Q, K and V projections */
    p = amk_program_create();
    if (!p) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    b.p = p; b.c = c;
    amk_program_set_meta_string(p, "model", c->name[0] ? c->name : "llama");
    amk_program_set_meta_string(p, "regime", "decode");
    amk_program_set_meta_string(p, "dtype", amk_dtype_name(wd));
    snprintf(meta, sizeof meta, "%d", window);
    amk_program_set_meta_string(p, "kv_window", meta);
    if (fused) amk_program_set_meta_string(p, "qk_rows", "interleaved");
    if (accum) amk_program_set_meta_string(p, "down_proj", "transposed");
    if (ao) amk_program_set_meta_string(p, "o_proj", "transposed");
    if (fold) amk_program_set_meta_string(p, "qkv_fold", "1");
    if (set_y) {
        snprintf(meta, sizeof meta, "%d %d", set_y, set_z);
        amk_program_set_meta_string(p, "sm_sets", meta);
    }

    token = amk__lb_buf(&b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "token");
    pos = amk__lb_buf(&b, AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "pos");
    embed = amk__lb_buf(&b, AMK_KIND_WEIGHT, wd, V, H, 0, 2, "model.embed_tokens.weight", "model.embed_tokens.weight");
    x = amk__lb_buf(&b, AMK_KIND_ACTIVATION, rd, 1, H, 0, 2, NULL, "x.0");
    cx = amk_program_add_counter(p, "embed done");
    n_cx = 1;
    {
        int ins[2];
        ins[0] = token; ins[1] = embed;
        t = amk__lb_task(&b, AMK_OP_EMBED, ins, 2, x, cx, NULL, NULL, 0, (int64_t)H * (amk_dtype_bits(wd) / 8), "embed");
        amk_task_set_int(p, t, "hidden", H);
    }
    for (i = 0; i < L; i++) {
        int w_an, w_q, w_k, w_v, w_o, w_fn, w_g, w_u, w_dn, kc, vc, attn, h, xo, c_att, c_comb, c_o, c_d, c_f = -1;
        int n_fill = 0, w_cat = -1, qkv = -1; /* qkv.i: the projections this layer's MLP folds (and W_cat.i) */
        const int prenorm = fold && i > 0;    /* this layer's ATTENTION_O takes qkv.(i-1), not Q/K/V tiles */
        int n_att, n_o, n_d, rows, ins[8], parts[8];
        char src[128], label[64];
#define AMK__W(var, r0, r1, rank, fmt) \
        snprintf(src, sizeof src, fmt, i); \
        var = amk__lb_buf(&b, AMK_KIND_WEIGHT, (rank) == 1 ? AMK_DTYPE_F32 : wd, r0, r1, 0, rank, src, "%s", src)
        AMK__W(w_an, H, 0, 1, "model.layers.%d.input_layernorm.weight");
        AMK__W(w_q, q_rows, H, 2, "model.layers.%d.self_attn.q_proj.weight");
        AMK__W(w_k, kv_rows, H, 2, "model.layers.%d.self_attn.k_proj.weight");
        AMK__W(w_v, kv_rows, H, 2, "model.layers.%d.self_attn.v_proj.weight");
        if (ao) { AMK__W(w_o, q_rows, H, 2, "model.layers.%d.self_attn.o_proj.weight"); } /* transposed: meta o_proj */
        else { AMK__W(w_o, H, q_rows, 2, "model.layers.%d.self_attn.o_proj.weight"); }
        AMK__W(w_fn, H, 0, 1, "model.layers.%d.post_attention_layernorm.weight");
        AMK__W(w_g, I, H, 2, "model.layers.%d.mlp.gate_proj.weight");
        AMK__W(w_u, I, H, 2, "model.layers.%d.mlp.up_proj.weight");
        if (accum) { AMK__W(w_dn, I, H, 2, "model.layers.%d.mlp.down_proj.weight"); } /* transposed: meta down_proj */
        else { AMK__W(w_dn, H, I, 2, "model.layers.%d.mlp.down_proj.weight"); }
        if (fold && i + 1 < L) { /* W_cat.i = [W_fold ; W_base] [I + H, F]: amk_llm derives it */
            AMK__W(w_cat, I + H, F, 2, "amk.qkv_fold.%d");
            qkv = amk__lb_buf(&b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, F, 0, 2, NULL, "qkv.%d", i);
        }
#undef AMK__W
        kc = amk__lb_buf(&b, AMK_KIND_KV_CACHE, ad, max_seq, NKV, HD, 3, NULL, "k_cache.%d", i);
        vc = amk__lb_buf(&b, AMK_KIND_KV_CACHE, ad, max_seq, NKV, HD, 3, NULL, "v_cache.%d", i);
        attn = ao ? -1 : amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "attn.%d", i);
        /* why F32 with ATTENTION_O: its tasks add into h */
        h = h_next >= 0 ? h_next : amk__lb_buf(&b, AMK_KIND_ACTIVATION, ao ? AMK_DTYPE_F32 : rd, 1, H, 0, 2, NULL, "h.%d", i);
        xo = amk__lb_buf(&b, AMK_KIND_ACTIVATION, rd, 1, H, 0, 2, NULL, "x.%d", i + 1);

        /* why: K and V rows need fewer tiles than Q; their tiles and tasks come first in list
           order, so an SM that also holds Q work does not block them behind it */
        rows = qkv_rows;
        if (fused) { /* QKV: norm + GEMV + RoPE, K and V straight into the cache row */
            /* wc, wn: what the attention and the FILLs beside it wait for: the Q/K/V tiles, or in a
               folded layer the MLP tiles before it, which built its qkv */
            int wc = cx, wn = n_cx, n, qr = qkv_prev;
            if (!prenorm) {
                const int c_qkv = amk_program_add_counter(p, "qkv tiles");
                int n_qkv = 0;
                qr = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "q_rot.%d", i);
                if (ao && i == 0) { /* h.0 starts at 0, before the step's first attention (it waits like a tile) */
                    if (amk__lb_zero(&b, h, c_qkv, NULL, NULL, 0, "L0 attention start") < 0) goto fail;
                    n_qkv++;
                }
                ins[0] = x; ins[1] = w_an; ins[3] = pos;
                ins[2] = w_k;
                n = amk__lb_tiles(&b, AMK_OP_RMSNORM_GEMV, ins, 4, 1, kc, c_qkv, kv_rows, H, rows, &cx, &n_cx, 1,
                                  AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW, "k", i);
                if (n < 0) goto fail;
                n_qkv += n;
                ins[2] = w_v;
                n = amk__lb_tiles(&b, AMK_OP_RMSNORM_GEMV, ins, 4, 1, vc, c_qkv, kv_rows, H, rows, &cx, &n_cx, 1,
                                  AMK_GEMV_FLAG_KV_ROW, "v", i);
                if (n < 0) goto fail;
                n_qkv += n;
                ins[2] = w_q;
                n = amk__lb_tiles(&b, AMK_OP_RMSNORM_GEMV, ins, 4, 1, qr, c_qkv, q_rows, H, rows, &cx, &n_cx, 1,
                                  AMK_GEMV_FLAG_ROPE, "q", i);
                if (n < 0) goto fail;
                n_qkv += n;
                wc = c_qkv;
                wn = n_qkv;
            }
            c_att = amk_program_add_counter(p, ao ? "attention + o tasks" : "attention tiles");
            n_att = ao ? amk__lb_attention_o(&b, i, qr, kc, vc, pos, w_o, x, h, ao_rows, max_seq, c_att, wc, wn, prenorm)
                       : amk__lb_attention(&b, i, qr, kc, vc, pos, attn, S, window, max_seq, c_att, &wc, &wn, 1, parts);
            if (accum && n_att >= 0) {
                /* x.(i+1) starts at 0. why beside attention: its few tasks leave most SMs idle, and
                   an SM runs its queue in list order, so the FILL also precedes any O tile there
                   (queued behind one, it delayed the MLP: bench/RESULTS.md run 147). With
                   ATTENTION_O it counts with those tasks, so the MLP tiles wait on one counter */
                c_f = ao ? c_att : amk_program_add_counter(p, "residual start");
                snprintf(label, sizeof label, "L%d residual start", i);
                if (amk__lb_zero(&b, xo, c_f, &wc, &wn, 1, label) < 0) goto fail;
                n_fill += ao;
            }
            h_next = -1;
            if (ao && i + 1 < L && n_att >= 0) { /* the next layer's h starts at 0 here, off its path */
                h_next = amk__lb_buf(&b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, H, 0, 2, NULL, "h.%d", i + 1);
                snprintf(label, sizeof label, "L%d attention start", i + 1);
                if (amk__lb_zero(&b, h_next, c_att, &wc, &wn, 1, label) < 0) goto fail;
                n_fill++;
            }
            if (qkv >= 0 && n_att >= 0) { /* so does the sum the MLP tiles fold the next Q/K/V into */
                snprintf(label, sizeof label, "L%d qkv start", i);
                if (amk__lb_zero(&b, qkv, c_att, &wc, &wn, 1, label) < 0) goto fail;
                n_fill++;
            }
        } else {
            int xn, q, k, v, qr, kr, n_q, n_k, n_v, j, wc[3], wn[3];
            int c_n1 = amk_program_add_counter(p, "attn norm"), c_q, c_k, c_v, c_qr, c_kr, c_ka, c_va;
            c_q = amk_program_add_counter(p, "q tiles"); c_k = amk_program_add_counter(p, "k tiles");
            c_v = amk_program_add_counter(p, "v tiles");
            c_qr = amk_program_add_counter(p, "rope q"); c_kr = amk_program_add_counter(p, "rope k");
            c_ka = amk_program_add_counter(p, "k append"); c_va = amk_program_add_counter(p, "v append");
            xn = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "xn.%d", i);
            q = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "q.%d", i);
            k = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, kv_rows, 0, 2, NULL, "k.%d", i);
            v = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, kv_rows, 0, 2, NULL, "v.%d", i);
            qr = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, q_rows, 0, 2, NULL, "q_rot.%d", i);
            kr = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, kv_rows, 0, 2, NULL, "k_rot.%d", i);
            snprintf(label, sizeof label, "L%d attn_norm", i);
            amk__lb_rmsnorm(&b, x, w_an, xn, c_n1, cx, n_cx, label);
            n_q = amk__lb_gemv(&b, xn, w_q, q, c_q, q_rows, H, rows, c_n1, 1, "q", i);
            n_k = amk__lb_gemv(&b, xn, w_k, k, c_k, kv_rows, H, rows, c_n1, 1, "k", i);
            n_v = amk__lb_gemv(&b, xn, w_v, v, c_v, kv_rows, H, rows, c_n1, 1, "v", i);
            if (n_q < 0 || n_k < 0 || n_v < 0) goto fail;
            snprintf(label, sizeof label, "L%d rope k", i);
            amk__lb_rope(&b, k, pos, kr, c_kr, c_k, n_k, label);
            ins[0] = kr; ins[1] = kc;
            snprintf(label, sizeof label, "L%d k append", i);
            j = amk__lb_task(&b, AMK_OP_KV_APPEND, ins, 2, kc, c_ka, &c_kr, &one, 1, 0, label);
            amk_task_set_int(p, j, "pos", 0);
            ins[0] = v; ins[1] = vc;
            snprintf(label, sizeof label, "L%d v append", i);
            j = amk__lb_task(&b, AMK_OP_KV_APPEND, ins, 2, vc, c_va, &c_v, &n_v, 1, 0, label);
            amk_task_set_int(p, j, "pos", 0);
            snprintf(label, sizeof label, "L%d rope q", i);
            amk__lb_rope(&b, q, pos, qr, c_qr, c_q, n_q, label);
            wc[0] = c_qr; wc[1] = c_ka; wc[2] = c_va; wn[0] = wn[1] = wn[2] = 1;
            c_att = amk_program_add_counter(p, "attention tiles");
            n_att = amk__lb_attention(&b, i, qr, kc, vc, pos, attn, S, window, max_seq, c_att, wc, wn, 3, parts);
        }
        if (n_att < 0) goto fail;
        c_comb = c_att;
        if (S > 1) {
            c_comb = amk_program_add_counter(p, "attention combine");
            snprintf(label, sizeof label, "L%d attention combine", i);
            t = amk__lb_task(&b, AMK_OP_ATTENTION_COMBINE, parts, S, attn, c_comb, &c_att, &n_att, 1, 0, label);
            amk_task_set_int(p, t, "head_dim", HD);
            n_att = 1;
        }
        if (ao) { /* h is complete when the ATTENTION_O tasks and the FILLs beside them are */
            c_o = c_att;
            n_o = n_att + n_fill;
        } else { /* with the one-step MLP the O tiles also wait for the FILL, first, so the MLP tiles
             need only theirs. why: the MLP's extra counter cost its start two L2 round trips after
             the O tiles' end (bench/RESULTS.md run 152); the O tiles pass it while attention runs */
            int wc[2], wn[2], nwt = 0;
            if (accum) { wc[nwt] = c_f; wn[nwt++] = 1; }
            wc[nwt] = c_comb; wn[nwt++] = n_att;
            c_o = amk__lb_proj_residual(&b, attn, w_o, x, h, H, q_rows, wc, wn, nwt, "o", i, &n_o);
        }
        if (c_o < 0) goto fail;
        /* MLP block */
        if (accum) { /* x.(i+1) = 0 (the FILL above) + h (by the first tile) + the tiles' shares of down */
            const int fi = qkv >= 0; /* FOLD: W_cat input 5, and the tiles add into qkv.i too */
            c_d = amk_program_add_counter(p, "mlp tiles");
            ins[0] = h; ins[1] = w_fn; ins[2] = w_g; ins[3] = w_u; ins[4] = w_dn; ins[5] = fi ? w_cat : h; ins[6] = h;
            /* the FILL is ordered before through the O tiles (c_o) */
            n_d = amk__lb_tiles(&b, AMK_OP_RMSNORM_MLP, ins, 6 + fi, 3, xo, c_d, I, H, mlp_rows, &c_o, &n_o, 1,
                                fi ? (int)AMK_MLP_FLAG_FOLD : 0, "mlp", i);
            if (n_d < 0) goto fail;
            for (t = p->n_tasks - n_d; fi && t < p->n_tasks; t++) { /* the tiles are the last tasks */
                const int64_t off = amk__param_i(&p->tasks[t], "n_off", 0), nt = amk__param_i(&p->tasks[t], "N_tile", 0);
                if (amk__lb_add_output(&b, t, qkv) < 0) goto fail;
                /* its rows of W_cat: its own and its share of the base rows (RMSNORM_MLP's FOLD) */
                p->tasks[t].est_bytes += (nt + (off + nt) * H / I - off * H / I) * F * (amk_dtype_bits(wd) / 8);
            }
        } else {
            int a = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, I, 0, 2, NULL, "act.%d", i), c_a, n_a;
            if (fused) { /* norm + gate/up + SiLU*up in one tile */
                c_a = amk_program_add_counter(p, "gate/up tiles");
                ins[0] = h; ins[1] = w_fn; ins[2] = w_g; ins[3] = w_u;
                n_a = amk__lb_tiles(&b, AMK_OP_RMSNORM_SWIGLU, ins, 4, 2, a, c_a, I, H,
                                    amk__lb_tile_rows(I, b.o.num_sms), &c_o, &n_o, 1, 0, "gate/up", i);
                if (n_a < 0) goto fail;
            } else {
                int hn = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "hn.%d", i);
                int g = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, I, 0, 2, NULL, "gate.%d", i);
                int u = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, I, 0, 2, NULL, "up.%d", i);
                int c_n2 = amk_program_add_counter(p, "ffn norm"), c_g, c_u, n_g, n_u, wc[2], wn[2];
                c_g = amk_program_add_counter(p, "gate tiles"); c_u = amk_program_add_counter(p, "up tiles");
                c_a = amk_program_add_counter(p, "silu mul");
                snprintf(label, sizeof label, "L%d ffn_norm", i);
                amk__lb_rmsnorm(&b, h, w_fn, hn, c_n2, c_o, n_o, label);
                rows = amk__lb_tile_rows(2LL * I, b.o.num_sms);
                n_g = amk__lb_gemv(&b, hn, w_g, g, c_g, I, H, rows, c_n2, 1, "gate", i);
                n_u = amk__lb_gemv(&b, hn, w_u, u, c_u, I, H, rows, c_n2, 1, "up", i);
                if (n_g < 0 || n_u < 0) goto fail;
                wc[0] = c_g; wc[1] = c_u; wn[0] = n_g; wn[1] = n_u;
                ins[0] = g; ins[1] = u;
                snprintf(label, sizeof label, "L%d silu_mul", i);
                amk__lb_task(&b, AMK_OP_SILU_MUL, ins, 2, a, c_a, wc, wn, 2, 0, label);
                n_a = 1;
            }
            c_d = amk__lb_proj_residual(&b, a, w_dn, h, xo, H, I, &c_a, &n_a, 1, "down", i, &n_d);
            if (c_d < 0) goto fail;
        }
        x = xo; cx = c_d; n_cx = n_d; qkv_prev = qkv;
    }
    { /* head */
        int w_norm = amk__lb_buf(&b, AMK_KIND_WEIGHT, AMK_DTYPE_F32, H, 0, 0, 1, "model.norm.weight", "model.norm.weight");
        int logits = amk__lb_buf(&b, AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, V, 0, 2, NULL, "logits");
        int next = amk__lb_buf(&b, AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 0, 0, 1, NULL, "next_token");
        int c_lm = amk_program_add_counter(p, "lm head tiles");
        int c_s = amk_program_add_counter(p, "argmax"), n_lm, rows = amk__lb_tile_rows(V, b.o.num_sms);
        lm_w = c->tie_embeddings ? embed
                                 : amk__lb_buf(&b, AMK_KIND_WEIGHT, wd, V, H, 0, 2, "lm_head.weight", "lm_head.weight");
        if (fused) {
            int ins[3];
            ins[0] = x; ins[1] = w_norm; ins[2] = lm_w;
            n_lm = amk__lb_tiles(&b, AMK_OP_RMSNORM_GEMV, ins, 3, 1, logits, c_lm, V, H, rows, &cx, &n_cx, 1, 0, "lm_head", L);
        } else {
            int xf = amk__lb_buf(&b, AMK_KIND_ACTIVATION, ad, 1, H, 0, 2, NULL, "x.final");
            int c_fn = amk_program_add_counter(p, "final norm");
            amk__lb_rmsnorm(&b, x, w_norm, xf, c_fn, cx, n_cx, "final norm");
            n_lm = amk__lb_gemv(&b, xf, lm_w, logits, c_lm, V, H, rows, c_fn, 1, "lm_head", L);
        }
        if (n_lm < 0) goto fail;
        if (fused && AMK_LLAMA_HEAD_ARGMAX) { /* each head tile's (max, index) pair as it stores its logits,
                                                 then one combine */
            int parts = amk__lb_buf(&b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 2 * (int64_t)n_lm, 0, 2, NULL, "argmax.partials");
            int k, t0 = p->n_tasks - n_lm; /* the head tiles are the program's last tasks */
            for (k = 0; k < n_lm; k++) {
                if (amk__lb_add_output(&b, t0 + k, parts) < 0) goto fail;
                amk_task_set_int(p, t0 + k, "flags", AMK_GEMV_FLAG_ARGMAX);
                amk_task_set_int(p, t0 + k, "part", k);
            }
            amk__lb_task(&b, AMK_OP_ARGMAX_COMBINE, &parts, 1, next, c_s, &c_lm, &n_lm, 1, 0, "argmax");
        } else if (fused) { /* why: one SM reads Llama-3's 0.5 MB of logits at ~22 GB/s (23 us); spread, 4 + 2 us
                        and one more hop (bench/RESULTS.md run 42) */
            const int64_t np0 = (V + 1023) / 1024 < b.o.num_sms ? (V + 1023) / 1024 : b.o.num_sms;
            const int64_t chunk = (V + np0 - 1) / np0, np = (V + chunk - 1) / chunk;
            int parts = amk__lb_buf(&b, AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 2 * np, 0, 2, NULL, "argmax.partials");
            int c_p = amk_program_add_counter(p, "argmax partials"), n_p = (int)np, t;
            int64_t k;
            for (k = 0; k < np; k++) {
                const int64_t off = k * chunk, nt = V - off < chunk ? V - off : chunk;
                char label[64];
                snprintf(label, sizeof label, "argmax[%lld:%lld]", (long long)off, (long long)(off + nt));
                t = amk__lb_task(&b, AMK_OP_ARGMAX_PARTIAL, &logits, 1, parts, c_p, &c_lm, &n_lm, 1, nt * 4, label);
                if (t < 0) goto fail;
                amk_task_set_int(p, t, "n_off", off);
                amk_task_set_int(p, t, "N_tile", nt);
                amk_task_set_int(p, t, "part", k);
            }
            amk__lb_task(&b, AMK_OP_ARGMAX_COMBINE, &parts, 1, next, c_s, &c_p, &n_p, 1, 0, "argmax");
        } else {
            amk__lb_task(&b, AMK_OP_SAMPLE_ARGMAX, &logits, 1, next, c_s, &c_lm, &n_lm, 1, 0, "argmax");
        }
    }
    if (p->build_error != AMK_OK) {
        amk_result r = p->build_error;
        amk_program_free(p);
        return amk__fail(d, r, "llama build: %s", amk_result_str(r));
    }
    *out = p;
    return AMK_OK;
fail:
    amk_program_free(p);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "llama build: out of memory");
}

/* A lowered step with meta "sm_sets" ("Y Z", AMK_LLAMA_SM_SETS) lowered again with an explicit
   assignment: the load-balanced one, but in each layer the Q/K/V tiles and then the ATTENTION_O
   tasks on SMs 0 .. Y-1 (one each, in list order), the MLP tiles and the FILLs (which run beside
   the Q/K/V tiles or attention) on Y .. Y+Z-1 (the FILLs from the last SM down). With
   AMK_LLAMA_SETS_ALTERNATE layer l's attention runs on A(l % 2) (A0 = 0 .. Y-1, A1 = Y .. 2Y-1),
   its Q/K/V tiles on the other, its MLP tiles on the SMs outside A(l % 2) and the FILLs on SMs
   2Y and up. A folded step (meta qkv_fold) has Q/K/V tiles in layer 0 alone: every layer's
   attention runs on A0, layer 0's Q/K/V tiles on A1 (on A0 without the alternation), the MLP tiles
   on Y .. Y+Z-1. The rule behind both: no task follows another on its SM without an idle phase
   between. Nothing to do without the meta. */
AMK__FN amk_result amk__llama_steer(amk_program *p, const amk_config *base, const amk_target *tgt, amk_diag *d) {
    char buf[64];
    int ny = 0, nz = 0, k, jq = 0, ja = 0, jm = 0, jf = 0;
    int last = 0; /* the step of the last layer task: 0 none yet, 1 a Q/K/V tile, 2 attention, 3 an MLP tile */
    int layer = -1, alt, folded; /* alt: AMK_LLAMA_SETS_ALTERNATE where the SMs allow it */
    amk_config sc;
    amk_result r;
    if (!amk_program_meta_string(p, "sm_sets", buf, sizeof buf)) return AMK_OK;
    if (sscanf(buf, "%d %d", &ny, &nz) != 2 || ny < 1 || nz < 1 || ny > tgt->num_sms - nz)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "llama build: bad meta sm_sets \"%s\" for %d SMs", buf, tgt->num_sms);
    alt = AMK_LLAMA_SETS_ALTERNATE && 2 * ny < ny + nz;
    folded = amk_program_meta_string(p, "qkv_fold", buf, sizeof buf) && strcmp(buf, "1") == 0;
    sc = *base;
    sc.sm_assignment = AMK_SM_EXPLICIT;
    sc.n_explicit = p->n_tasks;
    sc.explicit_task = (int *)amk__malloc((size_t)(p->n_tasks > 0 ? p->n_tasks : 1) * sizeof(int));
    sc.explicit_sm = (int *)amk__malloc((size_t)(p->n_tasks > 0 ? p->n_tasks : 1) * sizeof(int));
    if (!sc.explicit_task || !sc.explicit_sm) {
        amk__free(sc.explicit_task);
        amk__free(sc.explicit_sm);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (k = 0; k < p->n_tasks; k++) { /* list order: each layer's Q/K/V tiles, attention, MLP tiles */
        const amk_task *t = &p->tasks[k];
        int sm = t->sm;
        const int qkv = t->op == AMK_OP_RMSNORM_GEMV &&
                        (amk__param_i(t, "flags", 0) & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW)) != 0; /* not the head */
        /* a new layer: its first Q/K/V tile, or (folded) its first attention task after the MLP */
        if ((qkv && last != 1) || (t->op == AMK_OP_ATTENTION_O && (last == 0 || last == 3))) {
            jq = ja = jm = 0;
            layer++;
        }
        if (qkv) {
            sm = jq++ % ny + (alt && (folded || layer % 2 == 0) ? ny : 0); /* alt: on the set of the attention before */
            last = 1;
        } else if (t->op == AMK_OP_ATTENTION_O) {
            sm = ja++ % ny + (alt && !folded && layer % 2 == 1 ? ny : 0);
            last = 2;
        } else if (t->op == AMK_OP_RMSNORM_MLP) {
            sm = ny + jm++ % nz; /* alt: the SMs outside this layer's attention set */
            if (alt && !folded && layer % 2 == 1 && sm < 2 * ny) sm -= ny;
            last = 3;
        } else if (t->op == AMK_OP_FILL) {
            sm = ny + nz - 1 - jf++ % (alt ? nz - ny : nz);
        }
        sc.explicit_task[k] = t->id;
        sc.explicit_sm[k] = sm;
    }
    r = amk_program_lower(p, &sc, tgt, d);
    amk__free(sc.explicit_task);
    amk__free(sc.explicit_sm);
    return r;
}

AMK_API amk_result amk_llama_build_lowered(const amk_llama_config *cfg, const amk_llama_build_opts *o,
                                           amk_program **out, amk_diag *d) {
    amk_llama_build_opts bo;
    amk_config sc;
    amk_target tgt;
    amk_result r;
    if (o) bo = *o; else amk_llama_build_opts_default(&bo);
    r = amk_llama_build(cfg, &bo, out, d);
    if (r != AMK_OK) return r;
    amk_config_default(&sc);
    sc.threads_per_block = 512; /* why: 26% faster GEMV tiles than 256 on the H100 (bench/NOTES.md) */
    amk_target_builtin("h100", &tgt);
    tgt.num_sms = bo.num_sms;
    r = amk_program_lower(*out, &sc, &tgt, d);
    if (r == AMK_OK) r = amk__llama_steer(*out, &sc, &tgt, d);
    if (r != AMK_OK) { amk_program_free(*out); *out = NULL; }
    return r;
}

AMK_API amk_result amk_llama_set_pos(amk_program *p, int pos, amk_diag *d) {
    char buf[32];
    long window;
    int64_t rows = -1;
    int i;
    if (!p) return AMK_ERR_INVALID_ARG;
    if (!amk_program_meta_string(p, "kv_window", buf, sizeof buf) || (window = strtol(buf, NULL, 10)) < 1)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "program has no meta kv_window (not built by amk_llama_build)");
    for (i = 0; i < p->n_buffers && rows < 0; i++)
        if (p->buffers[i].kind == AMK_KIND_KV_CACHE && p->buffers[i].rank >= 1) rows = p->buffers[i].shape[0];
    if (pos < 0 || pos >= rows)
        return amk__fail(d, AMK_ERR_RUNTIME, "position %d is outside the KV cache (%lld rows)", pos,
                         (long long)(rows < 0 ? 0 : rows));
    for (i = 0; i < p->n_tasks; i++) { /* the fused step has none: its tasks read pos on the device */
        amk_task *t = &p->tasks[i];
        if (t->op == AMK_OP_KV_APPEND) {
            amk_task_set_int(p, i, "pos", pos);
        } else if (t->op == AMK_OP_ATTENTION_TILE) {
            int64_t start = amk__param_i(t, "kv_start", 0), len = (int64_t)pos + 1 - start;
            amk_task_set_int(p, i, "kv_len", len < 0 ? 0 : len > window ? window : len);
        }
    }
    return AMK_OK;
}

/* ---- sampling ------------------------------------------------------------------------------- */

AMK_API void amk_sampler_init(amk_sampler *s, float temperature, int top_k, float top_p, uint64_t seed) {
    amk__rng r;
    memset(s, 0, sizeof *s);
    s->temperature = temperature;
    s->top_k = top_k;
    s->top_p = top_p;
    amk__rng_seed(&r, seed);
    memcpy(s->state, r.s, sizeof s->state);
}

AMK_API void amk_sampler_free(amk_sampler *s) {
    amk__free(s->scratch_idx);
    amk__free(s->scratch_p);
    s->scratch_idx = NULL;
    s->scratch_p = NULL;
    s->scratch_n = 0;
}

AMK__FN int amk__argmax(const float *x, int n) {
    int i, best = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
    return best;
}

/* Token a comes before token b by their values in l (logits or probabilities): the higher first
   (NaN last), ties by lower index (a fixed order, so a seed's draws are reproducible). */
AMK__FN int amk__l_before(const float *l, int a, int b) {
    const float x = l[a] == l[a] ? l[a] : -INFINITY, y = l[b] == l[b] ? l[b] : -INFINITY;
    return x > y || (x == y && a < b);
}

/* Sifts h[r] down the heap h[0..n): with last = 0 the first element comes first in
   amk__l_before's order (a max-heap), with last = 1 it comes last (a min-heap). */
AMK__FN void amk__heap_down(int *h, const float *l, int n, int r, int last) {
    for (;;) {
        int c = 2 * r + 1, tmp;
        if (c >= n) break;
        if (c + 1 < n && amk__l_before(l, h[c + 1], h[c]) != last) c++;
        if (amk__l_before(l, h[c], h[r]) == last) break;
        tmp = h[r]; h[r] = h[c]; h[c] = tmp; r = c;
    }
}

/* h[0..k) = the k tokens of v[0..n) that come first in amk__l_before's order, in that order: a
   min-heap of the best k so far, O(n log k), then sorted. */
AMK__FN void amk__top_k(int *h, const float *v, int n, int k) {
    int i, m = 0, end;
    for (i = 0; i < n; i++) {
        if (m < k) {
            int c = m++;
            h[c] = i;
            while (c > 0 && amk__l_before(v, h[(c - 1) / 2], h[c])) { /* sift up */
                int pa = (c - 1) / 2, tmp = h[pa];
                h[pa] = h[c]; h[c] = tmp; c = pa;
            }
        } else if (amk__l_before(v, i, h[0])) {
            h[0] = i;
            amk__heap_down(h, v, k, 0, 1);
        }
    }
    for (end = k - 1; end > 0; end--) { /* the last in order to the end, repeatedly */
        int tmp = h[0];
        h[0] = h[end]; h[end] = tmp;
        amk__heap_down(h, v, end, 0, 1);
    }
}

/* The fewest first tokens of h[0..k) whose mass in p reaches thr (all k when it never does);
   *mass gets their mass. */
AMK__FN int amk__mass_prefix(const int *h, const float *p, int k, double thr, double *mass) {
    double m = 0.0;
    int i;
    for (i = 0; i < k && m < thr; i++) m += p[h[i]];
    *mass = m;
    return i;
}

/* why no full sort: sorting SmolLM2's 49152 logits every token cost 5.2 ms a draw (sampled
   generation at ~100 tok/s, bench/RESULTS.md run 73). Without top-k/top-p the draw walks the probabilities
   in vocabulary order, O(n); top-k takes the k best logits with a k-heap, O(n log k), and exp()
   of those only; top-p alone first tries the best 256 (a peaked distribution stops there), else
   pops a heap of the whole vocabulary until the kept mass reaches p, O(n + kept log n). Each
   token is drawn with its softmax probability (restricted to the kept ones and renormalised
   when truncated); the kept ones are walked in descending order. */
AMK_API int amk_sampler_sample(amk_sampler *s, const float *logits, int n) {
    int i, k, best, kept = 0;
    const float T = s ? s->temperature : 0.0f;
    const int top_p = s && s->top_p > 0.0f && s->top_p < 1.0f;
    float mx, *p;
    int *h;
    double total = 0.0, sum = 0.0, acc = 0.0, u;
    amk__rng r;
#define AMK__P(i) (logits[i] == logits[i] ? expf((logits[i] - mx) / T) : 0.0f)
    if (!s || !logits || n < 1) return -1;
    best = amk__argmax(logits, n);
    if (!(T > 0.0f)) return best;
    if (s->scratch_n < n) {
        amk_sampler_free(s);
        s->scratch_idx = (int *)amk__malloc((size_t)n * sizeof(int));
        s->scratch_p = (float *)amk__malloc((size_t)n * sizeof(float));
        if (!s->scratch_idx || !s->scratch_p) { amk_sampler_free(s); return best; }
        s->scratch_n = n;
    }
    h = s->scratch_idx;
    p = s->scratch_p;
    mx = logits[best];
    k = s->top_k > 0 && s->top_k < n ? s->top_k : n;
    memcpy(r.s, s->state, sizeof r.s);
    u = (double)(amk__rng_u64(&r) >> 11) / 9007199254740992.0; /* why: 53 random bits, in [0, 1) */
    memcpy(s->state, r.s, sizeof r.s);
    if (k < n) { /* the top k logits, then top-p within them */
        amk__top_k(h, logits, n, k);
        for (i = 0; i < k; i++) total += p[h[i]] = AMK__P(h[i]);
        kept = k;
        sum = total;
        if (top_p) kept = amk__mass_prefix(h, p, k, (double)s->top_p * total, &sum);
    } else {
        for (i = 0; i < n; i++) total += p[i] = AMK__P(i);
        if (!top_p) { /* the whole distribution */
            u *= total;
            for (i = 0; i < n; i++) {
                acc += p[i];
                if (u < acc) return i;
            }
            return best;
        }
        if (n > 256) { /* the best 256 first */
            amk__top_k(h, p, n, 256);
            kept = amk__mass_prefix(h, p, 256, (double)s->top_p * total, &sum);
            if (sum < (double)s->top_p * total) kept = 0;
        }
        if (!kept) { /* pop a max-heap into h[n-1], h[n-2], ... until the kept mass reaches p */
            int end;
            for (i = 0; i < n; i++) h[i] = i;
            for (i = n / 2 - 1; i >= 0; i--) amk__heap_down(h, p, n, i, 0);
            for (end = n, sum = 0.0; end > 0 && sum < (double)s->top_p * total; kept++) {
                int tmp = h[0];
                end--;
                h[0] = h[end]; h[end] = tmp;
                amk__heap_down(h, p, end, 0, 0);
                sum += p[tmp];
            }
            for (i = 0; i < kept / 2; i++) { /* reverse h[n-kept..n) in place, then to the front */
                int tmp = h[n - kept + i];
                h[n - kept + i] = h[n - 1 - i];
                h[n - 1 - i] = tmp;
            }
            memmove(h, h + (n - kept), (size_t)kept * sizeof(int));
        }
    }
#undef AMK__P
    u *= sum;
    for (i = 0; i < kept; i++) {
        acc += p[h[i]];
        if (u < acc) return h[i];
    }
    return kept > 0 ? h[kept - 1] : best;
}

/* ---- the LLM object --------------------------------------------------------------------------- */

struct amk_llm {
    amk_llama_config cfg;
    amk_llm_opts opts;
    amk_program *prog;
    amk_model *model;         /* NULL for random weights */
    amk_tokenizer *tok;       /* NULL for random weights */
    amk_refvm *vm;            /* the CPU backend, or */
    amk_cuda *cuda;           /* the GPU backend */
    int *step_tasks, n_step_tasks; /* tasks whose params change per position (KV_APPEND, ATTENTION_TILE) */
    int buf_token, buf_pos, buf_logits, buf_next;
    int max_seq;
    float *logits;            /* [vocab] host copy handed to the caller */
    int32_t *chain_tok;       /* [chain_cap] amk_llm_generate's tokens from the GPU */
    int chain_cap;
};

AMK_API void amk_llm_opts_default(amk_llm_opts *o) {
    memset(o, 0, sizeof *o);
    amk_llama_build_opts_default(&o->build);
    o->backend = AMK_BACKEND_AUTO;
    o->random_seed = 1;
}

AMK_API const amk_llama_config *amk_llm_config(const amk_llm *m) { return m ? &m->cfg : NULL; }
AMK_API const amk_program *amk_llm_program(const amk_llm *m) { return m ? m->prog : NULL; }
AMK_API const amk_tokenizer *amk_llm_tokenizer(const amk_llm *m) { return m ? m->tok : NULL; }
AMK_API int amk_llm_max_seq(const amk_llm *m) { return m ? m->max_seq : 0; }
AMK_API amk_cuda *amk_llm_cuda(amk_llm *m) { return m ? m->cuda : NULL; }
AMK_API const char *amk_llm_backend_name(const amk_llm *m) { return m && m->cuda ? "cuda" : "cpu"; }

AMK_API void amk_llm_close(amk_llm *m) {
    if (!m) return;
    amk_refvm_free(m->vm);
    amk_cuda_free(m->cuda);
    amk__free(m->step_tasks);
    amk_program_free(m->prog);
    amk_tokenizer_free(m->tok);
    amk_model_close(m->model);
    amk__free(m->logits);
    amk__free(m->chain_tok);
    amk__free(m);
}

/* Builds and lowers the step of m->cfg and creates the CPU VM. */
AMK__FN amk_result amk__llm_prepare(amk_llm *m, amk_diag *d) {
    amk_result r;
    int i;
    r = amk_llama_build_lowered(&m->cfg, &m->opts.build, &m->prog, d);
    if (r != AMK_OK) return r;
    m->buf_token = amk_program_find_buffer(m->prog, "token");
    m->buf_pos = amk_program_find_buffer(m->prog, "pos");
    m->buf_logits = amk_program_find_buffer(m->prog, "logits");
    m->buf_next = amk_program_find_buffer(m->prog, "next_token");
    m->max_seq = (int)m->prog->buffers[amk_program_find_buffer(m->prog, "k_cache.0")].shape[0];
    m->logits = (float *)amk__calloc((size_t)m->cfg.vocab, sizeof(float));
    m->step_tasks = (int *)amk__malloc((size_t)(m->prog->n_tasks > 0 ? m->prog->n_tasks : 1) * sizeof(int));
    if (!m->logits || !m->step_tasks) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < m->prog->n_tasks; i++) /* the tasks amk_llama_set_pos changes */
        if (m->prog->tasks[i].op == AMK_OP_KV_APPEND || m->prog->tasks[i].op == AMK_OP_ATTENTION_TILE)
            m->step_tasks[m->n_step_tasks++] = i;
    if (m->opts.backend != AMK_BACKEND_CPU) {
        if (!m->opts.device_image) {
            if (m->opts.backend == AMK_BACKEND_CUDA)
                return amk__fail(d, AMK_ERR_INVALID_ARG, "no device image (build it with `make device`)");
        } else {
            r = amk_cuda_create(m->prog, m->opts.device_image, m->opts.device_image_size, &m->cuda, d);
            if (r == AMK_ERR_NO_DRIVER && m->opts.backend == AMK_BACKEND_AUTO) amk_diag_clear(d);
            else if (r != AMK_OK) return r;
        }
    }
    return m->cuda ? AMK_OK : amk_refvm_create(m->prog, &m->vm, d);
}

/* 1 when b is a weight the step takes transposed: down_proj as [I, H] (meta down_proj
   "transposed", the one-step MLP's RMSNORM_MLP input) or o_proj as [q_rows, H] (meta o_proj
   "transposed", ATTENTION_O's input). */
AMK__FN int amk__llm_transposed(const amk_llm *m, const amk_buffer *b) {
    static const char *const names[2][2] = {{".mlp.down_proj.weight", "down_proj"}, {".self_attn.o_proj.weight", "o_proj"}};
    char v[32];
    const size_t n = b->source ? strlen(b->source) : 0;
    int k;
    for (k = 0; k < 2 && b->rank == 2; k++) {
        const size_t ln = strlen(names[k][0]);
        if (n >= ln && strcmp(b->source + n - ln, names[k][0]) == 0)
            return amk_program_meta_string(m->prog, names[k][1], v, sizeof v) && strcmp(v, "transposed") == 0;
    }
    return 0;
}

/* A weight's host copy data (nb bytes, HF layout) into the layout m's step wants. In place.
   - A fused step (meta qk_rows "interleaved") takes Q/K rows in interleaved pair order: within each
     head of hd rows, HF row i pairs with row i + hd/2, and those rows become 2i and 2i+1.
   - A step with meta down_proj (o_proj) "transposed" takes down_proj [H, I] (o_proj [H, q_rows])
     as its transpose. */
AMK__FN amk_result amk__llm_weight_layout(const amk_llm *m, const amk_buffer *b, void *data, size_t nb, amk_diag *d) {
    char v[32];
    const size_t n = b->source ? strlen(b->source) : 0;
    const size_t row_bytes = b->shape[0] > 0 ? nb / (size_t)b->shape[0] : 0;
    int64_t rows = b->shape[0], hd, h, i;
    int heads = 0;
    unsigned char *tmp;
    if (amk__llm_transposed(m, b)) { /* the file's [shape[1], shape[0]] into [shape[0], shape[1]] */
        const int64_t R = b->shape[1], C = b->shape[0];
        const size_t es = (size_t)amk_dtype_bits(b->dtype) / 8;
        int64_t r, c;
        if (es == 0 || (size_t)(R * C) * es != nb)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "'%s': cannot transpose a %s weight", b->source,
                             amk_dtype_name(b->dtype));
        tmp = (unsigned char *)amk__malloc(nb);
        if (!tmp) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(tmp, data, nb);
        for (r = 0; r < R; r++)
            for (c = 0; c < C; c++)
                memcpy((unsigned char *)data + ((size_t)c * (size_t)R + (size_t)r) * es,
                       tmp + ((size_t)r * (size_t)C + (size_t)c) * es, es);
        amk__free(tmp);
        return AMK_OK;
    }
    if (!amk_program_meta_string(m->prog, "qk_rows", v, sizeof v) || strcmp(v, "interleaved") != 0) return AMK_OK;
    if (n >= 23 && strcmp(b->source + n - 23, "self_attn.q_proj.weight") == 0) heads = m->cfg.n_heads;
    else if (n >= 23 && strcmp(b->source + n - 23, "self_attn.k_proj.weight") == 0) heads = m->cfg.n_kv_heads;
    else return AMK_OK;
    if (heads < 1 || rows % heads || (rows / heads) % 2)
        return amk__fail(d, AMK_ERR_MISMATCH, "'%s': %lld rows do not split into %d heads of an even size",
                         b->source, (long long)rows, heads);
    hd = rows / heads;
    tmp = (unsigned char *)amk__malloc((size_t)hd * row_bytes);
    if (!tmp) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (h = 0; h < heads; h++) {
        unsigned char *head = (unsigned char *)data + (size_t)(h * hd) * row_bytes;
        memcpy(tmp, head, (size_t)hd * row_bytes);
        for (i = 0; i < hd / 2; i++) {
            memcpy(head + (size_t)(2 * i) * row_bytes, tmp + (size_t)i * row_bytes, row_bytes);
            memcpy(head + (size_t)(2 * i + 1) * row_bytes, tmp + (size_t)(i + hd / 2) * row_bytes, row_bytes);
        }
    }
    amk__free(tmp);
    return AMK_OK;
}

/* The layer i of W_cat.i, a folded step's derived weight (source "amk.qkv_fold.<i>",
   amk_llama_build's qkv_fold), or -1 for any other buffer. */
AMK__FN int amk__llm_fold_layer(const amk_buffer *b) {
    static const char prefix[] = "amk.qkv_fold.";
    const char *num = b->source ? b->source + sizeof prefix - 1 : NULL;
    char *end;
    long v;
    if (!num || strncmp(b->source, prefix, sizeof prefix - 1) != 0 || *num < '0' || *num > '9') return -1;
    v = strtol(num, &end, 10);
    return *end == 0 && v < INT_MAX ? (int)v : -1;
}

/* The step's weight named name as n F32 values in the step's layout (amk__llm_weight_layout): read
   from the model file, or without one (random weights) from the reference VM's buffer. */
AMK__FN amk_result amk__llm_weight_f32(amk_llm *m, const char *name, float *dst, int64_t n, amk_diag *d) {
    const int id = amk_program_find_buffer(m->prog, name);
    amk_buffer f32;
    const void *src;
    size_t nb;
    amk_result r;
    if (id < 0 || m->prog->buffers[id].kind != AMK_KIND_WEIGHT || amk_buffer_numel(&m->prog->buffers[id]) != n ||
        (uint64_t)n > (uint64_t)(SIZE_MAX / 4))
        return amk__fail(d, AMK_ERR_MISMATCH, "qkv fold: the step has no weight '%s' of %lld values", name, (long long)n);
    f32 = m->prog->buffers[id];
    if (m->model) {
        f32.dtype = AMK_DTYPE_F32;
        r = amk_model_tensor_read(m->model, f32.source, AMK_DTYPE_F32, dst, (size_t)n * 4, d);
        return r == AMK_OK ? amk__llm_weight_layout(m, &f32, dst, (size_t)n * 4, d) : r;
    }
    if (!(src = amk_refvm_buffer(m->vm, id, &nb))) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", name);
    amk__refvm_load_row(src, f32.dtype, 0, n, dst);
    return AMK_OK;
}

/* r_j[0..F) += a_j * b[0..F) for the four rows r_j: the inner loop of amk__llm_fold_rows. why
   restrict rows and a fixed chunk of 16: GCC -O2 vectorises only a loop that needs no aliasing
   check and whose trip count is a multiple of the vector width; four rows at a time so each row of
   b read serves four sums. SmolLM2's 0.85 G multiply-adds a layer take 0.064 s so (a plain loop
   over f 0.23 s, unvectorised; two rows or eight at a time were slower when vectorised). */
AMK__FN void amk__axpy4(float *AMK__RESTRICT r0, float *AMK__RESTRICT r1, float *AMK__RESTRICT r2,
                        float *AMK__RESTRICT r3, const float *AMK__RESTRICT b, float a0, float a1, float a2,
                        float a3, int64_t F) {
    int64_t f;
    int j;
    for (f = 0; f + 16 <= F; f += 16)
        for (j = 0; j < 16; j++) {
            const float v = b[f + j];
            r0[f + j] += a0 * v; r1[f + j] += a1 * v; r2[f + j] += a2 * v; r3[f + j] += a3 * v;
        }
    for (; f < F; f++) {
        const float v = b[f];
        r0[f] += a0 * v; r1[f] += a1 * v; r2[f] += a2 * v; r3[f] += a3 * v;
    }
}

/* Rows [0, I) of W_fold = W_downT @ W_base into out (row n = sum_k W_downT[n, k] W_base[k, :]; wd
   [I, H], base [H, F]), four rows at a time: wd and out hold I rounded up to a multiple of 4 rows
   (wd's extra rows zero). Progress every 256 rows: *done counts them. */
AMK__FN void amk__llm_fold_rows(amk_llm *m, const float *wd, const float *base, float *out, int64_t I, int64_t H,
                                int64_t F, uint64_t *done, uint64_t total) {
    int64_t n, k, f, reported = 0;
    for (n = 0; n < I; n += 4) {
        float *r0 = out + n * F;
        for (f = 0; f < 4 * F; f++) r0[f] = 0.0f;
        for (k = 0; k < H; k++)
            amk__axpy4(r0, r0 + F, r0 + 2 * F, r0 + 3 * F, base + k * F, wd[n * H + k], wd[(n + 1) * H + k],
                       wd[(n + 2) * H + k], wd[(n + 3) * H + k], F);
        if (m->opts.progress && ((n + 4) % 256 == 0 || n + 4 >= I)) {
            const int64_t rows = n + 4 < I ? n + 4 : I;
            *done += (uint64_t)(rows - reported);
            reported = rows;
            m->opts.progress(m->opts.progress_user, "fold", *done, total);
        }
    }
}

/* W_cat.i (buffer id, [I + H, F]) of a folded step (amk_llama_build's qkv_fold), computed in F32
   from the weights it folds, in the step's layouts (amk__llm_weight_f32): W_base[k, f] = nw[k] *
   Wqkv[f, k] (nw: layer i+1's input_layernorm; Wqkv: its q_proj, k_proj and v_proj rows, F of H,
   Q and K interleaved), W_fold = W_downT @ W_base (W_downT: layer i's down_proj as [I, H]); then
   cast to the buffer's dtype, uploaded (CUDA) or written into the reference VM's buffer. */
AMK__FN amk_result amk__llm_fold(amk_llm *m, int id, int layer, uint64_t *done, uint64_t total, amk_diag *d) {
    static const char *const qkv_names[3] = {"q_proj", "k_proj", "v_proj"};
    const amk_llama_config *c = &m->cfg;
    const amk_buffer *b = &m->prog->buffers[id];
    const int64_t H = c->hidden, I = c->intermediate, qr = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvr = (int64_t)c->n_kv_heads * c->head_dim, F = qr + 2 * kvr, I4 = (I + 3) / 4 * 4;
    /* [F, H] [H] [I4, H] (rows past I zero) [H, F] [I4 + H, F] (W_cat's rows, then padding) */
    float *wqkv = NULL, *nw = NULL, *wd = NULL, *base = NULL, *cat = NULL;
    void *dst = NULL;
    char name[96];
    int64_t k, f, e;
    size_t nb = (size_t)amk__buffer_nbytes(b);
    amk_result r = AMK_OK;
    int j;
    if (b->rank != 2 || b->shape[0] != I + H || b->shape[1] != F || layer + 1 >= c->n_layers)
        return amk__fail(d, AMK_ERR_MISMATCH, "qkv fold: '%s' is not [%lld, %lld] of a layer before the last",
                         b->name, (long long)(I + H), (long long)F);
    wqkv = amk__refvm_floats(F * H);
    nw = amk__refvm_floats(H);
    wd = amk__refvm_floats(I4 * H);
    base = amk__refvm_floats(H * F);
    cat = amk__refvm_floats((I4 + H) * F);
    if (m->cuda) dst = amk__malloc(nb);
    else if (!(dst = amk_refvm_buffer(m->vm, id, &nb))) r = amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", b->name);
    if (r == AMK_OK && (!wqkv || !nw || !wd || !base || !cat || !dst))
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory folding '%s'", b->name);
    for (j = 0; j < 3 && r == AMK_OK; j++) { /* Q rows at 0, K rows at qr, V rows at qr + kvr */
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", layer + 1, qkv_names[j]);
        r = amk__llm_weight_f32(m, name, wqkv + (j ? qr + (j - 1) * kvr : 0) * H, (j ? kvr : qr) * H, d);
    }
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", layer + 1);
    if (r == AMK_OK) r = amk__llm_weight_f32(m, name, nw, H, d);
    snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", layer);
    if (r == AMK_OK) r = amk__llm_weight_f32(m, name, wd, I * H, d);
    if (r == AMK_OK) {
        for (e = I * H; e < I4 * H; e++) wd[e] = 0.0f;
        for (k = 0; k < H; k++)
            for (f = 0; f < F; f++) base[k * F + f] = nw[k] * wqkv[f * H + k];
        amk__llm_fold_rows(m, wd, base, cat, I, H, F, done, total);
        memcpy(cat + I * F, base, (size_t)(H * F) * sizeof(float)); /* W_base: rows I.. of W_cat */
        for (e = 0; e < (I + H) * F; e++) amk__store_f32(dst, b->dtype, e, cat[e]);
        if (m->cuda) r = amk_cuda_upload(m->cuda, id, dst, nb, d);
    }
    if (m->cuda) amk__free(dst);
    amk__free(wqkv); amk__free(nw); amk__free(wd); amk__free(base); amk__free(cat);
    return r;
}

/* Fills every WEIGHT buffer: from the model file, or random (seeded) when m->model is NULL. */
AMK__FN amk_result amk__llm_load_weights(amk_llm *m, amk_diag *d) {
    /* W_cat.i of a folded step is derived from the other weights, so it comes after them (not
       with random weights on the GPU: those are made like any other matrix, the step's numbers
       then meaning nothing, as every random weight's; for timing only) */
    const int derive = !m->cuda || m->model;
    uint64_t total = 0, done = 0, fold_total = 0, fold_done = 0;
    int i;
    amk__rng rng;
    for (i = 0; i < m->prog->n_buffers; i++) {
        const amk_buffer *b = &m->prog->buffers[i];
        if (b->kind != AMK_KIND_WEIGHT) continue;
        if (derive && amk__llm_fold_layer(b) >= 0) fold_total += (uint64_t)m->cfg.intermediate; /* rows of W_fold */
        else total += (uint64_t)amk__buffer_nbytes(b);
    }
    amk__rng_seed(&rng, m->opts.random_seed);
    for (i = 0; i < m->prog->n_buffers; i++) {
        const amk_buffer *b = &m->prog->buffers[i];
        size_t nb = (size_t)amk__buffer_nbytes(b);
        void *dst;
        amk_result r = AMK_OK;
        /* why: uniform in +-sqrt(3)/sqrt(K) has variance 1/K, so each output has unit variance
           (K: HF's in-features, shape[0] of a transposed weight) */
        const float scale = b->rank == 2 ? 1.7320508f / sqrtf((float)b->shape[amk__llm_transposed(m, b) ? 0 : 1]) : 0.0f;
        if (b->kind != AMK_KIND_WEIGHT || (derive && amk__llm_fold_layer(b) >= 0)) continue;
        if (m->cuda && !m->model) { /* random weights made on the device: no host copy of 16 GB */
            r = b->rank == 2 ? amk_cuda_fill_random(m->cuda, i, m->opts.random_seed * 1000003u + (uint64_t)i, scale, d)
                             : amk_cuda_fill_value(m->cuda, i, 1.0f, d);
        } else if (m->cuda) { /* file weights through a staging copy */
            void *stage = amk__malloc(nb);
            if (!stage) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory staging '%s'", b->name);
            r = amk_model_tensor_read(m->model, b->source, b->dtype, stage, nb, d);
            if (r == AMK_OK) r = amk__llm_weight_layout(m, b, stage, nb, d);
            if (r == AMK_OK) r = amk_cuda_upload(m->cuda, i, stage, nb, d);
            amk__free(stage);
        } else if (!(dst = amk_refvm_buffer(m->vm, i, &nb))) {
            return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", b->name);
        } else if (m->model) {
            r = amk_model_tensor_read(m->model, b->source, b->dtype, dst, nb, d);
            if (r == AMK_OK) r = amk__llm_weight_layout(m, b, dst, nb, d);
        } else {
            int64_t n = amk_buffer_numel(b), j;
            for (j = 0; j < n; j++) amk__store_f32(dst, b->dtype, j, b->rank == 2 ? amk__rng_sym(&rng) * scale : 1.0f);
            r = amk__llm_weight_layout(m, b, dst, nb, d); /* why: the same model as the spec_ops step for one seed */
        }
        if (r != AMK_OK) return r;
        done += nb;
        if (m->opts.progress) m->opts.progress(m->opts.progress_user, "weights", done, total);
    }
    for (i = 0; i < m->prog->n_buffers && derive; i++) {
        const int layer = amk__llm_fold_layer(&m->prog->buffers[i]);
        amk_result r;
        if (m->prog->buffers[i].kind != AMK_KIND_WEIGHT || layer < 0) continue;
        if ((r = amk__llm_fold(m, i, layer, &fold_done, fold_total, d)) != AMK_OK) return r;
    }
    return AMK_OK;
}

AMK_API amk_result amk_tokenizer_from_model(const amk_model *m, amk_tokenizer **out, amk_diag *d) {
    char tp[1024];
    if (!m || !out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_tokenizer_from_model: NULL argument");
    *out = NULL;
    if (amk_model_gguf(m)) return amk_tokenizer_from_gguf(amk_model_gguf(m), out, d);
    if (snprintf(tp, sizeof tp, "%s/tokenizer.json", amk_model_dir(m)) >= (int)sizeof tp)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "model directory path too long for its tokenizer.json");
    return amk_tokenizer_from_json(tp, out, d);
}

AMK_API amk_result amk_llm_open_model(amk_model *model, amk_tokenizer *tok, const amk_llm_opts *o,
                                      amk_llm **out, amk_diag *d) {
    amk_llm *m;
    amk_result r = AMK_OK;
    *out = NULL;
    if (!model) {
        amk_tokenizer_free(tok);
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open_model: NULL model");
    }
    m = (amk_llm *)amk__calloc(1, sizeof(amk_llm));
    if (!m) {
        amk_tokenizer_free(tok);
        amk_model_close(model);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (o) m->opts = *o; else amk_llm_opts_default(&m->opts);
    m->model = model;
    m->tok = tok;
    m->cfg = *amk_model_config(m->model);
    if (!m->tok) r = amk_tokenizer_from_model(m->model, &m->tok, d);
    if (r == AMK_OK) r = amk__llm_prepare(m, d);
    if (r == AMK_OK) r = amk__llm_load_weights(m, d);
    if (r != AMK_OK) { amk_llm_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API amk_result amk_llm_open(const char *path, const amk_llm_opts *o, amk_llm **out, amk_diag *d) {
    amk_model *model = NULL;
    amk_result r;
    *out = NULL;
    r = amk_model_open(path, &model, d);
    return r == AMK_OK ? amk_llm_open_model(model, NULL, o, out, d) : r;
}

AMK_API amk_result amk_llm_open_random(const amk_llama_config *cfg, const amk_llm_opts *o,
                                       amk_llm **out, amk_diag *d) {
    amk_llm *m;
    amk_result r;
    *out = NULL;
    if (!cfg) return AMK_ERR_INVALID_ARG;
    m = (amk_llm *)amk__calloc(1, sizeof(amk_llm));
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (o) m->opts = *o; else amk_llm_opts_default(&m->opts);
    m->cfg = *cfg;
    r = amk__llm_prepare(m, d);
    if (r == AMK_OK) r = amk__llm_load_weights(m, d);
    if (r != AMK_OK) { amk_llm_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API amk_result amk_llm_step(amk_llm *m, int token, int pos, const float **logits, int *argmax,
                                amk_diag *d) {
    amk_result r;
    void *buf;
    size_t nb;
    int32_t v;
    if (!m) return AMK_ERR_INVALID_ARG;
    if (pos < 0 || pos >= m->max_seq)
        return amk__fail(d, AMK_ERR_RUNTIME, "context of %d tokens is longer than the KV cache (%d); use a larger --ctx",
                         pos + 1, m->max_seq);
    if (token < 0 || token >= m->cfg.vocab)
        return amk__fail(d, AMK_ERR_RUNTIME, "token id %d is outside the vocabulary (%d)", token, m->cfg.vocab);
    r = amk_llama_set_pos(m->prog, pos, d);
    if (r != AMK_OK) return r;
    if (m->cuda) {
        int32_t next = -1, tp[2];
        amk_cuda_in in[2];
        amk_cuda_out out[2];
        tp[0] = token;
        tp[1] = pos;
        in[0].buffer_id = m->buf_token; in[0].host = &tp[0]; in[0].nbytes = 4;
        in[1].buffer_id = m->buf_pos; in[1].host = &tp[1]; in[1].nbytes = 4;
        out[0].buffer_id = m->buf_next; out[0].host = &next; out[0].nbytes = 4;
        /* why the logits only when asked: a greedy loop needs the token alone, and their copy
           (vocab floats, 0.2-0.5 MB) is a sizeable part of a small model's step */
        out[1].buffer_id = m->buf_logits; out[1].host = m->logits; out[1].nbytes = (size_t)m->cfg.vocab * 4;
        r = amk_cuda_update_task_params(m->cuda, m->prog, m->step_tasks, m->n_step_tasks, d);
        /* why one call: each separate copy waited for the device (~60 us a token on SmolLM2) */
        if (r == AMK_OK) r = amk_cuda_run_io(m->cuda, in, 2, out, logits ? 2 : 1, m->opts.timeout_ms, d);
        if (r != AMK_OK) return r;
        if (logits) *logits = m->logits;
        if (argmax) *argmax = next;
        return AMK_OK;
    }
    v = token;
    buf = amk_refvm_buffer(m->vm, m->buf_token, &nb);
    memcpy(buf, &v, 4);
    v = pos;
    buf = amk_refvm_buffer(m->vm, m->buf_pos, &nb);
    memcpy(buf, &v, 4);
    r = amk_refvm_run(m->vm, NULL, d);
    if (r != AMK_OK) return r;
    buf = amk_refvm_buffer(m->vm, m->buf_logits, &nb);
    memcpy(m->logits, buf, (size_t)m->cfg.vocab * sizeof(float)); /* logits: F32 [1, vocab] (the builder) */
    if (logits) *logits = m->logits;
    if (argmax) {
        buf = amk_refvm_buffer(m->vm, m->buf_next, &nb);
        *argmax = (int)amk__load_i64(buf, AMK_DTYPE_I32, 0);
    }
    return AMK_OK;
}

AMK_API amk_result amk_llm_generate(amk_llm *m, int token, int pos, int n, int *tokens, amk_diag *d) {
    amk_result r = AMK_ERR_UNSUPPORTED;
    int i;
    if (!m || !tokens) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_generate: NULL argument");
    if (n < 1 || n > AMK_CUDA_MAX_CHAIN)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_generate: n %d is outside [1, %d]", n, AMK_CUDA_MAX_CHAIN);
    if (pos < 0 || pos > m->max_seq - n)
        return amk__fail(d, AMK_ERR_RUNTIME, "context of %lld tokens is longer than the KV cache (%d); use a larger --ctx",
                         (long long)pos + n, m->max_seq);
    if (token < 0 || token >= m->cfg.vocab)
        return amk__fail(d, AMK_ERR_RUNTIME, "token id %d is outside the vocabulary (%d)", token, m->cfg.vocab);
    /* why a step at a time where the program has per-step params (the spec_ops step): a chained
       launch runs one set of params for every step */
    if (m->cuda && n > 1 && m->n_step_tasks == 0) {
        amk_cuda_chain ch;
        ch.token_buf = m->buf_token;
        ch.pos_buf = m->buf_pos;
        ch.next_buf = m->buf_next;
        ch.n_steps = n;
        if (n > m->chain_cap) {
            int32_t *t = (int32_t *)amk__malloc((size_t)n * sizeof(int32_t));
            if (!t) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
            amk__free(m->chain_tok);
            m->chain_tok = t;
            m->chain_cap = n;
        }
        r = amk_cuda_set_chain(m->cuda, &ch, d); /* UNSUPPORTED: an image without the chained kernel */
        if (r == AMK_OK) {
            r = amk_cuda_run_chain(m->cuda, token, pos, m->chain_tok, m->opts.timeout_ms > 0 ? m->opts.timeout_ms * n : 0.0, d);
            for (i = 0; i < n && r == AMK_OK; i++) tokens[i] = (int)m->chain_tok[i];
            amk_cuda_set_chain(m->cuda, NULL, NULL); /* why: a later amk_cuda_time_runs times single steps again */
            return r;
        }
        if (r != AMK_ERR_UNSUPPORTED) return r;
    }
    for (i = 0; i < n; i++)
        if ((r = amk_llm_step(m, i == 0 ? token : tokens[i - 1], pos + i, NULL, &tokens[i], d)) != AMK_OK) return r;
    return AMK_OK;
}

AMK_API amk_result amk_llm_reset(amk_llm *m, amk_diag *d) {
    int i;
    if (!m) return AMK_ERR_INVALID_ARG;
    for (i = 0; i < m->prog->n_buffers; i++) {
        size_t nb;
        void *b;
        if (m->prog->buffers[i].kind != AMK_KIND_KV_CACHE) continue;
        if (m->cuda) {
            amk_result r = amk_cuda_fill_value(m->cuda, i, 0.0f, d);
            if (r != AMK_OK) return r;
            continue;
        }
        b = amk_refvm_buffer(m->vm, i, &nb);
        if (!b) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for KV cache");
        memset(b, 0, nb);
    }
    return AMK_OK;
}
#endif /* AMK_IMPLEMENTATION */

/* MIT License. Copyright (c) 2026 the AMK authors.
   Permission is hereby granted, free of charge, to any person obtaining a copy of this software
   and associated documentation files (the "Software"), to deal in the Software without
   restriction, including without limitation the rights to use, copy, modify, merge, publish,
   distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
   Software is furnished to do so, subject to the following conditions: The above copyright notice
   and this permission notice shall be included in all copies or substantial portions of the
   Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND. */
