#!/usr/bin/env python3
"""Writes tests/data/interop: programs the spec's reference implementation writes, with its numbers.

    python3 scripts/amkpy_interop.py --amkpy DIR [--out tests/data/interop]

DIR is a checkout of RightNow-AI/AutoMegaKernel (IR_SPEC.md §0: its schedule/ir.py is normative).
The script imports that checkout's own Python (it needs torch and numpy) to lower toy Llama decoders
(models/toy.py -> schedule.graph.from_toy -> schedule.lower.lower), to validate them
(schedule.ir.validate) and to run them on its reference VM (vm/reference_vm.py). It writes, per case:

    CASE/stepK.json              its program for decode step K (its to_json)
    CASE/weights.safetensors     the weights the programs bind (by buffer source)
    CASE/inK.safetensors         step K's IO inputs (token_id, pos, reshape_id0)
    CASE/kv.safetensors          a prefilled KV cache, for a case that starts past position 0
    CASE/outK.safetensors        its reference VM's outputs of step K: logits and every KV cache
    bad/NAME.json                hand-mutated programs its validator rejects

and manifest.txt, the list tests/test_interop.sh walks (the format is at the top of that file), and
verdicts.json, its validator's verdict and errors for every program. Step K > 0 starts from the KV
caches of step K-1: its reference VM is given its own outputs of step K-1, and the test gives
`amk run` the outputs of its own previous run. Nothing of that repository is copied here: only the
programs and numbers its code writes.
"""
import argparse
import copy
import json
import os
import struct
import sys

TOL = {"F32": 1e-4, "F16": 3e-2, "BF16": 3e-2}   # relative to each tensor's largest value

# The toy decoders: name -> (ToyConfig overrides, activation dtype, quantization, steps, gemv N_tile,
# attention partitions, first position, batch). Tiny shapes keep the data small.
SMALL = dict(vocab=32, hidden=16, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=4, intermediate=32,
             max_seq=8)
CASES = [
    ("f32_gqa", dict(SMALL, n_layers=2), "F32", None, 3, 8, 1, 0, 1),
    ("f16_mha", dict(SMALL, n_kv_heads=4), "F16", None, 2, None, 1, 0, 1),
    ("bf16_mqa", dict(SMALL, n_kv_heads=1), "BF16", None, 2, 8, 1, 0, 1),
    ("i8_gqa", SMALL, "F32", dict(bits=8, group=8), 2, 8, 1, 0, 1),
    ("i4_gqa", SMALL, "F32", dict(bits=4, group=8), 2, None, 1, 0, 1),
    ("i4z_gqa", SMALL, "F32", dict(bits=4, group=8, symmetric=False), 1, None, 1, 0, 1),
    ("f32_split", dict(SMALL, max_seq=24), "F32", None, 2, None, 2, 20, 1),
    ("f16_split", dict(SMALL, max_seq=24), "F16", None, 1, None, 2, 18, 1),
    ("f32_batch3", SMALL, "F32", None, 2, 8, 1, 0, 3),
    ("bf16_batch2", dict(SMALL, n_kv_heads=1), "BF16", None, 2, None, 1, 0, 2),
]
TOKENS = [3, 17, 5, 29]


def st_write(path, tensors, torch):
    """A safetensors file of name -> torch tensor (F32 F16 BF16 I32 I8 U8)."""
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int32: "I32", torch.int8: "I8", torch.uint8: "U8"}
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def program_json(prog):
    """Its JSON of prog (to_dict), one buffer, counter or task a line: diffable and small."""
    d = prog.to_dict()
    out = ["{"]
    keys = list(d)
    for i, k in enumerate(keys):
        end = "," if i + 1 < len(keys) else ""
        if isinstance(d[k], list) and d[k]:
            out.append(f"  {json.dumps(k)}: [")
            out += [f"    {json.dumps(x, separators=(', ', ': '))}" + ("," if j + 1 < len(d[k]) else "")
                    for j, x in enumerate(d[k])]
            out.append("  ]" + end)
        else:
            out.append(f"  {json.dumps(k)}: {json.dumps(d[k], separators=(', ', ': '))}{end}")
    return "\n".join(out + ["}"]) + "\n"


def lower_case(m, name, cfg, dt, quant, steps, n_tile, parts, pos0, B, out, manifest, verdicts):
    torch = m["torch"]
    DType = m["DType"]
    tdt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dt]
    model = m["make_toy"](seed=len(name), dtype=tdt, **cfg)
    graph = m["from_toy"](model)
    weights = model.weights_dict()
    gen = torch.Generator().manual_seed(7)
    for k in weights:   # the toy's norms are ones: vary them so a wrong weight row shows
        if k.endswith("norm"):
            weights[k] = (1 + 0.5 * torch.rand(weights[k].shape, generator=gen)).to(tdt)
    qmeta = None
    if quant:
        weights, qmeta = m["quantize_weights"](weights, graph=graph, **quant)
    tiling = {}
    if n_tile:
        tiling["gemv"] = {"N_tile": n_tile}
    if parts > 1:
        tiling["attention"] = {"n_partitions": parts}
    config = m["ScheduleConfig"](tiling=tiling) if tiling else None
    os.makedirs(os.path.join(out, name), exist_ok=True)
    st_write(os.path.join(out, name, "weights.safetensors"), weights, torch)
    kv, kv_file = {}, "-"
    for k in range(steps):
        pos = pos0 + k
        prog = m["lower"](graph, config=config, pos=pos, dtype=DType[dt], quant=qmeta, B=B)
        if k == 0 and pos0 > 0:   # a cache holding positions [0, pos0) already (one sequence)
            for b in prog.buffers:
                if b.kind.name == "KV_CACHE":
                    c = torch.zeros(b.shape, dtype=tdt)
                    c[:pos0] = (torch.rand((pos0,) + tuple(b.shape[1:]), generator=gen) * 2 - 1).to(tdt)
                    kv[b.name] = c
            st_write(os.path.join(out, name, "kv.safetensors"), kv, torch)
            kv_file = f"{name}/kv.safetensors"
        res = m["validate"](prog)
        rel = f"{name}/step{k}.json"
        with open(os.path.join(out, rel), "w") as f:
            f.write(program_json(prog))
        verdicts[rel] = {"ok": res.ok, "errors": res.errors}
        inputs = {"token_id": torch.tensor([TOKENS[(k + j) % len(TOKENS)] for j in range(B)], dtype=torch.int32),
                  "pos": torch.tensor([pos] * B, dtype=torch.int32),
                  "reshape_id0": torch.arange(B, dtype=torch.int32)}
        st_write(os.path.join(out, name, f"in{k}.safetensors"), inputs, torch)
        # its VM refuses what its validator rejects; the asymmetric int4 case runs unvalidated
        vm = m["ReferenceVM"](prog, weights, strict_validate=res.ok)
        res_out = vm.run(inputs, kv=kv)
        st_write(os.path.join(out, name, f"out{k}.safetensors"), res_out, torch)
        kv = {b.name: res_out[b.name] for b in prog.buffers if b.kind.name == "KV_CACHE"}
        note = "" if res.ok else "  # its validator rejects: " + res.errors[0][:90]
        manifest.append(f"run {rel} {name}/weights.safetensors {name}/in{k}.safetensors "
                        f"{kv_file if k == 0 else '@prev'} {name}/out{k}.safetensors {TOL[dt]}{note}")
    return prog


def lenient_case(m, out, manifest, verdicts):
    """A batch-3 f32 step its validator accepts in forms AMK once refused: float token ids and
    positions, a final norm weight of one row per sequence ([3, hidden]), and every activation
    (space HBM) on a GLOBAL_SCRATCH page, shared where its validator proves the live ranges apart.
    Its reference VM gives each buffer its own storage; AMK's puts a page's buffers in one."""
    torch, name, B = m["torch"], "f32_lenient", 3
    model = m["make_toy"](seed=11, dtype=torch.float32, **SMALL)
    graph = m["from_toy"](model)
    weights = model.weights_dict()
    prog = m["lower"](graph, config=m["ScheduleConfig"](tiling={"gemv": {"N_tile": 8}}), pos=0,
                      dtype=m["DType"].F32, B=B)
    for b in prog.buffers:
        if b.name in ("token_id", "pos"):
            b.dtype = m["DType"].F32
    fn = next(b for b in prog.buffers if b.source == "final_norm")
    fn.shape, fn.source = (B, fn.shape[0]), "final_norm.rows"
    weights["final_norm.rows"] = 1 + torch.rand((B, fn.shape[1]), generator=torch.Generator().manual_seed(3))
    pages = m["PageAllocation"]()
    prog.pages = pages
    for b in prog.buffers:
        if b.kind.name != "ACTIVATION":
            continue
        for pg in pages.pages:          # the first page its validator lets b share
            pages.buffer_to_page[b.id] = pg.id
            if m["validate"](prog).ok:
                pg.nbytes = max(pg.nbytes, b.nbytes)
                break
        else:
            pg = m["Page"](len(pages.pages), m["MemSpace"].GLOBAL_SCRATCH, b.nbytes)
            pages.pages.append(pg)
            pages.buffer_to_page[b.id] = pg.id
    res = m["validate"](prog)
    assert res.ok, res.report()
    os.makedirs(os.path.join(out, name), exist_ok=True)
    rel = f"{name}/step0.json"
    with open(os.path.join(out, rel), "w") as f:
        f.write(program_json(prog))
    verdicts[rel] = {"ok": True, "errors": []}
    inputs = {"token_id": torch.tensor(TOKENS[:B], dtype=torch.float32),
              "pos": torch.zeros(B, dtype=torch.float32), "reshape_id0": torch.arange(B, dtype=torch.int32)}
    st_write(os.path.join(out, name, "weights.safetensors"), weights, torch)
    st_write(os.path.join(out, name, "in0.safetensors"), inputs, torch)
    st_write(os.path.join(out, name, "out0.safetensors"), m["ReferenceVM"](prog, weights).run(inputs), torch)
    manifest.append(f"run {rel} {name}/weights.safetensors {name}/in0.safetensors - {name}/out0.safetensors "
                    f"{TOL['F32']}  # {len(pages.pages)} pages for {len(pages.buffer_to_page)} activations")


def mutations(prog, m):
    """Hand-mutated copies of prog (a step with tiled GEMVs), each a defect its validator rejects."""
    Wait = m["Wait"]
    tasks = prog.tasks
    tiled = {}
    for t in tasks:
        tiled.setdefault(t.out_counter, []).append(t)
    shared = next(c for c, ts in tiled.items() if len(ts) > 1)
    waiter = next(t for t in tasks if any(w.counter == shared for w in t.waits))
    attn = next(t for t in tasks if t.op.name == "ATTENTION_TILE")
    rope = next(t for t in tasks if t.op.name == "ROPE")
    out = {}

    p = copy.deepcopy(prog)   # a first-k-of-N wait on a counter of several tiles
    for w in p.tasks[waiter.id].waits:
        if w.counter == shared:
            w.threshold = 1
    out["partial_join"] = p
    p = copy.deepcopy(prog)   # the first task waits on the last one's counter: a cycle
    p.tasks[0].waits.append(Wait(p.tasks[-1].out_counter, 1))
    out["cycle"] = p
    p = copy.deepcopy(prog)   # RoPE without its theta
    del p.tasks[rope.id].params["theta"]
    out["missing_param"] = p
    p = copy.deepcopy(prog)   # attention unordered with the KV appends and the query
    p.tasks[attn.id].waits = []
    out["race_read"] = p
    p = copy.deepcopy(prog)   # two tiles of one counter over the same columns
    ts = tiled[shared]
    p.tasks[ts[1].id].params["n_off"] = ts[0].params["n_off"]
    out["waw_overlap"] = p
    p = copy.deepcopy(prog)   # a wait for more producers than the counter has
    for w in p.tasks[waiter.id].waits:
        if w.counter == shared:
            w.threshold = len(tiled[shared]) + 1
    out["threshold_over"] = p
    p = copy.deepcopy(prog)   # a task waiting on its own counter
    p.tasks[rope.id].waits.append(Wait(p.tasks[rope.id].out_counter, 1))
    out["self_wait"] = p
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--amkpy", required=True, help="a checkout of RightNow-AI/AutoMegaKernel")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "interop"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.amkpy))
    import torch
    from models.toy import make_toy
    from schedule.graph import from_toy
    from schedule.ir import DType, MemSpace, Page, PageAllocation, ScheduleConfig, Wait, validate
    from schedule.lower import lower
    from schedule.quantize import quantize_weights
    from vm.reference_vm import ReferenceVM
    torch.set_num_threads(1)
    m = dict(torch=torch, make_toy=make_toy, from_toy=from_toy, DType=DType, ScheduleConfig=ScheduleConfig,
             Wait=Wait, validate=validate, lower=lower, quantize_weights=quantize_weights,
             ReferenceVM=ReferenceVM, MemSpace=MemSpace, Page=Page, PageAllocation=PageAllocation)
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "bad"), exist_ok=True)
    manifest, verdicts, progs = [], {}, {}
    for case in CASES:
        progs[case[0]] = lower_case(m, *case, out, manifest, verdicts)
    lenient_case(m, out, manifest, verdicts)
    for name, p in mutations(progs["bf16_mqa"], m).items():   # one layer, tiled: small files
        res = validate(p)
        assert not res.ok, f"its validator accepts the mutation {name}"
        rel = f"bad/{name}.json"
        with open(os.path.join(out, rel), "w") as f:
            f.write(program_json(p))
        verdicts[rel] = {"ok": False, "errors": res.errors}
        manifest.append(f"reject {rel}")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("# written by scripts/amkpy_interop.py; the format is at the top of tests/test_interop.sh\n")
        f.write("\n".join(manifest) + "\n")
    with open(os.path.join(out, "verdicts.json"), "w") as f:
        json.dump(verdicts, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(out) for x in fs)
    print(f"wrote {len(manifest)} manifest lines, {total} bytes under {out}")


if __name__ == "__main__":
    main()
