#include "options.h"

#include <functional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace train_fashion_mnist {
namespace {

struct OptionSpec {
  const char* name;
  const char* value_name;  // nullptr: a flag without value
  const char* help;
  std::function<void(Options&, const std::string&)> apply;
};

template <class T>
T parse_number(const std::string& option, const std::string& text, T min) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value >= static_cast<double>(min)) return static_cast<T>(value);
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + option + ": '" + text +
                              "' is not a number >= " + std::to_string(min));
}

// Returns true for `yes`, false for `no`.
bool parse_switch(const std::string& option, const std::string& text, const std::string& yes,
                  const std::string& no) {
  if (text == yes || text == no) return text == yes;
  throw std::invalid_argument("--" + option + ": '" + text + "' is neither " + yes + " nor " + no);
}

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> kSpecs = {
      {"epochs", "N", "epochs to train (default 3)",
       [](Options& o, const std::string& v) { o.epochs = parse_number<int>("epochs", v, 1); }},
      {"batch-size", "N", "samples per rank per step (default 64)",
       [](Options& o, const std::string& v) {
         o.batch_size = parse_number<size_t>("batch-size", v, 1);
       }},
      {"lr", "X", "SGD learning rate, the peak of the schedule (default 0.1)",
       [](Options& o, const std::string& v) { o.lr = parse_number<double>("lr", v, 0); }},
      {"momentum", "X", "SGD momentum (default 0.9)",
       [](Options& o, const std::string& v) {
         o.momentum = parse_number<double>("momentum", v, 0);
       }},
      {"nesterov", "on|off", "Nesterov momentum (default on)",
       [](Options& o, const std::string& v) {
         o.nesterov = parse_switch("nesterov", v, "on", "off");
       }},
      {"schedule", "cosine|constant",
       "learning rate: cosine decay from --lr to 0 over all epochs, or constant (default cosine)",
       [](Options& o, const std::string& v) {
         o.cosine = parse_switch("schedule", v, "cosine", "constant");
       }},
      {"data-dir", "DIR", "Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)",
       [](Options& o, const std::string& v) { o.data_dir = v; }},
      {"checkpoint-dir", "DIR", "where each epoch's checkpoint goes (default ./checkpoints)",
       [](Options& o, const std::string& v) { o.checkpoint_dir = v; }},
      {"checkpoint-every", "N",
       "also checkpoint every N steps within an epoch, so that --resume continues from the "
       "middle of it (default 0: at the end of each epoch only)",
       [](Options& o, const std::string& v) {
         o.checkpoint_every = parse_number<size_t>("checkpoint-every", v, 1);
       }},
      {"save-weights", "FILE",
       "at the end, rank 0 writes every parameter and buffer to FILE: name, dtype, shape and the "
       "raw bytes (to compare runs bit for bit)",
       [](Options& o, const std::string& v) { o.save_weights = v; }},
      {"resume", nullptr, "continue from the checkpoint in --checkpoint-dir, if there is one",
       [](Options& o, const std::string&) { o.resume = true; }},
      {"subset", "N", "train on the first N training samples only (default: all 60000)",
       [](Options& o, const std::string& v) { o.subset = parse_number<size_t>("subset", v, 1); }},
      {"max-steps", "N", "stop each epoch after N steps (benchmarks; default: whole epochs)",
       [](Options& o, const std::string& v) {
         o.max_steps = parse_number<size_t>("max-steps", v, 1);
       }},
      {"threads", "N", "intra-op threads per rank (default 1)",
       [](Options& o, const std::string& v) { o.threads = parse_number<int>("threads", v, 1); }},
      {"seed", "N", "seed of the initial weights and of the shuffle (default 0)",
       [](Options& o, const std::string& v) { o.seed = parse_number<uint64_t>("seed", v, 0); }},
      {"backend", "NAME", "auto (shared memory on one host), shm or tcp (default auto)",
       [](Options& o, const std::string& v) { o.backend = v; }},
      {"zero", "0|1|2",
       "0: every rank keeps the whole optimizer; 1: optimizer state sharded (ZeRO-1); 2: "
       "gradients sharded too (ZeRO-2) (default 0)",
       [](Options& o, const std::string& v) {
         o.zero = parse_number<int>("zero", v, 0);
         if (o.zero > 2) throw std::invalid_argument("--zero: '" + v + "' is not 0, 1 or 2");
       }},
      {"uneven", nullptr,
       "uneven shards: rank r trains on a contiguous share of weight r + 1 of each epoch's "
       "order, the ranks that finish first shadowing the others (Join)",
       [](Options& o, const std::string&) { o.uneven = true; }},
      {"help", nullptr, "print this help and exit",
       [](Options& o, const std::string&) { o.help = true; }},
  };
  return kSpecs;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!arg.starts_with("--")) throw std::invalid_argument("unexpected argument '" + arg + "'");
    arg = arg.substr(2);
    std::string value;
    const size_t eq = arg.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs())
      if (arg == s.name) spec = &s;
    if (spec == nullptr) throw std::invalid_argument("unknown option --" + arg + " (see --help)");
    if (spec->value_name != nullptr && !inline_value) {
      if (i + 1 >= argc) throw std::invalid_argument("--" + arg + " needs a value");
      value = argv[++i];
    }
    spec->apply(options, value);
  }
  return options;
}

std::string usage_text() {
  std::string text =
      "usage: lockstep run --nproc-per-node N -- train_fashion_mnist [options]\n\n"
      "Trains a small CNN on Fashion-MNIST with DistributedDataParallel, one shard per rank.\n\n"
      "options:\n";
  for (const auto& s : specs()) {
    std::string left =
        std::string("  --") + s.name + (s.value_name ? std::string(" ") + s.value_name : "");
    left.resize(std::max<size_t>(left.size() + 1, 30), ' ');
    text += left + s.help + "\n";
  }
  return text;
}

}  // namespace train_fashion_mnist
