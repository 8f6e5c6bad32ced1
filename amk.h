/* amk.h - AMK, an LLM megakernel runtime for plain C: the host side. Version 0.1.0.

   USAGE
     #define AMK_IMPLEMENTATION      in exactly one .c (or .cpp) file, then
     #include "amk.h"               everywhere else include it without the define.
     amk_ir.h must sit beside this file.

   WHAT IT DOES
     Holds a megakernel program (the IR of spec IR_SPEC.md: buffers, counters, tasks), reads and
     writes it as the spec's JSON, proves it deadlock- and race-free (validate), lowers it onto
     SMs (SM assignment, per-SM queues, page allocation) and runs it with real numerics on a CPU
     reference VM, the oracle for every other backend. Reads and writes safetensors files.
   WHAT IT DOES NOT DO (yet)
     Model import, the tokenizer and the CUDA runtime live in later sections; see README.md.

   CONTENTS (search for the tag)
     >>config >>api >>ir >>validate >>lower >>refvm >>safetensors >>json     declarations
     >>impl_common >>impl_program >>impl_json >>impl_validate >>impl_lower >>impl_refvm
     >>impl_safetensors                                                       implementation

   CONFIG
     | macro                  | default          | where                                        |
     | AMK_MALLOC/REALLOC/FREE | malloc/realloc/free | before the implementation; all or none    |
     | AMK_API                | extern (static with AMK_STATIC) | anywhere before the include    |
     | AMK_JSON_MAX_DEPTH     | 64               | before the implementation                     |

   ERRORS
     Every fallible call returns amk_result (AMK_OK = 0) and, when the caller passes one, fills a
     caller-owned amk_diag with a message, the JSON line:col and path, the validator check id and
     the task or buffer concerned. The library never prints, never exits, never aborts on input.

   MEMORY
     A program owns everything it points to; amk_program_free releases it all. Strings returned
     to the caller (amk_program_write_json) are freed with amk_free.

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
    X(qdtype, 'i') X(group, 'i') X(pos, 'i') X(flags, 'i') X(dim, 'i') X(rope_orig_ctx, 'i') \
    X(eps, 'f') X(scale, 'f') X(theta, 'f') X(rope_factor, 'f') X(rope_low_freq_factor, 'f') \
    X(rope_high_freq_factor, 'f')

/* One row of OP_REGISTRY (spec §7): arity and the params that make the op correct. */
typedef struct amk_op_spec {
    const char *name;
    int min_inputs, max_inputs, n_outputs; /* -1 = variadic (still capped by the ABI) */
    const char *required[8];               /* NULL-terminated param keys */
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
    int pipelining_depth;       /* default 2 */
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
/* Element count of a buffer; -1 on overflow. */
AMK_API int64_t amk_buffer_numel(const amk_buffer *b);
/* Sum of WEIGHT and CONST buffer bytes (the bandwidth floor's numerator). */
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
#define AMK__PART_DECL
#include "src/gguf.h"
#include "src/model.h"
#include "src/tokenizer.h"
#include "src/cuda.h"
#include "src/llama.h"
#undef AMK__PART_DECL

#ifdef __cplusplus
}
#endif
#endif /* AMK_H */

/* ============================================================================================== */
/*                                       IMPLEMENTATION                                            */
/* ============================================================================================== */
#if defined(AMK_IMPLEMENTATION) && !defined(AMK_IMPLEMENTATION_DONE)
#define AMK_IMPLEMENTATION_DONE
#include "src/common.h"
#include "src/program.h"
#include "src/json.h"
#include "src/opshape.h"
#include "src/validate.h"
#include "src/lower.h"
#include "src/refvm.h"
#include "src/safetensors.h"
#define AMK__PART_IMPL
#include "src/gguf.h"
#include "src/model.h"
#include "src/tokenizer.h"
#include "src/cuda.h"
#include "src/llama.h"
#undef AMK__PART_IMPL
#endif /* AMK_IMPLEMENTATION */

/* MIT License. Copyright (c) 2026 the AMK authors.
   Permission is hereby granted, free of charge, to any person obtaining a copy of this software
   and associated documentation files (the "Software"), to deal in the Software without
   restriction, including without limitation the rights to use, copy, modify, merge, publish,
   distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
   Software is furnished to do so, subject to the following conditions: The above copyright notice
   and this permission notice shall be included in all copies or substantial portions of the
   Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND. */
