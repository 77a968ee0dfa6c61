// translator: GNMT-style sequence-to-sequence (Wu et al. 2016, the layout of
// MLPerf's PyTorch GNMT): a bidirectional-then-stacked LSTM encoder, an LSTM
// decoder with normalised Bahdanau attention, shared embeddings, residual
// connections, label-smoothed cross entropy (0.1), Adam. Data: a parallel
// corpus (<prefix>.<src> and <prefix>.<tgt>, one whitespace-tokenised sentence
// per line, WMT16 en-de layout). Each epoch visits every sentence pair once in
// a fresh order; a batch is cut at --max-length and padded to the longest in
// the batch, on the pipeline's prefetch thread. Items = sentence pairs.
#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/dataset_path.h"
#include "benchmarks/support/torch_runtime.h"
#include "pipeline/formats/text_corpus.h"
#include "pipeline/loader_report.h"
#include "pipeline/options.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

struct Batch {
  torch::Tensor src, src_lengths, tgt_in, tgt_out;
  std::int64_t tokens = 0;  // target tokens, </s> included
};

// Pads sentences i in `pick` into [B, T] tensors: src; tgt_in = <s> + tgt; tgt_out = tgt + </s>.
Batch collate(const mlbench::pipeline::ParallelCorpus& c, const std::vector<std::int64_t>& pick, std::int64_t max_len) {
  using namespace mlbench::pipeline;  // kPad, kBos, kEos
  const auto b = static_cast<std::int64_t>(pick.size());
  std::int64_t ts = 1, tt = 1;
  for (auto i : pick) {
    ts = std::max<std::int64_t>(ts, std::min<std::int64_t>(max_len, static_cast<std::int64_t>(c.source[i].size())));
    tt = std::max<std::int64_t>(tt, std::min<std::int64_t>(max_len, static_cast<std::int64_t>(c.target[i].size())) + 1);
  }
  Batch out;
  out.src = torch::full({b, ts}, kPad, torch::kInt64);
  out.src_lengths = torch::empty({b}, torch::kInt64);
  out.tgt_in = torch::full({b, tt}, kPad, torch::kInt64);
  out.tgt_out = torch::full({b, tt}, kPad, torch::kInt64);
  auto s = out.src.accessor<std::int64_t, 2>();
  auto sl = out.src_lengths.accessor<std::int64_t, 1>();
  auto ti = out.tgt_in.accessor<std::int64_t, 2>();
  auto to = out.tgt_out.accessor<std::int64_t, 2>();
  for (std::int64_t r = 0; r < b; ++r) {
    const auto& src = c.source[static_cast<std::size_t>(pick[r])];
    const auto& tgt = c.target[static_cast<std::size_t>(pick[r])];
    const auto ls = std::min<std::int64_t>(max_len, static_cast<std::int64_t>(src.size()));
    const auto lt = std::min<std::int64_t>(max_len, static_cast<std::int64_t>(tgt.size()));
    for (std::int64_t t = 0; t < ls; ++t) s[r][t] = src[t];
    sl[r] = ls;
    ti[r][0] = kBos;
    for (std::int64_t t = 0; t < lt; ++t) {
      ti[r][t + 1] = tgt[t];
      to[r][t] = tgt[t];
    }
    to[r][lt] = kEos;
    out.tokens += lt + 1;
  }
  return out;
}

// --synthetic: one batch of random ids, every sentence --max-length long, on the device.
Batch synthetic_batch(std::int64_t bs, std::int64_t max_length, std::int64_t vocab, const torch::Device& device) {
  Batch b;
  b.src = torch::randint(4, vocab, {bs, max_length}, torch::kInt64).to(device);
  b.src_lengths = torch::full({bs}, max_length, torch::kInt64).to(device);
  b.tgt_in = torch::randint(4, vocab, {bs, max_length}, torch::kInt64).to(device);
  b.tgt_out = torch::randint(4, vocab, {bs, max_length}, torch::kInt64).to(device);
  b.tokens = bs * max_length;
  return b;
}

// Everything translator's own flags set.
struct TranslatorOptions {
  std::int64_t hidden = 1024, layers = 0, vocab_size = 32000, max_length = 50;
  double dropout = 0.2, smoothing = 0.1, lr = 2e-3;
  int prefetch = 2;
  pipeline::ParallelCorpusOptions corpus;
};

void add_flags(core::BenchCli& cli, TranslatorOptions& opt) {
  cli.add_option("--hidden-size", opt.hidden, "LSTM width (GNMT: 1024)")->check(core::integer_in(2, 1 << 16));
  cli.add_option("--num-layers", opt.layers, "Encoder and decoder layers; 0 = 4 (GNMT) on CUDA, 2 on CPU")
      ->check(core::integer_in(0, 64));
  cli.add_option("--vocab-size", opt.vocab_size, "Shared vocabulary cap (most frequent words)")
      ->check(core::integer_in(8, 1 << 22));
  cli.add_option("--max-length", opt.max_length, "Sentences are cut at this many tokens")
      ->check(core::integer_in(1, 10000));
  cli.add_option("--dropout", opt.dropout, "Dropout")->check(core::number_in(0.0, 0.99));
  cli.add_option("--smoothing", opt.smoothing, "Label smoothing")->check(core::number_in(0.0, 0.99));
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
  pipeline::add_prefetch_flag(cli, opt.prefetch, "default 2; one background thread");
  cli.add_option("--src-lang", opt.corpus.source_lang, "Source file suffix");
  cli.add_option("--tgt-lang", opt.corpus.target_lang, "Target file suffix");
  cli.add_option("--prefix", opt.corpus.prefix, "File prefix (<prefix>.<lang>)");
  cli.add_option("--max-pairs", opt.corpus.max_pairs, "Read at most this many sentence pairs (0 = all)")
      ->check(core::integer_in(0, 1LL << 40));
}

// The sentence pairs (none under --synthetic) and where they came from.
struct CorpusData {
  std::shared_ptr<pipeline::ParallelCorpus> corpus = std::make_shared<pipeline::ParallelCorpus>();
  std::string source = "synthetic";
};

// The model's sizes; reads the corpus (unless --synthetic), whose vocabulary sets mo.vocab.
CorpusData read_data(const core::BenchOptions& o, const TranslatorOptions& opt, const torch::Device& device,
                     bench::GnmtOptions& mo) {
  mo.hidden = opt.hidden;
  mo.num_layers = opt.layers > 0 ? opt.layers : (device.is_cuda() ? 4 : 2);
  if (mo.num_layers < 2) throw core::UsageError("--num-layers must be at least 2 (or 0 for the default)");
  mo.dropout = opt.dropout;
  pipeline::ParallelCorpusOptions co = opt.corpus;
  co.vocab_size = opt.vocab_size;
  CorpusData data;
  if (o.synthetic) {
    mo.vocab = opt.vocab_size;
  } else {
    const auto dir = bench::dataset_path(o, "wmt16", co.prefix + "." + co.source_lang);
    *data.corpus = pipeline::read_parallel_corpus(dir, co);
    mo.vocab = data.corpus->vocab.size();
    data.source = (dir / (co.prefix + "." + co.source_lang)).string();
  }
  return data;
}

// The report's pipeline block (stops the loader) and metrics.
void report_run(nlohmann::json& report, pipeline::DataLoader<Batch>* batches, const CorpusData& data,
                const bench::GnmtOptions& mo, std::int64_t params, std::int64_t tokens, std::int64_t bs) {
  const auto n_pairs = static_cast<std::size_t>(data.corpus->source.size());
  report["pipeline"] = pipeline::in_memory_report(batches, data.source, n_pairs);
  if (batches) {
    report["pipeline"]["skipped_empty_pairs"] = data.corpus->skipped_empty;
    report["pipeline"]["unknown_tokens"] = data.corpus->unknown_tokens;
  }
  auto& m = report["metrics"];
  m["parameters"] = params;
  m["vocabulary"] = mo.vocab;
  m["num_layers"] = mo.num_layers;
  m["hidden_size"] = mo.hidden;
  const double iterations = report.value("iterations", 0.0);
  m["target_tokens_per_item"] =
      iterations > 0 ? static_cast<double>(tokens) / (iterations * static_cast<double>(bs)) : 0.0;
}

core::Workload make_workload(const core::BenchOptions& o, const TranslatorOptions& opt,
                             const bench::TorchContext& ctx) {
  bench::GnmtOptions mo;
  const CorpusData data = read_data(o, opt, ctx.device, mo);
  bench::Gnmt model(mo);
  model->to(ctx.device);
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(opt.lr));
  const std::int64_t bs = o.batch_size, max_length = opt.max_length;
  const auto n_pairs = static_cast<std::int64_t>(data.corpus->source.size());
  // Every pair once per epoch in a fresh order (the pipeline's Sampler),
  // collated on the pipeline's prefetch thread.
  std::shared_ptr<pipeline::DataLoader<Batch>> batches;
  if (!o.synthetic) {
    batches = pipeline::in_memory_loader<Batch>(
        static_cast<std::size_t>(n_pairs), static_cast<std::size_t>(bs), opt.prefetch,
        static_cast<std::uint64_t>(o.seed), [corpus = data.corpus, max_length](const std::vector<std::size_t>& idx) {
          return collate(*corpus, std::vector<std::int64_t>(idx.begin(), idx.end()), max_length);
        });
  }
  std::optional<Batch> fixed;
  if (o.synthetic) fixed = synthetic_batch(bs, max_length, mo.vocab, ctx.device);
  auto tokens = std::make_shared<std::int64_t>(0);
  core::Workload work;
  work.items_per_iteration = static_cast<double>(bs);
  work.step = [=, smoothing = opt.smoothing, device = ctx.device](core::Iteration& it) mutable {
    Batch b = fixed ? *fixed : it.wait([&] { return *batches->next(); });
    if (!fixed) {
      it.h2d([&] {
        b.src = b.src.to(device, true);
        b.src_lengths = b.src_lengths.to(device, true);
        b.tgt_in = b.tgt_in.to(device, true);
        b.tgt_out = b.tgt_out.to(device, true);
      });
    }
    *tokens += b.tokens;
    auto loss = it.compute([&] {
      optimizer->zero_grad();
      auto logits = model->forward(b.src, b.src_lengths, b.tgt_in);
      auto l = bench::label_smoothed_loss(logits, b.tgt_out, smoothing, pipeline::kPad);
      l.backward();
      optimizer->step();
      return l;
    });
    it.set_loss(bench::deferred_loss(loss));
  };
  work.finish = [=, params = bench::parameter_count(*model)](nlohmann::json& report) {
    report_run(report, batches.get(), data, mo, params, *tokens, bs);
  };
  return work;
}

int run(const core::BenchCli& cli, const TranslatorOptions& opt) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH,
                              [&](const bench::TorchContext& ctx) { return make_workload(cli.options(), opt, ctx); });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("translator",
                     "translator: GNMT-style LSTM seq2seq with attention on a parallel corpus (WMT16 en-de)",
                     {.batch_size = 64, .repeat = 15, .number = 10});
  TranslatorOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return run(cli, opt);
}
