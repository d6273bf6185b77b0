"""Writes a Hugging Face Llama shaped like tiny_recipe (common.bash) into DIR: config.json,
model.safetensors and model.safetensors.index.json, with small distinct F32 weights.

  make_hf_model.py DIR [--alias NAME=OTHER] [--empty NAME]

--alias points NAME's data_offsets at OTHER's bytes (two weights sharing them); --empty adds
an empty tensor NAME at the offset OTHER starts at, left out of the index (a name the importer
ignores)."""
import argparse, json, os, struct

D, FFN, VOCAB, LAYERS, HEADS, KV_HEADS = 32, 64, 257, 2, 4, 2


def tensors():
    kv = D // HEADS * KV_HEADS
    shapes = {"model.embed_tokens.weight": [VOCAB, D], "model.norm.weight": [D], "lm_head.weight": [VOCAB, D]}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [D], p + "post_attention_layernorm.weight": [D],
                       p + "self_attn.q_proj.weight": [D, D], p + "self_attn.k_proj.weight": [kv, D],
                       p + "self_attn.v_proj.weight": [kv, D], p + "self_attn.o_proj.weight": [D, D],
                       p + "mlp.gate_proj.weight": [FFN, D], p + "mlp.up_proj.weight": [FFN, D],
                       p + "mlp.down_proj.weight": [D, FFN]})
    return shapes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--alias", default="")
    parser.add_argument("--empty", default="")
    args = parser.parse_args()
    alias, other = args.alias.split("=") if args.alias else ("", "")
    header, data = {}, b""
    for k, (name, shape) in enumerate(sorted(tensors().items())):
        count = 1
        for extent in shape:
            count *= extent
        if name == alias:  # no bytes of its own: the data section still ends with the last tensor
            header[name] = {"dtype": "F32", "shape": shape}
            continue
        values = [((k * 7919 + i * 104729) % 2001 - 1000) / 1e4 for i in range(count)]
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * count]}
        data += struct.pack(f"<{count}f", *values)
    index = {"metadata": {"total_size": len(data)}, "weight_map": {n: "model.safetensors" for n in header}}
    if alias:
        header[alias]["data_offsets"] = header[other]["data_offsets"]
        if args.empty:
            at = header[other]["data_offsets"][0]
            header[args.empty] = {"dtype": "F32", "shape": [0], "data_offsets": [at, at]}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    with open(os.path.join(args.dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    config = {"model_type": "llama", "hidden_size": D, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB,
              "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "tie_word_embeddings": False}
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(config, f)


main()
