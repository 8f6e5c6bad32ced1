/* amk_cuda.h - AMK's CUDA runtime layer. Part of AMK (amk.h has the library's manual).

   WHAT IT DOES
     Runs a validated, lowered program on an NVIDIA GPU through the driver API: libcuda
     opened at run time (AMK_ERR_NO_DRIVER without one, never a crash), the device image set
     (`make device`: the full and the general build of amk_vm.cuh) loaded with
     cuModuleLoadDataEx, one device arena holding every buffer, counter and table, each
     instruction's device form checked and its shared memory sized, the persistent kernel
     launched cooperatively with a watchdog, chained decode steps, timing records and a Chrome
     trace of the per-SM timeline.
   WHAT IT DOES NOT DO
     GPUs older than sm_80; build programs (amk_arch.h) or generate text (amk_llm.h). On GPUs other
     than sm_90 it runs the portable build (sm_80's instructions), slower than the sm_90a ones.
   CONTENTS
     declarations >>cuda | implementation >>impl_cuda */
#ifndef AMK_CUDA_H
#define AMK_CUDA_H

#include "amk_arch.h"
#include "amk_plan.h" /* the device forms' sizing rules and the knobs (amk_tune.h) the runtime shares */

#ifdef __cplusplus
extern "C" {
#endif

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
    AMK_IMAGE_GENERAL_CHAIN = 3, /* the general build's */
    AMK_IMAGE_PREFILL = 4,       /* the general build's chain kernel with the tensor-copy GEMM (amk_gemm_tma),
                                    for a program whose GEMV/GEMM tiles take it: launched a step at a time */
    AMK_IMAGE_PORTABLE = 5       /* sm_80 and newer (AMK_PORTABLE): the general build's chain kernel with the
                                    prefill build's ops, mma.sync for wgmma, no tensor maps, a fatbin of cubins for
                                    sm_80, 86, 89 and 120 and compute_80 PTX; every program, on any GPU */
} amk_image_kind;
/* The kind's name: "full", "general", "full chain", "general chain", "prefill", "portable" ("?"
   otherwise). */
#define AMK_IMAGE_KIND_NAME(kind)                                                                          \
    ((kind) == AMK_IMAGE_FULL ? "full" : (kind) == AMK_IMAGE_GENERAL ? "general" : (kind) == AMK_IMAGE_FULL_CHAIN \
     ? "full chain" : (kind) == AMK_IMAGE_GENERAL_CHAIN ? "general chain" : (kind) == AMK_IMAGE_PREFILL ? "prefill" \
     : (kind) == AMK_IMAGE_PORTABLE ? "portable" : "?")
/* 1 for the kinds with the small-model forms (the planner's lean images). */
#define AMK_IMAGE_LEAN(kind) ((kind) == AMK_IMAGE_FULL || (kind) == AMK_IMAGE_FULL_CHAIN)
/* 1 for the kinds that hold the prefill chunk's ops (amk_plan_prefill_only) and run the chain kernel
   for single steps too */
#define AMK_IMAGE_HAS_PREFILL(kind) ((kind) == AMK_IMAGE_PREFILL || (kind) == AMK_IMAGE_PORTABLE)
/* the specialised forms an image kind has (amk_plan_form's forms) */
#define AMK_IMAGE_FORMS(kind) \
    (AMK_IMAGE_LEAN(kind) ? AMK_PLAN_FORMS_LEAN : (kind) == AMK_IMAGE_PREFILL ? AMK_PLAN_FORMS_PREFILL | AMK_PLAN_FORMS_WG \
                                                : AMK_IMAGE_HAS_PREFILL(kind) ? AMK_PLAN_FORMS_PREFILL : 0)
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
   could take a small-model form (amk_cuda_wants_full), else the full build; the prefill build
   instead of the general one when the set has it and a GEMV/GEMM tile of p takes its tensor-copy
   GEMM or an ATTENTION_PREFILL task its tensor-core form, or a task runs in the prefill build only
   (amk_cuda_wants_prefill: a prefill chunk's matrices and attention, its q, k and v in tiles of
   rows, which the other builds refuse). The environment variable
   AMK_CUDA_IMAGE=full, =general or =prefill forces one (amk_cuda_info.image_kind says which).
   On a GPU other than sm_90 (Ampere, Ada, Blackwell) it loads the set's portable build for every
   program (AMK_CUDA_IMAGE=portable forces it on an H100/H200 too); without one, UNSUPPORTED says
   so. AMK_CUDA_SMEM_CAP=bytes caps the dynamic shared memory a block (a 99 KB GPU on an H200:
   101376); the planner then sizes every task's form to what is left. AMK_CUDA_MEM_CAP=bytes
   makes the device's memory look that large (what is in use stays in use): an arena past what
   is left is OUT_OF_MEMORY, as on a smaller GPU.
   Errors: NO_DRIVER, CUDA (d->cuda_error has the name), UNSUPPORTED (a shape the VM cannot run
   on this device, e.g. head_dim > 256), REJECTED, INVALID_ARG, OUT_OF_MEMORY. */
AMK_API amk_result amk_cuda_create(const amk_program *p, const void *image, size_t image_size,
                                   amk_cuda **out, amk_diag *d);
/* amk_cuda_create for a program that reads and writes some of another runtime's buffers in place
   (a prefill program beside the decode step, over one set of weights and KV caches): share (NULL:
   nothing shared) holds an entry a buffer of p, base's buffer that p's buffer is, or -1 for one of
   its own. A shared buffer must have the dtype and byte size of base's and sit on no page of p;
   the new runtime's arena leaves it out and never zeroes it. base must outlive the new runtime, and
   the two must not run at once (each amk_cuda_run waits for its launch, so calls from one thread
   never overlap). Errors: those of amk_cuda_create; INVALID_ARG for a share that does not match. */
AMK_API amk_result amk_cuda_create_shared(const amk_program *p, const void *image, size_t image_size,
                                          const amk_cuda *base, const int *share, amk_cuda **out,
                                          amk_diag *d);
/* Copies nbytes (exactly the buffer's size in its dtype, else AMK_ERR_MISMATCH) between host
   memory and a buffer's device storage. Synchronous: done when it returns, after every launch of
   c before it, and seen by every launch after it (so are the parameter updates below). Weights,
   KV caches and inputs go up with upload; anything can come back with download (a paged
   activation reads its page). */
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
/* Measures the tensor cores' dense rate as the prompt's GEMM issues them, in the same process: a
   kernel of the prefill image (amk_tc_peak: a block of 512 threads an SM, its four warpgroups
   issuing the tensor-copy GEMM's bf16 m64n128k16 MMAs back to back on operands in shared memory)
   run `iters` times after 2 warm-up launches, timed with CUDA events; *tflops gets the median in
   TFLOP/s (2 operations a multiply-add). It is the ceiling `amk bench --prefill` reports against.
   iters in [1, 10000]. Errors: INVALID_ARG, UNSUPPORTED (an image without the kernel: only the
   prefill image has it), CUDA. */
AMK_API amk_result amk_cuda_tensor_peak(amk_cuda *c, int iters, double *tflops, amk_diag *d);
/* Fills a buffer on the device with seeded uniform values in [-scale, scale) in its dtype (float
   dtypes; integer dtypes get values in [0, (int)scale)), without a host copy: the random-weight
   benchmark uses it for 16 GB of weights. Same (seed, buffer) -> same values on every run.
   Element i's value depends only on (seed, buffer_id, i): splitmix64 bits, 24 of them for a
   float u in [0, 1), v = (2u - 1) * scale, rounded toward zero into the dtype (so never +scale).
   Float dtypes need a finite scale >= 0; integer dtypes a scale >= 1, whose integer part is
   capped at the dtype's count of non-negative values (I8 128, U8 256, I4 8 (stored q + 8), BOOL
   2, I32 2^31 - 1). A block format (AMK_DTYPE_Q8_0 ... IQ4_NL) gets random bytes with each
   block's f16 scales set from scale so its values stay within a few times scale (timing weights;
   finite scale >= 0). Synchronous. Errors: INVALID_ARG (bad id or scale), UNSUPPORTED, CUDA. */
AMK_API amk_result amk_cuda_fill_random(amk_cuda *c, int buffer_id, uint64_t seed, float scale,
                                        amk_diag *d);
/* Fills a buffer with one value (norm weights get 1.0), rounded and saturated into the dtype as
   amk_cuda_upload of amk__store_f32's encoding would be. Synchronous. UNSUPPORTED for a block
   format. */
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

/* Device 0's compute capability and SM count, without a runtime (opens the driver and closes it
   again). Errors: NO_DRIVER (no driver, or it sees no device), INVALID_ARG (a NULL pointer). */
AMK_API amk_result amk_cuda_device_query(int *cc_major, int *cc_minor, int *sms, amk_diag *d);
/* Whether amk_cuda_create would load a set's portable build on this machine's device 0: 1 for a
   GPU other than sm_90 or AMK_CUDA_IMAGE=portable, 0 for an sm_90 GPU (the sm_90a builds), -1 when
   it cannot tell (no driver or device; AMK_CUDA_IMAGE names no build). The portable build has none
   of the small-model forms, so a program for it must not need them (amk_llm builds its step for
   it). Opens the driver when AMK_CUDA_IMAGE does not decide. */
AMK_API int amk_cuda_picks_portable(void);

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
/* 1 when a task of p could take one of the VM's specialised forms (amk_plan_form: a lean or ring
   decode tile, the lean ATTENTION_O), so the full build serves it best. */
AMK_API int amk_cuda_wants_full(const amk_program *p);
/* 1 if a GEMV/GEMM tile of p takes the prefill build's tensor-copy GEMM (16-bit x and W, several
   rows, 512 threads: amk_plan_gemm_tma_ops) or an ATTENTION_PREFILL task its tensor-core form
   (amk_plan_attn_prefill_mma), so that amk_cuda_create loads that build. */
AMK_API int amk_cuda_wants_prefill(const amk_program *p);
AMK_API void amk_cuda_get_info(const amk_cuda *c, amk_cuda_info *info);

/* Releases everything (NULL is fine). */
AMK_API void amk_cuda_free(amk_cuda *c);


#ifdef __cplusplus
}
#endif
#endif /* AMK_CUDA_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_CUDA_IMPLEMENTATION_DONE)
#define AMK_CUDA_IMPLEMENTATION_DONE
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

/* The device VM's limits (amk_vm.cuh, amk_ops.cuh; its launch bound is amk_tune.h's
   AMK_VM_MAX_THREADS); its status words and timing records are amk_ir.h's AMK_VM_STATUS_* and
   amk_vm_timing_t. */
#define AMK__VM_ATTN_MAX_HEAD_DIM 256 /* 32 lanes x AMK_ATTN_DPL accumulators */
#define AMK__VM_BW_THREADS 1024 /* AMK_BW_THREADS: amk_bw_read/amk_bw_copy's launch bound */
#define AMK__VM_TC_PEAK_THREADS 512 /* AMK_TC_PEAK_THREADS: amk_tc_peak's launch bound */
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
    X(MemGetInfo, "cuMemGetInfo_v2", (size_t *, size_t *)) \
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
    amk__CUfunction fn_tc_peak; /* the prefill image's amk_tc_peak; NULL in the others */
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
    /* amk_cuda_create_shared: the runtime whose buffers this one's use in place, and per buffer
       that runtime's buffer or -1 (NULL: none shared) */
    const amk_cuda *base;
    int32_t *shared;
    int64_t *buf_bytes;         /* [n_buffers] its size in its dtype */
    amk_buffer_t *bufs;         /* [n_buffers] host copy of the device buffer table */
    amk_instruction_t *ins;     /* [n_tasks] host copy of the instruction table */
    int32_t *queue_off;         /* [num_sms + 1] */
    int32_t *queue;             /* [n_tasks] */
    int32_t *queue_pos;         /* [n_tasks] task i's entry in queue */
    amk_vm_ctx_t *ctxs;         /* [n_tasks] host copy of the context table (queue order) */
    int no_prefetch;            /* the program's config has pipelining_depth 0: no L2 prefetches */
    uint64_t off_counters, off_status, off_timing, off_contexts;
    /* the tasks' tensor maps (amk__cuda_kv_maps): cuTensorMapEncodeTiled (NULL: the driver lacks
       it), per task its pair of maps or -1, per pair its first task and its rows (-1: a GEMM
       tile's pair, x's and W's maps) */
    amk__CUresult (*TensorMapEncodeTiled)(void *, int, uint32_t, void *, const uint64_t *, const uint64_t *,
                                          const uint32_t *, const uint32_t *, int, int, int, int);
    int32_t *kv_pair;
    int32_t *kv_pair_task;      /* the first task of each pair (its geometry) */
    int32_t *kv_pair_rows;      /* the rows of each pair's box; -1 a GEMM tile's pair */
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
/* The same for a result already computed (a helper's, such as amk__cuda_h2d's). */
#define AMK__CU_CHECK(c, d, result, what) do { amk__CUresult amk__r_ = (result); \
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

/* Forms of the spec's opcodes the reference VM runs and the device does not: KV_APPEND and
   ATTENTION_TILE over a batch of caches (rank 4, B > 1), attention partials not in F32, and
   RMSNORM_MLP with a block-format W_down but K not a multiple of 32 or more rows a tile than K. 1 with
   the reason in msg; 0 when the device runs t. */
AMK__FN int amk__cuda_unsupported_form(const amk_program *p, const amk_task *t, char *msg, size_t size) {
    int i;
    if ((t->op == AMK_OP_KV_APPEND || t->op == AMK_OP_ATTENTION_TILE) && t->n_inputs >= 2 &&
        amk__opshape_batch(&p->buffers[t->inputs[1]]) > 1) {
        snprintf(msg, size, "%s over a batch of caches (rank 4, %lld sequences) runs on the reference VM only",
                 amk_op_name(t->op), (long long)p->buffers[t->inputs[1]].shape[0]);
        return 1;
    }
    /* why: the device restages the tile's values where x was (amk_blk_down) */
    if (amk_op_device(t->op, NULL) == AMK_OP_RMSNORM_MLP && t->n_inputs >= 5 &&
        amk_dtype_is_block(p->buffers[t->inputs[4]].dtype) &&
        (amk__param_i(t, "K", 0) % 32 != 0 || AMK_BLK_UP(amk__param_i(t, "N_tile", 0)) > AMK_BLK_UP(amk__param_i(t, "K", 0)))) {
        snprintf(msg, size, "%s: a W_down in a block format ('%s', %s) runs on the reference VM only unless K is a "
                 "multiple of 32 and N_tile (%lld) at most K (%lld)", amk_op_name(t->op),
                 p->buffers[t->inputs[4]].name ? p->buffers[t->inputs[4]].name : "?",
                 amk_dtype_name(p->buffers[t->inputs[4]].dtype), (long long)amk__param_i(t, "N_tile", 0),
                 (long long)amk__param_i(t, "K", 0));
        return 1;
    }
    for (i = 0; i < t->n_inputs + t->n_outputs; i++) {
        const int id = i < t->n_inputs ? t->inputs[i] : t->outputs[i - t->n_inputs];
        const int part = t->op == AMK_OP_ATTENTION_COMBINE ? i < t->n_inputs
                       : t->op == AMK_OP_ATTENTION_TILE && i == t->n_inputs &&
                         ((uint32_t)amk__param_i(t, "flags", 0) & AMK_ATTN_FLAG_PARTIAL);
        const char *name = p->buffers[id].name ? p->buffers[id].name : "?";
        if (part && p->buffers[id].dtype != AMK_DTYPE_F32) {
            snprintf(msg, size, "%s: attention partials '%s' in %s run on the reference VM only (the device's are F32)",
                     amk_op_name(t->op), name, amk_dtype_name(p->buffers[id].dtype));
            return 1;
        }
    }
    return 0;
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
    if (amk__cuda_unsupported_form(p, t, msg, sizeof msg))
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: %s", ti, msg);
    if (smem > 0) {
        amk_vm_ctx_t x;
        int64_t need, K, hd;
        amk_task_context(p, ti, &x);
        need = amk_plan_least(&x, threads);
        K = x.ins.params.K;
        hd = x.ins.params.head_dim;
        const int op = x.ins.op; /* the device's op (a variant's base) */
        if ((op == AMK_OP_GEMV_TILE || op == AMK_OP_GEMM_TILE || op == AMK_OP_RMSNORM_GEMV ||
             op == AMK_OP_RMSNORM_SWIGLU || op == AMK_OP_RMSNORM_MLP) && need > smem)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: K = %lld needs %lld bytes of shared memory, the VM has %lld",
                             ti, (long long)K, (long long)need, (long long)smem);
        if ((op == AMK_OP_ATTENTION_TILE || op == AMK_OP_ATTENTION_DECODE || op == AMK_OP_ATTENTION_O ||
             op == AMK_OP_ATTENTION_PREFILL) && (hd > AMK__VM_ATTN_MAX_HEAD_DIM || need > smem))
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: head_dim %lld is above the VM's %d or its q staging "
                             "exceeds %lld bytes of shared memory", ti, (long long)hd, AMK__VM_ATTN_MAX_HEAD_DIM, (long long)smem);
        /* only a specialised form takes them (without tensor maps here: amk__cuda_context drops a
           task's maps where their layout does not fit) */
        if (amk_plan_prefill_only(&x) && !AMK_IMAGE_HAS_PREFILL(image_kind))
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: %s %s runs in the prefill and portable builds only, not "
                             "the %s build", ti, amk_op_name(t->op),
                             t->op == AMK_OP_COPY ? "in a tile of rows (M_tile) or of a block format"
                             : t->op == AMK_OP_GEMM_TILE ? "of a K range (K_tile)" : "in a tile of rows (M_tile)",
                             AMK_IMAGE_KIND_NAME(image_kind));
        if (amk_plan_folded(&x) && amk_plan_form(&x, threads, smem, AMK_IMAGE_FORMS(image_kind)) == AMK_FORM_GENERAL)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: the VM takes %s only in its lean form (%s), which "
                             "does not take this task", ti, amk_op_name(t->op),
                             !AMK_IMAGE_LEAN(image_kind) ? "not in the general, prefill or portable build" : "shapes, dtypes or shared memory");
    }
    if (d) d->task = saved_task;
    return AMK_OK;
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
    if (in->params.n_off < 0 || in->params.N_tile < 1 || in->params.K < 1) return NULL;
    /* bits a row: a block format's rows are whole blocks (the validator's rule) */
    bits = amk_dtype_is_block(W->dtype) ? (uint64_t)amk_dtype_nbytes(W->dtype, in->params.K) * 8
                                        : (uint64_t)amk_dtype_bits(W->dtype) * (uint64_t)in->params.K;
    if (amk_dtype_bits(W->dtype) == 8 && in->params.qdtype == AMK_DTYPE_I4) bits /= 2; /* I4 packed in a byte buffer */
    *start = (uint64_t)in->params.n_off * bits / 8 & ~(uint64_t)15;
    *end = ((uint64_t)in->params.n_off + (uint64_t)in->params.N_tile) * bits / 8;
    limit = amk_dtype_is_block(W->dtype) ? (uint64_t)amk_dtype_nbytes(W->dtype, W->numel) /* never past the buffer */
          : (uint64_t)W->numel * (W->dtype == AMK_DTYPE_U8 ? 8 : amk_dtype_bits(W->dtype)) / 8;
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

/* Task i's L2 prefetches in its instruction (amk__cuda_prefetches); none when the program's config
   sets pipelining_depth 0 (spec §5: "0 = no prefetch"). */
AMK__FN void amk__cuda_task_prefetches(amk_cuda *c, int i) {
    amk_instruction_t *in = &c->ins[i];
    if (c->no_prefetch) {
        amk__cuda_prefetch_clear(in);
        return;
    }
    amk__cuda_prefetches(c->bufs, c->n_buffers, in);
}

/* AMK_VM_HINT_KV_EARLY (amk_ir.h) in ins[i] (p's task i) for the ATTENTION_O tasks it holds for:
   the position buffer is an IO_INPUT (nothing writes it: the validator's WRITE_READONLY), the
   caches are KV_CACHE buffers (never in a page) and every task that writes one writes only the row
   at that same position buffer (amk__v_kv_row_writer_pos: an RMSNORM_GEMV_KV or _ROPE_KV over one
   row of x, or an ATTENTION_O_PRENORM's outputs 2 and 3). Returns the number of instructions
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
        if (amk_op_device(t->op, NULL) == AMK_OP_ATTENTION_O && t->n_inputs >= 4) {
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

/* A copy between the host and the device, done when it returns and ordered after everything
   enqueued on c->stream before it (c's context current). why on c->stream and not cuMemcpyHtoD:
   the launch stream is non-blocking, so the legacy stream's copies are not ordered against its
   launches, and from pageable memory cuMemcpyHtoD returns once the bytes are staged, before they
   land: a launch right after it could read the old bytes. The builder sweep's spec-path step
   (its positions are parameters, updated each step) read stale ones now and then while other
   threads' amk_cuda copied on the same legacy stream (bench/RESULTS.md runs 320-324). */
AMK__FN amk__CUresult amk__cuda_h2d(amk_cuda *c, amk__CUdeviceptr dst, const void *src, size_t n) {
    const amk__CUresult cr = c->api.MemcpyHtoDAsync(dst, src, n, c->stream);
    return cr == AMK__CUDA_SUCCESS ? c->api.StreamSynchronize(c->stream) : cr;
}
AMK__FN amk__CUresult amk__cuda_d2h(amk_cuda *c, void *dst, amk__CUdeviceptr src, size_t n) {
    const amk__CUresult cr = c->api.MemcpyDtoHAsync(dst, src, n, c->stream);
    return cr == AMK__CUDA_SUCCESS ? c->api.StreamSynchronize(c->stream) : cr;
}

/* Tasks' operands by tensor copies: pairs of 2-D tensor maps (cuTensorMapEncodeTiled), a pair a
   task at most, shared by the tasks of one geometry.
   - The lean attention's cache rows (AMK_ATTN_KV_TMA, amk_ops.cuh): a K and a V cache buffer each
     viewed as [rows, n_kv * head_dim] bf16 with a box of head_dim x kv_len elements. For a task the
     planner's lean form would copy so (amk_plan_attn_tma), not the same buffer twice, and only with
     the full build loaded (the others have no lean attention). A task uses its pair only while it
     carries AMK_VM_HINT_KV_EARLY (amk__cuda_context).
   - A GEMV/GEMM or RMSNORM_GEMV tile's x and W (AMK_GEMM_TMA, amk_gemm_tma): each viewed as
     [numel / K, K] with a box of AMK_TMA_BK x AMK_TMA_BM (x) or AMK_TMA_WBOX (W) elements, for a task
     whose operands suit (amk_plan_gemm_tma_ops), with the prefill build loaded; a GEMM_TILE of a
     K range (K_tile) views columns [k_off, k_off + K_tile) of each (a pair a range).
   Both 16-bit elements (UINT16: the bytes, no float fill) and 128-byte swizzle.
   amk__cuda_kv_pairs assigns the pairs (c->kv_pair[task], -1 for none) before the arena is
   planned; amk__cuda_kv_maps encodes and uploads them once it exists. Returns 0, or -1 out of
   memory. */
#define AMK__CUDA_TMAP_BYTES 128 /* CUtensorMap: 128 bytes, 64-byte aligned */
/* a task's timing record and its marks (amk_ir.h: the marks array follows the records') */
#define AMK__CUDA_TIMING_BYTES (sizeof(amk_vm_timing_t) + sizeof(amk_vm_marks_t))
AMK__FN int amk__cuda_kv_pairs(amk_cuda *c, const amk_program *p) {
    int i, k;
    c->n_kv_pairs = 0;
    if (!c->TensorMapEncodeTiled || p->n_tasks < 1) return 0;
    c->kv_pair = (int32_t *)amk__calloc((size_t)p->n_tasks, sizeof(int32_t));
    c->kv_pair_task = (int32_t *)amk__calloc((size_t)p->n_tasks, sizeof(int32_t));
    c->kv_pair_rows = (int32_t *)amk__calloc((size_t)p->n_tasks, sizeof(int32_t));
    if (!c->kv_pair || !c->kv_pair_task || !c->kv_pair_rows) return -1;
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        const int op = amk_op_device(t->op, NULL);
        amk_vm_ctx_t x;
        int64_t nkv = 0, n = -1, w;
        c->kv_pair[i] = -1;
        if (amk_plan_gemm_w(op)) {
            if (c->info.image_kind != AMK_IMAGE_PREFILL) continue; /* the only build with amk_gemm_tma */
            amk_task_context(p, i, &x);
            if (!amk_plan_gemm_tma_ops(&x, c->threads)) continue;
            w = x.ins.params.K;
            if (amk_buffer_numel(&p->buffers[t->inputs[0]]) / w > INT32_MAX ||
                amk_buffer_numel(&p->buffers[t->inputs[amk_plan_gemm_w(op)]]) / w > INT32_MAX)
                continue; /* a box's row coordinate is an int32 */
        } else {
            const amk_buffer *kb, *vb;
            /* why only for the full build: the others have no lean attention, nothing would read the maps */
            if (op != AMK_OP_ATTENTION_O || !AMK_IMAGE_LEAN(c->info.image_kind) || t->n_inputs < 5 ||
                t->inputs[1] == t->inputs[2])
                continue;
            amk_task_context(p, i, &x); /* would the lean form copy this task's rows with maps? */
            x.maps = 1;
            x.kv_rows = x.ins.params.kv_len;
            if (!amk_plan_attn_tma(&x) || amk_plan_attn_lean_bytes(&x, c->threads, 1) == 0) continue;
            kb = &p->buffers[t->inputs[1]];
            vb = &p->buffers[t->inputs[2]];
            nkv = x.ins.params.n_kv_heads;
            n = x.ins.params.kv_len;
            w = (int64_t)x.ins.params.head_dim * nkv;
            if (nkv > 1024 || kb->kind != AMK_KIND_KV_CACHE || vb->kind != AMK_KIND_KV_CACHE || amk_buffer_numel(kb) % w != 0 ||
                amk_buffer_numel(vb) != amk_buffer_numel(kb) || amk_buffer_numel(kb) / w > INT32_MAX)
                continue; /* what the maps' encoding needs */
        }
        for (k = 0; k < c->n_kv_pairs; k++) { /* the same two buffers (x and W, or K and V) and geometry */
            const amk_task *u = &p->tasks[c->kv_pair_task[k]];
            const int a = n < 0 ? 0 : 1, b = n < 0 ? amk_plan_gemm_w(op) : 2;
            const int ua = n < 0 ? 0 : 1, ub = n < 0 ? amk_plan_gemm_w(amk_op_device(u->op, NULL)) : 2;
            if (c->kv_pair_rows[k] == n && u->inputs[ua] == t->inputs[a] && u->inputs[ub] == t->inputs[b] &&
                (n < 0 ? amk__param_i(u, "K", 0) == w && amk__param_i(u, "k_off", 0) == amk__param_i(t, "k_off", 0) &&
                             amk__param_i(u, "K_tile", 0) == amk__param_i(t, "K_tile", 0)
                       : amk__param_i(u, "n_kv_heads", 0) == nkv))
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
   driver refuses leaves its tasks without one (they stage their operands otherwise). */
AMK__FN amk_result amk__cuda_kv_maps(amk_cuda *c, const amk_program *p, amk_diag *d) {
    unsigned char *raw, *maps;
    int i, k;
    if (c->n_kv_pairs < 1) return AMK_OK;
    raw = (unsigned char *)amk__calloc((size_t)c->n_kv_pairs * 2 * AMK__CUDA_TMAP_BYTES + 64, 1);
    if (!raw) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    maps = raw + (64 - (uintptr_t)raw % 64) % 64; /* why: the driver wants the map 64-byte aligned */
    for (k = 0; k < c->n_kv_pairs; k++) {
        const amk_task *t = &p->tasks[c->kv_pair_task[k]];
        const int gemm = c->kv_pair_rows[k] < 0;
        const int64_t w = gemm ? amk__param_i(t, "K", 0) : amk__param_i(t, "head_dim", 0) * amk__param_i(t, "n_kv_heads", 0);
        /* a GEMM_TILE of a K range: both maps start at column k_off and end K_tile later (the
           columns past it read as zero, as past K) */
        const int64_t k0 = gemm && amk__param_i(t, "K_tile", 0) > 0 ? amk__param_i(t, "k_off", 0) : 0;
        const int64_t kw = gemm && amk__param_i(t, "K_tile", 0) > 0 ? amk__param_i(t, "K_tile", 0) : w;
        int e, ok = 1;
        for (e = 0; e < 2; e++) { /* x and W (input amk_plan_gemm_w), or K and V (inputs 1 and 2) */
            const int b = t->inputs[gemm ? (e ? amk_plan_gemm_w(amk_op_device(t->op, NULL)) : 0) : 1 + e];
            const uint64_t dim[2] = {(uint64_t)kw, (uint64_t)(amk_buffer_numel(&p->buffers[b]) / w)};
            const uint64_t stride[1] = {(uint64_t)w * 2};
            const uint32_t box[2] = {gemm ? (uint32_t)AMK_TMA_BK : 64u,
                                     gemm ? (uint32_t)(e ? AMK_TMA_WBOX : AMK_TMA_BM) : (uint32_t)c->kv_pair_rows[k]};
            const uint32_t one[2] = {1u, 1u};
            /* UINT16 (the bytes, no float fill), no interleave, 128-byte swizzle, no L2 promotion */
            if (c->TensorMapEncodeTiled(maps + (size_t)(2 * k + e) * AMK__CUDA_TMAP_BYTES, 1, 2u,
                                        (void *)(uintptr_t)(c->bufs[b].ptr + (uint64_t)k0 * 2), dim, stride, box, one, 0, 3,
                                        0, 0) !=
                AMK__CUDA_SUCCESS)
                ok = 0;
        }
        if (!ok)
            for (i = 0; i < p->n_tasks; i++)
                if (c->kv_pair[i] == k) c->kv_pair[i] = -1;
    }
    {
        const amk__CUresult cr = amk__cuda_h2d(c, c->arena + c->off_kv_maps, maps,
                                               (size_t)c->n_kv_pairs * 2 * AMK__CUDA_TMAP_BYTES);
        amk__free(raw);
        if (cr != AMK__CUDA_SUCCESS) return amk__cuda_err(c, d, cr, "cuMemcpyHtoDAsync (tensor maps)");
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
    if (c->kv_pair && c->kv_pair[i] >= 0 && (c->kv_pair_rows[c->kv_pair[i]] < 0 || (x->ins.hints & AMK_VM_HINT_KV_EARLY))) {
        /* why the pair's rows, not the task's kv_len: an update may change kv_len; the planner then
           sees the mismatch (amk_plan_attn_tma) and the task stages its rows itself */
        x->kv_rows = c->kv_pair_rows[c->kv_pair[i]] < 0 ? 0 : c->kv_pair_rows[c->kv_pair[i]];
        x->maps = c->arena + c->off_kv_maps + (uint64_t)c->kv_pair[i] * 2 * AMK__CUDA_TMAP_BYTES;
    }
    x->ins.form = amk_plan_form(x, c->threads, c->smem_bytes, AMK_IMAGE_FORMS(c->info.image_kind));
    if (x->maps && x->ins.form == AMK_FORM_GENERAL) {
        /* the maps' layout did not fit (a launch sized by the config): the task stages its rows by
           cp.async (for PRENORM the layout amk__cuda_check_task proved fits) */
        x->maps = 0;
        x->kv_rows = 0;
        x->ins.form = amk_plan_form(x, c->threads, c->smem_bytes, AMK_IMAGE_FORMS(c->info.image_kind));
    }
    if (x->ins.form == AMK_FORM_GEMM_TMA && x->ins.params.K_tile > 0) {
        /* a K range: its maps view columns [k_off, k_off + K_tile) of x and W (amk__cuda_kv_maps),
           so the device runs a GEMM of K_tile columns on them (x keeps its rows). why here, not a
           range in amk_gemm_tma: any change to that inlined loop moved the prefill VM's registers
           and its unsplit chunks' time (bench/NOTES.md session "split-k") */
        x->in[0].numel = x->in[0].numel / x->ins.params.K * x->ins.params.K_tile;
        x->ins.params.K = x->ins.params.K_tile;
        x->ins.params.k_off = x->ins.params.K_tile = 0;
    }
    c->ins[i].form = x->ins.form;
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
            if ((n_pages > 0 && p->buffer_page[b] >= 0) || (c->shared && c->shared[b] >= 0)) continue;
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

/* The threads a block of p's launch: its config's (default 256), capped at the VM's launch bound
   (the function's own cap, read once loaded, may lower it). */
AMK__FN int amk__cuda_threads(const amk_program *p) {
    const int t = p->has_config && p->config.threads_per_block > 0 ? p->config.threads_per_block : 256;
    return (t > AMK_VM_MAX_THREADS ? AMK_VM_MAX_THREADS : t) & ~31;
}

AMK_API int amk_cuda_wants_prefill(const amk_program *p) {
    int i;
    amk_vm_ctx_t x;
    if (!p) return 0;
    for (i = 0; i < p->n_tasks; i++) {
        amk_task_context(p, i, &x);
        if (amk_plan_gemm_tma_ops(&x, amk__cuda_threads(p)) || amk_plan_attn_prefill_mma(&x, amk__cuda_threads(p), INT64_MAX) ||
            amk_plan_prefill_only(&x))
            return 1;
    }
    return 0;
}

AMK_API int amk_cuda_wants_full(const amk_program *p) {
    int i;
    amk_vm_ctx_t x;
    if (!p) return 0;
    for (i = 0; i < p->n_tasks; i++) {
        /* why any shared memory: the device's is not known yet; a false yes costs speed, never a
           result */
        amk_task_context(p, i, &x);
        if (amk_plan_form(&x, amk__cuda_threads(p), INT64_MAX, AMK_PLAN_FORMS_LEAN) != AMK_FORM_GENERAL) return 1;
    }
    return 0;
}

/* 1 when a device of compute capability major.minor runs the portable build rather than the
   sm_90a ones (every GPU but sm_90), or AMK_CUDA_IMAGE forces it; 0 for the sm_90a ones; -1 when
   AMK_CUDA_IMAGE names no build, or when it is unset and the device is unknown (major < 0). */
AMK__FN int amk__cuda_portable(int major, int minor) {
    const char *force = getenv("AMK_CUDA_IMAGE");
    if (force && *force) {
        if (strcmp(force, "full") != 0 && strcmp(force, "general") != 0 && strcmp(force, "prefill") != 0 &&
            strcmp(force, "portable") != 0)
            return -1;
        return strcmp(force, "portable") == 0;
    }
    return major < 0 ? -1 : !(major == 9 && minor == 0);
}

/* The image amk__cuda_load_image loads from what the caller passed, for a device of compute
   capability major.minor: itself, or from a set the portable build (amk__cuda_portable), the build
   AMK_CUDA_IMAGE names, else when p takes no small-model form the prefill build (when a tile of p
   takes its GEMM) or the general build, if the set has it, else the full build. *kind gets the
   kind loaded. */
AMK__FN amk_result amk__cuda_pick_image(const amk_program *p, int major, int minor, const void **image, size_t *size,
                                        int *kind, amk_diag *d) {
    const char *force = getenv("AMK_CUDA_IMAGE");
    const void *blob = *image;
    const size_t n = *size;
    const int portable = amk__cuda_portable(major, minor);
    *kind = AMK_IMAGE_FULL;
    if (portable < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "AMK_CUDA_IMAGE is '%s': full, general, prefill or portable", force);
    if (!amk_image_set_is(blob, n)) return AMK_OK;
    if (portable) {
        *kind = AMK_IMAGE_PORTABLE;
        if (amk_image_set_find(blob, n, AMK_IMAGE_PORTABLE, image, size, NULL) != AMK_OK) {
            if (force && *force)
                return amk__fail(d, AMK_ERR_UNSUPPORTED, "AMK_CUDA_IMAGE=portable and the device image set has no "
                                 "portable build (`make device` builds it), only sm_90a ones");
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "the device is sm_%d%d and the device image set has no portable "
                             "build (sm_80 and newer; `make device` builds it), only sm_90a ones", major, minor);
        }
        return AMK_OK;
    }
    if (force && *force) {
        *kind = strcmp(force, "full") == 0 ? AMK_IMAGE_FULL : strcmp(force, "general") == 0 ? AMK_IMAGE_GENERAL : AMK_IMAGE_PREFILL;
    } else if (!amk_cuda_wants_full(p)) {
        if (amk_cuda_wants_prefill(p) && amk_image_set_find(blob, n, AMK_IMAGE_PREFILL, image, size, NULL) == AMK_OK) {
            *kind = AMK_IMAGE_PREFILL;
            return AMK_OK;
        }
        if (amk_image_set_find(blob, n, AMK_IMAGE_GENERAL, image, size, NULL) == AMK_OK) {
            *kind = AMK_IMAGE_GENERAL;
            return AMK_OK;
        }
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
    /* why amk_vm_chain for the prefill build: it is built as a chain kernel (gpu.mk), which runs
       one step when its chain argument says none */
    if (AMK_IMAGE_HAS_PREFILL(c->info.image_kind))
        AMK__CU_TRY(c, d, ModuleGetFunction(&c->fn, c->mod, "amk_vm_chain"), "cuModuleGetFunction(amk_vm_chain)");
    else
        AMK__CU_TRY(c, d, ModuleGetFunction(&c->fn, c->mod, "amk_vm_main"), "cuModuleGetFunction(amk_vm_main)");
    /* the service kernels are optional: an image without them still runs programs */
    if (c->api.ModuleGetFunction(&c->fn_bw_read, c->mod, "amk_bw_read") != AMK__CUDA_SUCCESS) c->fn_bw_read = NULL;
    if (c->api.ModuleGetFunction(&c->fn_bw_copy, c->mod, "amk_bw_copy") != AMK__CUDA_SUCCESS) c->fn_bw_copy = NULL;
    if (c->api.ModuleGetFunction(&c->fn_fill_random, c->mod, "amk_fill_random") != AMK__CUDA_SUCCESS) c->fn_fill_random = NULL;
    if (c->api.ModuleGetFunction(&c->fn_fill_value, c->mod, "amk_fill_value") != AMK__CUDA_SUCCESS) c->fn_fill_value = NULL;
    if (c->api.ModuleGetFunction(&c->fn_tc_peak, c->mod, "amk_tc_peak") != AMK__CUDA_SUCCESS) c->fn_tc_peak = NULL;
    return AMK_OK;
}

/* The chained-steps build of the kind c loaded (c->mod_chain, c->fn_chain), when image is a set
   that has one; none is no error (amk_cuda_set_chain then says UNSUPPORTED). The portable build's
   kernel is a chain kernel itself. */
AMK__FN amk_result amk__cuda_load_chain(amk_cuda *c, const void *image, size_t size, amk_diag *d) {
    const void *one;
    size_t one_size;
    amk_result r;
    if (c->info.image_kind == AMK_IMAGE_PORTABLE) {
        c->fn_chain = c->fn;
        return AMK_OK;
    }
    if (!amk_image_set_is(image, size) || c->info.image_kind > AMK_IMAGE_GENERAL ||
        amk_image_set_find(image, size, (amk_image_kind)(c->info.image_kind + AMK_IMAGE_FULL_CHAIN), &one, &one_size, NULL) != AMK_OK)
        return AMK_OK;
    if ((r = amk__cuda_load_module(c, one, one_size, &c->mod_chain, d)) != AMK_OK) return r;
    AMK__CU_TRY(c, d, ModuleGetFunction(&c->fn_chain, c->mod_chain, "amk_vm_chain"), "cuModuleGetFunction(amk_vm_chain)");
    return AMK_OK;
}

/* The arena against the device's memory, before it is allocated: INVALID_ARG when the KV caches
   alone exceed the device's memory (a smaller context is the cure), OUT_OF_MEMORY when the arena
   exceeds what is free now; each naming the sizes. */
AMK__FN amk_result amk__cuda_fits(amk_cuda *c, const amk_program *p, amk_diag *d) {
    size_t free_b = 0, total_b = 0;
    uint64_t kv = 0, cap = 0;
    int b;
    const char *cap_s = getenv("AMK_CUDA_MEM_CAP"); /* a smaller GPU's memory, emulated */
    if (c->api.MemGetInfo(&free_b, &total_b) != AMK__CUDA_SUCCESS) return AMK_OK; /* why: cuMemAlloc still says */
    if (cap_s && *cap_s) {
        char *end = NULL;
        cap = (uint64_t)strtoull(cap_s, &end, 10);
        if (!end || *end || cap == 0)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "AMK_CUDA_MEM_CAP is '%s': bytes of device memory, a positive "
                             "integer", cap_s);
        if (cap < (uint64_t)total_b) { /* what is in use now stays in use on the smaller device */
            const uint64_t used = (uint64_t)total_b - (uint64_t)free_b;
            free_b = (size_t)(cap > used ? cap - used : 0);
            total_b = (size_t)cap;
        }
    }
    for (b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].kind == AMK_KIND_KV_CACHE && c->buf_bytes[b] > 0 && !(c->shared && c->shared[b] >= 0))
            kv += (uint64_t)c->buf_bytes[b];
    if (kv > (uint64_t)total_b)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "the KV caches need %.1f GB, more than device %s's %.1f GB; use a "
                         "smaller context (--ctx)", (double)kv / 1e9, c->info.device_name, (double)total_b / 1e9);
    if (c->arena_bytes > (uint64_t)free_b)
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "the program needs %.1f GB of device memory (%.1f GB of it the KV "
                         "caches), device %s has %.1f GB free of %.1f GB", (double)c->arena_bytes / 1e9, (double)kv / 1e9,
                         c->info.device_name, (double)free_b / 1e9, (double)total_b / 1e9);
    return AMK_OK;
}

/* Everything after the driver is up: launch shape, arena, tables. */
AMK__FN amk_result amk__cuda_setup(amk_cuda *c, const amk_program *p, amk_diag *d) {
    int optin = 0, static_smem = 0, fn_max_threads = 0, nb = 0, coop = 0, i, s;
    amk_buffer_t *bt;
    amk_result r;
    AMK__CU_TRY(c, d, DeviceGetAttribute(&optin, AMK__CU_DEV_ATTR_SMEM_PER_BLOCK_OPTIN, c->dev), "cuDeviceGetAttribute");
    {
        const char *cap = getenv("AMK_CUDA_SMEM_CAP"); /* a smaller GPU's shared memory a block, emulated */
        if (cap && *cap) {
            char *end = NULL;
            const long v = strtol(cap, &end, 10);
            if (!end || *end || v < 1024 || v > (1L << 30))
                return amk__fail(d, AMK_ERR_INVALID_ARG, "AMK_CUDA_SMEM_CAP is '%s': bytes of shared memory a block, "
                                 "1024 or more (a 99 KB GPU: 101376)", cap);
            if (v < optin) optin = (int)v;
        }
    }
    AMK__CU_TRY(c, d, DeviceGetAttribute(&coop, AMK__CU_DEV_ATTR_COOPERATIVE_LAUNCH, c->dev), "cuDeviceGetAttribute");
    AMK__CU_TRY(c, d, FuncGetAttribute(&static_smem, AMK__CU_FUNC_ATTR_SHARED_SIZE_BYTES, c->fn), "cuFuncGetAttribute");
    AMK__CU_TRY(c, d, FuncGetAttribute(&fn_max_threads, AMK__CU_FUNC_ATTR_MAX_THREADS_PER_BLOCK, c->fn), "cuFuncGetAttribute");
    AMK__CU_TRY(c, d, FuncGetAttribute(&c->info.regs_per_thread, AMK__CU_FUNC_ATTR_NUM_REGS, c->fn), "cuFuncGetAttribute");
    if (!coop) return amk__fail(d, AMK_ERR_UNSUPPORTED, "device %s does not support cooperative launch", c->info.device_name);
    c->threads = amk__cuda_threads(p);
    if (c->threads > fn_max_threads) c->threads = fn_max_threads;
    c->threads &= ~31;
    if (c->threads < 32) return amk__fail(d, AMK_ERR_UNSUPPORTED, "the VM kernel allows %d threads a block", fn_max_threads);
    if (amk__cuda_kv_pairs(c, p) < 0) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (p->has_config && p->config.smem_bytes_per_block > 0) {
        c->smem_bytes = p->config.smem_bytes_per_block;
    } else { /* what the tasks would like, at most what the device allows; the driver then sizes L1 */
        c->smem_bytes = 16; /* why not 0: a valid, 16-byte area even when no task stages anything */
        for (i = 0; i < p->n_tasks; i++) {
            amk_vm_ctx_t x;
            int64_t w;
            amk_task_context(p, i, &x);
            if (c->kv_pair && c->kv_pair[i] >= 0 && c->kv_pair_rows[c->kv_pair[i]] < 0) x.maps = 1; /* a GEMM tile's, to come */
            w = amk_plan_want(&x, c->threads);
            if (w > c->smem_bytes) c->smem_bytes = w;
        }
        /* at most what both kernels allow: the chained-steps kernel holds a little more static
           shared memory, and a launch sized for the single step alone left it out (issue 38:
           amk bench --chain at the 8B shape's context 4096) */
        int cap = static_smem, chain_static = 0;
        if (c->fn_chain && c->api.FuncGetAttribute(&chain_static, AMK__CU_FUNC_ATTR_SHARED_SIZE_BYTES, c->fn_chain) ==
                               AMK__CUDA_SUCCESS && chain_static > cap)
            cap = chain_static;
        if (c->smem_bytes > (int64_t)optin - cap) c->smem_bytes = (int64_t)optin - cap;
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
    if ((r = amk__cuda_plan(c, p, d)) != AMK_OK) return r;
    if (c->arena_bytes > (uint64_t)SIZE_MAX) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "the device arena is too large");
    if ((r = amk__cuda_fits(c, p, d)) != AMK_OK) return r;
    AMK__CU_TRY(c, d, MemAlloc(&c->arena, (size_t)c->arena_bytes), "cuMemAlloc (the arena)");
    AMK__CU_TRY(c, d, StreamCreate(&c->stream, AMK__CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    AMK__CU_TRY(c, d, StreamCreate(&c->ctl, AMK__CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    /* why on the launch stream: see amk__cuda_h2d */
    AMK__CU_TRY(c, d, MemsetD8Async(c->arena, 0, (size_t)c->arena_bytes, c->stream), "cuMemsetD8Async");
    AMK__CU_TRY(c, d, StreamSynchronize(c->stream), "cuStreamSynchronize");
    c->prog.buffers += c->arena;
    c->prog.counters += c->arena;
    c->prog.sm_queue_offset += c->arena;
    c->prog.abort_flag += c->arena;
    c->prog.contexts += c->arena;
    /* tables: buffers, instructions and queues (task-list order filtered by SM: spec §3.1) on the
       host, resolved into the contexts the device reads */
    bt = c->bufs = (amk_buffer_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(amk_buffer_t));
    if (!bt) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < p->n_buffers; i++)
        amk_buffer_descriptor(&p->buffers[i], c->shared && c->shared[i] >= 0 ? c->base->bufs[c->shared[i]].ptr
                                                                             : c->arena + c->buf_off[i], &bt[i]);
    c->no_prefetch = p->has_config && p->config.pipelining_depth == 0;
    for (i = 0; i < p->n_tasks; i++) {
        amk_task_instruction(&p->tasks[i], &c->ins[i]);
        amk__cuda_task_prefetches(c, i);
    }
    if (amk__cuda_kv_hints(p, c->ins) < 0) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_kv_maps(c, p, d)) != AMK_OK) return r;
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
        AMK__CU_CHECK(c, d, amk__cuda_h2d(c, c->prog.buffers, bt, (size_t)p->n_buffers * sizeof(amk_buffer_t)),
                      "cuMemcpyHtoDAsync (buffer table)");
    if (c->n_tasks) {
        AMK__CU_CHECK(c, d, amk__cuda_h2d(c, c->prog.contexts, c->ctxs, (size_t)c->n_tasks * sizeof(amk_vm_ctx_t)),
                      "cuMemcpyHtoDAsync (context table)");
    }
    AMK__CU_CHECK(c, d, amk__cuda_h2d(c, c->prog.sm_queue_offset, c->queue_off, (size_t)(c->num_sms + 1) * 4),
                  "cuMemcpyHtoDAsync (queues)");
    AMK__CU_TRY(c, d, MemAllocHost((void **)&c->host_status, (size_t)(AMK_VM_STATUS_WORDS(c->num_sms) + 1) * 4), "cuMemAllocHost");
    c->host_abort = c->host_status + AMK_VM_STATUS_WORDS(c->num_sms);
    c->info.grid = c->num_sms;
    c->info.threads = c->threads;
    c->info.smem_bytes = c->smem_bytes;
    c->info.arena_bytes = (int64_t)c->arena_bytes;
    return AMK_OK;
}

/* amk_cuda_create_shared's check of share (one entry a buffer of p, or NULL) against base. */
AMK__FN amk_result amk__cuda_check_share(const amk_program *p, const amk_cuda *base, const int *share, amk_diag *d) {
    int b;
    if (!share) return AMK_OK;
    if (!base || !base->bufs) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create_shared: no runtime to share with");
    for (b = 0; b < p->n_buffers; b++) {
        const int j = share[b];
        if (j < 0) continue;
        if (j >= base->n_buffers)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create_shared: buffer %d ('%s') is shared with buffer "
                             "%d, which the other runtime lacks (it has %d)", b, p->buffers[b].name, j, base->n_buffers);
        if (base->bufs[j].dtype != p->buffers[b].dtype || base->buf_bytes[j] != amk__buffer_nbytes(&p->buffers[b]))
            return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create_shared: buffer %d ('%s', %s, %lld bytes) is "
                             "shared with buffer %d of %s and %lld bytes", b, p->buffers[b].name,
                             amk_dtype_name(p->buffers[b].dtype), (long long)amk__buffer_nbytes(&p->buffers[b]), j,
                             amk_dtype_name(base->bufs[j].dtype), (long long)base->buf_bytes[j]);
        if (p->has_pages && p->buffer_page && p->buffer_page[b] >= 0)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create_shared: buffer %d ('%s') sits on page %d: a "
                             "shared buffer cannot", b, p->buffers[b].name, p->buffer_page[b]);
    }
    return AMK_OK;
}

/* amk_cuda_create_shared without amk_program_validate (the memory-safety checks still run; share
   NULL: nothing shared): amk_llm uses it for the programs it lowered itself, the test suite to
   launch programs validate would refuse (a wait that can never be met). */
AMK__FN amk_result amk__cuda_create_from(const amk_program *p, const void *image, size_t image_size,
                                         const amk_cuda *base, const int *share, amk_cuda **out, amk_diag *d) {
    amk_cuda *c;
    amk_result r;
    int i, num_sms = 0, n_dev = 0;
    if (out) *out = NULL;
    if (!p || !image || !image_size || !out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create: NULL or empty argument");
    if (p->n_tasks < 0 || p->n_buffers < 0 || p->n_counters < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_create: negative counts");
    if ((r = amk__cuda_check_share(p, base, share, d)) != AMK_OK) return r;
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
    if (share) {
        c->base = base;
        c->shared = (int32_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(int32_t));
        if (c->shared)
            for (i = 0; i < p->n_buffers; i++) c->shared[i] = share[i] < 0 ? -1 : share[i];
    }
    if ((share && !c->shared) || !c->buf_off || !c->buf_bytes || !c->ins || !c->queue || !c->queue_off || !c->queue_pos || !c->ctxs) {
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
        r = amk__cuda_pick_image(p, c->info.cc_major, c->info.cc_minor, &one, &one_size, &c->info.image_kind, d);
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

AMK__FN amk_result amk__cuda_create_unchecked(const amk_program *p, const void *image, size_t image_size,
                                             amk_cuda **out, amk_diag *d) {
    return amk__cuda_create_from(p, image, image_size, NULL, NULL, out, d);
}

/* ---- public functions --------------------------------------------------------------------------- */

AMK_API amk_result amk_cuda_create_shared(const amk_program *p, const void *image, size_t image_size,
                                          const amk_cuda *base, const int *share, amk_cuda **out, amk_diag *d) {
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
    return amk__cuda_create_from(p, image, image_size, base, share, out, d);
}

AMK_API amk_result amk_cuda_create(const amk_program *p, const void *image, size_t image_size,
                                   amk_cuda **out, amk_diag *d) {
    return amk_cuda_create_shared(p, image, image_size, NULL, NULL, out, d);
}

AMK_API amk_result amk_cuda_device_query(int *cc_major, int *cc_minor, int *sms, amk_diag *d) {
    amk_cuda *c;
    amk_result r;
    int n = 0;
    if (!cc_major || !cc_minor || !sms) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_device_query: NULL argument");
    *cc_major = *cc_minor = *sms = 0;
    c = (amk_cuda *)amk__calloc(1, sizeof *c);
    if (!c) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    r = amk__cuda_open_driver(c, d);
    if (r == AMK_OK &&
        (c->api.Init(0) != AMK__CUDA_SUCCESS || c->api.DeviceGetCount(&n) != AMK__CUDA_SUCCESS || n < 1 ||
         c->api.DeviceGet(&c->dev, 0) != AMK__CUDA_SUCCESS ||
         c->api.DeviceGetAttribute(cc_major, AMK__CU_DEV_ATTR_CC_MAJOR, c->dev) != AMK__CUDA_SUCCESS ||
         c->api.DeviceGetAttribute(cc_minor, AMK__CU_DEV_ATTR_CC_MINOR, c->dev) != AMK__CUDA_SUCCESS ||
         c->api.DeviceGetAttribute(sms, AMK__CU_DEV_ATTR_MULTIPROCESSOR_COUNT, c->dev) != AMK__CUDA_SUCCESS))
        r = amk__fail(d, AMK_ERR_NO_DRIVER, "the CUDA driver sees no usable device");
    amk_cuda_free(c);
    return r;
}

AMK_API int amk_cuda_picks_portable(void) {
    const char *force = getenv("AMK_CUDA_IMAGE");
    int major = -1, minor = 0, sms;
    if (!(force && *force) && amk_cuda_device_query(&major, &minor, &sms, NULL) != AMK_OK) major = -1;
    return amk__cuda_portable(major, minor); /* why the query only without the variable: it decides alone */
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
    amk__free(c->shared);
    amk__free(c->buf_bytes);
    amk__free(c->bufs);
    amk__free(c->ins);
    amk__free(c->queue);
    amk__free(c->queue_off);
    amk__free(c->queue_pos);
    amk__free(c->ctxs);
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
    cr = up ? amk__cuda_h2d(c, c->bufs[id].ptr, host, nbytes)
            : amk__cuda_d2h(c, host, c->bufs[id].ptr, nbytes);
    amk__cuda_leave(c);
    return cr == AMK__CUDA_SUCCESS ? AMK_OK : amk__cuda_err(c, d, cr, up ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync");
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
    int k, j, n, lo, hi;
    if (!c || !p || (!all && (n_list < 0 || (n_list > 0 && !list))))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_update_params: bad argument");
    if (p->n_tasks != c->n_tasks || p->n_buffers != c->n_buffers || p->n_counters != c->n_counters)
        return amk__fail(d, AMK_ERR_MISMATCH, "not the program this amk_cuda was created from (task, buffer or counter count)");
    n = all ? p->n_tasks : n_list;
    for (k = 0; k < n; k++) {
        const int i = all ? k : list[k];
        const amk_task *t;
        const amk_instruction_t *in;
        uint32_t form;
        int same, dop;
        if (i < 0 || i >= p->n_tasks) return amk__fail(d, AMK_ERR_INVALID_ARG, "task index %d out of range", i);
        t = &p->tasks[i];
        in = &c->ins[i];
        dop = amk_op_device(t->op, &form); /* a variant's form is part of its op: never an update */
        same = dop == in->op && ((uint32_t)in->params.flags & amk__op_form_bits(dop)) == form && t->sm == in->sm &&
               t->out_counter == in->out_counter &&
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
        amk_task_marshal_params(&p->tasks[i], &c->ins[i].params);
        amk__cuda_task_prefetches(c, i);
        amk__cuda_context(c, q);
        if (q < lo) lo = q;
        if (q > hi) hi = q;
    }
    if (!c->n_tasks || n == 0) return AMK_OK;
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    /* why the span: a step's update (the spec path's positions) is a few tasks */
    cr = amk__cuda_h2d(c, c->prog.contexts + (uint64_t)lo * sizeof(amk_vm_ctx_t), c->ctxs + lo,
                       (size_t)(hi - lo + 1) * sizeof(amk_vm_ctx_t));
    amk__cuda_leave(c);
    return cr == AMK__CUDA_SUCCESS ? AMK_OK : amk__cuda_err(c, d, cr, "cuMemcpyHtoDAsync (context table)");
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
    if (ctr && c->n_counters) /* best effort: the aborted launch has ended (amk__cuda_run_io) */
        amk__cuda_d2h(c, ctr, c->prog.counters, (size_t)c->n_counters * 4);
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
   stream before every step, which a small model's short step feels (bench/RESULTS.md run 238) */
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
        chain.next = c->bufs[c->chain.next_buf].ptr;
        chain.token = c->bufs[c->chain.token_buf].ptr;
        chain.pos = c->bufs[c->chain.pos_buf].ptr;
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
                         : code == AMK_VM_ERR_KV_POS ? "KV cache position outside the cache (or, in a tile of rows, not pos[0] + m):"
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
        AMK__CU_GOTO(MemcpyHtoDAsync(c->bufs[in[i].buffer_id].ptr, c->host_io + off, in[i].nbytes, c->stream),
                     "cuMemcpyHtoDAsync (run_io)", done);
    }
    out_base = off; /* the outputs' staging follows the inputs', the chain's tokens last */
    if ((r = amk__cuda_launch(c, &prog, steps, d)) != AMK_OK) goto done;
    for (i = 0; i < n_out; off += amk__pad16(out[i].nbytes), i++)
        if (out[i].nbytes)
            AMK__CU_GOTO(MemcpyDtoHAsync(c->host_io + off, c->bufs[out[i].buffer_id].ptr, out[i].nbytes, c->stream),
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
    cr = amk__cuda_d2h(c, raw, c->arena + c->off_timing, (size_t)c->n_tasks * AMK__CUDA_TIMING_BYTES);
    amk__cuda_leave(c);
    if (cr != AMK__CUDA_SUCCESS) { amk__free(raw); return amk__cuda_err(c, d, cr, "cuMemcpyDtoHAsync (timing)"); }
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

/* The end of a timed service kernel's measurement (amk__cuda_bw_measure, amk_cuda_tensor_peak):
   its events and device memory (0 and NULL: none), once the stream is done with them, the context
   left (amk__cuda_enter's), the host times freed. */
AMK__FN void amk__cuda_timed_end(amk_cuda *c, amk__CUevent e0, amk__CUevent e1, amk__CUdeviceptr mem, double *times) {
    if (e0) c->api.EventDestroy(e0);
    if (e1) c->api.EventDestroy(e1);
    if (mem) {
        c->api.StreamSynchronize(c->stream);
        c->api.MemFree(mem);
    }
    amk__cuda_leave(c);
    amk__free(times);
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
    amk__cuda_timed_end(c, e0, e1, scratch, times);
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

AMK_API amk_result amk_cuda_tensor_peak(amk_cuda *c, int iters, double *tflops, amk_diag *d) {
    /* why 20000 rounds: ~10 ms a launch on an H200, so the launch's own cost is far below the spread */
    int rounds = 20000;
    amk__CUdeviceptr sink = 0;
    amk__CUevent e0 = NULL, e1 = NULL;
    amk_result r;
    double *times, ms = 0.0;
    uint64_t sink_addr;
    void *args[2];
    if (tflops) *tflops = 0.0;
    if (!c || !tflops) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_tensor_peak: NULL argument");
    if (iters < 1 || iters > AMK__CUDA_MAX_ITERS) return amk__fail(d, AMK_ERR_INVALID_ARG, "iters %d is outside [1, %d]", iters, AMK__CUDA_MAX_ITERS);
    if (!c->fn_tc_peak)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "the %s image has no amk_tc_peak kernel (the prefill image has it)",
                         AMK_IMAGE_KIND_NAME(c->info.image_kind));
    times = (double *)amk__malloc((size_t)iters * sizeof(double));
    if (!times) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) { amk__free(times); return r; }
    AMK__CU_GOTO(MemAlloc(&sink, 16), "cuMemAlloc (tensor peak sink)", done);
    AMK__CU_GOTO(EventCreate(&e0, AMK__CU_EVENT_DEFAULT), "cuEventCreate", done);
    AMK__CU_GOTO(EventCreate(&e1, AMK__CU_EVENT_DEFAULT), "cuEventCreate", done);
    sink_addr = sink;
    args[0] = &rounds;
    args[1] = &sink_addr;
    r = amk__cuda_time_kernel(c, c->fn_tc_peak, (unsigned)c->info.device_sms, AMK__VM_TC_PEAK_THREADS, args, iters, e0, e1,
                              times, &ms, d);
    /* a block's round: 4 warpgroups x AMK_TMA_BK / 16 MMAs of 64 x 128 x 16 multiply-adds */
    if (r == AMK_OK && ms > 0.0)
        *tflops = (double)c->info.device_sms * rounds * 4.0 * (AMK_TMA_BK / 16) * 64.0 * 128.0 * 16.0 * 2.0 / (ms * 1e-3) * 1e-12;
    else if (r == AMK_OK) r = amk__fail(d, AMK_ERR_CUDA, "the tensor peak kernel's time read 0 ms");
done:
    amk__cuda_timed_end(c, e0, e1, sink, times);
    return r;
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
    if (!random && amk_dtype_is_block(dtype)) {
        if (d) d->buffer = id;
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "%s: buffer %d is %s, a weight format with no encoding of one value",
                         name, id, amk_dtype_name(dtype));
    }
    if (random && (amk_dtype_is_float(dtype) || amk_dtype_is_block(dtype)) && !(v >= 0.0f && v <= FLT_MAX)) {
        if (d) d->buffer = id;
        return amk__fail(d, AMK_ERR_INVALID_ARG, "%s: scale %g must be finite and >= 0 for buffer %d (%s)", name, (double)v, id, amk_dtype_name(dtype));
    }
    if (random && !amk_dtype_is_float(dtype) && !amk_dtype_is_block(dtype)) {
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
            AMK__CU_GOTO(MemcpyHtoDAsync(c->bufs[c->chain.token_buf].ptr, &c->chain_token0, 4, c->stream),
                         "cuMemcpyHtoDAsync (chain start)", done);
            AMK__CU_GOTO(MemcpyHtoDAsync(c->bufs[c->chain.pos_buf].ptr, &c->chain_pos0, 4, c->stream),
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

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */
