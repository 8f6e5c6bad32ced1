#!/usr/bin/env python3
"""Greedy reference for SmolLM2-135M-Instruct from HF transformers (the oracle for the Llama path).

Loads the same Q4_1 GGUF that AMK runs (transformers dequantizes it to float32 and undoes the Q/K
permutation), feeds each fixed prompt, then decodes N new tokens greedily with a manual KV-cached
loop (no EOS stop, no logits processors, so the raw logits are comparable), and writes for every
step the greedy id and the top-K logits. Usage:
    python3 scripts/hf_reference.py models/SmolLM2-135M-Instruct.Q4_1.gguf tests/data/llama/hf_reference.json
"""
import json, os, sys, platform

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
]
CHAT = "What is the tallest mountain in the world?"
N_NEW = 32
TOP_K = 16


def main():
    import torch, transformers
    path, out = sys.argv[1], sys.argv[2]
    d, f = os.path.split(os.path.abspath(path))
    torch.manual_seed(0)
    tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model.eval()
    chat = tok.apply_chat_template([{"role": "user", "content": CHAT}], tokenize=False,
                                   add_generation_prompt=True)
    cases = []
    for text in PROMPTS + [chat]:
        ids = tok(text, add_special_tokens=False).input_ids
        steps = []
        with torch.no_grad():
            o = model(torch.tensor([ids]), use_cache=True)
            past, logits = o.past_key_values, o.logits[0, -1]
            for _ in range(N_NEW):
                nxt = int(torch.argmax(logits))
                v, i = torch.topk(logits, TOP_K)
                steps.append({"next": nxt, "top_ids": i.tolist(), "top_logits": [float(x) for x in v]})
                o = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past, logits = o.past_key_values, o.logits[0, -1]
        cases.append({"prompt": text, "prompt_ids": ids, "steps": steps,
                      "text": tok.decode([s["next"] for s in steps])})
        print(repr(text[:40]), "->", repr(cases[-1]["text"]))
    meta = {"model": f, "transformers": transformers.__version__, "torch": torch.__version__,
            "python": platform.python_version(), "dtype": "float32", "device": "cpu",
            "n_new": N_NEW, "top_k": TOP_K}
    with open(out, "w") as fp:
        json.dump({"meta": meta, "cases": cases}, fp, indent=1)
    write_text(out[:-5] + ".txt", cases)


def write_text(path, cases):
    """The same data for C tests: `case N id...` then per step `step NEXT K id logit ...`."""
    with open(path, "w") as fp:
        for c in cases:
            fp.write("case %d %s\n" % (len(c["prompt_ids"]), " ".join(map(str, c["prompt_ids"]))))
            for s in c["steps"]:
                fp.write("step %d %d %s\n" % (s["next"], len(s["top_ids"]), " ".join(
                    "%d %.9g" % (i, v) for i, v in zip(s["top_ids"], s["top_logits"]))))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--text-only":  # re-derive the .txt from the .json
        write_text(sys.argv[2][:-5] + ".txt", json.load(open(sys.argv[2]))["cases"])
    else:
        main()
