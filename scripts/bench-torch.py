#!/usr/bin/env python3
"""The PyTorch baseline for `ustrain bench`: the recipe's model trained on random tokens.

Reads the same recipe (TOML) for the model, batch, sequence length, precision, recompute
policy and optimizer settings, builds the same Llama-style model in PyTorch (RMSNorm, RoPE in
the rotate-half layout, grouped-query attention through F.scaled_dot_product_attention,
SwiGLU, a tied or untied head), trains warm-up steps and then timed steps, and prints one line:

    torch: tokens/s=... mfu=... peak_mem_gib=... step_ms=... compile_s=... ...

MFU uses ustrain's convention: 6 N + 6 L d S FLOPs per token (N: parameters in matrix
multiplies, the head included, the embedding not) over a peak of 989 TFLOP/s (H100/H200 SXM
dense bf16). bf16 runs under autocast with fp32 master weights and a fused AdamW, as ustrain
keeps fp32 master weights, gradients and moments.

    python3 scripts/bench-torch.py recipes/bench-1b.toml [--steps 10] [--warmup 3]
        [--set train.micro_batch=4 ...] [--no-compile] [--dry-run] [--profile CSV]

--profile CSV runs one more step under torch.profiler after the timed ones and writes its GPU
kernels as CSV (name, calls, total_ns; one step), the input scripts/kernel-classes.py reads.
"""
import argparse
import functools
import math
import sys
import time

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: read_toml's own subset below
    tomllib = None

PEAK_FLOPS = 989e12  # H100/H200 SXM dense bf16, as ustrain's MFU

DEFAULTS = {  # the recipe keys used here, with ustrain's defaults
    "model": {"vocab_size": 256, "d_model": 256, "n_layers": 4, "n_heads": 8, "n_kv_heads": 4,
              "ffn_hidden": 768, "rope_theta": 10000.0, "norm_eps": 1e-5, "tied_embeddings": False,
              "max_seq_len": 256, "init_std": 0.02},
    "train": {"micro_batch": 8, "global_batch": 8, "seq_len": 256, "grad_clip": 1.0,
              "precision": "fp32", "recompute": "none"},
    "optim": {"lr": 3e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1},
    "run": {"seed": 1234},
}


def scalar(text):
    """One TOML value of the kinds recipes use: a quoted string, a boolean, a number."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text.replace("_", ""))
    except ValueError:
        return float(text.replace("_", ""))  # a ValueError here names the bad value


def read_toml(text):
    """The recipe's TOML: tomllib where Python has it, else the subset recipes use ([section]
    headers, key = value lines with strings, booleans and numbers, # comments)."""
    if tomllib is not None:
        return tomllib.loads(text)
    doc = {}
    section = doc
    for raw in text.splitlines():
        line, quote = "", None
        for c in raw:  # drop a comment, unless the # is inside a string
            if c in "\"'":
                quote = None if quote == c else (quote or c)
            if c == "#" and quote is None:
                break
            line += c
        line = line.strip()
        if line.startswith("["):
            section = doc.setdefault(line.strip("[] "), {})
        elif line:
            key, _, value = line.partition("=")
            section[key.strip()] = scalar(value.strip())
    return doc


def parse_value(text):
    """A --set value in TOML syntax; a bare word is a string, as for ustrain's --set."""
    try:
        return read_toml(f"v = {text}")["v"]
    except ValueError:  # tomllib.TOMLDecodeError is one
        return text


def load_recipe(path, overrides):
    with open(path, encoding="utf-8") as f:
        doc = read_toml(f.read())
    recipe = {section: {**keys, **doc.get(section, {})} for section, keys in DEFAULTS.items()}
    for assignment in overrides:
        key, sep, value = assignment.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or section not in recipe or name not in recipe[section]:
            sys.exit(f"bench-torch: --set {assignment}: expected SECTION.KEY=VALUE with one of "
                     f"{sorted(f'{s}.{k}' for s, keys in DEFAULTS.items() for k in keys)}")
        recipe[section][name] = parse_value(value)
    m, t = recipe["model"], recipe["train"]
    if m["d_model"] % m["n_heads"] or m["n_heads"] % m["n_kv_heads"]:
        sys.exit("bench-torch: d_model must split into n_heads, and n_heads into n_kv_heads groups")
    if t["global_batch"] % t["micro_batch"]:
        sys.exit("bench-torch: train.global_batch must be a multiple of train.micro_batch")
    if t["precision"] not in ("fp32", "bf16"):
        sys.exit(f"bench-torch: train.precision = {t['precision']!r}: this baseline runs fp32 or bf16")
    return recipe


def matmul_params(m):
    """N of the MFU convention: every weight that takes part in a matrix multiply, head included."""
    d, dh = m["d_model"], m["d_model"] // m["n_heads"]
    per_layer = (d * (m["n_heads"] + 2 * m["n_kv_heads"]) * dh  # fused q, k, v
                 + m["n_heads"] * dh * d                         # output projection
                 + d * 2 * m["ffn_hidden"]                       # fused gate and up
                 + m["ffn_hidden"] * d)                          # down
    return m["n_layers"] * per_layer + m["vocab_size"] * d      # the head multiplies even when tied


def flops_per_token(m, seq_len):
    return 6.0 * matmul_params(m) + 6.0 * m["n_layers"] * m["d_model"] * seq_len


def build_model(recipe, call_block, torch, nn, F):
    """The model; call_block(block, x, cos, sin) runs one block (see recompute_wrapper)."""
    m = recipe["model"]
    d, heads, kv_heads = m["d_model"], m["n_heads"], m["n_kv_heads"]
    dh, ffn = d // heads, m["ffn_hidden"]

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            x = x.float()
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m["norm_eps"]) * self.weight

    def rotate(x, cos, sin):  # x (B, heads, S, Dh); cos, sin (S, Dh / 2): rotate-half layout
        x1, x2 = x.chunk(2, dim=-1)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = RMSNorm(), RMSNorm()
            self.qkv = nn.Linear(d, (heads + 2 * kv_heads) * dh, bias=False)
            self.o = nn.Linear(heads * dh, d, bias=False)
            self.gate_up = nn.Linear(d, 2 * ffn, bias=False)
            self.down = nn.Linear(ffn, d, bias=False)

        def forward(self, x, cos, sin):
            B, S, _ = x.shape
            qkv = self.qkv(self.ln1(x)).view(B, S, heads + 2 * kv_heads, dh).transpose(1, 2)
            q, k, v = qkv.split([heads, kv_heads, kv_heads], dim=1)  # (B, heads, S, Dh)
            att = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v,
                                                 is_causal=True, enable_gqa=True)
            x = x + self.o(att.transpose(1, 2).reshape(B, S, heads * dh))
            gate, up = self.gate_up(self.ln2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(gate) * up)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(m["vocab_size"], d)
            self.blocks = nn.ModuleList(Block() for _ in range(m["n_layers"]))
            self.norm = RMSNorm()
            self.head = nn.Linear(d, m["vocab_size"], bias=False)
            if m["tied_embeddings"]:
                self.head.weight = self.embed.weight
            for p in self.parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=m["init_std"])
            inv_freq = m["rope_theta"] ** (-torch.arange(0, dh // 2, dtype=torch.float64) / (dh // 2))
            angle = torch.outer(torch.arange(m["max_seq_len"], dtype=torch.float64), inv_freq)
            self.register_buffer("cos", angle.cos().float(), persistent=False)
            self.register_buffer("sin", angle.sin().float(), persistent=False)

        def forward(self, ids, targets):
            S = ids.shape[1]
            cos, sin = self.cos[:S], self.sin[:S]
            x = self.embed(ids)
            for block in self.blocks:
                x = call_block(block, x, cos, sin)
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return Llama()


def recompute_wrapper(policy, torch):
    """How each block is called under train.recompute: as is, or under activation checkpointing.

    "full" keeps only each block's input; "selective" keeps the outputs of the matrix
    multiplies and of attention and recomputes the cheap ops between them (norms, RoPE,
    SwiGLU), as ustrain's selective policy does."""
    from torch.utils import checkpoint as ckpt
    if policy == "none":
        return lambda block, x, cos, sin: block(x, cos, sin)
    if policy == "full":
        return lambda block, x, cos, sin: ckpt.checkpoint(block, x, cos, sin, use_reentrant=False)
    aten = torch.ops.aten
    keep = {aten.mm.default, aten.addmm.default, aten.bmm.default}
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention"):
        if hasattr(aten, name):
            keep.add(getattr(aten, name).default)

    def policy_fn(ctx, op, *args, **kwargs):
        return ckpt.CheckpointPolicy.MUST_SAVE if op in keep else ckpt.CheckpointPolicy.PREFER_RECOMPUTE

    context = functools.partial(ckpt.create_selective_checkpoint_contexts, policy_fn)
    return lambda block, x, cos, sin: ckpt.checkpoint(block, x, cos, sin, use_reentrant=False,
                                                      context_fn=context)


def write_kernel_profile(path, run_step, torch):
    """One step under torch.profiler; its GPU kernels' calls and total time as CSV."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_step()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        calls, ns = kernels.get(e.name, (0, 0))
        kernels[e.name] = (calls + 1, ns + int(e.time_range.elapsed_us() * 1000))  # a kernel's own span
    with open(path, "w") as f:
        f.write("name,calls,total_ns\n")
        for name, (calls, ns) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
            f.write('"%s",%d,%d\n' % (name.replace('"', "'"), calls, ns))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe")
    parser.add_argument("--steps", type=int, default=10, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")
    parser.add_argument("--no-compile", action="store_true", help="eager mode (no torch.compile)")
    parser.add_argument("--dry-run", action="store_true", help="print the sizes and FLOPs, import no torch")
    parser.add_argument("--profile", metavar="CSV", help="one more step under torch.profiler: its kernels to CSV")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0:
        sys.exit("bench-torch: --steps must be at least 1 and --warmup at least 0")
    recipe = load_recipe(args.recipe, args.overrides)
    m, t, o = recipe["model"], recipe["train"], recipe["optim"]
    seq, micro, accum = t["seq_len"], t["micro_batch"], t["global_batch"] // t["micro_batch"]
    sizes = (f"n_matmul={matmul_params(m)} flops_per_token={flops_per_token(m, seq):.6g} "
             f"tokens_per_step={micro * accum * seq} micro_batch={micro} accum={accum} seq={seq} "
             f"precision={t['precision']} recompute={t['recompute']}")
    if args.dry_run:
        print(f"torch: dry_run=1 {sizes}")
        return 0

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("torch: error=no_cuda_device")
        return 1
    torch.manual_seed(recipe["run"]["seed"])
    device = torch.device("cuda")
    with device:  # parameters are made and initialised on the GPU: 1 B of them take a while on a CPU
        model = build_model(recipe, recompute_wrapper(t["recompute"], torch), torch, nn, F)
    params = list(model.parameters())  # a tied head is listed once
    opt = torch.optim.AdamW(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                            weight_decay=o["weight_decay"], fused=True)
    compiled = model if args.no_compile else torch.compile(model)
    # A few batches of random ids, cycled: speed does not depend on the ids.
    batches = [torch.randint(0, m["vocab_size"], (micro, seq + 1), device=device) for _ in range(4)]

    def step(index):
        for a in range(accum):
            tokens = batches[(index * accum + a) % len(batches)]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=t["precision"] == "bf16"):
                loss = compiled(tokens[:, :-1], tokens[:, 1:]) / accum
            loss.backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, t["grad_clip"], foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    try:
        t0 = time.perf_counter()
        for i in range(args.warmup):
            step(i)
        torch.cuda.synchronize()
        warmup_s = time.perf_counter() - t0
        times = []
        for i in range(args.steps):
            s0 = time.perf_counter()
            loss = step(args.warmup + i)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - s0)
    except torch.cuda.OutOfMemoryError:
        print(f"torch: error=out_of_memory {sizes} peak_mem_gib={torch.cuda.max_memory_allocated() / 2**30:.2f}")
        return 1
    if args.profile:
        write_kernel_profile(args.profile, lambda: step(args.warmup + args.steps), torch)
    step_s = sum(times) / len(times)
    tokens_per_s = micro * accum * seq / step_s
    mfu = tokens_per_s * flops_per_token(m, seq) / PEAK_FLOPS
    peak_mem = torch.cuda.max_memory_allocated() / 2**30
    print(f"torch: tokens/s={tokens_per_s:.0f} mfu={mfu:.4f} peak_mem_gib={peak_mem:.2f} "
          f"peak_tflops={PEAK_FLOPS / 1e12:.0f} step_ms={1e3 * step_s:.1f} step_ms_min={1e3 * min(times):.1f} "
          f"warmup_s={warmup_s:.1f} loss={loss.item() * accum:.4f} compile={'off' if args.no_compile else 'on'} "
          f"{sizes} torch={torch.__version__} device={torch.cuda.get_device_name().replace(' ', '_')}")
    return 0 if math.isfinite(tokens_per_s) else 1


if __name__ == "__main__":
    sys.exit(main())
