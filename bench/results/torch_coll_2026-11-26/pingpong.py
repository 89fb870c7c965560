import os, sys, time, statistics
import torch, torch.distributed as dist
sys.path.insert(0, os.environ["TORCH_COLL_LIB"]); import torch_coll
rank = int(os.environ["RANK"]); torch.set_num_threads(1)
dist.init_process_group("coll", rank=rank, world_size=2)
out = []
for n in (2, 1 << 14, 1 << 20, 1 << 24):
    t = torch.ones(n // 4 if n > 4 else 1)
    res = []
    for it in range(22):
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(t, 1); dist.recv(t, 1)
        else:
            dist.recv(t, 0); dist.send(t, 0)
        if it >= 2: res.append(time.perf_counter() - t0)
    out.append(f"{n}B {statistics.median(res)*1e6/2:.1f}us")
if rank == 0: print("ping-pong half round trip:", " ".join(out))
dist.destroy_process_group()
