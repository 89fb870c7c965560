# SPDX-License-Identifier: MIT
# bench/compare.d/torch_gloo.py -- the torch.distributed side of bench/compare: the gloo backend
# of Debian's python3-torch (TCP over loopback, file rendezvous), or with BACKEND "coll" this
# library's backend (bindings/torch, built into $TORCH_COLL_LIB), all_reduce, reduce_scatter or
# all_gather of float32 (sum) over a doubling size sweep, sizes counted as collbench counts
# them. One process per rank; rank 0 prints "coll bytes time_us" (mean over the timed calls).
# Run: /usr/bin/python3 torch_gloo.py RANK NRANKS INITFILE allreduce MINB MAXB ITERS [BACKEND]
import os
import sys
import time

import torch
import torch.distributed as dist


def main(argv):
    if len(argv) not in (8, 9) or argv[4] not in ("allreduce", "reduce_scatter", "allgather") \
            or (len(argv) == 9 and argv[8] not in ("gloo", "coll")):
        sys.stderr.write("usage: torch_gloo.py RANK NRANKS INITFILE "
                         "allreduce|reduce_scatter|allgather MINB MAXB ITERS [gloo|coll]\n")
        return 2
    rank, n, path, coll = int(argv[1]), int(argv[2]), argv[3], argv[4]
    minb, maxb, iters = int(argv[5]), int(argv[6]), int(argv[7])
    backend = argv[8] if len(argv) == 9 else "gloo"
    if backend == "coll":
        sys.path.insert(0, os.environ["TORCH_COLL_LIB"])
        import torch_coll  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method="file://" + path, rank=rank, world_size=n)
    a = torch.zeros(maxb // 4 + 16)
    bytes_ = minb
    while bytes_ <= maxb:
        cnt = bytes_ // 4
        part = cnt // n
        if coll != "allreduce" and part == 0:
            bytes_ *= 2
            continue
        if coll == "allreduce":
            x = a[:cnt]
            call = lambda: dist.all_reduce(x)
        elif coll == "allgather":
            outs = [torch.empty(part) for _ in range(n)]
            x = a[:part]
            call = lambda: dist.all_gather(outs, x)
        else:
            ins = [a[i * part:(i + 1) * part] for i in range(n)]
            out = torch.empty(part)
            call = lambda: dist.reduce_scatter(out, ins)
        try:
            call()
        except RuntimeError as e:  # the gloo backend lacks reduce_scatter
            if rank == 0:
                sys.stderr.write("torch_gloo: %s %s: %s\n" % (backend, coll,
                                                              str(e).splitlines()[0]))
            return 3
        call()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        t = (time.perf_counter() - t0) / iters
        if rank == 0:
            print("%s %d %.3f" % (coll, bytes_ if coll == "allreduce" else part * n * 4, t * 1e6),
                  flush=True)
        bytes_ *= 2
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
