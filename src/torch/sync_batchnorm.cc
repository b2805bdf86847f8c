// SyncBatchNorm (include/lockstep/torch/sync_batchnorm.h): the global statistics, the autograd
// function whose backward all_reduces the gradient sums, and convert_sync_batchnorm.
#include "lockstep/torch/sync_batchnorm.h"

#include <torch/autograd.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockstep/core/error.h"
#include "torch/tensor_views.h"

namespace lockstep::torch {

namespace {

namespace nn = ::torch::nn;
using ::lockstep::detail::concat;
using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

constexpr const char* kWhat = "SyncBatchNorm";

// What backward needs besides tensors, carried in the autograd context as a capsule.
struct Comm : ::torch::CustomClassHolder {
  std::shared_ptr<ProcessGroup> group;
  std::chrono::milliseconds timeout{};
  int64_t num_features = 0;
};

// The dimensions a channel's statistics run over: all but dimension 1.
std::vector<int64_t> reduce_dims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel tensor [C] shaped (1, C, 1, ...) to broadcast against `like`, in its dtype and on
// its device.
at::Tensor per_channel(const at::Tensor& t, const at::Tensor& like) {
  std::vector<int64_t> shape(static_cast<size_t>(like.dim()), 1);
  shape[1] = t.numel();
  return t.to(like.device(), like.scalar_type()).view(shape);
}

// Sums `buffer` (a contiguous CPU tensor) over the group, in place. Errors get a prefix that says
// which SyncBatchNorm step failed and what every rank must agree on.
void all_reduce_sum(const Comm& comm, const at::Tensor& buffer, const char* step) {
  auto context = [&] {
    return concat(kWhat, "(num_features=", comm.num_features, ") ", step, ": the all_reduce of ",
                  buffer.numel(), " per-channel values over group '", comm.group->name(),
                  "' failed. Every rank of the group must run each SyncBatchNorm's training "
                  "forward and backward in the same order, with the same num_features (a model "
                  "that differs between ranks, or a rank that skipped a step, breaks this): ");
  };
  try {
    comm.group
        ->all_reduce(detail::buffer_of(buffer), {.op = ReduceOp::sum, .timeout = comm.timeout})
        ->wait();
  } catch (const MismatchError& e) {
    throw MismatchError(context() + e.what());
  } catch (const TimeoutError& e) {
    throw TimeoutError(context() + e.what());
  } catch (const NetworkError& e) {
    throw NetworkError(context() + e.what());
  }
}

// y = (x - mean) * invstd * weight + bias with the global statistics; backward all_reduces the
// gradient sums ([Backward] in the header). mean, invstd: [C] double CPU tensors; count: the
// number of values per channel over the group. weight and bias: nullopt when !affine (autograd
// refuses undefined tensors as inputs).
class SyncBatchNormFunction : public ::torch::autograd::Function<SyncBatchNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const c10::optional<at::Tensor>& weight_or_none,
                            const c10::optional<at::Tensor>& bias_or_none, const at::Tensor& mean,
                            const at::Tensor& invstd, double count, c10::intrusive_ptr<Comm> comm) {
    const at::Tensor weight = weight_or_none.value_or(at::Tensor());
    const at::Tensor bias = bias_or_none.value_or(at::Tensor());
    at::Tensor scale = weight.defined() ? invstd * weight.to(at::kDouble).cpu() : invstd;
    at::Tensor out = (input - per_channel(mean, input)) * per_channel(scale, input);
    if (bias.defined()) out = out + per_channel(bias, input);
    ctx->save_for_backward({input, weight, mean, invstd});
    ctx->saved_data["count"] = count;
    ctx->saved_data["comm"] = c10::IValue::make_capsule(std::move(comm));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const double count = ctx->saved_data["count"].toDouble();
    const auto capsule = ctx->saved_data["comm"].toCapsule();  // keeps `comm` alive
    const Comm& comm = static_cast<const Comm&>(*capsule);
    const at::Tensor& dy = grad_outputs[0];
    const int64_t channels = mean.numel();
    const std::vector<int64_t> dims = reduce_dims(input);

    // This rank's [sum(dy) (C), sum(dy * (x - mean)) (C)], in double.
    const at::Tensor xmu = input - per_channel(mean, input);
    const at::Tensor sums = at::cat({at::sum(dy, dims, false, at::kDouble),
                                     at::sum(dy * xmu, dims, false, at::kDouble)})
                                .cpu()
                                .contiguous();
    const at::Tensor sum_dy = sums.narrow(0, 0, channels);
    const at::Tensor sum_dy_xmu = sums.narrow(0, channels, channels);

    at::Tensor grad_input, grad_weight, grad_bias;
    // Weight and bias: this rank's part, not reduced (DDP averages them). needs_input_grad counts
    // the tensor inputs only: 1 and 2 are weight and bias when they are defined.
    if (weight.defined() && ctx->needs_input_grad(1))
      grad_weight = (sum_dy_xmu * invstd).to(weight.options());
    if (weight.defined() && ctx->needs_input_grad(2)) grad_bias = sum_dy.to(weight.options());
    if (ctx->needs_input_grad(0)) {
      at::Tensor global = sums.clone();
      if (comm.group->size() > 1) all_reduce_sum(comm, global, "backward");
      const at::Tensor mean_dy = global.narrow(0, 0, channels) / count;
      const at::Tensor mean_dy_xmu = global.narrow(0, channels, channels) / count;
      // grad_input = w * invstd * (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean)))
      const at::Tensor a = weight.defined() ? invstd * weight.to(at::kDouble).cpu() : invstd;
      const at::Tensor b = a * invstd * invstd * mean_dy_xmu;
      grad_input =
          (dy - per_channel(mean_dy, input)) * per_channel(a, input) - xmu * per_channel(b, input);
    }
    return {grad_input,   grad_weight,  grad_bias,   at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The parts of a torch::nn::BatchNorm{1,2,3}d that a SyncBatchNorm takes over.
struct BatchNormView {
  const char* type;
  nn::BatchNormOptions options;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

std::optional<BatchNormView> batchnorm_view(const nn::Module& m) {
  auto take = [](const auto& bn, const char* type) {
    return BatchNormView{type,
                         bn.options,
                         bn.weight,
                         bn.bias,
                         bn.running_mean,
                         bn.running_var,
                         bn.num_batches_tracked};
  };
  if (auto* bn = dynamic_cast<const nn::BatchNorm1dImpl*>(&m)) return take(*bn, "BatchNorm1d");
  if (auto* bn = dynamic_cast<const nn::BatchNorm2dImpl*>(&m)) return take(*bn, "BatchNorm2d");
  if (auto* bn = dynamic_cast<const nn::BatchNorm3dImpl*>(&m)) return take(*bn, "BatchNorm3d");
  return std::nullopt;
}

SyncBatchNormOptions options_of(const BatchNormView& bn,
                                std::shared_ptr<ProcessGroup> process_group,
                                std::chrono::milliseconds timeout) {
  SyncBatchNormOptions options(bn.options.num_features(), std::move(process_group));
  const auto momentum = bn.options.momentum();  // c10::optional in 1.x, std::optional in 2.x
  options.eps(bn.options.eps())
      .momentum(momentum.has_value() ? std::optional<double>(*momentum) : std::nullopt)
      .affine(bn.options.affine())
      .track_running_stats(bn.options.track_running_stats())
      .timeout(timeout);
  return options;
}

BatchNormView checked_view(const nn::Module& m) {
  auto view = batchnorm_view(m);
  LOCKSTEP_ENFORCE(view.has_value(), InvalidArgument, kWhat, ": module ", m.name(),
                   " is not a torch::nn::BatchNorm1d, BatchNorm2d or BatchNorm3d");
  return *view;
}

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(SyncBatchNormOptions options_) : options(std::move(options_)) {
  LOCKSTEP_ENFORCE(options.process_group() != nullptr, InvalidArgument, kWhat,
                   ": no process group (SyncBatchNormOptions(num_features, group))");
  LOCKSTEP_ENFORCE(options.num_features() > 0, InvalidArgument, kWhat, ": num_features is ",
                   options.num_features(), ", expected at least 1");
  reset();
}

SyncBatchNormImpl::SyncBatchNormImpl(const nn::Module& batchnorm,
                                     std::shared_ptr<ProcessGroup> process_group,
                                     std::chrono::milliseconds timeout)
    : options(options_of(checked_view(batchnorm), std::move(process_group), timeout)) {
  LOCKSTEP_ENFORCE(options.process_group() != nullptr, InvalidArgument, kWhat,
                   ": no process group to synchronise ", batchnorm.name(), " over");
  const BatchNormView bn = checked_view(batchnorm);
  register_state(bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked);
}

void SyncBatchNormImpl::register_state(at::Tensor w, at::Tensor b, at::Tensor mean, at::Tensor var,
                                       at::Tensor batches) {
  const bool w_grad = w.defined() && w.requires_grad();
  const bool b_grad = b.defined() && b.requires_grad();
  weight = register_parameter("weight", std::move(w), w_grad);
  bias = register_parameter("bias", std::move(b), b_grad);
  running_mean = register_buffer("running_mean", std::move(mean));
  running_var = register_buffer("running_var", std::move(var));
  num_batches_tracked = register_buffer("num_batches_tracked", std::move(batches));
}

void SyncBatchNormImpl::reset() {
  const int64_t c = options.num_features();
  at::Tensor w, b, mean, var, batches;
  if (options.affine()) {
    w = at::empty({c}).set_requires_grad(true);
    b = at::empty({c}).set_requires_grad(true);
  }
  if (options.track_running_stats()) {
    mean = at::zeros({c});
    var = at::ones({c});
    batches = at::zeros({}, at::kLong);
  }
  register_state(w, b, mean, var, batches);
  reset_parameters();
}

void SyncBatchNormImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  ::torch::NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void SyncBatchNormImpl::reset_parameters() {
  reset_running_stats();
  if (!options.affine()) return;
  nn::init::ones_(weight);
  nn::init::zeros_(bias);
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "lockstep::torch::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=";
  if (options.momentum())
    stream << *options.momentum();
  else
    stream << "None";
  stream << ", affine=" << std::boolalpha << options.affine()
         << ", track_running_stats=" << options.track_running_stats() << ", group='"
         << options.process_group()->name() << "')";
}

at::Tensor SyncBatchNormImpl::forward(const at::Tensor& input) {
  const int64_t channels = options.num_features();
  LOCKSTEP_ENFORCE(input.defined(), InvalidArgument, kWhat, ": undefined input tensor");
  LOCKSTEP_ENFORCE(input.dim() >= 2, InvalidArgument, kWhat, "(num_features=", channels,
                   "): expected an input of shape (N, C, *) with at least 2 dimensions, got a ",
                   input.dim(), "-D input of shape ", input.sizes());
  LOCKSTEP_ENFORCE(input.size(1) == channels, InvalidArgument, kWhat, "(num_features=", channels,
                   "): the input has ", input.size(1), " channels (dimension 1 of shape ",
                   input.sizes(), "), expected ", channels);
  LOCKSTEP_ENFORCE(at::isFloatingType(input.scalar_type()), InvalidArgument, kWhat,
                   ": expected a floating-point input, got ", input.scalar_type());
  LOCKSTEP_ENFORCE(!weight.defined() || weight.scalar_type() == input.scalar_type(),
                   InvalidArgument, kWhat, ": the input's dtype ", input.scalar_type(),
                   " differs from the weight's ", weight.scalar_type(),
                   " (convert the module with ->to(dtype))");
  const double eps = options.eps();
  if (!is_training()) {
    // No communication: the running statistics, or without them this rank's batch (as torch).
    const bool running = running_mean.defined();
    return at::batch_norm(input, weight, bias, running ? running_mean : at::Tensor(),
                          running ? running_var : at::Tensor(), /*training=*/!running,
                          /*momentum=*/0.0, eps, /*cudnn_enabled=*/false);
  }

  auto comm = c10::make_intrusive<Comm>();
  comm->group = options.process_group();
  comm->timeout = options.timeout();
  comm->num_features = channels;
  const std::vector<int64_t> dims = reduce_dims(input);
  at::Tensor stats;  // [sum (C), sum of squares (C), count (1)], double, on the CPU
  {
    ::torch::NoGradGuard no_grad;
    const at::Tensor x = input.detach();
    const int64_t n = x.numel() / channels;
    const at::Tensor sum = at::sum(x, dims, false, at::kDouble);
    // The squares around this rank's mean (in the input's dtype: `shift`), for accuracy:
    // sum(x^2) = sum((x - shift)^2) + 2 shift sum(x) - n shift^2.
    const at::Tensor shift = (sum / std::max<int64_t>(n, 1)).to(x.scalar_type());
    const at::Tensor shift_d = shift.to(at::kDouble);
    const at::Tensor centered =
        at::sum((x - per_channel(shift, x)).square(), dims, false, at::kDouble);
    const at::Tensor sum_sq =
        centered + 2 * shift_d * sum - static_cast<double>(n) * shift_d * shift_d;
    stats = at::cat({sum, sum_sq, at::full({1}, static_cast<double>(n), sum.options())})
                .cpu()
                .contiguous();
  }
  if (comm->group->size() > 1) all_reduce_sum(*comm, stats, "forward");
  const double count = stats[2 * channels].item<double>();
  LOCKSTEP_ENFORCE(count > 1, InvalidArgument, kWhat, "(num_features=", channels,
                   "): expected more than 1 value per channel when training, got ", count,
                   " over the ", comm->group->size(), " rank(s) of group '", comm->group->name(),
                   "' (input shape on this rank: ", input.sizes(), ")");
  const at::Tensor mean = stats.narrow(0, 0, channels) / count;
  const at::Tensor var = (stats.narrow(0, channels, channels) / count - mean * mean).clamp_min(0);
  const at::Tensor invstd = (var + eps).rsqrt();

  if (options.track_running_stats()) {
    ::torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
    const double factor =
        options.momentum() ? *options.momentum() : 1.0 / num_batches_tracked.item<double>();
    const at::Tensor unbiased = var * (count / (count - 1));
    running_mean.mul_(1 - factor).add_(factor * mean.to(running_mean.options()));
    running_var.mul_(1 - factor).add_(factor * unbiased.to(running_var.options()));
  }
  auto maybe = [](const at::Tensor& t) {
    return t.defined() ? c10::optional<at::Tensor>(t) : c10::optional<at::Tensor>();
  };
  return SyncBatchNormFunction::apply(input, maybe(weight), maybe(bias), mean, invstd, count,
                                      std::move(comm));
}

// ---------------------------------------------------------------------------------------------
// convert_sync_batchnorm ([Conversion] in the header)
// ---------------------------------------------------------------------------------------------

namespace {

// A BatchNorm of the tree, with where it is registered and how many references the tree accounts
// for (registrations and container slots).
struct Found {
  std::shared_ptr<nn::Module> module;  // the walk's one reference
  std::string path;                    // the first path it was found at
  // (parent, name) of each registration.
  std::vector<std::pair<nn::Module*, std::string>> sites;
  long known = 0;
};

struct Walk {
  std::vector<Found> found;
  std::unordered_map<const nn::Module*, size_t> index;  // into found
  std::unordered_set<const nn::Module*> visited;
  std::vector<nn::Module*> containers;  // visited Sequential / ModuleList / ModuleDict

  Found* find(const nn::Module* m) {
    auto it = index.find(m);
    return it == index.end() ? nullptr : &found[it->second];
  }

  // Every module a container holds in its own list, whether or not it is a BatchNorm.
  template <class Fn>
  static void for_each_slot(nn::Module& container, Fn&& fn) {
    if (auto* seq = dynamic_cast<nn::SequentialImpl*>(&container)) {
      for (auto& any : *seq) fn(any.ptr().get());
    } else if (auto* list = dynamic_cast<nn::ModuleListImpl*>(&container)) {
      for (auto& m : *list) fn(m.get());
    } else if (auto* dict = dynamic_cast<nn::ModuleDictImpl*>(&container)) {
      for (auto& item : *dict) fn(item.value().get());
    }
  }

  void visit(nn::Module& parent, const std::string& prefix) {
    if (!visited.insert(&parent).second) return;  // a shared submodule: once
    for (const auto& item : parent.named_children()) {
      const std::string path = prefix.empty() ? item.key() : prefix + "." + item.key();
      const std::shared_ptr<nn::Module>& child = item.value();
      if (!batchnorm_view(*child)) {
        visit(*child, path);
        continue;
      }
      if (index.emplace(child.get(), found.size()).second) found.push_back({child, path, {}, 0});
      Found& f = *find(child.get());
      f.sites.emplace_back(&parent, item.key());
      ++f.known;
    }
    bool container = false;
    for_each_slot(parent, [&](const nn::Module* m) {
      container = true;
      if (Found* f = find(m)) ++f->known;
    });
    if (container) containers.push_back(&parent);
  }
};

}  // namespace

std::shared_ptr<nn::Module> convert_sync_batchnorm(std::shared_ptr<nn::Module> module,
                                                   std::shared_ptr<ProcessGroup> process_group,
                                                   std::chrono::milliseconds timeout) {
  LOCKSTEP_ENFORCE(module != nullptr, InvalidArgument, "convert_sync_batchnorm: no module");
  LOCKSTEP_ENFORCE(process_group != nullptr, InvalidArgument,
                   "convert_sync_batchnorm: no process group");
  if (batchnorm_view(*module))
    return std::make_shared<SyncBatchNormImpl>(*module, std::move(process_group), timeout);

  Walk walk;
  walk.visit(*module, "");
  // Now the only references not counted are the walk's own (one each) and outside ones.
  std::vector<std::string> pinned;
  for (const Found& f : walk.found) {
    const long extra = f.module.use_count() - 1 - f.known;
    if (extra > 0)
      pinned.push_back(concat("'", f.path, "' (", checked_view(*f.module).type, ", ", extra,
                              " reference(s) outside the module tree)"));
  }
  if (!pinned.empty()) {
    std::string list;
    for (const auto& p : pinned) list += (list.empty() ? "" : ", ") + p;
    throw InvalidArgument(concat(
        "convert_sync_batchnorm: cannot convert ", list,
        ". A BatchNorm held by a typed member (such as `torch::nn::BatchNorm2d bn;` of a "
        "module) or a copy kept elsewhere would still be called by forward, and LibTorch cannot "
        "redirect such a reference. Build the model with lockstep::torch::SyncBatchNorm directly "
        "(SyncBatchNorm(SyncBatchNormOptions(num_features, group))), or keep BatchNorms only in "
        "the registry (register_module without a member) and in Sequential / ModuleList / "
        "ModuleDict. Nothing was converted"));
  }

  std::unordered_map<const nn::Module*, std::shared_ptr<SyncBatchNormImpl>> replacement;
  for (const Found& f : walk.found) {
    auto sync = std::make_shared<SyncBatchNormImpl>(*f.module, process_group, timeout);
    for (const auto& [parent, name] : f.sites)
      parent->replace_module(name, std::static_pointer_cast<nn::Module>(sync));
    replacement.emplace(f.module.get(), std::move(sync));
  }
  for (nn::Module* c : walk.containers) {
    if (auto* seq = dynamic_cast<nn::SequentialImpl*>(c)) {
      for (auto& any : *seq) {
        auto it = replacement.find(any.ptr().get());
        if (it != replacement.end()) any = nn::AnyModule(it->second);
      }
    } else if (auto* list = dynamic_cast<nn::ModuleListImpl*>(c)) {
      for (auto& m : *list) {
        auto it = replacement.find(m.get());
        if (it != replacement.end()) m = it->second;
      }
    } else if (auto* dict = dynamic_cast<nn::ModuleDictImpl*>(c)) {
      std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> updates;
      for (const auto& [key, m] : dict->items()) {
        auto it = replacement.find(m.get());
        if (it != replacement.end()) updates.emplace_back(key, it->second);
      }
      dict->update(updates);
    }
  }
  for (const Found& f : walk.found) {
    LOCKSTEP_ENFORCE(f.module.use_count() == 1, Error,
                     "convert_sync_batchnorm: internal error: ", f.path, " is still referenced ",
                     f.module.use_count() - 1, " time(s) after the conversion");
  }
  return module;
}

}  // namespace lockstep::torch
