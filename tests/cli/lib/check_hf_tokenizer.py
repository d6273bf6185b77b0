#!/usr/bin/python3
"""Checks a Hugging Face export's tokenizer files against the published formats, reading the
sentencepiece model with sentencepiece's own Python bindings (not ustrain's code).

usage: check_hf_tokenizer.py EXPORT_DIR ORIGINAL.model

LlamaTokenizer (and AutoTokenizer, through tokenizer_class) reads tokenizer.model with
tokenizer_config.json's options and special_tokens_map.json; config.json and
generation_config.json carry the special ids that generate() and padding use. Prints one line
per check and exits 1 if any fails.
"""
import json
import sys

import sentencepiece
from sentencepiece import sentencepiece_model_pb2

export_dir, original = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    failures += 0 if ok else 1


def load(name):
    with open(f"{export_dir}/{name}", encoding="utf-8") as f:
        return json.load(f)


with open(f"{export_dir}/tokenizer.model", "rb") as f:
    model_bytes = f.read()
with open(original, "rb") as f:
    check(model_bytes == f.read(), "tokenizer.model is the training tokenizer's model, byte for byte")
sp = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)
proto = sentencepiece_model_pb2.ModelProto()
proto.ParseFromString(model_bytes)

# ustrain starts a document after EOS and pads with EOS when the model has no BOS or PAD piece.
eos = sp.eos_id() if sp.eos_id() >= 0 else None
ids = {"bos": sp.bos_id() if sp.bos_id() >= 0 else eos, "eos": eos, "pad": sp.pad_id() if sp.pad_id() >= 0 else eos}
config, generation = load("config.json"), load("generation_config.json")
for name, want in ids.items():
    check(config.get(f"{name}_token_id") == want, f"config.json {name}_token_id is {want}")
    check(generation.get(f"{name}_token_id") == want, f"generation_config.json {name}_token_id is {want}")
check(config["vocab_size"] >= sp.get_piece_size(), "config.json's vocabulary holds every piece")

tok = load("tokenizer_config.json")
check(tok["tokenizer_class"] == "LlamaTokenizer", "tokenizer_class LlamaTokenizer")
check(tok["add_bos_token"] is False and tok["add_eos_token"] is False, "adds neither BOS nor EOS, as ustrain")
check(tok["legacy"] is True, "legacy: the model encodes as sentencepiece itself does")
check(tok["add_prefix_space"] == proto.normalizer_spec.add_dummy_prefix,
      f"add_prefix_space is the model's add_dummy_prefix ({proto.normalizer_spec.add_dummy_prefix})")
check(tok["model_max_length"] == config["max_position_embeddings"], "model_max_length is the context length")
special_map = load("special_tokens_map.json")
specials = dict(ids, unk=sp.unk_id())
for name, id_ in specials.items():
    piece = sp.id_to_piece(id_)
    check(tok[f"{name}_token"] == piece, f"tokenizer_config {name}_token is piece {id_} ({piece})")
    entry = special_map[f"{name}_token"]
    check(entry["content"] == piece and entry["lstrip"] is False and entry["rstrip"] is False
          and entry["normalized"] is False and entry["single_word"] is False,
          f"special_tokens_map {name}_token is AddedToken {piece}")
decoder = tok["added_tokens_decoder"]
check(sorted(int(i) for i in decoder) == sorted(set(specials.values())),
      "added_tokens_decoder lists exactly the special ids")
for i, entry in decoder.items():
    check(entry["content"] == sp.id_to_piece(int(i)) and entry["special"] is True
          and (sp.is_control(int(i)) or sp.is_unknown(int(i))),
          f"added_tokens_decoder[{i}] is the model's special piece {entry['content']}")
sys.exit(1 if failures else 0)
