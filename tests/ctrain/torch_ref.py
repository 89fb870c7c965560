# SPDX-License-Identifier: MIT
# The same GPT as ctrain (train/gpt.c) written in PyTorch: reads ctrain's --dump directory
# (settings, initial weights, batches), trains for the same steps with torch.optim.AdamW,
# the same warm-up/cosine schedule and clip_grad_norm_, and compares the first step's
# gradients and every step's loss with ctrain's. Exit 0 match, 1 mismatch, 77 without torch.
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_ref.py: PyTorch is not installed (Debian: apt-get install python3-torch); skip")
    sys.exit(77)

LOSS_RTOL = 1e-4   # relative, per step
GRAD_RTOL = 1e-4   # max |diff| per tensor relative to the tensor's max |grad|
BLOCK = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb"]


def read_config(d):
    cfg = {}
    with open(os.path.join(d, "config.txt")) as f:
        for line in f:
            k, v = line.split()
            cfg[k] = float(v) if "." in v or "e" in v else int(v)
    return cfg


def shapes(cfg):
    V, T, C = cfg["vocab"], cfg["ctx"], cfg["channels"]
    out = [("wte", (V, C)), ("wpe", (T, C))]
    blk = {"ln1w": (C,), "ln1b": (C,), "qkvw": (3 * C, C), "qkvb": (3 * C,),
           "attprojw": (C, C), "attprojb": (C,), "ln2w": (C,), "ln2b": (C,),
           "fcw": (4 * C, C), "fcb": (4 * C,), "fcprojw": (C, 4 * C), "fcprojb": (C,)}
    for l in range(cfg["layers"]):
        out += [("h%d.%s" % (l, n), blk[n]) for n in BLOCK]
    return out + [("lnfw", (C,)), ("lnfb", (C,))]


def load_f32(path, shp):
    flat = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32)
    out, off = {}, 0
    for name, s in shp:
        n = math.prod(s)
        out[name] = flat[off:off + n].clone().reshape(s)
        off += n
    assert off == flat.numel(), "size mismatch: %d vs %d" % (off, flat.numel())
    return out


def forward(p, cfg, idx, tgt):
    B, T = idx.shape
    C, H = cfg["channels"], cfg["heads"]
    x = p["wte"][idx] + p["wpe"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["layers"]):
        q = lambda n: p["h%d.%s" % (l, n)]
        h = F.layer_norm(x, (C,), q("ln1w"), q("ln1b"), 1e-5)
        qkv = F.linear(h, q("qkvw"), q("qkvb"))
        qq, kk, vv = qkv.split(C, dim=2)
        qq, kk, vv = [t.view(B, T, H, C // H).transpose(1, 2) for t in (qq, kk, vv)]
        att = (qq @ kk.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ vv).transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, q("attprojw"), q("attprojb"))
        h = F.layer_norm(x, (C,), q("ln2w"), q("ln2b"), 1e-5)
        h = F.gelu(F.linear(h, q("fcw"), q("fcb")), approximate="tanh")
        x = x + F.linear(h, q("fcprojw"), q("fcprojb"))
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], 1e-5)
    logits = x @ p["wte"].t()
    return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1))


def lr_at(cfg, step):
    lr, w, n, r = cfg["lr"], cfg["warmup"], cfg["steps"], cfg["min_lr_ratio"]
    if step < w:
        return lr * (step + 1) / w
    frac = (step - w) / (n - w) if n > w else 1.0
    return lr * (r + (1 - r) * 0.5 * (1 + math.cos(math.pi * frac)))


def main(d):
    torch.manual_seed(0)
    cfg = read_config(d)
    shp = shapes(cfg)
    p = load_f32(os.path.join(d, "params.bin"), shp)
    for t in p.values():
        t.requires_grad_(True)
    ref_g = load_f32(os.path.join(d, "grads0.bin"), shp)
    ref = [tuple(map(float, line.split()[1:])) for line in open(os.path.join(d, "losses.txt"))]
    B, T = cfg["batch"], cfg["seqlen"]
    raw = open(os.path.join(d, "batches.bin"), "rb").read()
    opt = torch.optim.AdamW(list(p.values()), lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                            eps=cfg["eps"], weight_decay=cfg["weight_decay"])
    ok = True
    for step in range(len(ref)):
        chunk = raw[step * 2 * B * T:(step + 1) * 2 * B * T]
        idx = torch.tensor(list(chunk[:B * T]), dtype=torch.long).view(B, T)
        tgt = torch.tensor(list(chunk[B * T:]), dtype=torch.long).view(B, T)
        opt.zero_grad()
        loss = forward(p, cfg, idx, tgt)
        loss.backward()
        if step == 0:
            worst = 0.0
            for name, _ in shp:
                g, r = p[name].grad, ref_g[name]
                err = (g - r).abs().max().item() / max(g.abs().max().item(), 1e-12)
                worst = max(worst, err)
                if err > GRAD_RTOL:
                    print("grad %-12s rel err %.3e > %.0e" % (name, err, GRAD_RTOL))
                    ok = False
            print("step 0 gradients: %d tensors, worst relative error %.3e (tolerance %.0e)"
                  % (len(shp), worst, GRAD_RTOL))
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), cfg["clip"]) \
            if cfg["clip"] > 0 else torch.tensor(0.0)
        for gr in opt.param_groups:
            gr["lr"] = lr_at(cfg, step)
        opt.step()
        rel = abs(loss.item() - ref[step][0]) / abs(loss.item())
        flag = "ok" if rel <= LOSS_RTOL else "MISMATCH"
        ok = ok and rel <= LOSS_RTOL
        print("step %2d loss torch %.7f ctrain %.7f rel %.2e | norm torch %.5f ctrain %.5f %s"
              % (step, loss.item(), ref[step][0], rel, norm.item(), ref[step][1], flag))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: torch_ref.py DUMP_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
