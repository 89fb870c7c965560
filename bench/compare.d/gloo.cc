// SPDX-License-Identifier: MIT
// bench/compare.d/gloo.cc -- the Gloo side of bench/compare (Debian's libgloo-dev, TCP over
// loopback, rendezvous in a file store): gloo::allreduce, ReduceScatterHalvingDoubling or
// gloo::allgather of float (sum) over a doubling size sweep, sizes counted as collbench counts
// them. One process per rank; rank 0 prints "coll bytes time_us", the time being its mean over
// the timed calls after a barrier-like warm-up.
// Run: compare_gloo RANK NRANKS STOREDIR allreduce MINB MAXB ITERS  (started once per rank)
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
    if (argc != 8) {
        std::fprintf(stderr, "usage: %s RANK NRANKS STOREDIR allreduce|reduce_scatter|allgather "
                             "MINB MAXB ITERS\n", argv[0]);
        return 2;
    }
    int rank = std::atoi(argv[1]), n = std::atoi(argv[2]), iters = std::atoi(argv[7]);
    std::string coll = argv[4];
    size_t minb = std::strtoull(argv[5], nullptr, 0), maxb = std::strtoull(argv[6], nullptr, 0);
    if (n < 1 || rank < 0 || rank >= n || iters < 1 || minb < 4 || maxb < minb ||
        (coll != "allreduce" && coll != "reduce_scatter" && coll != "allgather")) {
        std::fprintf(stderr, "compare_gloo: bad arguments\n");
        return 2;
    }
    gloo::transport::tcp::attr attr("127.0.0.1");
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(argv[3]);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(store, dev);
    std::vector<float> a(maxb / 4 + 16), b(maxb / 4 + 16);
    uint32_t tag = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
        size_t cnt = bytes / 4, part = cnt / (size_t)n;
        if (coll != "allreduce" && part == 0)
            continue;
        std::vector<int> recv(n, (int)part);
        std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> rs; // set up once per size
        if (coll == "reduce_scatter")
            rs.reset(new gloo::ReduceScatterHalvingDoubling<float>(ctx, {a.data()},
                                                                     (int)(part * n), recv));
        double t0 = 0.0;
        for (int it = -2; it < iters; it++) {
            if (it == 0) {
                gloo::BarrierOptions bo(ctx);
                bo.setTag(++tag);
                gloo::barrier(bo);
                t0 = std::chrono::duration<double>(
                         std::chrono::steady_clock::now().time_since_epoch()).count();
            }
            if (coll == "allreduce") {
                gloo::AllreduceOptions o(ctx);
                o.setInput(a.data(), cnt);
                o.setOutput(b.data(), cnt);
                o.setReduceFunction(static_cast<void (*)(void *, const void *, const void *,
                                                         size_t)>(&gloo::sum<float>));
                o.setTag(++tag);
                gloo::allreduce(o);
            } else if (coll == "allgather") {
                gloo::AllgatherOptions o(ctx);
                o.setInput(a.data(), part);
                o.setOutput(b.data(), part * n);
                o.setTag(++tag);
                gloo::allgather(o);
            } else {
                rs->run();
            }
        }
        double t = std::chrono::duration<double>(
                       std::chrono::steady_clock::now().time_since_epoch()).count() - t0;
        if (rank == 0)
            std::printf("%s %zu %.3f\n", coll.c_str(), coll == "allreduce" ? bytes : part * n * 4,
                        t / iters * 1e6);
        std::fflush(stdout);
    }
    return 0;
}
