#!/usr/bin/env python3
"""bench/hf_baseline.py - the baseline AMK's decode benchmark is compared with: one decode step
of the same model shapes through HF transformers, captured as a CUDA graph over a static KV cache.

For each shape (the configs of amk_llama_config_preset in amk.h, REFERENCE.md 3.1/3.3), with
random bfloat16 weights built directly on the GPU (LlamaConfig + LlamaForCausalLM; nothing is
downloaded), and each context length ctx:
  1. a StaticCache for one sequence, positions [0, ctx) filled by prefilling a random prompt of
     length ctx once;
  2. the one-token decode step at position ctx,
     model(input_ids, cache_position=[ctx], past_key_values=cache, use_cache=True),
     warmed up on a side stream, captured into a torch.cuda.CUDAGraph and replayed: `--warmup`
     replays, then `--iters` replays each between two CUDA events (back to back, as a decode loop
     runs). ms/token is the median of those; "wall" is the timed loop's host time / iters.
If capture fails the step is timed eagerly instead and the row says so.

Positions: transformers 5 may derive the write position from the cache itself instead of the
cache_position argument (run 1 of bench/NOTES.md hit index_copy_ out of bounds with a cache of
exactly ctx + 1 slots), so each replay may decode the next position. The cache therefore has
room for every step this script runs (max_cache_len = ctx + 1 + steps + 8), and the row records
whether positions advanced (`positions_advance`, from the filled slots counted afterwards). HF's
static-cache attention spans all max_cache_len slots (masked) either way: at ctx 4096 the extra
~130 slots are 3% of the attention's keys; at ctx 128 attention is a negligible part of the step.

Each shape runs in its own worker process, so a CUDA fault in one cannot take the others down.

GB/s is the bytes one step must read over its time: every weight once (an untied embedding table
only one row) plus the K and V caches for ctx + 1 positions. It is an effective rate, not a
measurement of traffic.

Usage: python3 bench/hf_baseline.py [OUT.json] [--shapes a,b] [--ctx 128,4096] [--iters N]
                                    [--warmup N]
       (--worker SHAPE --rows FILE: one shape, rows as JSON into FILE; what the main process runs)
Needs torch with CUDA and transformers >= 5 (the StaticCache constructor is read at run time).
"""
import argparse
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
# name: (layers, hidden, intermediate, heads, kv heads, head_dim, vocab, max_pos, rope_theta,
#        llama3 rope scaling or None, tied embeddings)
SHAPES = {
    "llama3-8b": (32, 4096, 14336, 32, 8, 128, 128256, 8192, 500000.0, None, False),
    "llama3.2-1b": (16, 2048, 8192, 32, 8, 64, 128256, 131072, 500000.0, LLAMA3_ROPE, True),
    "smollm2-135m": (30, 576, 1536, 9, 3, 64, 49152, 8192, 100000.0, None, True),
}
DTYPE = torch.bfloat16


def make_config(name):
    layers, hidden, inter, heads, kv, hd, vocab, max_pos, theta, scaling, tied = SHAPES[name]
    kw = dict(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
              num_key_value_heads=kv, head_dim=hd, vocab_size=vocab, max_position_embeddings=max_pos,
              rms_norm_eps=1e-5, tie_word_embeddings=tied, hidden_act="silu", attention_bias=False,
              mlp_bias=False, bos_token_id=0, eos_token_id=0, pad_token_id=None)
    # why: transformers 5 keeps RoPE settings in rope_parameters; older versions take rope_theta
    # and rope_scaling. Read the constructor rather than guess the version.
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        rope = dict(scaling) if scaling else {"rope_type": "default"}
        rope["rope_theta"] = theta
        kw["rope_parameters"] = rope
    else:
        kw["rope_theta"] = theta
        kw["rope_scaling"] = dict(scaling) if scaling else None
    cfg = LlamaConfig(**kw)
    try:
        cfg._attn_implementation = "sdpa"  # why: torch's fused attention; flash-attn is not installed
    except (AttributeError, ValueError):
        pass  # the version's default stays; the log prints which one ran
    return cfg


def make_model(cfg):
    """Random bf16 weights, built on the GPU: matrices N(0, 0.02), norm weights 1."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(DTYPE)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    model = model.to(DTYPE).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    return model


def make_cache(cfg, max_len):
    """A StaticCache for one sequence of max_len positions, whatever the installed constructor."""
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"max_cache_len": max_len}
    if "config" in params:
        kw["config"] = cfg
    for key, val in (("max_batch_size", 1), ("batch_size", 1), ("device", "cuda"), ("dtype", DTYPE)):
        if key in params:
            kw[key] = val
    return StaticCache(**kw)


def bytes_per_token(model, cfg, ctx):
    """Weights read once per token (an untied embedding: one row) plus K and V for ctx + 1 rows."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if not cfg.tie_word_embeddings:
        emb = model.get_input_embeddings().weight
        total -= emb.numel() * emb.element_size() - emb.shape[1] * emb.element_size()
    kv = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * (ctx + 1) * 2
    return total + kv


def time_step(fn, warmup, iters):
    """Median ms of iters back-to-back calls of fn, each between two CUDA events, and host wall ms/call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    t0 = time.perf_counter()
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / iters
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), wall, min(times), max(times)


def cache_tensor(cache, max_len):
    """Layer 0's key storage: the first 4-D tensor attribute with max_len slots (None if not found)."""
    for val in vars(cache.layers[0]).values():
        if torch.is_tensor(val) and val.dim() == 4 and val.shape[2] == max_len:
            return val
    return None


def filled_slots(cache, max_len):
    """Slots of layer 0 holding any non-zero key (batch 0, head 0); -1 if the storage is not found."""
    t = cache_tensor(cache, max_len)
    return -1 if t is None else int((t[0, 0].abs().sum(-1) != 0).sum())


def run_shape_ctx(model, cfg, name, ctx, args):
    steps = 1 + 3 + 1 + 1 + args.warmup + args.iters  # eager, side-stream warm-up, capture, check, timed
    max_len = ctx + 1 + steps + 8  # why: room if every step advances the position; 8 spare
    row = {"shape": name, "ctx": ctx, "max_cache_len": max_len}
    cache = make_cache(cfg, max_len)
    gen = torch.Generator(device="cuda").manual_seed(1234 + ctx)
    prompt = torch.randint(0, cfg.vocab_size, (1, ctx), device="cuda", generator=gen)
    tok = torch.randint(0, cfg.vocab_size, (1, 1), device="cuda", generator=gen)
    pos = torch.tensor([ctx], device="cuda", dtype=torch.long)
    fwd = inspect.signature(model.forward).parameters
    row["forward_takes_cache_position"] = "cache_position" in fwd
    extra = {"logits_to_keep": 1} if "logits_to_keep" in fwd else {}
    with torch.no_grad():
        t0 = time.perf_counter()
        model(input_ids=prompt, cache_position=torch.arange(ctx, device="cuda"), past_key_values=cache,
              use_cache=True, **extra)
        torch.cuda.synchronize()
        row["prefill_ms"] = (time.perf_counter() - t0) * 1e3
    del prompt
    row["filled_after_prefill"] = filled_slots(cache, max_len)

    def step():
        return model(input_ids=tok, cache_position=pos, past_key_values=cache, use_cache=True).logits

    with torch.no_grad():
        eager = step()
        torch.cuda.synchronize()
        row["logits_finite"] = bool(torch.isfinite(eager.float()).all())
        graph, out, mode = None, None, "cuda_graph"
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = step()
            graph.replay()
            torch.cuda.synchronize()
            row["graph_logits_finite"] = bool(torch.isfinite(out.float()).all())
            fn = graph.replay
        except Exception as e:  # noqa: BLE001 - report any capture failure and fall back
            mode = "eager"
            row["capture_error"] = f"{type(e).__name__}: {e}"[:400]
            graph = None
            torch.cuda.synchronize()
            fn = step
        row["mode"] = mode
        med, wall, lo, hi = time_step(fn, args.warmup, args.iters)
    filled = filled_slots(cache, max_len)
    row["filled_after"] = filled
    row["positions_advance"] = filled > ctx + 1
    nbytes = bytes_per_token(model, cfg, ctx)
    row.update({"ms_per_token": med, "wall_ms_per_token": wall, "min_ms": lo, "max_ms": hi,
                "iters": args.iters, "tokens_per_s": 1e3 / med, "bytes_per_token": nbytes,
                "effective_gbs": nbytes / (med * 1e-3) / 1e9})
    del graph, out, cache, eager
    return row


def worker(args):
    """One shape, every ctx: rows appended to args.rows as they finish (a fault loses only the rest)."""
    torch.manual_seed(0)
    name = args.worker
    cfg = make_config(name)
    t0 = time.perf_counter()
    model = make_model(cfg)
    torch.cuda.synchronize()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"hf_baseline: {name}: {n_params / 1e6:.1f} M parameters, built in {time.perf_counter() - t0:.1f} s, "
          f"attention {model.config._attn_implementation}", flush=True)
    rows = []
    for ctx in [int(c) for c in args.ctx.split(",") if c]:
        try:
            row = run_shape_ctx(model, cfg, name, ctx, args)
        except Exception as e:  # noqa: BLE001 - report it; a CUDA fault ends the worker right after
            row = {"shape": name, "ctx": ctx, "error": f"{type(e).__name__}: {e}"[:400]}
        row["params"] = n_params
        rows.append(row)
        with open(args.rows, "w") as f:
            json.dump(rows, f)
        if "error" in row:
            print(f"hf_baseline: {name} ctx {ctx}: FAILED {row['error']}", flush=True)
            return 1
        print(f"hf_baseline: {name} ctx {ctx}: {row['mode']} {row['ms_per_token']:.3f} ms/token "
              f"(wall {row['wall_ms_per_token']:.3f}, min {row['min_ms']:.3f}, max {row['max_ms']:.3f}), "
              f"prefill {row['prefill_ms']:.0f} ms, filled {row['filled_after_prefill']} -> {row['filled_after']}"
              + (f", capture error: {row['capture_error']}" if "capture_error" in row else ""), flush=True)
        gc.collect()
        torch.cuda.empty_cache()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="write the results as JSON here")
    ap.add_argument("--shapes", default="smollm2-135m,llama3.2-1b,llama3-8b")
    ap.add_argument("--ctx", default="128,4096")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.iters < 50:
        ap.error("--iters must be >= 50")
    shapes = [s for s in args.shapes.split(",") if s]
    for s in shapes + ([args.worker] if args.worker else []):
        if s not in SHAPES:
            ap.error(f"unknown shape {s}; known: {', '.join(SHAPES)}")
    if not torch.cuda.is_available():
        sys.exit("hf_baseline: no CUDA device")
    if args.worker:
        return worker(args)
    info = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "transformers": transformers.__version__, "dtype": "bfloat16",
            "static_cache_signature": str(inspect.signature(StaticCache.__init__)),
            "warmup": args.warmup, "iters": args.iters, "results": []}
    print(f"hf_baseline: {info['device']}, torch {info['torch']}, transformers {info['transformers']}")
    print(f"hf_baseline: StaticCache{info['static_cache_signature']}", flush=True)
    ctxs = [int(c) for c in args.ctx.split(",") if c]
    for name in shapes:
        fd, rows_path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name, "--rows", rows_path,
                               "--ctx", args.ctx, "--iters", str(args.iters), "--warmup", str(args.warmup)],
                              stderr=subprocess.PIPE, text=True)
        try:
            with open(rows_path) as f:
                rows = json.load(f)
        except (OSError, ValueError):
            rows = []
        os.unlink(rows_path)
        done = {r["ctx"] for r in rows}
        for ctx in ctxs:  # what the worker never reached (it died): say why
            if ctx not in done:
                rows.append({"shape": name, "ctx": ctx, "error": f"worker exited {proc.returncode}: "
                             + " | ".join(proc.stderr.strip().splitlines()[-3:])[-400:]})
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-3000:])
        info["results"].extend(rows)
    print()
    print(f"{'shape':<14} {'ctx':>5} {'mode':<10} {'ms/token':>9} {'wall ms':>8} {'tok/s':>8} {'GB/s':>7}")
    for r in info["results"]:
        if "error" in r:
            print(f"{r['shape']:<14} {r['ctx']:>5} {'FAILED':<10} {r['error'][:120]}")
            continue
        print(f"{r['shape']:<14} {r['ctx']:>5} {r['mode']:<10} {r['ms_per_token']:>9.3f} {r['wall_ms_per_token']:>8.3f} "
              f"{r['tokens_per_s']:>8.1f} {r['effective_gbs']:>7.0f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(info, f, indent=1)
        print(f"hf_baseline: wrote {args.out}")
    return 1 if any("error" in r for r in info["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
