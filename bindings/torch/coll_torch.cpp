// SPDX-License-Identifier: MIT
//
// torch.distributed backend "coll": a c10d::ProcessGroup (PyTorch 1.13's API) on libcoll. Each
// call checks its arguments, queues the operation and returns a Work at once. One thread per
// process group runs the queue in call order, the same on every rank. Where every rank is on
// this host, all-reduces, reduce-scatters and all-gathers run there as blocking calls, so that
// they take libcoll's single-copy direct path and its small-call slots (which match only
// blocking calls); across hosts, and for every other operation, it starts non-blocking requests,
// which overlap. The requests in flight keep progressing while a blocking call waits for its
// peers. The thread copies results where an operation needs a staging buffer and completes the
// Work and its Future (which DDP's reducer waits on). It does not spin for the next call: on 2
// CPUs with 2 ranks a spinning thread takes the CPU its caller needs. CPU tensors; the unique
// id travels through the c10d store.
#include <torch/extension.h>
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <coll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace {

coll_dtype_t to_dtype(const at::Tensor &t)
{
    switch (t.scalar_type()) {
    case at::kFloat: return COLL_FLOAT32;
    case at::kDouble: return COLL_FLOAT64;
    case at::kHalf: return COLL_FLOAT16;
    case at::kBFloat16: return COLL_BFLOAT16;
    case at::kInt: return COLL_INT32;
    case at::kLong: return COLL_INT64;
    case at::kChar: return COLL_INT8;
    case at::kByte: return COLL_UINT8;
    case at::kBool: return COLL_UINT8;
    default: TORCH_CHECK(false, "coll backend: tensors of type ", t.scalar_type(), " are not supported");
    }
}

// Booleans travel as bytes: a sum is a logical or, a product a logical and (as NCCL maps them),
// so the result stays 0 or 1.
coll_redop_t to_op(const c10d::ReduceOp &op, const at::Tensor &t)
{
    if (t.scalar_type() == at::kBool) {
        TORCH_CHECK(op != c10d::ReduceOp::AVG, "coll backend: AVG is not defined for bool tensors");
        if (op == c10d::ReduceOp::SUM) {
            return COLL_MAX;
        }
        if (op == c10d::ReduceOp::PRODUCT) {
            return COLL_MIN;
        }
    }
    switch (op) {
    case c10d::ReduceOp::SUM: return COLL_SUM;
    case c10d::ReduceOp::PRODUCT: return COLL_PROD;
    case c10d::ReduceOp::MIN: return COLL_MIN;
    case c10d::ReduceOp::MAX: return COLL_MAX;
    case c10d::ReduceOp::AVG: return COLL_AVG;
    default: TORCH_CHECK(false, "coll backend: this reduction operator is not supported");
    }
}

void check_cpu(const at::Tensor &t, const char *what)
{
    TORCH_CHECK(t.device().is_cpu(), "coll backend: ", what, " must be a CPU tensor");
}

class WorkColl : public c10d::Work {
  public:
    WorkColl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
        : c10d::Work(rank, type), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get())))
    {
    }

    void complete(std::exception_ptr e)
    {
        if (e) {
            future_->setError(e);
        } else {
            future_->markCompleted(c10::IValue(outputs_));
        }
        finish(e);
    }

    std::vector<at::Tensor> result() override { return outputs_; }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  private:
    std::vector<at::Tensor>                 outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupColl : public c10d::ProcessGroup {
  public:
    ProcessGroupColl(coll_comm_t *comm, int rank, int size, bool one_host)
        : c10d::ProcessGroup(rank, size), comm_(comm), one_host_(one_host),
          runner_([this] { runner_main(); })
    {
    }

    ~ProcessGroupColl() override
    {
        {
            std::lock_guard<std::mutex> g(m_);
            stop_ = true;
        }
        cv_.notify_all();
        runner_.join();
        coll_comm_destroy(comm_);
    }

    const std::string getBackendName() const override { return "coll"; }

    static c10::intrusive_ptr<c10d::ProcessGroup>
    create(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
           const std::chrono::duration<float> &timeout)
    {
        coll_unique_id_t id;
        if (rank == 0) {
            check(coll_get_unique_id(&id), nullptr, "coll_get_unique_id");
            std::vector<uint8_t> bytes(reinterpret_cast<uint8_t *>(&id),
                                       reinterpret_cast<uint8_t *>(&id) + sizeof(id));
            store->set("coll_unique_id", bytes);
        } else {
            std::vector<uint8_t> bytes = store->get("coll_unique_id");
            TORCH_CHECK(bytes.size() == sizeof(id), "coll backend: bad unique id in the store");
            memcpy(&id, bytes.data(), sizeof(id));
        }
        coll_config_t cfg = COLL_CONFIG_INITIALIZER;
        cfg.timeout_s     = timeout.count();
        coll_comm_t *comm = nullptr;
        check(coll_comm_init_rank_config(&comm, size, id, rank, &cfg), nullptr,
              "coll_comm_init_rank");
        int hosts = 0;
        try {
            check(coll_comm_nhosts(comm, &hosts), comm, "coll_comm_nhosts");
            return c10::make_intrusive<ProcessGroupColl>(comm, rank, size, hosts == 1);
        } catch (...) {
            coll_comm_destroy(comm);
            throw;
        }
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override
    {
        at::Tensor   t  = single(tensors, "allreduce");
        void        *p  = t.data_ptr();
        size_t       n  = t.numel();
        coll_dtype_t dt = to_dtype(t);
        coll_redop_t op = to_op(opts.reduceOp, t);
        coll_comm_t *c  = comm_;
        return start(c10d::OpType::ALLREDUCE, {t}, [t, p, n, dt, op, c](coll_request_t **r) {
            return r == nullptr ? coll_allreduce(p, p, n, dt, op, c)
                                : coll_iallreduce(p, p, n, dt, op, c, r);
        }, nullptr, true);
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override
    {
        at::Tensor   t    = single(tensors, "broadcast");
        void        *p    = t.data_ptr();
        size_t       n    = t.numel();
        coll_dtype_t dt   = to_dtype(t);
        int          root = (int)opts.rootRank;
        coll_comm_t *c    = comm_;
        return start(c10d::OpType::BROADCAST, {t}, [t, p, n, dt, root, c](coll_request_t **r) {
            return coll_ibroadcast(p, p, n, dt, root, c, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override
    {
        at::Tensor   t    = single(tensors, "reduce");
        void        *p    = t.data_ptr();
        size_t       n    = t.numel();
        coll_dtype_t dt   = to_dtype(t);
        coll_redop_t op   = to_op(opts.reduceOp, t);
        int          root = (int)opts.rootRank;
        coll_comm_t *c    = comm_;
        return start(c10d::OpType::REDUCE, {t}, [t, p, n, dt, op, root, c](coll_request_t **r) {
            return coll_ireduce(p, p, n, dt, op, root, c, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &) override
    {
        at::Tensor in = single(inputs, "allgather");
        TORCH_CHECK(outputs.size() == 1 && (int)outputs[0].size() == getSize(),
                    "coll backend: allgather needs one list of ", getSize(), " output tensors");
        for (auto &o : outputs[0]) {
            contiguous(o, "an output");
            TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                        "coll backend: allgather outputs must have the input's size and type");
        }
        size_t       n    = in.numel();
        coll_dtype_t dt   = to_dtype(in);
        coll_comm_t *c    = comm_;
        auto         outs = outputs[0];
        auto flat = std::make_shared<at::Tensor>(); // the runner's staging when blocking
        return start(
            c10d::OpType::ALLGATHER, outs,
            [this, in, outs, flat, n, dt, c](coll_request_t **r) {
                *flat = staging(r, outs.size() * n, in);
                return r == nullptr ? coll_allgather(in.data_ptr(), flat->data_ptr(), n, dt, c)
                                    : coll_iallgather(in.data_ptr(), flat->data_ptr(), n, dt, c, r);
            },
            [outs, flat, n]() mutable {
                for (size_t i = 0; i < outs.size(); i++) {
                    outs[i].view(-1).copy_(flat->narrow(0, (int64_t)(i * n), (int64_t)n));
                }
                flat->reset();
            },
            true);
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &) override
    {
        at::Tensor in = contiguous(input, "input"), out = contiguous(output, "output");
        TORCH_CHECK(out.numel() == in.numel() * getSize(),
                    "coll backend: _allgather_base output must hold size x input elements");
        TORCH_CHECK(out.scalar_type() == in.scalar_type(), "coll backend: _allgather_base output is ",
                    out.scalar_type(), ", input ", in.scalar_type(), ": expected one type");
        size_t       n  = in.numel();
        coll_dtype_t dt = to_dtype(in);
        coll_comm_t *c  = comm_;
        return start(c10d::OpType::_ALLGATHER_BASE, {out}, [in, out, n, dt, c](coll_request_t **r) {
            return r == nullptr ? coll_allgather(in.data_ptr(), out.data_ptr(), n, dt, c)
                                : coll_iallgather(in.data_ptr(), out.data_ptr(), n, dt, c, r);
        }, nullptr, true);
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override
    {
        at::Tensor out = single(outputs, "reduce_scatter");
        TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == getSize(),
                    "coll backend: reduce_scatter needs one list of ", getSize(), " inputs");
        std::vector<at::Tensor> parts;
        for (auto &t : inputs[0]) {
            check_cpu(t, "an input");
            TORCH_CHECK(t.numel() == out.numel() && t.scalar_type() == out.scalar_type(),
                        "coll backend: reduce_scatter inputs must have the output's size and type");
            parts.push_back(t.reshape(-1));
        }
        size_t       n  = out.numel();
        coll_dtype_t dt = to_dtype(out);
        coll_redop_t op = to_op(opts.reduceOp, out);
        coll_comm_t *c  = comm_;
        auto flat = std::make_shared<at::Tensor>(); // kept until the request ends
        return start(c10d::OpType::REDUCE_SCATTER, {out},
                     [this, parts, out, flat, n, dt, op, c](coll_request_t **r) {
                         *flat = staging(r, parts.size() * n, out);
                         for (size_t i = 0; i < parts.size(); i++) {
                             flat->narrow(0, (int64_t)(i * n), (int64_t)n).copy_(parts[i]);
                         }
                         return r == nullptr ? coll_reduce_scatter(flat->data_ptr(),
                                                                   out.data_ptr(), n, dt, op, c)
                                             : coll_ireduce_scatter(flat->data_ptr(),
                                                                    out.data_ptr(), n, dt, op, c, r);
                     },
                     [flat]() { flat->reset(); }, true);
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                        const c10d::ReduceScatterOptions &opts) override
    {
        at::Tensor in = contiguous(input, "input"), out = contiguous(output, "output");
        TORCH_CHECK(in.numel() == out.numel() * getSize(),
                    "coll backend: _reduce_scatter_base input must hold size x output elements");
        TORCH_CHECK(out.scalar_type() == in.scalar_type(), "coll backend: _reduce_scatter_base output is ",
                    out.scalar_type(), ", input ", in.scalar_type(), ": expected one type");
        size_t       n  = out.numel();
        coll_dtype_t dt = to_dtype(out);
        coll_redop_t op = to_op(opts.reduceOp, out);
        coll_comm_t *c  = comm_;
        return start(c10d::OpType::_REDUCE_SCATTER_BASE, {out},
                     [in, out, n, dt, op, c](coll_request_t **r) {
                         return r == nullptr
                                    ? coll_reduce_scatter(in.data_ptr(), out.data_ptr(), n, dt, op, c)
                                    : coll_ireduce_scatter(in.data_ptr(), out.data_ptr(), n, dt,
                                                           op, c, r);
                     },
                     nullptr, true);
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &outSplits,
                                                 std::vector<int64_t> &inSplits,
                                                 const c10d::AllToAllOptions &) override
    {
        TORCH_CHECK(outSplits.empty() && inSplits.empty(),
                    "coll backend: alltoall_base supports equal splits only");
        at::Tensor in = contiguous(input, "input"), out = contiguous(output, "output");
        TORCH_CHECK(in.numel() == out.numel() && in.numel() % getSize() == 0,
                    "coll backend: alltoall_base needs equal sizes divisible by the world size");
        TORCH_CHECK(out.scalar_type() == in.scalar_type(), "coll backend: alltoall_base output is ",
                    out.scalar_type(), ", input ", in.scalar_type(), ": expected one type");
        size_t       n  = in.numel() / getSize();
        coll_dtype_t dt = to_dtype(in);
        coll_comm_t *c  = comm_;
        return start(c10d::OpType::ALLTOALL_BASE, {out}, [in, out, n, dt, c](coll_request_t **r) {
            return coll_ialltoall(in.data_ptr(), out.data_ptr(), n, dt, c, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &) override
    {
        TORCH_CHECK((int)outputs.size() == getSize() && (int)inputs.size() == getSize(),
                    "coll backend: alltoall needs ", getSize(), " inputs and outputs");
        std::vector<at::Tensor> parts;
        int64_t                 n = inputs[0].numel();
        for (auto &t : inputs) {
            check_cpu(t, "an input");
            TORCH_CHECK(t.numel() == n, "coll backend: alltoall needs tensors of equal size");
            parts.push_back(t.reshape(-1));
        }
        for (auto &t : outputs) {
            contiguous(t, "an output");
            TORCH_CHECK(t.numel() == n && t.scalar_type() == inputs[0].scalar_type(),
                        "coll backend: alltoall needs tensors of equal size and type");
        }
        at::Tensor   in = at::cat(parts), out = at::empty_like(in);
        coll_dtype_t dt = to_dtype(in);
        coll_comm_t *c  = comm_;
        auto         outs = outputs;
        return start(
            c10d::OpType::ALLTOALL, outs,
            [in, out, n, dt, c](coll_request_t **r) {
                return coll_ialltoall(in.data_ptr(), out.data_ptr(), (size_t)n, dt, c, r);
            },
            [outs, out, n]() mutable {
                for (size_t i = 0; i < outs.size(); i++) {
                    outs[i].view(-1).copy_(out.narrow(0, (int64_t)i * n, n));
                }
            });
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        coll_comm_t *c = comm_;
        return start(c10d::OpType::BARRIER, {},
                     [c](coll_request_t **r) { return coll_ibarrier(c, r); });
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                        int) override
    {
        return p2p(c10d::OpType::SEND, tensors, dstRank);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                        int) override
    {
        return p2p(c10d::OpType::RECV, tensors, srcRank);
    }

  private:
    // launch(&req) starts a request; launch(nullptr), where blocking is set, runs the blocking
    // call instead.
    using Launch = std::function<coll_result_t(coll_request_t **)>;

    struct Pending {
        c10::intrusive_ptr<WorkColl> work;
        Launch                       launch;
        std::function<void()>        after;    // once it ended well: copies out of staging
        bool                         blocking; // run as a blocking call
        bool                         p2p;      // a send or receive
        coll_request_t              *req = nullptr;
    };

    static void check(coll_result_t st, coll_comm_t *comm, const char *what)
    {
        TORCH_CHECK(st == COLL_OK, "coll backend: ", what, " failed: ",
                    comm != nullptr ? coll_comm_last_error(comm) : coll_last_error());
    }

    static at::Tensor contiguous(const at::Tensor &t, const char *what)
    {
        check_cpu(t, what);
        TORCH_CHECK(t.is_contiguous(), "coll backend: ", what, " must be contiguous");
        return t;
    }

    at::Tensor single(std::vector<at::Tensor> &ts, const char *op)
    {
        TORCH_CHECK(ts.size() == 1, "coll backend: ", op, " takes exactly one tensor per rank");
        return contiguous(ts[0], "the tensor");
    }

    // Queue an operation for the runner. may_block: an all-reduce, reduce-scatter or
    // all-gather, which runs as a blocking call where every rank is on this host (there the
    // direct path and the small-call slots, which match only blocking calls, take it; across
    // hosts the requests of several calls overlap in flight instead).
    c10::intrusive_ptr<c10d::Work> start(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         Launch launch, std::function<void()> after = nullptr,
                                         bool may_block = false)
    {
        auto work = c10::make_intrusive<WorkColl>(getRank(), type, outputs);
        bool p2p  = type == c10d::OpType::SEND || type == c10d::OpType::RECV;
        {
            std::lock_guard<std::mutex> g(m_);
            TORCH_CHECK(!stop_, "coll backend: the process group is being destroyed");
            queue_.push_back(Pending{work, std::move(launch), std::move(after),
                                     may_block && one_host_, p2p});
            queued_.fetch_add(1, std::memory_order_release);
        }
        cv_.notify_one();
        return work;
    }

    c10::intrusive_ptr<c10d::Work> p2p(c10d::OpType type, std::vector<at::Tensor> &tensors,
                                       int peer)
    {
        bool         send = type == c10d::OpType::SEND;
        at::Tensor   t    = single(tensors, send ? "send" : "recv");
        size_t       n    = t.numel();
        coll_dtype_t dt   = to_dtype(t);
        coll_comm_t *c    = comm_;
        return start(type, {t}, [t, n, dt, peer, c, send](coll_request_t **r) {
            return send ? coll_isend(t.data_ptr(), n, dt, peer, c, r)
                        : coll_irecv(t.data_ptr(), n, dt, peer, c, r);
        });
    }

    // count elements of like's type to stage a call through: for a blocking call (r NULL) in the
    // runner's staging buffer, kept from call to call (a fresh buffer of many MiB would fault its
    // pages in at every call; blocking calls use it on the runner, one at a time), for a request
    // in a buffer of its own.
    at::Tensor staging(coll_request_t **r, size_t count, const at::Tensor &like)
    {
        if (r != nullptr) {
            return at::empty({(int64_t)count}, like.options());
        }
        int64_t bytes = (int64_t)(count * like.element_size());
        if (!stage_.defined() || stage_.numel() < bytes) {
            stage_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
        }
        return stage_.narrow(0, 0, bytes).view(like.scalar_type());
    }

    // Complete p's Work: with e, or st's error, or after its copies.
    void finish(Pending &p, coll_result_t st, std::exception_ptr e = nullptr)
    {
        if (!e && st != COLL_OK) {
            e = std::make_exception_ptr(std::runtime_error(
                std::string("coll backend: ") + coll_comm_last_error(comm_)));
        } else if (!e && p.after) {
            try {
                p.after();
            } catch (...) {
                e = std::current_exception();
            }
        }
        p.work->complete(e);
        p.launch = nullptr; // drops the tensors they hold
        p.after  = nullptr;
    }

    // End the requests in flight that are done, in any order (a later call's Work may be what
    // the caller waits for before it makes the call that ends an earlier one). True if any.
    bool reap(std::deque<Pending> &inflight)
    {
        bool any = false;
        for (auto it = inflight.begin(); it != inflight.end();) {
            int           done = 0;
            coll_result_t st   = coll_test(it->req, &done);
            if (done) {
                finish(*it, st);
                it  = inflight.erase(it);
                any = true;
            } else {
                ++it;
            }
        }
        return any;
    }

    // The queue in call order: everything queued so far is started (a blocking call runs to its
    // end; its waits progress the requests in flight); then the requests in flight are ended.
    // With collectives only, the oldest is waited for (coll_wait sleeps on the transports): every
    // rank starts the same collectives in the same order, so none waits for a later call. A send
    // or receive may (an exchange that receives first; a receive posted before a collective on
    // the sender's side): while one is in flight, every request is tested, back to back for
    // kSpinUs after each change, then once per nap (growing to kNapMaxUs), and a new call ends
    // the nap, so that the calls queued meanwhile start. What no order can save: a blocking call
    // waits for its peers' same call, so a send queued behind it on one rank, which another rank
    // must receive before it makes that call, is never started (README, "Use from PyTorch").
    void runner_main()
    {
        at::NoGradGuard     no_grad; // copies into staging must not record autograd history
        std::deque<Pending> inflight;
        double              nap_us = 0.0; // 0: spin first
        for (;;) {
            std::deque<Pending> batch;
            size_t              seen;
            {
                std::unique_lock<std::mutex> g(m_);
                cv_.wait(g, [&] { return stop_ || !queue_.empty() || !inflight.empty(); });
                if (queue_.empty() && inflight.empty()) {
                    return;
                }
                batch.swap(queue_);
                seen = queued_.load(std::memory_order_acquire);
            }
            nap_us = batch.empty() ? nap_us : 0.0;
            for (auto &p : batch) {
                coll_result_t      st = COLL_OK;
                std::exception_ptr e;
                try {
                    st = p.launch(p.blocking ? nullptr : &p.req);
                } catch (...) { /* a staging buffer's allocation or copy */
                    e = std::current_exception();
                }
                if (p.blocking || st != COLL_OK || e) {
                    finish(p, st, e);
                } else {
                    inflight.push_back(std::move(p));
                }
            }
            if (inflight.empty()) {
                continue;
            }
            bool p2p = false;
            for (auto &p : inflight) {
                p2p |= p.p2p;
            }
            if (!p2p) {
                finish(inflight.front(), coll_wait(inflight.front().req));
                inflight.pop_front();
                continue;
            }
            bool got = false;
            if (nap_us == 0.0) { /* back to back after a change, as coll_wait spins first */
                auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinUs);
                while (!(got = reap(inflight)) && queued_.load(std::memory_order_acquire) == seen &&
                       std::chrono::steady_clock::now() < until) {
                    std::this_thread::yield();
                }
            } else {
                got = reap(inflight);
            }
            if (got || queued_.load(std::memory_order_acquire) != seen) {
                nap_us = 0.0;
                continue;
            }
            nap_us = nap_us == 0.0 ? kNapMinUs : nap_us * 2 < kNapMaxUs ? nap_us * 2 : kNapMaxUs;
            std::unique_lock<std::mutex> g(m_); /* stop_ does not end it: nothing new comes */
            cv_.wait_for(g, std::chrono::microseconds((int64_t)nap_us),
                         [&] { return !queue_.empty(); });
        }
    }

    coll_comm_t            *comm_;
    std::mutex              m_;
    std::condition_variable cv_;
    std::deque<Pending>     queue_;
    bool                    stop_ = false;
    at::Tensor              stage_;            // the runner's (staging())
    bool                    one_host_ = false; // every rank on this host (coll_comm_nhosts)
    std::atomic<size_t>     queued_{0};        // calls ever queued (the runner's polls read it)
    static constexpr int    kSpinUs   = 500;  // a send/recv in flight: requests tested back to
    static constexpr double kNapMinUs = 20.0, kNapMaxUs = 250.0; // back, then once per nap
    std::thread             runner_;
};

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "torch.distributed backend 'coll' on libcoll";
    m.def("create_process_group", &ProcessGroupColl::create, py::arg("store"), py::arg("rank"),
          py::arg("size"), py::arg("timeout"));
}
