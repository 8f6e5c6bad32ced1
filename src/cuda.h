/* ==== >>cuda: the CUDA runtime (driver API, libcuda opened at run time). Included twice from
   amk.h: once with AMK__PART_DECL defined (public declarations, inside extern "C"), once with
   AMK__PART_IMPL defined (the implementation). ==== */
#ifdef AMK__PART_DECL

/* A validated, lowered program resolved onto one GPU: the device VM image (amk_vm.cuh compiled
   to a cubin, fatbin or PTX) loaded, ONE device arena holding every buffer, counter and table,
   and the launch parameters checked (cooperative occupancy, shared memory). libcuda is opened
   with dlopen at create time, so programs that include amk.h build and run on machines without
   CUDA; there amk_cuda_create returns AMK_ERR_NO_DRIVER. The environment variable
   AMK_CUDA_LIBRARY, when set, names the driver library to open instead of libcuda.so.1.
   Uses device 0 and its primary context (the one the CUDA runtime shares). Not thread-safe: one
   amk_cuda at a time per thread. */
typedef struct amk_cuda amk_cuda;

/* Validates p (a rejected program is refused with AMK_ERR_REJECTED and the first error in d),
   requires every task to have an SM (lower it first), loads image (image_size bytes; PTX need
   not be NUL-terminated; a JIT/ptxas error log lands in d->jit_log), sizes dynamic shared memory
   (config smem_bytes_per_block, or the device's opt-in maximum), checks that grid = the target's
   SM count co-schedules (cooperative launch), allocates the arena once, zeroes it (every buffer
   starts zeroed, as in the reference VM) and uploads the tables. threads_per_block comes from
   the program's config (default 256), capped at the VM's 512. p may be freed afterwards.
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
   kv_start per decode step) and uploads the instruction table. p must have the same tasks
   (ops, buffers, counters, waits, SMs) as at create (else AMK_ERR_MISMATCH); every task's shapes
   and params are re-checked (AMK_ERR_REJECTED with the op check's message). */
AMK_API amk_result amk_cuda_update_params(amk_cuda *c, const amk_program *p, amk_diag *d);
/* One forward pass: zero the counters, cooperative launch, wait. Past timeout_ms (<= 0: 10 s)
   the abort flag is raised, the kernel leaves within microseconds, and the result is
   AMK_ERR_TIMEOUT with the SMs that had not finished, the task each was at and the counter it
   waited on in d (d->task, d->counter: the first of them); the context stays usable. A device
   run-time error (a token id or position out of range) gives AMK_ERR_RUNTIME naming the task.
   A fault of the kernel itself gives AMK_ERR_CUDA (the context is then lost: free c). */
AMK_API amk_result amk_cuda_run(amk_cuda *c, double timeout_ms, amk_diag *d);

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
    double wait_us;       /* waiting for its counters */
    double start_us, end_us; /* the op's run, from the earliest record of the launch */
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
/* Median wall time of n launches of the loaded program (each: counters zeroed, cooperative
   launch, completion), timed with CUDA events around each launch on the stream, after `warmup`
   launches; per-launch times into times_us when not NULL (n entries). The timed span is the
   counter memset plus the kernel (the status copy and host polling are outside it); every launch
   is checked as amk_cuda_run checks it (10 s watchdog) and the first failure is returned. An even
   n gives the mean of the two middle times. n in [1, 100000], warmup in [0, 100000]. */
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
} amk_cuda_info;
AMK_API void amk_cuda_get_info(const amk_cuda *c, amk_cuda_info *info);

/* Releases everything (NULL is fine). */
AMK_API void amk_cuda_free(amk_cuda *c);

#endif /* AMK__PART_DECL */

#ifdef AMK__PART_IMPL
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

struct amk_cuda {
    void *lib;                  /* dlopen handle */
    amk__cuda_api api;
    amk__CUdevice dev;
    amk__CUcontext ctx;         /* the primary context, retained */
    amk__CUmodule mod;
    amk__CUfunction fn;
    amk__CUfunction fn_bw_read, fn_bw_copy, fn_fill_random, fn_fill_value; /* NULL if the image lacks one */
    amk__CUstream stream;       /* the launch */
    amk__CUstream ctl;          /* the abort write: a second stream, so it passes the kernel */
    amk__CUdeviceptr arena;
    uint64_t arena_bytes;
    uint32_t *host_status;      /* pinned [4 + num_sms]: the status words after a run */
    uint32_t *host_abort;       /* pinned [1]: the value the watchdog writes */
    amk_program_t prog;         /* device addresses; the kernel's one parameter */
    int n_buffers, n_tasks, n_counters, num_sms, threads, timing_on, timed_run;
    int64_t smem_bytes;
    uint64_t *buf_off;          /* [n_buffers] offset of each buffer's storage in the arena */
    int64_t *buf_bytes;         /* [n_buffers] its size in its dtype */
    amk_buffer_t *bufs;         /* [n_buffers] host copy of the device buffer table */
    amk_instruction_t *ins;     /* [n_tasks] host copy of the instruction table */
    int32_t *queue_off;         /* [num_sms + 1] */
    int32_t *queue;             /* [n_tasks] */
    uint64_t off_counters, off_status, off_instructions, off_timing;
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

/* What the device code relies on for memory safety, checked for every task whatever validate
   said: ids in range, ABI caps, SMs assigned, the op's shapes (amk__op_check). threads and smem
   (0 before the device is known) add the VM's own limits. */
AMK__FN amk_result amk__cuda_check_task(const amk_program *p, int ti, int num_sms, int threads,
                                       int64_t smem, amk_diag *d) {
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
        if ((t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE) && K * 4 > smem)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: K = %lld needs %lld bytes of shared memory, the VM has %lld",
                             ti, (long long)K, (long long)K * 4, (long long)smem);
        if (t->op == AMK_OP_ATTENTION_TILE &&
            (hd > AMK__VM_ATTN_MAX_HEAD_DIM || (int64_t)(threads / 32) * hd * 4 > smem))
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "task %d: head_dim %lld is above the VM's %d or its q staging "
                             "exceeds %lld bytes of shared memory", ti, (long long)hd, AMK__VM_ATTN_MAX_HEAD_DIM, (long long)smem);
    }
    if (d) d->task = saved_task;
    return AMK_OK;
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
   page), counters + status (adjacent: one memset per run), the tables, timing. */
AMK__FN amk_result amk__cuda_plan(amk_cuda *c, const amk_program *p, amk_diag *d) {
    static const int kind_order[] = {AMK_KIND_WEIGHT, AMK_KIND_CONST, AMK_KIND_KV_CACHE,
                                     AMK_KIND_IO_INPUT, AMK_KIND_IO_OUTPUT, AMK_KIND_ACTIVATION};
    uint64_t top = 0, n, *page_off = NULL, *page_bytes = NULL, off_buffers, off_qoff, off_queue;
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
        !amk__cuda_reserve(&top, (uint64_t)(AMK_VM_STATUS_PROGRESS + c->num_sms) * 4, &c->off_status) ||
        !amk__mul_u64((uint64_t)p->n_buffers, sizeof(amk_buffer_t), &n) || !amk__cuda_reserve(&top, n, &off_buffers) ||
        !amk__mul_u64((uint64_t)c->n_tasks, sizeof(amk_instruction_t), &n) || !amk__cuda_reserve(&top, n, &c->off_instructions) ||
        !amk__cuda_reserve(&top, (uint64_t)(c->num_sms + 1) * 4, &off_qoff) ||
        !amk__cuda_reserve(&top, (uint64_t)c->n_tasks * 4, &off_queue) ||
        !amk__mul_u64((uint64_t)c->n_tasks, sizeof(amk_vm_timing_t), &n) || !amk__cuda_reserve(&top, n, &c->off_timing))
        goto overflow;
    amk__free(page_off);
    amk__free(page_bytes);
    c->arena_bytes = top;
    memset(&c->prog, 0, sizeof c->prog);
    c->prog.buffers = off_buffers;           /* offsets for now: amk__cuda_create rebases them */
    c->prog.counters = c->off_counters;
    c->prog.instructions = c->off_instructions;
    c->prog.sm_queue_offset = off_qoff;
    c->prog.sm_queue = off_queue;
    c->prog.scratch = 0;
    c->prog.abort_flag = c->off_status;
    c->prog.timing = 0;
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

/* Loads the image: cubin/fatbin as is, PTX NUL-terminated; ptxas/JIT errors into d->jit_log. */
AMK__FN amk_result amk__cuda_load_image(amk_cuda *c, const void *image, size_t size, amk_diag *d) {
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
    r = c->api.ModuleLoadDataEx(&c->mod, image, 2, opts, vals);
    amk__free(copy);
    if (r != AMK__CUDA_SUCCESS) {
        c->mod = NULL;
        return amk__cuda_err(c, d, r, "cuModuleLoadDataEx (see jit_log)");
    }
    AMK__CU_TRY(c, d, ModuleGetFunction(&c->fn, c->mod, "amk_vm_main"), "cuModuleGetFunction(amk_vm_main)");
    /* the service kernels are optional: an image without them still runs programs */
    if (c->api.ModuleGetFunction(&c->fn_bw_read, c->mod, "amk_bw_read") != AMK__CUDA_SUCCESS) c->fn_bw_read = NULL;
    if (c->api.ModuleGetFunction(&c->fn_bw_copy, c->mod, "amk_bw_copy") != AMK__CUDA_SUCCESS) c->fn_bw_copy = NULL;
    if (c->api.ModuleGetFunction(&c->fn_fill_random, c->mod, "amk_fill_random") != AMK__CUDA_SUCCESS) c->fn_fill_random = NULL;
    if (c->api.ModuleGetFunction(&c->fn_fill_value, c->mod, "amk_fill_value") != AMK__CUDA_SUCCESS) c->fn_fill_value = NULL;
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
    c->smem_bytes = p->has_config && p->config.smem_bytes_per_block > 0 ? p->config.smem_bytes_per_block
                                                                         : (int64_t)optin - static_smem;
    if (c->smem_bytes + static_smem > optin || c->smem_bytes < 1)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "%lld bytes of dynamic shared memory (+%d static) exceed the device's %d",
                         (long long)c->smem_bytes, static_smem, optin);
    for (i = 0; i < p->n_tasks; i++)
        if ((r = amk__cuda_check_task(p, i, c->num_sms, c->threads, c->smem_bytes, d)) != AMK_OK) return r;
    /* why: without raising the limit first, occupancy reads 0 above 48 KB (REFERENCE.md §4.3) */
    AMK__CU_TRY(c, d, FuncSetAttribute(c->fn, AMK__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)c->smem_bytes), "cuFuncSetAttribute");
    AMK__CU_TRY(c, d, OccupancyMaxActiveBlocks(&nb, c->fn, c->threads, (size_t)c->smem_bytes), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (nb < 1 || (int64_t)c->num_sms > (int64_t)nb * c->info.device_sms)
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "the program needs %d co-resident blocks of %d threads and %lld bytes of "
                         "shared memory; device %s holds %d a SM x %d SMs", c->num_sms, c->threads,
                         (long long)c->smem_bytes, c->info.device_name, nb, c->info.device_sms);
    if ((r = amk__cuda_plan(c, p, d)) != AMK_OK) return r;
    if (c->arena_bytes > (uint64_t)SIZE_MAX) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "the device arena is too large");
    AMK__CU_TRY(c, d, MemAlloc(&c->arena, (size_t)c->arena_bytes), "cuMemAlloc (the arena)");
    AMK__CU_TRY(c, d, MemsetD8(c->arena, 0, (size_t)c->arena_bytes), "cuMemsetD8");
    c->prog.buffers += c->arena;
    c->prog.counters += c->arena;
    c->prog.instructions += c->arena;
    c->prog.sm_queue_offset += c->arena;
    c->prog.sm_queue += c->arena;
    c->prog.abort_flag += c->arena;
    /* tables: buffers, instructions, queues (task-list order filtered by SM: spec §3.1) */
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
    for (i = 0; i < p->n_tasks; i++) amk__cuda_instruction(&p->tasks[i], &c->ins[i]);
    for (i = 0; i < p->n_tasks; i++) c->queue_off[p->tasks[i].sm + 1]++;
    for (s = 0; s < c->num_sms; s++) c->queue_off[s + 1] += c->queue_off[s];
    {
        int32_t *fill = (int32_t *)amk__calloc((size_t)c->num_sms, sizeof(int32_t));
        if (!fill) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        for (i = 0; i < p->n_tasks; i++) c->queue[c->queue_off[p->tasks[i].sm] + fill[p->tasks[i].sm]++] = i;
        amk__free(fill);
    }
    if (p->n_buffers)
        AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.buffers, bt, (size_t)p->n_buffers * sizeof(amk_buffer_t)), "cuMemcpyHtoD (buffer table)");
    if (c->n_tasks) {
        AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.instructions, c->ins, (size_t)c->n_tasks * sizeof(amk_instruction_t)), "cuMemcpyHtoD");
        AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.sm_queue, c->queue, (size_t)c->n_tasks * 4), "cuMemcpyHtoD");
    }
    AMK__CU_TRY(c, d, MemcpyHtoD(c->prog.sm_queue_offset, c->queue_off, (size_t)(c->num_sms + 1) * 4), "cuMemcpyHtoD");
    AMK__CU_TRY(c, d, MemAllocHost((void **)&c->host_status, (size_t)(AMK_VM_STATUS_PROGRESS + c->num_sms + 1) * 4), "cuMemAllocHost");
    c->host_abort = c->host_status + AMK_VM_STATUS_PROGRESS + c->num_sms;
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
        if ((r = amk__cuda_check_task(p, i, num_sms, 0, 0, d)) != AMK_OK) return r;
    c = (amk_cuda *)amk__calloc(1, sizeof(amk_cuda));
    if (!c) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    c->n_buffers = p->n_buffers;
    c->n_tasks = p->n_tasks;
    c->n_counters = p->n_counters;
    c->num_sms = num_sms;
    c->buf_off = (uint64_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(uint64_t));
    c->buf_bytes = (int64_t *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(int64_t));
    c->ins = (amk_instruction_t *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(amk_instruction_t));
    c->queue = (int32_t *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(int32_t));
    c->queue_off = (int32_t *)amk__calloc((size_t)num_sms + 1, sizeof(int32_t));
    if (!c->buf_off || !c->buf_bytes || !c->ins || !c->queue || !c->queue_off) {
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
#define AMK__CU_STEP(call, what) do { amk__CUresult cr_ = c->api.call; \
    if (cr_ != AMK__CUDA_SUCCESS) { r = amk__cuda_err(c, d, cr_, what); goto fail; } } while (0)
    AMK__CU_STEP(DeviceGet(&c->dev, 0), "cuDeviceGet");
    AMK__CU_STEP(DeviceGetName(c->info.device_name, (int)sizeof c->info.device_name, c->dev), "cuDeviceGetName");
    AMK__CU_STEP(DeviceGetAttribute(&c->info.cc_major, AMK__CU_DEV_ATTR_CC_MAJOR, c->dev), "cuDeviceGetAttribute");
    AMK__CU_STEP(DeviceGetAttribute(&c->info.cc_minor, AMK__CU_DEV_ATTR_CC_MINOR, c->dev), "cuDeviceGetAttribute");
    AMK__CU_STEP(DeviceGetAttribute(&c->info.device_sms, AMK__CU_DEV_ATTR_MULTIPROCESSOR_COUNT, c->dev), "cuDeviceGetAttribute");
    AMK__CU_STEP(DriverGetVersion(&c->info.driver_version), "cuDriverGetVersion");
    AMK__CU_STEP(PrimaryCtxRetain(&c->ctx, c->dev), "cuDevicePrimaryCtxRetain");
    AMK__CU_STEP(CtxPushCurrent(c->ctx), "cuCtxPushCurrent");
#undef AMK__CU_STEP
    r = amk__cuda_load_image(c, image, image_size, d);
    if (r == AMK_OK) r = amk__cuda_setup(c, p, d);
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
    /* TODO(validate): AMK_ERR_UNSUPPORTED is the stub's answer; treat it as accepted until it lands */
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
            if (c->arena) c->api.MemFree(c->arena);
            if (c->mod) c->api.ModuleUnload(c->mod);
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
    amk__free(c);
}

AMK__FN amk_result amk__cuda_copy(amk_cuda *c, int id, void *host, size_t nbytes, int up, amk_diag *d) {
    amk_result r;
    amk__CUresult cr;
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

AMK_API amk_result amk_cuda_update_params(amk_cuda *c, const amk_program *p, amk_diag *d) {
    amk_result r;
    amk__CUresult cr;
    int i, j;
    if (!c || !p) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_update_params: NULL argument");
    if (p->n_tasks != c->n_tasks || p->n_buffers != c->n_buffers || p->n_counters != c->n_counters)
        return amk__fail(d, AMK_ERR_MISMATCH, "not the program this amk_cuda was created from (task, buffer or counter count)");
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        const amk_instruction_t *in = &c->ins[i];
        int same = t->op == in->op && t->sm == in->sm && t->out_counter == in->out_counter &&
                   t->n_inputs == in->n_inputs && t->n_outputs == in->n_outputs && t->n_waits == in->n_waits;
        for (j = 0; same && j < t->n_inputs; j++) same = t->inputs[j] == in->inputs[j];
        for (j = 0; same && j < t->n_outputs; j++) same = t->outputs[j] == in->outputs[j];
        for (j = 0; same && j < t->n_waits; j++)
            same = t->waits[j].counter == in->wait_counter[j] && t->waits[j].threshold == (int64_t)in->wait_threshold[j];
        if (!same) {
            if (d) d->task = i;
            return amk__fail(d, AMK_ERR_MISMATCH, "task %d differs from the program this amk_cuda was created from", i);
        }
        if ((r = amk__cuda_check_task(p, i, c->num_sms, c->threads, c->smem_bytes, d)) != AMK_OK) return r;
    }
    for (i = 0; i < p->n_tasks; i++) amk_task_marshal_params(&p->tasks[i], &c->ins[i].params);
    if (!c->n_tasks) return AMK_OK;
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    cr = c->api.MemcpyHtoD(c->prog.instructions, c->ins, (size_t)c->n_tasks * sizeof(amk_instruction_t));
    amk__cuda_leave(c);
    return cr == AMK__CUDA_SUCCESS ? AMK_OK : amk__cuda_err(c, d, cr, "cuMemcpyHtoD (instructions)");
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
        const int done = (int)c->host_status[AMK_VM_STATUS_PROGRESS + s];
        if (done >= len) continue;
        n_stuck++;
        if (n_stuck <= 4 && done >= 0) {
            const int ti = c->queue[c->queue_off[s] + done];
            const amk_instruction_t *in = &c->ins[ti];
            int w, wc = -1;
            for (w = 0; w < in->n_waits && ctr; w++)
                if (ctr[in->wait_counter[w]] < in->wait_threshold[w]) { wc = w; break; }
            if (wc >= 0)
                amk__sb_printf(&sb, "%sSM %d at task %d (id %d, %s) waits on counter %d (%u < %u)", first ? "" : "; ",
                               s, ti, in->id, amk_op_name(in->op), in->wait_counter[wc],
                               ctr[in->wait_counter[wc]], in->wait_threshold[wc]);
            else
                amk__sb_printf(&sb, "%sSM %d at task %d (id %d, %s), running", first ? "" : "; ", s, ti, in->id,
                               amk_op_name(in->op));
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

/* Enqueues one launch on c->stream (c's context current): the counters and status words zeroed
   (and the timing records when timing is on), then the cooperative launch. *prog gets the
   launch's parameters. */
AMK__FN amk_result amk__cuda_launch(amk_cuda *c, amk_program_t *prog, amk_diag *d) {
    const size_t status_bytes = (size_t)(AMK_VM_STATUS_PROGRESS + c->num_sms) * 4;
    void *args[1];
    *prog = c->prog;
    prog->timing = c->timing_on ? c->arena + c->off_timing : 0;
    /* counters and status words are adjacent: one memset (spec §2: counters zeroed per launch) */
    AMK__CU_TRY(c, d, MemsetD8Async(prog->counters, 0, (size_t)(c->off_status - c->off_counters) + status_bytes, c->stream), "cuMemsetD8Async");
    if (c->timing_on && c->n_tasks)
        AMK__CU_TRY(c, d, MemsetD8Async(prog->timing, 0, (size_t)c->n_tasks * sizeof(amk_vm_timing_t), c->stream), "cuMemsetD8Async");
    args[0] = prog;
    AMK__CU_TRY(c, d, LaunchCooperativeKernel(c->fn, (unsigned)c->num_sms, 1, 1, (unsigned)c->threads, 1, 1,
                                              (unsigned)c->smem_bytes, c->stream, args), "cuLaunchCooperativeKernel");
    c->timed_run = c->timing_on;
    return AMK_OK;
}

/* After amk__cuda_launch: copies the status words back, waits for the stream (past timeout_ms,
   <= 0: the default, the watchdog raises the abort flag) and turns the status into a result. */
AMK__FN amk_result amk__cuda_complete(amk_cuda *c, const amk_program_t *prog, double timeout_ms, amk_diag *d) {
    const size_t status_bytes = (size_t)(AMK_VM_STATUS_PROGRESS + c->num_sms) * 4;
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
    for (s = 0; s < c->num_sms; s++) /* a clean exit must have run every queue to its end */
        if ((int)st_words[AMK_VM_STATUS_PROGRESS + s] != c->queue_off[s + 1] - c->queue_off[s])
            return amk__fail(d, AMK_ERR_RUNTIME, "the VM left SM %d's queue after %u of %d tasks (abort word %u)", s,
                             st_words[AMK_VM_STATUS_PROGRESS + s], c->queue_off[s + 1] - c->queue_off[s],
                             st_words[AMK_VM_STATUS_ABORT]);
    return AMK_OK;
}

AMK_API amk_result amk_cuda_run(amk_cuda *c, double timeout_ms, amk_diag *d) {
    amk_program_t prog;
    amk_result r;
    if (!c) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_run: NULL");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) return r;
    r = amk__cuda_launch(c, &prog, d);
    if (r == AMK_OK) r = amk__cuda_complete(c, &prog, timeout_ms, d);
    amk__cuda_leave(c);
    return r;
}

AMK_API amk_result amk_cuda_timing(amk_cuda *c, amk_cuda_timing_record *records, int cap,
                                   int *n_out, amk_diag *d) {
    amk_vm_timing_t *raw;
    amk__CUresult cr;
    amk_result r;
    uint64_t t0 = UINT64_MAX;
    int i, n;
    if (n_out) *n_out = 0;
    if (!c || (!records && cap > 0) || cap < 0) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_timing: bad argument");
    if (!c->timed_run) return amk__fail(d, AMK_ERR_INVALID_ARG, "the last run did not record timing (amk_cuda_set_timing)");
    n = cap < c->n_tasks ? cap : c->n_tasks;
    if (n == 0) return AMK_OK;
    raw = (amk_vm_timing_t *)amk__calloc((size_t)c->n_tasks, sizeof(amk_vm_timing_t));
    if (!raw) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) { amk__free(raw); return r; }
    cr = c->api.MemcpyDtoH(raw, c->arena + c->off_timing, (size_t)c->n_tasks * sizeof(amk_vm_timing_t));
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
    amk__CUresult cr;
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
#define AMK__CU_BW(call, what) do { cr = c->api.call; if (cr != AMK__CUDA_SUCCESS) { r = amk__cuda_err(c, d, cr, what); goto done; } } while (0)
    AMK__CU_BW(DeviceGetAttribute(&l2, AMK__CU_DEV_ATTR_L2_CACHE_SIZE, c->dev), "cuDeviceGetAttribute");
    AMK__CU_BW(OccupancyMaxActiveBlocks(&fit, fn, AMK__VM_BW_THREADS, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (fit < 1) { r = amk__fail(d, AMK_ERR_UNSUPPORTED, "the bandwidth kernel does not fit a SM"); goto done; }
    if (bytes > SIZE_MAX / 2) { r = amk__fail(d, AMK_ERR_INVALID_ARG, "a %llu-byte scratch buffer is too large", (unsigned long long)bytes); goto done; }
    if (bytes / 4 < (size_t)l2) bytes = (size_t)l2 * 4;
    bytes &= ~(size_t)31; /* why: whole 16-byte vectors in each half */
    grid = (unsigned)c->info.device_sms * (unsigned)(blocks_per_sm > 0 && blocks_per_sm < fit ? blocks_per_sm : fit);
    AMK__CU_BW(MemAlloc(&scratch, bytes + 256), "cuMemAlloc (bandwidth scratch)");
    AMK__CU_BW(MemsetD8Async(scratch, 0, bytes + 256, c->stream), "cuMemsetD8Async");
    AMK__CU_BW(EventCreate(&e0, AMK__CU_EVENT_DEFAULT), "cuEventCreate");
    AMK__CU_BW(EventCreate(&e1, AMK__CU_EVENT_DEFAULT), "cuEventCreate");
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
#undef AMK__CU_BW
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
    amk__CUresult cr;
    amk_program_t prog;
    amk_result r;
    double *sorted;
    int i;
    if (median_us) *median_us = 0.0;
    if (!c || !median_us) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_time_runs: NULL argument");
    if (n < 1 || n > AMK__CUDA_MAX_RUNS || warmup < 0 || warmup > AMK__CUDA_MAX_RUNS)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_cuda_time_runs: n %d or warmup %d is outside its range", n, warmup);
    sorted = (double *)amk__malloc((size_t)n * sizeof(double));
    if (!sorted) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if ((r = amk__cuda_enter(c, d)) != AMK_OK) { amk__free(sorted); return r; }
#define AMK__CU_TR(call, what) do { cr = c->api.call; if (cr != AMK__CUDA_SUCCESS) { r = amk__cuda_err(c, d, cr, what); goto done; } } while (0)
    AMK__CU_TR(EventCreate(&e0, AMK__CU_EVENT_DEFAULT), "cuEventCreate");
    AMK__CU_TR(EventCreate(&e1, AMK__CU_EVENT_DEFAULT), "cuEventCreate");
    for (i = 0; i < warmup + n; i++) {
        float ms = 0.0f;
        AMK__CU_TR(EventRecord(e0, c->stream), "cuEventRecord");
        if ((r = amk__cuda_launch(c, &prog, d)) != AMK_OK) goto done;
        AMK__CU_TR(EventRecord(e1, c->stream), "cuEventRecord");
        if ((r = amk__cuda_complete(c, &prog, 0.0, d)) != AMK_OK) goto done;
        if (i < warmup) continue;
        AMK__CU_TR(EventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
        sorted[i - warmup] = (double)ms * 1e3;
        if (times_us) times_us[i - warmup] = sorted[i - warmup];
    }
    *median_us = amk__cuda_median(sorted, n);
    r = AMK_OK;
done:
#undef AMK__CU_TR
    if (e0) c->api.EventDestroy(e0);
    if (e1) c->api.EventDestroy(e1);
    amk__cuda_leave(c);
    amk__free(sorted);
    return r;
}

#endif /* AMK__PART_IMPL */
