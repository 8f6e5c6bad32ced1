/* amk.h - AMK, an LLM megakernel runtime for plain C: the host side. Version 0.1.0.

   USAGE
     #define AMK_IMPLEMENTATION      in exactly one .c (or .cpp) file, then
     #include "amk.h"               (include it first there: it asks for POSIX before any system
                                     header). Everywhere else include it without the define.
     The headers below (and amk_tune.h, amk_plan.h) must sit beside this file; amk_vm.cuh and
     amk_ops.cuh are the device side (built into a cubin by `make device`, handed to the runtime
     as bytes).

   WHAT IT DOES
     - Holds a megakernel program (the IR of IR_SPEC.md: buffers, counters, tasks), reads and
       writes it as the spec's JSON, proves it deadlock- and race-free (validate: every check has a
       stable id, AMK_CHECKS), runs the counter simulations, lowers it onto SMs (SM assignment,
       per-SM queues, page allocation) and runs it with real numerics on the CPU reference VM,
       the oracle every other backend is tested against.
     - Reads models: GGUF (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K) and
       safetensors (single or sharded) with config.json; byte-level BPE tokenizers from GGUF or
       tokenizer.json; builds a Llama decode step as a program; generates text (amk_llm_*).
     - Runs programs on NVIDIA GPUs through the driver API (libcuda opened at run time: without a
       driver every other feature still works and amk_cuda_create says AMK_ERR_NO_DRIVER):
       sm_90a builds on Hopper (H100, H200), a portable build on sm_80 and newer (A100, RTX 30 /
       40 / 50, L4, Jetson Orin).
   WHAT IT DOES NOT DO (yet)
     Batch > 1, architectures other than Llama, Mistral, Qwen2 and Qwen3, a warp-specialised
     weight loader on the GPU (see bench/RESULTS.md for where the time goes).

   LAYERS (one stb-style header each, with its own manual at its top, in the order data flows;
   each includes the one before it and calls only the layers below it; amk.h includes them all)
     amk_ir.h        the IR and the on-device ABI (plain PODs, shared with the device), and the
                     op table
     amk_core.h      results and diagnostics, allocation, checked sizes, strings, dtypes, files,
                     the strict JSON reader every parser uses
     amk_program.h   the program data model, building programs in code, the op registry, the
                     program file (spec §6)
     amk_validate.h  what each opcode accepts, validation (spec §3), counter simulations,
                     lowering (spec §5)
     amk_refvm.h     the reference VM, the conformance oracle
     amk_model.h     GGUF, safetensors, config.json
     amk_nfc.h       Unicode NFC (the tokenizer's normalizer)
     amk_tok.h       the tokenizers: byte-level BPE, SentencePiece BPE; chat formats
     amk_arch.h      the model builders: a Llama decode step
     amk_cuda.h      the CUDA runtime (driver API)
     amk_llm.h       the generation API over a backend (reference VM or CUDA), sampling
   Beside the layers, shared with the device (amk_arch.h includes them): amk_tune.h, every tuning
   knob of host and device in one table; amk_plan.h, the device form planner (amk_plan_form:
   which form an instruction runs in, and the shared memory it takes), compiled into both sides.
   Each header's sections are under searchable >>tag banners.

   THE OP TABLE
     amk_ir.h's AMK_OPS declares every opcode once: code, name, arity, required params, write
     semantics, the validator's region function, and the names of its check (amk_validate.h),
     reference (amk_refvm.h) and device (amk_ops.cuh) functions. The enum, the registry and JSON
     names, and every dispatch come from it: an op lives in its row, those three functions and
     its tests.

   CONFIG
     | macro                   | default                | where                                 |
     | AMK_MALLOC/REALLOC/FREE | malloc/realloc/free    | before the implementation; all or none|
     | AMK_API                 | extern (static with AMK_STATIC) | anywhere before the include  |
     | AMK_JSON_MAX_DEPTH      | 64                     | before the implementation             |
     | AMK_CUDA_LIBRARY (env)  | libcuda.so.1           | the environment, at run time          |
     | tuning knobs            | amk_tune.h's table     | -D, alike for host and device image   |

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

#include "amk_llm.h"

#endif /* AMK_H */


/* MIT License. Copyright (c) 2026 the AMK authors.
   Permission is hereby granted, free of charge, to any person obtaining a copy of this software
   and associated documentation files (the "Software"), to deal in the Software without
   restriction, including without limitation the rights to use, copy, modify, merge, publish,
   distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
   Software is furnished to do so, subject to the following conditions: The above copyright notice
   and this permission notice shall be included in all copies or substantial portions of the
   Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND. */

