# SPDX-License-Identifier: MIT
"""One rank of the torch.distributed "coll" backend test (started by test_torch.sh with RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Every operation runs on the "coll" group and, where
gloo implements it in this PyTorch, on a gloo group with the same inputs: the results must be
equal (else they are checked against values computed here). Then the same DistributedDataParallel
training from the same initial weights and batches runs on both backends: losses and parameters
must be identical. Prints the per-step time of both as a side note (the bench has the figures)."""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

sys.path.insert(0, os.environ["TORCH_COLL_LIB"])
import torch_coll  # noqa: F401,E402  (registers the backend)

rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
# a deadlock fails within a minute, naming the call (the default is 30 minutes)
dist.init_process_group(backend="coll", rank=rank, world_size=ws, timeout=timedelta(seconds=60))
coll = dist.group.WORLD
gloo = dist.new_group(backend="gloo")
assert dist.get_backend() == "coll", dist.get_backend()
checks = 0


def same(a, b, what):
    global checks
    checks += 1
    if not torch.equal(a, b):
        raise AssertionError(f"rank {rank}: {what}: coll {a.flatten()[:6]} != expected {b.flatten()[:6]}")


def data(dtype, n=1000, salt=0):
    g = torch.Generator().manual_seed(1234 + rank * 17 + salt)
    x = torch.randint(-50, 50, (n,), generator=g)
    return x.to(dtype)


# all_reduce: every operator gloo has, several types, blocking and async
for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.float16):
    for k, op in enumerate((dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN,
                            dist.ReduceOp.PRODUCT)):
        if op == dist.ReduceOp.PRODUCT and dtype == torch.float16:
            continue
        a, b = data(dtype, salt=k), data(dtype, salt=k)
        dist.all_reduce(a, op=op, group=coll)
        dist.all_reduce(b, op=op, group=gloo)
        same(a, b, f"all_reduce {op} {dtype}")
a = data(torch.float32)
work = dist.all_reduce(a, group=coll, async_op=True)
work.wait()
assert work.is_completed()
b = data(torch.float32)
dist.all_reduce(b, group=gloo)
same(a, b, "async all_reduce")
fut = dist.all_reduce(data(torch.float32), group=coll, async_op=True).get_future()
same(fut.wait()[0], b, "all_reduce future")
# AVG (gloo has none): the sum divided by the world size
a = data(torch.float64)
s = data(torch.float64)
dist.all_reduce(a, op=dist.ReduceOp.AVG, group=coll)
dist.all_reduce(s, group=gloo)
same(a, s / ws, "all_reduce AVG")

# broadcast and reduce from every root
for root in range(ws):
    a, b = data(torch.float32, salt=root), data(torch.float32, salt=root)
    dist.broadcast(a, src=root, group=coll)
    dist.broadcast(b, src=root, group=gloo)
    same(a, b, f"broadcast from {root}")
    a, b = data(torch.int64, salt=root), data(torch.int64, salt=root)
    dist.reduce(a, dst=root, group=coll)
    dist.reduce(b, dst=root, group=gloo)
    if rank == root:
        same(a, b, f"reduce to {root}")

# all_gather (list and into one tensor)
a = data(torch.float32, 333)
la = [torch.empty(333) for _ in range(ws)]
lb = [torch.empty(333) for _ in range(ws)]
dist.all_gather(la, a, group=coll)
dist.all_gather(lb, a, group=gloo)
for i in range(ws):
    same(la[i], lb[i], f"all_gather part {i}")
out = torch.empty(333 * ws)
dist.all_gather_into_tensor(out, a, group=coll)
same(out, torch.cat(lb), "all_gather_into_tensor")

# an output of another type than the input: refused, nothing written
out = torch.zeros(333 * ws * 2, dtype=torch.float16)
try:
    dist.all_gather_into_tensor(out[:333 * ws], a, group=coll)
    raise AssertionError(f"rank {rank}: all_gather_into_tensor float32 -> float16 was accepted")
except RuntimeError as e:
    assert "expected one type" in str(e), e
same(out, torch.zeros(333 * ws * 2, dtype=torch.float16), "refused all_gather_into_tensor")
try:
    dist.reduce_scatter_tensor(torch.empty(4), torch.zeros(4 * ws, dtype=torch.float64),
                               group=coll)
    raise AssertionError(f"rank {rank}: reduce_scatter_tensor float64 -> float32 was accepted")
except RuntimeError as e:
    assert "expected one type" in str(e), e

# bool: a sum is a logical or, a product a logical and (as NCCL), results stay 0 or 1
t = torch.tensor([rank == 0, True, False, rank == 1])
dist.all_reduce(t, group=coll)
same(t, torch.tensor([True, True, False, ws > 1]), "all_reduce SUM of bool")
t = torch.tensor([rank == 0, True, False, rank == 1])
dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, group=coll)
same(t, torch.tensor([ws == 1, True, False, False]), "all_reduce PRODUCT of bool")

# reduce_scatter (gloo has none here): each rank's part of the sum
parts = [data(torch.float32, 100, salt=i) for i in range(ws)]
out = torch.empty(100)
dist.reduce_scatter(out, parts, group=coll)
full = torch.cat(parts)
dist.all_reduce(full, group=gloo)
same(out, full[rank * 100:(rank + 1) * 100], "reduce_scatter")
out = torch.empty(100)
dist.reduce_scatter_tensor(out, torch.cat(parts), group=coll)
same(out, full[rank * 100:(rank + 1) * 100], "reduce_scatter_tensor")

# the list forms stage through one buffer kept from call to call: sizes up and down, other types
for k, (dtype, n) in enumerate(((torch.int64, 5000), (torch.float16, 17), (torch.float64, 3000))):
    a = data(dtype, n, salt=10 + k)
    la = [torch.empty(n, dtype=dtype) for _ in range(ws)]
    lb = [torch.empty(n, dtype=dtype) for _ in range(ws)]
    dist.all_gather(la, a, group=coll)
    dist.all_gather(lb, a, group=gloo)
    same(torch.cat(la), torch.cat(lb), f"all_gather of {n} {dtype}")
    parts = [data(dtype, n, salt=20 + k + i) for i in range(ws)]
    out = torch.empty(n, dtype=dtype)
    dist.reduce_scatter(out, parts, group=coll)
    full = torch.cat(parts)
    dist.all_reduce(full, group=gloo)
    same(out, full[rank * n:(rank + 1) * n], f"reduce_scatter of {n} {dtype}")

# all_to_all (single tensor and lists)
a = data(torch.float32, 64 * ws)
oa, ob = torch.empty(64 * ws), torch.empty(64 * ws)
dist.all_to_all_single(oa, a, group=coll)
dist.all_to_all_single(ob, a, group=gloo)
same(oa, ob, "all_to_all_single")
ins = list(a.chunk(ws))
outs = [torch.empty(64) for _ in range(ws)]
dist.all_to_all(outs, ins, group=coll)
same(torch.cat(outs), ob, "all_to_all")

# send/recv around a ring, barrier
t = torch.full((1000,), float(rank))
r = torch.empty(1000)
reqs = [dist.isend(t, (rank + 1) % ws, group=coll), dist.irecv(r, (rank - 1) % ws, group=coll)]
for q in reqs:
    q.wait()
same(r, torch.full((1000,), float((rank - 1) % ws)), "isend/irecv")
dist.barrier(group=coll)

# the direct path (one host): all-reduce, all-gather and reduce-scatter large enough for it;
# test_torch.sh finds its log line for each
big = data(torch.float32, 1 << 18, salt=3)
ref = big.clone()
dist.all_reduce(big, group=coll)
dist.all_reduce(ref, group=gloo)
same(big, ref, "all_reduce of 1 MiB")
part = data(torch.float32, 1 << 16, salt=4)
out = torch.empty((1 << 16) * ws)
dist.all_gather_into_tensor(out, part, group=coll)
lb = [torch.empty(1 << 16) for _ in range(ws)]
dist.all_gather(lb, part, group=gloo)
same(out, torch.cat(lb), "all_gather_into_tensor of 256 KiB per rank")
full = data(torch.float32, (1 << 16) * ws, salt=5)
out = torch.empty(1 << 16)
dist.reduce_scatter_tensor(out, full, group=coll)
dist.all_reduce(full, group=gloo)
same(out, full[rank << 16:(rank + 1) << 16], "reduce_scatter_tensor of 256 KiB per rank")

# operations of both kinds in flight at once, waited for last to first: a send started before
# an all-reduce (which runs as a blocking call) and received after it, as the calls come
src = torch.full((1 << 18,), float(rank) + 0.5)
dst = torch.empty(1 << 18)
bc, bc_ref = data(torch.float32, 1000, salt=6), data(torch.float32, 1000, salt=6)
big, big_ref = data(torch.float32, 1 << 18, salt=7), data(torch.float32, 1 << 18, salt=7)
small, small_ref = data(torch.float64, 3, salt=8), data(torch.float64, 3, salt=8)
works = [dist.isend(src, (rank + 1) % ws, group=coll),
         dist.broadcast(bc, src=ws - 1, group=coll, async_op=True),
         dist.all_reduce(big, group=coll, async_op=True),
         dist.irecv(dst, (rank - 1) % ws, group=coll),
         dist.all_reduce(small, op=dist.ReduceOp.MAX, group=coll, async_op=True)]
for w in reversed(works):
    w.wait()
dist.broadcast(bc_ref, src=ws - 1, group=gloo)
dist.all_reduce(big_ref, group=gloo)
dist.all_reduce(small_ref, op=dist.ReduceOp.MAX, group=gloo)
same(bc, bc_ref, "broadcast in flight with others")
same(big, big_ref, "all_reduce in flight with others")
same(small, small_ref, "small all_reduce in flight with others")
same(dst, torch.full((1 << 18,), float((rank - 1) % ws) + 0.5), "send across an all_reduce")

# a send or receive that waits for a call its peer makes later: the sleeps put it alone in the
# backend's queue before that call comes. (a) an exchange, receive first on both ranks; (b) rank
# 0 receives, then all-reduces; rank 1 all-reduces, then sends; (c) a send before an all-reduce,
# its receive after it; (d) below
nxt, prv = (rank + 1) % ws, (rank - 1) % ws
src, dst = torch.full((1 << 16,), float(rank)), torch.empty(1 << 16)
w = dist.irecv(dst, prv, group=coll)
time.sleep(0.05)
dist.send(src, nxt, group=coll)
w.wait()
same(dst, torch.full((1 << 16,), float(prv)), "exchange, receive first")
big_ref = data(torch.float32, 1 << 18, salt=9)
dist.all_reduce(big_ref, group=gloo)
# (b), and (d): a later call's Work completes while an earlier receive still waits (rank 0
# receives, all-reduces, sends, then waits for its receive; rank 1 all-reduces, receives, sends)
for later_send in (False, True):
    big = data(torch.float32, 1 << 18, salt=9)
    if rank == 0:
        w = dist.irecv(dst, ws - 1, group=coll)
        time.sleep(0 if later_send else 0.05)
        dist.all_reduce(big, group=coll)
        if later_send:
            dist.send(src, ws - 1, group=coll)
        w.wait()
        same(dst, torch.full((1 << 16,), float(ws - 1)), f"receive across an all_reduce ({later_send})")
    else:
        dist.all_reduce(big, group=coll)
        if rank == ws - 1:
            if later_send:
                dist.recv(dst, 0, group=coll)
                same(dst, torch.full((1 << 16,), 0.0), "send to a rank whose receive waits")
            dist.send(src, 0, group=coll)
    same(big, big_ref, f"all_reduce while a receive waits ({later_send})")
w = dist.isend(src, nxt, group=coll)
time.sleep(0.05)
big = data(torch.float32, 1 << 18, salt=9)
dist.all_reduce(big, group=coll)
dist.recv(dst, prv, group=coll)
w.wait()
same(big, big_ref, "all_reduce while a send waits")
same(dst, torch.full((1 << 16,), float(prv)), "send before an all_reduce, received after it")

# bad input: a clear error, not a crash
try:
    dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.BAND, group=coll)
    raise AssertionError("a bitwise AND was accepted")
except RuntimeError as e:
    assert "not supported" in str(e), e
try:
    dist.all_reduce(torch.zeros(4, dtype=torch.complex128).to_sparse(), group=coll)
    raise AssertionError("a sparse tensor was accepted")
except RuntimeError:
    pass


# DDP: the same training on both backends, from the same weights and batches
def train(group, steps=25):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group,
                                                    bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)
    losses, t0 = [], time.perf_counter()
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        y = torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()], (time.perf_counter() - t0) / steps


lc, pc, tc = train(coll)
lg, pg, tg = train(gloo)
assert lc == lg, f"rank {rank}: DDP losses differ: coll {lc[:3]} gloo {lg[:3]}"
for a, b in zip(pc, pg):
    same(a, b, "DDP parameters after 25 steps")
# an error reaches wait() with libcoll's message: the ranks disagree on the count (on a group of
# its own, which it fails; on one host the slots see it at once, across hosts the timeout's
# diagnosis names it)
bad = dist.new_group(backend="coll", timeout=timedelta(seconds=5))
work = dist.all_reduce(torch.ones(8 + rank), group=bad, async_op=True)
try:
    work.wait()
    raise AssertionError("all_reduce calls of different counts were accepted")
except RuntimeError as e:
    # the diagnosis names the mismatch when the ranks' timeouts meet; else the timeout alone
    assert "coll backend" in str(e) and ("mismatch" in str(e) and "8 x f32" in str(e) or
                                         "no progress" in str(e)), e
    checks += 1
dist.destroy_process_group(bad)

if rank == 0:
    print(f"test_torch_backend: {checks} checks passed; DDP 25 steps: loss {lc[0]:.6f} -> "
          f"{lc[-1]:.6f} on both backends; step {tc * 1e3:.2f} ms (coll) vs {tg * 1e3:.2f} ms "
          f"(gloo)", flush=True)
dist.destroy_process_group(gloo)
dist.destroy_process_group()
