#!/usr/bin/env python3
"""Tiny random models of each family AMK is to run, with HF transformers' logits (issue 41's oracle).

For llama, qwen2, qwen3 and mistral, builds a model from a config alone (no download) with the
family's features switched on: grouped-query attention, Qwen2's q/k/v biases, Qwen3's per-head q/k
norms and a head_dim other than hidden / heads, Mistral's sliding window (shorter than the prompt),
tied embeddings in qwen2 and untied in the others; and two Llamas with RoPE scaling, linear
(llama_linear) and YaRN (llama_yarn: its ramp inside head_dim, its attention factor). Every
weight is random and non-trivial: the matrices N(0, 1/cols), the norms 1 + N(0, 0.1^2), the
biases N(0, 0.1^2). For each it writes to
OUT/FAMILY/:
  config.json, model.safetensors      save_pretrained (HF names, float32)
  tokenizer.json                      a byte-level BPE of the 256 bytes (GPT-2's byte alphabet, no
                                      merges): token id b is byte b
  model.gguf                          the same weights as llama.cpp's converter writes them (float32;
                                      llama and mistral under GGUF arch "llama" with Q/K rows
                                      permuted, qwen2 and qwen3 unpermuted), the same vocabulary
  logits.txt                          the prompt's logits at every position (eager attention, f32):
                                        ids T id...            the prompt
                                        logits T V             then T lines of V values (%.9g)
                                        greedy N id...         N tokens by greedy full re-runs
Runs on the GPU machine (it has torch and transformers; the gguf wheel travels in .lcp/):
    PYTHONPATH=/tmp/site python3 scripts/family_reference.py OUT [FAMILY,...]
"""
import json, os, sys, platform

FAMILIES = ["llama", "qwen2", "qwen3", "mistral", "llama_linear", "llama_yarn"]
# RoPE scaling variants (Llama's architecture): linear, and YaRN with a ramp inside head_dim
ROPE = {"llama_linear": {"rope_type": "linear", "factor": 2.0},
        "llama_yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}}
T, N_GREEDY, SEED = 24, 8, 41


def config_for(fam, transformers):
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-6, rope_theta=10000.0, bos_token_id=1, eos_token_id=2)
    if fam == "llama":
        return transformers.LlamaConfig(tie_word_embeddings=False, **common)
    if fam in ROPE:
        common["max_position_embeddings"] = 16384
        return transformers.LlamaConfig(tie_word_embeddings=False, rope_parameters=dict(ROPE[fam], rope_theta=10000.0),
                                        **{k: v for k, v in common.items() if k != "rope_theta"})
    if fam == "qwen2":
        return transformers.Qwen2Config(tie_word_embeddings=True, use_sliding_window=False, **common)
    if fam == "qwen3":
        return transformers.Qwen3Config(tie_word_embeddings=False, head_dim=32, attention_bias=False, **common)
    if fam == "mistral":
        return transformers.MistralConfig(tie_word_embeddings=False, sliding_window=8, head_dim=16, **common)
    raise ValueError(fam)


def randomize(model, torch):
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[1] ** 0.5))
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:  # biases
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def byte_vocab():
    """GPT-2's byte alphabet: byte b's character in a byte-level BPE vocabulary."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def write_tokenizer_json(d):
    """tokenizer.json of the byte vocabulary: HF tokenizers' byte-level BPE, no merges."""
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": {c: i for i, c in enumerate(byte_vocab())}, "merges": []}}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as fp:
        json.dump(tok, fp, ensure_ascii=False, indent=1)


def permute(w, n_head):
    """llama.cpp's converter: a Llama/Mistral Q or K matrix's rows as GGUF stores them."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(fam, cfg, model, path):
    import gguf, numpy as np
    arch = "llama" if fam in ("llama", "mistral") or fam in ROPE else fam
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tiny-random-{fam}")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(float(cfg.rope_theta if hasattr(cfg, "rope_theta") else 10000.0))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    w.add_rope_dimension_count(hd)
    w.add_key_length(hd)
    w.add_value_length(hd)
    if fam == "mistral":
        w.add_sliding_window(cfg.sliding_window)
    if fam in ROPE:
        rp = ROPE[fam]
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR if rp["rope_type"] == "linear" else gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rp["factor"])
        if "original_max_position_embeddings" in rp:
            w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(byte_vocab())
    w.add_token_types([1] * 256)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    names = {"self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(cfg.num_hidden_layers):
        p, q = f"model.layers.{i}.", f"blk.{i}."
        w.add_tensor(q + "attn_norm.weight", sd[p + "input_layernorm.weight"])
        w.add_tensor(q + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        for proj, heads in (("q", cfg.num_attention_heads), ("k", cfg.num_key_value_heads), ("v", 0)):
            m = sd[p + f"self_attn.{proj}_proj.weight"]
            b = sd.get(p + f"self_attn.{proj}_proj.bias")
            if arch == "llama" and heads:
                m = permute(m, heads)
                b = permute(b, heads) if b is not None else None
            w.add_tensor(q + f"attn_{proj}.weight", np.ascontiguousarray(m))
            if b is not None:
                w.add_tensor(q + f"attn_{proj}.bias", np.ascontiguousarray(b))
        for proj in ("q", "k"):
            nw = sd.get(p + f"self_attn.{proj}_norm.weight")
            if nw is not None:
                w.add_tensor(q + f"attn_{proj}_norm.weight", nw)
        for hf, gg in names.items():
            w.add_tensor(q + gg + ".weight", sd[p + hf + ".weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    if not cfg.tie_word_embeddings:
        w.add_tensor("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


def main():
    import torch, transformers
    out = sys.argv[1]
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    ids = (3 + torch.randint(0, 253, (T,), generator=g)).tolist()
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "python": platform.python_version(), "dtype": "float32", "attn": "eager", "seed": SEED}
    for fam in (sys.argv[2].split(",") if len(sys.argv) > 2 else FAMILIES):
        d = os.path.join(out, fam)
        os.makedirs(d, exist_ok=True)
        try:
            cfg = config_for(fam, transformers)
            cfg._attn_implementation = "eager"
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float()
            randomize(model, torch)
            model.eval()
            model.save_pretrained(d, safe_serialization=True)
            write_tokenizer_json(d)
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0].float()
                seq = list(ids)
                for _ in range(N_GREEDY):
                    seq.append(int(torch.argmax(model(torch.tensor([seq])).logits[0, -1])))
            with open(os.path.join(d, "logits.txt"), "w") as fp:
                fp.write("ids %d %s\n" % (T, " ".join(map(str, ids))))
                fp.write("logits %d %d\n" % tuple(logits.shape))
                for row in logits.tolist():
                    fp.write(" ".join("%.9g" % v for v in row) + "\n")
                fp.write("greedy %d %s\n" % (N_GREEDY, " ".join(map(str, seq[T:]))))
            print(fam, "ok: greedy", seq[T:], "logit range %.3f..%.3f" % (float(logits.min()), float(logits.max())))
        except Exception as e:  # one family's failure must not lose the others
            print(fam, "FAILED:", type(e).__name__, e)
            continue
        try:
            write_gguf(fam, cfg, model, os.path.join(d, "model.gguf"))
            print(fam, "gguf ok")
        except Exception as e:
            print(fam, "gguf FAILED:", type(e).__name__, e)
    with open(os.path.join(out, "meta.json"), "w") as fp:
        json.dump(meta, fp, indent=1)


if __name__ == "__main__":
    main()
