// SPDX-License-Identifier: MIT
//
// torch.distributed backend "coll": a c10d::ProcessGroup (PyTorch 1.13's API) whose operations
// are libcoll non-blocking requests. Each call starts its request and returns a Work at once; a
// completion thread per process group waits for the requests in order, copies results where an
// operation needs a staging buffer, and completes the Work and its Future (which DDP's reducer
// waits on). CPU tensors; the unique id travels through the c10d store.
#include <torch/extension.h>
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <coll.h>

#include <condition_variable>
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

coll_redop_t to_op(const c10d::ReduceOp &op)
{
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
    ProcessGroupColl(coll_comm_t *comm, int rank, int size)
        : c10d::ProcessGroup(rank, size), comm_(comm), waiter_([this] { waiter_main(); })
    {
    }

    ~ProcessGroupColl() override
    {
        {
            std::lock_guard<std::mutex> g(m_);
            stop_ = true;
        }
        cv_.notify_all();
        waiter_.join();
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
        return c10::make_intrusive<ProcessGroupColl>(comm, rank, size);
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override
    {
        at::Tensor t = single(tensors, "allreduce");
        return start(c10d::OpType::ALLREDUCE, {t}, [&](coll_request_t **r) {
            return coll_iallreduce(t.data_ptr(), t.data_ptr(), t.numel(), to_dtype(t),
                                   to_op(opts.reduceOp), comm_, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override
    {
        at::Tensor t = single(tensors, "broadcast");
        return start(c10d::OpType::BROADCAST, {t}, [&](coll_request_t **r) {
            return coll_ibroadcast(t.data_ptr(), t.data_ptr(), t.numel(), to_dtype(t),
                                   (int)opts.rootRank, comm_, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override
    {
        at::Tensor t = single(tensors, "reduce");
        return start(c10d::OpType::REDUCE, {t}, [&](coll_request_t **r) {
            return coll_ireduce(t.data_ptr(), t.data_ptr(), t.numel(), to_dtype(t),
                                to_op(opts.reduceOp), (int)opts.rootRank, comm_, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &) override
    {
        at::Tensor in = single(inputs, "allgather");
        TORCH_CHECK(outputs.size() == 1 && (int)outputs[0].size() == getSize(),
                    "coll backend: allgather needs one list of ", getSize(), " output tensors");
        at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
        auto outs = outputs[0];
        return start(
            c10d::OpType::ALLGATHER, outs,
            [&](coll_request_t **r) {
                return coll_iallgather(in.data_ptr(), flat.data_ptr(), in.numel(), to_dtype(in),
                                       comm_, r);
            },
            [outs, flat, n = in.numel()]() mutable {
                for (size_t i = 0; i < outs.size(); i++) {
                    outs[i].view(-1).copy_(flat.narrow(0, (int64_t)i * n, n));
                }
            });
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &) override
    {
        at::Tensor in = contiguous(input, "input"), out = contiguous(output, "output");
        TORCH_CHECK(out.numel() == in.numel() * getSize(),
                    "coll backend: _allgather_base output must hold size x input elements");
        return start(c10d::OpType::_ALLGATHER_BASE, {out}, [&](coll_request_t **r) {
            return coll_iallgather(in.data_ptr(), out.data_ptr(), in.numel(), to_dtype(in),
                                   comm_, r);
        });
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
            parts.push_back(t.reshape(-1));
        }
        at::Tensor flat = at::cat(parts);
        return start(c10d::OpType::REDUCE_SCATTER, {out}, [&](coll_request_t **r) {
            return coll_ireduce_scatter(flat.data_ptr(), out.data_ptr(), out.numel(),
                                        to_dtype(out), to_op(opts.reduceOp), comm_, r);
        }, [flat]() {});
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                        const c10d::ReduceScatterOptions &opts) override
    {
        at::Tensor in = contiguous(input, "input"), out = contiguous(output, "output");
        TORCH_CHECK(in.numel() == out.numel() * getSize(),
                    "coll backend: _reduce_scatter_base input must hold size x output elements");
        return start(c10d::OpType::_REDUCE_SCATTER_BASE, {out}, [&](coll_request_t **r) {
            return coll_ireduce_scatter(in.data_ptr(), out.data_ptr(), out.numel(), to_dtype(out),
                                        to_op(opts.reduceOp), comm_, r);
        });
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
        return start(c10d::OpType::ALLTOALL_BASE, {out}, [&](coll_request_t **r) {
            return coll_ialltoall(in.data_ptr(), out.data_ptr(), in.numel() / getSize(),
                                  to_dtype(in), comm_, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &) override
    {
        TORCH_CHECK((int)outputs.size() == getSize() && (int)inputs.size() == getSize(),
                    "coll backend: alltoall needs ", getSize(), " inputs and outputs");
        std::vector<at::Tensor> parts;
        for (auto &t : inputs) {
            parts.push_back(t.reshape(-1));
        }
        at::Tensor in = at::cat(parts), out = at::empty_like(in);
        int64_t    n  = inputs[0].numel();
        for (auto &t : inputs) {
            TORCH_CHECK(t.numel() == n, "coll backend: alltoall needs tensors of equal size");
        }
        auto outs = outputs;
        return start(
            c10d::OpType::ALLTOALL, outs,
            [&](coll_request_t **r) {
                return coll_ialltoall(in.data_ptr(), out.data_ptr(), n, to_dtype(in), comm_, r);
            },
            [outs, out, in, n]() mutable {
                for (size_t i = 0; i < outs.size(); i++) {
                    outs[i].view(-1).copy_(out.narrow(0, (int64_t)i * n, n));
                }
            });
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        return start(c10d::OpType::BARRIER, {},
                     [&](coll_request_t **r) { return coll_ibarrier(comm_, r); });
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                        int) override
    {
        at::Tensor t = single(tensors, "send");
        return start(c10d::OpType::SEND, {t}, [&](coll_request_t **r) {
            return coll_isend(t.data_ptr(), t.numel(), to_dtype(t), dstRank, comm_, r);
        });
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                        int) override
    {
        at::Tensor t = single(tensors, "recv");
        return start(c10d::OpType::RECV, {t}, [&](coll_request_t **r) {
            return coll_irecv(t.data_ptr(), t.numel(), to_dtype(t), srcRank, comm_, r);
        });
    }

  private:
    struct Pending {
        c10::intrusive_ptr<WorkColl> work;
        coll_request_t              *req;
        std::function<void()>        after;
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

    c10::intrusive_ptr<c10d::Work>
    start(c10d::OpType type, std::vector<at::Tensor> outputs,
          const std::function<coll_result_t(coll_request_t **)> &launch,
          std::function<void()> after = nullptr)
    {
        auto            work = c10::make_intrusive<WorkColl>(getRank(), type, outputs);
        coll_request_t *req  = nullptr;
        check(launch(&req), comm_, "starting the operation");
        {
            std::lock_guard<std::mutex> g(m_);
            queue_.push_back(Pending{work, req, std::move(after)});
        }
        cv_.notify_one();
        return work;
    }

    void waiter_main()
    {
        for (;;) {
            Pending p;
            {
                std::unique_lock<std::mutex> g(m_);
                cv_.wait(g, [this] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) {
                    return;
                }
                p = std::move(queue_.front());
                queue_.pop_front();
            }
            coll_result_t      st = coll_wait(p.req);
            std::exception_ptr e;
            if (st != COLL_OK) {
                e = std::make_exception_ptr(std::runtime_error(
                    std::string("coll backend: ") + coll_comm_last_error(comm_)));
            } else if (p.after) {
                try {
                    p.after();
                } catch (...) {
                    e = std::current_exception();
                }
            }
            p.work->complete(e);
        }
    }

    coll_comm_t            *comm_;
    std::mutex              m_;
    std::condition_variable cv_;
    std::deque<Pending>     queue_;
    bool                    stop_ = false;
    std::thread             waiter_;
};

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "torch.distributed backend 'coll' on libcoll";
    m.def("create_process_group", &ProcessGroupColl::create, py::arg("store"), py::arg("rank"),
          py::arg("size"), py::arg("timeout"));
}
