#!/usr/bin/env python3
"""Per-phase table of one decode step's or prefill chunk's timeline (a trace from `amk bench
--trace` or `amk generate --trace`; .json or .json.gz).

    python3 bench/phases.py TRACE [--layer N] [--starts]

A phase is the tasks of one layer with the same role (Q/K/V tiles, attention, O or the one-step
attention + O, gate/up and down or the one-step MLP; the LM head and argmax after the last layer;
any other label's words, such as a prefill chunk's 'residual o' or 'silu_mul', are a role of
their own). A prefill chunk's trace (`amk bench --prefill N --trace PREFIX`) reads the same way.
For each phase of the chosen layer (default: the middle one), in the order the phases started,
and the head it prints: tasks, the span from the phase's first start to its last end, the
median and the slowest task's op time, how far apart the tasks started, and the hop: from the
previous phase's last end (before its signal) to this phase's first start. A trace of an image
with marks (AMK_VM_MARKS 1) adds the layer's marks: where inside the tasks the time goes.

--starts adds, over the middle half of the layers, each role's task starts after the moment T
its inputs were complete (the last end of the phase before), split by whether the task's SM had
itself just finished (its previous task ended within 0.5 us of T): the medians of the start
after T, of the SM's time from its previous end to reaching the task, and of its wait.
"""
import gzip
import json
import re
import statistics
import sys

ROLE = {"k": "qkv", "v": "qkv", "q": "qkv", "attention": "attention", "attention combine": "combine",
        "attention_o": "attention+o", "o": "o", "gate/up": "gate/up", "down": "down", "mlp": "mlp",
        "residual start": "fill", "attention start": "fill", "lm_head": "lm_head"}
# a layer's phases in order (down or mlp ends it; the FILLs that start the sums run off the path)
LAYER = ["qkv", "attention", "combine", "attention+o", "o", "gate/up", "down", "mlp"]


def layer_end(groups, layer):
    """The tasks that complete a layer's output: its residual ADD after down (a prefill chunk), its
    down tiles, or its mlp tiles."""
    return groups.get((layer, "residual down")) or groups.get((layer, "down")) or groups.get((layer, "mlp"))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def phase_of(name):
    """(layer, role) of a task label such as 'L5 q[0:24]' or 'L5 attention[0] kv3'; None else."""
    if name in ("argmax", "embed"):
        return (None, name)
    if name.startswith("argmax["):  # ARGMAX_PARTIAL tasks; "argmax" is the combine (or SAMPLE_ARGMAX)
        return (None, "argmax parts")
    m = re.match(r"L(\d+) ([^\[]+)", name)
    if not m:
        return None
    words = m.group(2).split()
    role = ROLE.get(" ".join(words))
    if role:
        return (int(m.group(1)), role)
    # a prefill program's (or the spec ops') other roles: the label's words without a kv head and
    # "rows" ('L5 attention kv3 rows[0:31]' -> 'attention', 'L5 residual o' as it is)
    words = [w for w in words if w != "rows" and not re.fullmatch(r"kv\d+", w)]
    return (int(m.group(1)), ROLE.get(" ".join(words), " ".join(words))) if words else None


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    events = load(args[0])
    layer = int(args[args.index("--layer") + 1]) if "--layer" in args else None
    groups = {}
    for e in events:
        ph = phase_of(e["name"])
        if ph:
            groups.setdefault(ph, []).append(e)
    layers = sorted({l for (l, r) in groups if l is not None and r != "lm_head"})
    if not layers:
        sys.exit("no layer tasks in the trace")
    if layer is None:
        layer = layers[len(layers) // 2]
    t0 = min(e["ts"] for e in events)
    step = max(e["ts"] + e["dur"] for e in events) - t0
    # the layer's phases in the order they started (not the FILLs that start the sums: they run off
    # the path)
    roles = sorted((r for (l, r) in groups if l == layer and r != "fill" and not r.endswith(" start")),
                   key=lambda r: min(e["ts"] for e in groups[(layer, r)]))
    rows = [(layer, r) for r in roles] + [(layers[-1] + 1, "lm_head"), (None, "argmax parts"), (None, "argmax")]
    print(f"step {step:.1f} us over {len(layers)} layers; phases of layer {layer} and the head (us)")
    print("| phase | tasks | span | task median | task max | start spread | hop |")
    print("|---|---|---|---|---|---|---|")
    before = layer_end(groups, layer - 1) or groups.get((None, "embed"))
    prev_end = max(e["ts"] + e["dur"] for e in before) if before else None
    total = 0.0
    for key in rows:
        ev = groups.get(key)
        if not ev:
            continue
        first = min(e["ts"] for e in ev)
        last_start = max(e["ts"] for e in ev)
        end = max(e["ts"] + e["dur"] for e in ev)
        durs = [e["dur"] for e in ev]
        hop = first - prev_end if prev_end is not None else float("nan")
        name = key[1] if key[0] is None or key[1] == "lm_head" else f"L{key[0]} {key[1]}"
        print(f"| {name} | {len(ev)} | {end - first:.1f} | {statistics.median(durs):.1f} | {max(durs):.1f} "
              f"| {last_start - first:.1f} | {hop:.1f} |")
        if key[0] == layer:
            total += (end - first) + (hop if hop == hop else 0.0)
        prev_end = end
    print(f"layer {layer}: {total:.1f} us with its hops")
    marks(groups, layer)
    if "--starts" in args:
        starts(events, groups, layers)


def marks(groups, layer):
    """The chosen layer's marks (a trace of an image built with AMK_VM_MARKS 1, amk_tune.h): per phase
    the median of each mark, us after the task's start (the point thread 0 passed), then the
    median task time; nothing when the trace has none."""
    rows = []
    for role in LAYER:
        ev = [e for e in groups.get((layer, role), []) if "marks_us" in e.get("args", {})]
        if ev:
            m = [statistics.median(e["args"]["marks_us"][k] for e in ev) for k in range(len(ev[0]["args"]["marks_us"]))]
            rows.append((role, len(ev), m, statistics.median(e["dur"] for e in ev)))
    if rows:
        print(f"marks of layer {layer} (us after the task's start; medians; 0 = not passed)")
        print("| phase | tasks | " + " | ".join(f"mark {k}" for k in range(len(rows[0][2]))) + " | end |")
        print("|---|---|" + "---|" * (len(rows[0][2]) + 1))
        for role, n, m, dur in rows:
            print(f"| {role} | {n} | " + " | ".join(f"{v:.2f}" for v in m) + f" | {dur:.2f} |")


def starts(events, groups, layers):
    """Start of each task after its phase's inputs were complete, by whether its SM was busy."""
    by_sm = {}
    for e in events:
        by_sm.setdefault(e["tid"], []).append(e)
    prev_end = {}
    for evs in by_sm.values():
        evs.sort(key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            prev_end[id(b)] = a["ts"] + a["dur"]
    rows = {}
    mid = layers[len(layers) // 4: len(layers) - len(layers) // 4]
    for layer in mid:
        before = layer_end(groups, layer - 1)
        for role in LAYER:
            ev = groups.get((layer, role))
            if not ev or not before:
                continue
            t = max(e["ts"] + e["dur"] for e in before)
            for e in ev:
                pe = prev_end.get(id(e))
                if pe is None:
                    continue
                reached = e["ts"] - e["args"]["wait_us"]
                rows.setdefault((role, pe > t - 0.5), []).append((e["ts"] - t, reached - pe, e["args"]["wait_us"]))
            before = ev
    print(f"starts after the inputs were complete, layers {mid[0]}-{mid[-1]} (us; medians)")
    print("| phase | SM just finished | tasks | start after T | previous end to reaching it | wait |")
    print("|---|---|---|---|---|---|")
    for role in LAYER:
        for busy in (False, True):
            v = rows.get((role, busy))
            if v:
                med = [statistics.median(x[i] for x in v) for i in range(3)]
                print(f"| {role} | {'yes' if busy else 'no'} | {len(v)} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} |")


if __name__ == "__main__":
    main()
