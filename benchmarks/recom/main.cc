// recom: NeuMF neural collaborative filtering (He et al. 2017, MLPerf NCF
// sizes: GMF factors 64, MLP 256-256-128-64) on MovieLens ml-20m ratings.csv.
// Every rating is an implicit positive; each positive comes with --negatives
// items drawn uniformly (not checked against the user's ratings, unlike MLPerf's
// exact negatives: cheaper, and the model sees the same batch shapes); each
// epoch visits every rating once, batches built on the pipeline's prefetch
// thread. BCE loss,
// Adam (MLPerf's lr 0.0045, betas 0.25/0.5). Items = user-item pairs.
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/dataset_path.h"
#include "benchmarks/support/torch_runtime.h"
#include "pipeline/formats/ratings.h"
#include "pipeline/loader_report.h"
#include "pipeline/options.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

std::vector<std::int64_t> parse_layers(const std::string& s) {
  std::vector<std::int64_t> out;
  std::stringstream in(s);
  std::string tok;
  while (std::getline(in, tok, ',')) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(tok, &used);
      if (used != tok.size() || v < 1) throw std::invalid_argument(tok);
      out.push_back(v);
    } catch (const std::exception&) {
      throw mlbench::core::UsageError(
          fmt::format("--layers: '{}' is not a positive integer (e.g. 256,256,128,64)", tok));
    }
  }
  if (out.size() < 2 || out[0] % 2 != 0) {
    throw mlbench::core::UsageError("--layers needs at least 2 sizes and an even first size (e.g. 256,256,128,64)");
  }
  return out;
}

// Everything recom's own flags set.
struct RecomOptions {
  std::int64_t factors = 64;
  std::string layers = "256,256,128,64";
  int negatives = 4;
  double lr = 0.0045;
  int prefetch = 2;
};

void add_flags(core::BenchCli& cli, RecomOptions& opt) {
  cli.add_option("--factors", opt.factors, "GMF embedding size")->check(core::integer_in(1, 1 << 16));
  cli.add_option("--layers", opt.layers, "MLP sizes, comma-separated (first = 2 x MLP embedding)");
  cli.add_option("--negatives", opt.negatives, "Negative items per positive")->check(core::integer_in(0, 1000));
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
  pipeline::add_prefetch_flag(cli, opt.prefetch, "default 2; one background thread");
}

// users, items, labels of one batch.
using Batch = std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>;

// positives then their negatives: [users x group], [pos items, random items], labels 1/0.
Batch with_negatives(const torch::Tensor& u, const torch::Tensor& pos, std::int64_t num_items, int negatives) {
  const std::int64_t group = negatives + 1;
  auto neg = torch::randint(num_items, {pos.size(0) * negatives}, torch::kInt64);
  auto all_users = u.repeat({group});
  auto all_items = torch::cat({pos, neg});
  auto labels = torch::cat({torch::ones({pos.size(0)}), torch::zeros({pos.size(0) * negatives})});
  return std::make_tuple(all_users, all_items, labels);
}

// One rating each (none under --synthetic), and where they came from.
struct Ratings {
  torch::Tensor users, items;
  std::string source = "synthetic";
};

// ratings.csv (unless --synthetic); its user and item counts size the model.
Ratings load_ratings(const core::BenchOptions& o, bench::NeuMFOptions& mo) {
  Ratings out;
  if (o.synthetic) return out;
  const auto path = bench::dataset_path(o, "ml20m", "ratings.csv");
  auto r = pipeline::read_ratings(path);
  mo.num_users = r.num_users;
  mo.num_items = r.num_items;
  out.users =
      torch::from_blob(r.users.data(), {static_cast<std::int64_t>(r.users.size())}, torch::kInt32).to(torch::kInt64);
  out.items =
      torch::from_blob(r.items.data(), {static_cast<std::int64_t>(r.items.size())}, torch::kInt32).to(torch::kInt64);
  out.source = (path / "ratings.csv").string();
  return out;
}

// Real data: the positives of an epoch are every rating once, in a fresh
// order (the pipeline's Sampler), with fresh random negatives, gathered on
// the pipeline's prefetch thread. Null under --synthetic.
std::shared_ptr<pipeline::DataLoader<Batch>> batch_loader(const core::BenchOptions& o, const RecomOptions& opt,
                                                          const Ratings& data, std::int64_t positives,
                                                          std::int64_t num_items) {
  if (!data.users.defined()) return nullptr;
  return pipeline::in_memory_loader<Batch>(
      static_cast<std::size_t>(data.users.size(0)), static_cast<std::size_t>(positives), opt.prefetch,
      static_cast<std::uint64_t>(o.seed),
      [users = data.users, items = data.items, num_items,
       negatives = opt.negatives](const std::vector<std::size_t>& idx) {
        std::vector<std::int64_t> rows(idx.begin(), idx.end());
        auto index = torch::from_blob(rows.data(), {static_cast<std::int64_t>(rows.size())}, torch::kInt64);
        return with_negatives(users.index_select(0, index), items.index_select(0, index), num_items, negatives);
      });
}

core::Workload make_workload(const core::BenchOptions& o, const RecomOptions& opt, const torch::Device& device) {
  bench::NeuMFOptions mo;
  mo.mf_dim = opt.factors;
  mo.layers = parse_layers(opt.layers);
  const std::int64_t bs = o.batch_size;
  const std::int64_t group = opt.negatives + 1;
  if (bs < group) throw core::UsageError(fmt::format("--batch-size must be at least --negatives + 1 = {}", group));
  const std::int64_t positives = bs / group;
  const Ratings data = load_ratings(o, mo);
  const std::int64_t num_items = mo.num_items;
  auto batches = batch_loader(o, opt, data, positives, num_items);
  bench::NeuMF model(mo);
  model->to(device);
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(),
                                                        torch::optim::AdamOptions(opt.lr).betas({0.25, 0.5}).eps(1e-8));
  // Synthetic: random ids.
  std::optional<Batch> fixed;
  if (o.synthetic) {
    auto [u, i, l] = with_negatives(torch::randint(mo.num_users, {positives}, torch::kInt64),
                                    torch::randint(num_items, {positives}, torch::kInt64), num_items, opt.negatives);
    fixed = std::make_tuple(u.to(device), i.to(device), l.to(device));
  }
  core::Workload work;
  work.items_per_iteration = static_cast<double>(positives * group);
  work.step = [=](core::Iteration& it) mutable {
    auto batch = fixed ? *fixed : it.wait([&] { return *batches->next(); });
    if (!fixed) {
      batch = it.h2d([&] {
        return std::make_tuple(std::get<0>(batch).to(device, true), std::get<1>(batch).to(device, true),
                               std::get<2>(batch).to(device, true));
      });
    }
    auto loss = it.compute([&] {
      optimizer->zero_grad();
      auto logits = model->forward(std::get<0>(batch), std::get<1>(batch));
      auto l = torch::binary_cross_entropy_with_logits(logits, std::get<2>(batch));
      l.backward();
      optimizer->step();
      return l;
    });
    it.set_loss(bench::deferred_loss(loss));
  };
  const std::int64_t ratings = data.users.defined() ? data.users.size(0) : 0;
  work.finish = [=, params = bench::parameter_count(*model), source = data.source](nlohmann::json& report) {
    report["pipeline"] = pipeline::in_memory_report(batches.get(), source, static_cast<std::size_t>(ratings));
    auto& m = report["metrics"];
    m["parameters"] = params;
    m["users"] = mo.num_users;
    m["items"] = mo.num_items;
    m["positives_per_batch"] = positives;
  };
  return work;
}

int run(const core::BenchCli& cli, const RecomOptions& opt) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    return make_workload(cli.options(), opt, ctx.device);
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("recom", "recom: NeuMF (GMF + MLP) recommender on MovieLens ml-20m",
                     {.batch_size = 2048, .repeat = 25, .number = 100});
  RecomOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return run(cli, opt);
}
