// A synchronous parameter server over lockstep::rpc, with LibTorch: rank 0 holds an MLP's
// parameters, ranks 1..W train it on Fashion-MNIST, and the result equals, bit for bit, one
// process doing the same. parameter_server.py is the same program in Python.
//
//   lockstep run --standalone --nproc-per-node 3 example_rpc_parameter_server [--steps 30]
//
// Rank 0 ("worker0", the server) serves:
//   get_params()               the parameters of the current step, a list of tensors (sent from
//                              the server's own tensors: to_rpc copies nothing);
//   push_grads(k, loss, grads) the caller's gradients for step k, an async function: it returns
//                              an rpc::Future at once, completed only when all W workers'
//                              gradients of step k are in. Then the server sums them in rank
//                              order, divides by W, applies one plain SGD step and completes every
//                              waiter with the step's loss. No RPC thread waits meanwhile;
//   the object "optimizer"     (rpc::serve): the server's SGD; its method step() says how many
//                              updates it has applied. Workers start at that step, and the first
//                              worker checks at the end that it is --steps.
// Worker w (rank w + 1) loops: get_params, forward and backward on its shard of batch k (rows
// w, w + W, ...), push_grads. Once every worker has shut down, the server saves its weights
// (--out: dict(torch.load(path)) in Python is a dict of name -> tensor), replays the run in this
// one process (the same initial weights, batches, shards, rank-order sum and SGD step) and checks
// that every parameter is torch::equal to what the workers trained. It exits 1 when one differs.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/rpc/rpc.h"
#include "lockstep/torch/data.h"
#include "lockstep/torch/rpc_tensor.h"

namespace {

namespace rpc = lockstep::rpc;
using lockstep::torch::from_rpc;
using lockstep::torch::to_rpc;
using Tensors = std::vector<at::Tensor>;

struct Options {
  int64_t steps = 30;
  int64_t batch = 120;  // samples per step, over all workers
  double lr = 0.1;
  size_t subset = 4096;  // images used (the first ones)
  std::string data = lockstep::torch::kFashionMnistDir;
  std::string out = "parameter_server_weights.pt";
  // The server's shutdown spans the whole training: it serves until every worker is done.
  int64_t timeout_s = 120;
};

Options parse(int argc, char** argv) {
  Options o;
  const char* usage =
      "usage: example_rpc_parameter_server [--steps N] [--batch B] [--lr LR] [--subset N] "
      "[--data DIR] [--out FILE] [--timeout SECONDS]";
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(usage);
    const std::string value = argv[i + 1];
    if (key == "--steps") {
      o.steps = std::stoll(value);
    } else if (key == "--batch") {
      o.batch = std::stoll(value);
    } else if (key == "--lr") {
      o.lr = std::stod(value);
    } else if (key == "--subset") {
      o.subset = std::stoull(value);
    } else if (key == "--data") {
      o.data = value;
    } else if (key == "--out") {
      o.out = value;
    } else if (key == "--timeout") {
      o.timeout_s = std::stoll(value);
    } else {
      throw std::invalid_argument(usage);
    }
  }
  if (o.steps < 1 || o.batch < 1 || o.subset < static_cast<size_t>(o.batch))
    throw std::invalid_argument("--steps and --batch are positive, --subset at least --batch");
  return o;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) throw std::runtime_error(std::string(name) + " is not set: run under `lockstep run`");
  return std::atoi(v);
}

// The 784-64-10 MLP, with the same initial weights in every process.
torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(784, 64), torch::nn::ReLU(),
                               torch::nn::Linear(64, 10));
}

struct Data {
  at::Tensor x;  // [N, 784] float32, normalized (FashionMnist's mean and std)
  at::Tensor y;  // [N] int64
};

Data load_data(const Options& o) {
  lockstep::torch::FashionMnist set({.dir = o.data, .subset = o.subset});
  return {set.images().reshape({-1, 784}), set.targets()};
}

// Worker w's rows of batch `step` (the batches cycle through the data): every W-th row from row w,
// so shards differ by at most one row, and are equal when W divides the batch.
std::pair<at::Tensor, at::Tensor> shard(const Data& d, int64_t step, int64_t batch, int w,
                                        int workers) {
  const int64_t start = step % (d.x.size(0) / batch) * batch;
  auto rows = [&](const at::Tensor& t) {
    return t.slice(0, start, start + batch).slice(0, w, batch, workers);
  };
  return {rows(d.x), rows(d.y)};
}

// (loss, gradients) of `model` with weights `params` on one shard. The workers and the server's
// single-process replay both compute their gradients here, so that the two run the same ops.
std::pair<double, Tensors> shard_gradient(torch::nn::Sequential& model, const Tensors& params,
                                          const std::pair<at::Tensor, at::Tensor>& xy) {
  auto mine = model->parameters();
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(params.at(i));
  }
  model->zero_grad(/*set_to_none=*/true);
  at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(xy.first), xy.second);
  loss.backward();
  Tensors grads;
  for (const auto& p : mine) grads.push_back(p.grad().detach().clone());
  return {loss.item<double>(), grads};
}

// The mean of each parameter's gradients, summed in worker order (floating-point addition is not
// associative: any other order could change the last bits).
Tensors average_in_rank_order(const std::vector<Tensors>& by_worker) {
  Tensors total;
  for (const auto& g : by_worker.at(0)) total.push_back(g.clone());
  for (size_t w = 1; w < by_worker.size(); ++w)
    for (size_t i = 0; i < total.size(); ++i) total[i].add_(by_worker[w].at(i));
  for (auto& t : total) t = t / static_cast<double>(by_worker.size());
  return total;
}

// One plain SGD step, out of place: a get_params reply still on its way keeps its tensors.
Tensors sgd_update(const Tensors& params, const Tensors& grads, double lr) {
  Tensors next;
  for (size_t i = 0; i < params.size(); ++i) next.push_back(params[i] - lr * grads.at(i));
  return next;
}

rpc::Value to_value(const Tensors& tensors) {
  rpc::List list;
  for (const auto& t : tensors) list.emplace_back(to_rpc(t));
  return rpc::Value(std::move(list));
}

Tensors from_value(const rpc::Value& value) {
  Tensors tensors;
  for (const auto& v : value.as_list()) tensors.push_back(from_rpc(v.as_tensor()));
  return tensors;
}

// What get_params, push_grads and the optimizer share; handlers run on several RPC threads.
struct ServerState {
  std::mutex mu;
  Tensors params;
  int64_t steps = 0;  // SGD steps applied
  // The step being gathered: each worker's gradients and loss, and the pushes' futures.
  std::map<int, Tensors> grads;
  std::map<int, double> losses;
  std::vector<rpc::Future> waiters;
  std::vector<double> loss_history;  // the mean loss of each step, as the workers measured it
};

int run_server(const Options& o, int workers, const Data& data) {
  auto model = make_model();
  Tensors initial;
  for (const auto& p : model->parameters()) initial.push_back(p.detach().clone());
  ServerState s;
  s.params = initial;

  rpc::register_function("get_params", [&](const rpc::Call&) {
    std::lock_guard lock(s.mu);
    return to_value(s.params);
  });
  rpc::register_async_function("push_grads", [&](const rpc::Call& c) {
    const int w = c.caller.id - 1;  // the caller's rank names its shard: no argument can lie
    const int64_t step = c.args.at(0).as_int();
    const double loss = c.args.at(1).as_float();
    Tensors grads = from_value(c.args.at(2));  // over the received bytes, no copy
    rpc::Future done = rpc::Future::make();
    std::vector<rpc::Future> ready;
    double mean_loss = 0;
    {
      std::lock_guard lock(s.mu);
      if (step != s.steps)
        throw std::invalid_argument("worker " + std::to_string(w) + " pushed step " +
                                    std::to_string(step) + ", the server is at step " +
                                    std::to_string(s.steps));
      if (w < 0 || w >= workers)
        throw std::invalid_argument("push_grads from " + c.caller.name + ", which is no worker");
      if (s.grads.count(w))
        throw std::invalid_argument("push_grads from " + c.caller.name + " twice in a step");
      s.grads[w] = std::move(grads);
      s.losses[w] = loss;
      s.waiters.push_back(done);
      if (static_cast<int>(s.grads.size()) < workers)
        return done;  // answered once the last worker's gradients are in
      std::vector<Tensors> in_order;
      for (int i = 0; i < workers; ++i) {  // std::map: ascending worker index
        in_order.push_back(s.grads[i]);
        mean_loss += s.losses[i];
      }
      mean_loss /= workers;
      s.params = sgd_update(s.params, average_in_rank_order(in_order), o.lr);
      ++s.steps;
      s.loss_history.push_back(mean_loss);
      ready.swap(s.waiters);
      s.grads.clear();
      s.losses.clear();
    }
    if (step % 5 == 0 || step + 1 == o.steps)
      std::printf("server: step %2lld  loss %.4f\n", static_cast<long long>(step), mean_loss);
    std::fflush(stdout);
    for (const auto& f : ready) f.set_value(rpc::Value(mean_loss));  // outside the lock: sends
    return done;
  });
  rpc::Served optimizer = rpc::serve("optimizer", {{"step", [&](const rpc::Call&) {
                                                      std::lock_guard lock(s.mu);
                                                      return rpc::Value(s.steps);
                                                    }}});
  rpc::init_rpc("worker0");
  // Graceful: serves until every worker has shut down too.
  const rpc::ShutdownReport report = rpc::shutdown(std::chrono::seconds(o.timeout_s));
  // The functions refer to this frame's state: no call may reach them after it.
  optimizer.close();
  rpc::unregister_function("get_params");
  rpc::unregister_function("push_grads");

  // The weights as a tuple of (name, tensor) pairs, in the format of Python's torch.save:
  // dict(torch.load(path)) reads them (a c10::Dict would be tagged with its types, which
  // torch.load's weights_only mode refuses).
  std::vector<c10::IValue> pairs;
  const auto names = model->named_parameters().keys();
  for (size_t i = 0; i < names.size(); ++i)
    pairs.emplace_back(c10::ivalue::Tuple::create({c10::IValue(names[i]), s.params[i]}));
  const std::vector<char> bytes = torch::pickle_save(c10::ivalue::Tuple::create(std::move(pairs)));
  std::ofstream file(o.out, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file.flush()) throw std::runtime_error("cannot write the weights to " + o.out);

  // The same training in this one process: each worker's shard gradient computed in turn, then
  // the same rank-order mean and the same SGD step.
  Tensors params = initial;
  for (int64_t k = 0; k < o.steps; ++k) {
    std::vector<Tensors> grads;
    for (int w = 0; w < workers; ++w)
      grads.push_back(shard_gradient(model, params, shard(data, k, o.batch, w, workers)).second);
    params = sgd_update(params, average_in_rank_order(grads), o.lr);
  }

  bool ok = true;
  auto fail = [&](const std::string& why) {
    std::printf("parameter server: FAILED: %s\n", why.c_str());
    ok = false;
  };
  if (!report.clean())
    fail(std::to_string(report.dead.size()) + " workers died and " +
         std::to_string(report.unfinished.size()) + " did not finish before shutdown");
  if (s.steps != o.steps)
    fail("the server applied " + std::to_string(s.steps) + " steps, not " +
         std::to_string(o.steps));
  bool identical = true;
  double max_diff = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    identical = identical && torch::equal(s.params[i], params[i]);
    max_diff = std::max(max_diff, (s.params[i] - params[i]).abs().max().item<double>());
  }
  if (!identical) {
    char why[120];
    std::snprintf(why, sizeof why, "weights differ from the single-process run (max |diff| %g)",
                  max_diff);
    fail(why);
  }
  if (ok)
    std::printf(
        "parameter server: %lld steps, %d workers, weights identical to the single-process run "
        "(max |diff| %.1f), loss %.4f -> %.4f; weights in %s\n",
        static_cast<long long>(o.steps), workers, max_diff, s.loss_history.front(),
        s.loss_history.back(), o.out.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int run_worker(const Options& o, int rank, int workers, const Data& data) {
  const int w = rank - 1;
  auto model = make_model();  // for its structure: its weights come from the server
  rpc::init_rpc("worker" + std::to_string(rank));
  const rpc::Handle opt = rpc::handle("worker0", "optimizer");
  rpc::Future fut = opt.call_async("step");
  const int64_t first = fut.wait().as_int();  // 0 on a fresh server
  for (int64_t k = first; k < o.steps; ++k) {
    const Tensors params = from_value(rpc::rpc_sync("worker0", "get_params"));
    auto [loss, grads] = shard_gradient(model, params, shard(data, k, o.batch, w, workers));
    rpc::rpc_sync("worker0", "push_grads", {k, loss, to_value(grads)});
  }
  if (w == 0) {
    const int64_t applied = opt.call_async("step").wait().as_int();
    std::printf("worker%d: the server applied %lld SGD steps\n", rank,
                static_cast<long long>(applied));
    std::fflush(stdout);
    if (applied != o.steps)
      throw std::runtime_error("the server applied " + std::to_string(applied) + " steps, not " +
                               std::to_string(o.steps));
  }
  rpc::shutdown(std::chrono::seconds(o.timeout_s));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
    if (world < 2) throw std::invalid_argument("needs at least 2 processes (a server, a worker)");
    // One intra-op thread everywhere: a GEMM's blocking, hence its sums' order and last bits, can
    // depend on the thread count, and the replay on the server must compute what workers did.
    at::set_num_threads(1);
    const Data data = load_data(o);
    const int workers = world - 1;
    return rank == 0 ? run_server(o, workers, data) : run_worker(o, rank, workers, data);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_rpc_parameter_server: %s\n", e.what());
    return 1;
  }
}
