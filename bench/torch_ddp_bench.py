# SPDX-License-Identifier: MIT
"""DDP step time on torch.distributed's "coll" backend against gloo, interleaved (coll, gloo,
coll, gloo, ...) so that both see the same machine; one rank per process, started by
torch_ddp_bench.sh. Prints the median step time per backend and the ratio."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.environ["TORCH_COLL_LIB"])
import torch_coll  # noqa: F401,E402

rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
width, depth = int(os.environ.get("WIDTH", "1024")), int(os.environ.get("DEPTH", "4"))
steps, rounds = int(os.environ.get("STEPS", "10")), int(os.environ.get("ROUNDS", "5"))
torch.set_num_threads(1)
dist.init_process_group(backend="coll", rank=rank, world_size=ws)
groups = {"coll": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}


def run(group):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(32, width)
    times = []
    for s in range(steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        if s >= 2:  # warm-up
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


res = {"coll": [], "gloo": []}
for _ in range(rounds):
    for name in ("coll", "gloo"):
        res[name].append(run(groups[name]))
if rank == 0:
    params = depth * (width * width + width)
    c, g = statistics.median(res["coll"]), statistics.median(res["gloo"])
    print(f"DDP, {ws} ranks, {depth} x Linear({width}, {width}) = {params / 1e6:.1f} M fp32 "
          f"parameters ({params * 4 / 2**20:.0f} MiB of gradients), batch 32, 1 thread per rank")
    print(f"median step over {rounds} interleaved rounds of {steps} steps: coll {c * 1e3:.1f} ms, "
          f"gloo {g * 1e3:.1f} ms, gloo/coll {g / c:.2f}")
    print("per round (ms): coll " + " ".join(f"{v * 1e3:.1f}" for v in res["coll"]) +
          "; gloo " + " ".join(f"{v * 1e3:.1f}" for v in res["gloo"]))
dist.destroy_process_group(groups["gloo"])
dist.destroy_process_group()
