# Damaged shards, checkpoints and foreign files: each is one clear error (exit 2) naming what
# is wrong; never a crash, never a silently different run.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
"$USTRAIN" train tiny.toml --set train.steps=10 --set checkpoint.interval=5 >train.log 2>&1 || fail "training"
good=runs/tiny/checkpoints/step-00000010

# Rewrites a checkpoint's manifest with python: FIELD = VALUE (JSON), then a valid checksum,
# as a tool that knows the format would (what the checksum alone cannot catch).
rewrite_manifest() {
  $PYTHON - "$@" <<'PY'
import json, sys, zlib
path, field, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
m = json.load(open(path))
m[field] = value
m["manifest_crc32"] = "00000000"
text = json.dumps(m, indent=1) + "\n"
text = text.replace('"manifest_crc32": "00000000"', '"manifest_crc32": "%08x"' % zlib.crc32(text.encode()))
open(path, "w").write(text)
PY
}

# Shards.
shard=$(ls data/train-*.h5 | head -1)
cp -r data flipped && printf '\x55' | dd of="flipped/${shard#data/}" bs=1 seek=3000 conv=notrunc 2>/dev/null
fault "shard with a flipped byte" 2 "fails its checksum" -- "$USTRAIN" train tiny.toml --set data.path=flipped \
  --set run.name=flipped
cp -r data cut && truncate -s 2000 "cut/${shard#data/}"
fault "truncated shard" 2 "is [0-9]+ bytes but manifest.json says" -- "$USTRAIN" train tiny.toml --set data.path=cut \
  --set run.name=cut
cp -r data nomanifest && truncate -s 100 nomanifest/manifest.json
fault "truncated dataset manifest" 2 "manifest.json is not valid JSON" -- "$USTRAIN" train tiny.toml \
  --set data.path=nomanifest --set run.name=nomanifest
# A number beyond a double (found by fuzzing): the JSON parser's overflow is a damaged file too.
cp -r data overflow && sed -i 's/"format_minor": [0-9]*/"format_minor": 1e999999/' overflow/manifest.json
fault "dataset manifest holding 1e999999" 2 "overflow/manifest.json is not valid JSON" -- \
  "$USTRAIN" train tiny.toml --set data.path=overflow --set run.name=overflow

# Checkpoints.
cp -r "$good" edited && sed -i 's/"step": 10/"step": 8/' edited/manifest.json
fault "manifest step edited 10 -> 8" 2 "edited/manifest.json does not match its checksum" -- \
  "$USTRAIN" train tiny.toml --set run.name=edited --resume edited
cp -r "$good" position
sed -i 's/\\"position\\":\([0-9]*\)/\\"position\\":1\1/' position/manifest.json
fault "data position edited" 2 "position/manifest.json does not match its checksum" -- \
  "$USTRAIN" train tiny.toml --set run.name=position --resume position
# A data position edited by a tool that rewrites the checksum: it no longer matches the tokens seen.
cp -r "$good" moved
$PYTHON - moved/manifest.json <<'PY'
import json, sys, zlib
path = sys.argv[1]
m = json.load(open(path))
state = json.loads(m["files"][0]["data_state"])
state["position"] += 8
m["files"][0]["data_state"] = json.dumps(state, separators=(",", ":"))
m["manifest_crc32"] = "00000000"
text = json.dumps(m, indent=1) + "\n"
text = text.replace('"manifest_crc32": "00000000"', '"manifest_crc32": "%08x"' % zlib.crc32(text.encode()))
open(path, "w").write(text)
PY
fault "data position edited (checksum valid)" 2 "saved data position [0-9]+ .* does not match the [0-9]+ tokens" -- \
  "$USTRAIN" train tiny.toml --set run.name=moved --resume moved
# The checksum removed or spoilt: an error, not a check switched off. Only a manifest of format
# version 1 (before the checksum) may lack it, with a warning. Upper-case digits are the same.
strip_checksum() {
  $PYTHON - "$@" <<'PY'
import json, sys
path, version = sys.argv[1], int(sys.argv[2])
m = json.load(open(path))
del m["manifest_crc32"]
m["format_version"] = version
open(path, "w").write(json.dumps(m, indent=1) + "\n")
PY
}
cp -r "$good" unsummed && strip_checksum unsummed/manifest.json 2
fault "manifest_crc32 removed" 2 "unsummed/manifest.json has no manifest_crc32" -- \
  "$USTRAIN" train tiny.toml --set run.name=unsummed --resume unsummed
cp -r "$good" spoilt && sed -i 's/"manifest_crc32": "[0-9a-f]*"/"manifest_crc32": "12z4"/' spoilt/manifest.json
fault "manifest_crc32 malformed" 2 "spoilt/manifest.json: manifest_crc32 is \"12z4\"" -- \
  "$USTRAIN" ckpt inspect spoilt
cp -r "$good" version1 && strip_checksum version1/manifest.json 1
fault "format version 1 without manifest_crc32: a warning" 0 "version1/manifest.json has no manifest_crc32" -- \
  "$USTRAIN" ckpt inspect version1
cp -r "$good" upper && sed -i 's/"manifest_crc32": "\([0-9a-f]*\)"/"manifest_crc32": "\U\1"/' upper/manifest.json
fault "upper-case manifest_crc32" 0 "" -- "$USTRAIN" ckpt inspect upper
cp -r "$good" huge && sed -i 's/"lr": [0-9.e-]*/"lr": 1e999999/' huge/manifest.json
fault "checkpoint manifest holding 1e999999" 2 "huge/manifest.json is not valid JSON" -- "$USTRAIN" ckpt inspect huge
mkdir -p negative && cp -r "$good" negative/ckpt && rewrite_manifest negative/ckpt/manifest.json step -5
fault "negative step (checksum valid)" 2 "step -5 is negative" -- "$USTRAIN" ckpt inspect negative/ckpt
mkdir -p renamed && cp -r "$good" renamed/step-00000008
fault "step-8 directory holding step 10" 2 "says step 10, but its directory is step-00000008" -- \
  "$USTRAIN" eval tiny.toml --checkpoint renamed/step-00000008
cp -r "$good" nan
$PYTHON - nan <<'PY'
import json, struct, sys, zlib
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
f = d + "/rank-00000.safetensors"
raw = bytearray(open(f, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
name = next(k for k in header if k.startswith("param/model.norm"))
begin, end = header[name]["data_offsets"]
raw[8 + n + begin:8 + n + begin + 4] = struct.pack("<f", float("nan"))
open(f, "wb").write(raw)
m["files"][0]["checksums"][name] = "crc32:%08x" % zlib.crc32(bytes(raw[8 + n + begin:8 + n + end]))
m["manifest_crc32"] = "00000000"
text = json.dumps(m, indent=1) + "\n"
text = text.replace('"manifest_crc32": "00000000"', '"manifest_crc32": "%08x"' % zlib.crc32(text.encode()))
open(d + "/manifest.json", "w").write(text)
PY
fault "NaN weights with valid checksums: generate" 2 "tensor param/model.norm.weight.* holds a non-finite value" -- \
  "$USTRAIN" generate --checkpoint nan --tokens 4
fault "NaN weights with valid checksums: eval" 2 "holds a non-finite value" -- \
  "$USTRAIN" eval tiny.toml --checkpoint nan
"$USTRAIN" ckpt export "$good" hf >export.log 2>&1 || fail "export"
$PYTHON - hf/model.safetensors <<'PY'
import json, struct, sys
f = sys.argv[1]
raw = bytearray(open(f, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
begin = header["model.norm.weight"]["data_offsets"][0]
raw[8 + n + begin:8 + n + begin + 4] = struct.pack("<f", float("inf"))
open(f, "wb").write(raw)
PY
fault "ckpt import of inf weights" 2 "model.norm.weight holds a non-finite value \(inf" -- \
  "$USTRAIN" ckpt import hf imported --recipe tiny.toml

# Foreign files.
write_safetensors() {  # FILE HEADER_JSON DATA_BYTES
  $PYTHON -c 'import struct, sys; h = sys.argv[2].encode(); open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(int(sys.argv[3])))' "$@"
}
mkdir -p overflow && write_safetensors overflow/model.safetensors \
  '{"model.norm.weight": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}}' 0
fault "safetensors shape whose element count overflows" 2 "element count overflows 64 bits" -- \
  "$USTRAIN" ckpt inspect overflow
$PYTHON -c '
h = b"{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (2305843009213693962,), }"
h += b" " * (118 - len(h)) + b"\n"
open("huge.npy", "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + bytes(80))'
fault ".npy shape (2**61 + 10,)" 2 "more elements than any file holds" -- \
  "$USTRAIN" data convert --input huge.npy --output huge-out --format npy --tokenizer byte
$PYTHON -c 'import struct; open("bad.bin", "wb").write(struct.pack("<256i", 20240520, 1, 1 << 30, *([0] * 253)) + bytes(10))'
fault "llm.c header announcing 2**30 tokens" 2 "announces 1073741824 tokens" -- \
  "$USTRAIN" data convert --input bad.bin --output llmc-out --format llmc --tokenizer byte
printf 'MMIDIDX\0\0' >bad.idx && $PYTHON -c '
import struct; open("bad.idx", "ab").write(struct.pack("<QBQQ", 1, 8, 1 << 60, 2))' && : >bad.bin
fault "Megatron .idx with 2**60 sequences" 2 "Megatron index bad.idx is [0-9]+ bytes, but its counts" -- \
  "$USTRAIN" data convert --input bad --output megatron-out --format megatron --tokenizer byte
finish
