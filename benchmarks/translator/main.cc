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

}  // namespace

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("translator", "translator: GNMT-style LSTM seq2seq with attention on a parallel corpus (WMT16 en-de)",
                     {.batch_size = 64, .repeat = 15, .number = 10});
  std::int64_t hidden = 1024, layers = 0, vocab_size = 32000, max_length = 50;
  double dropout = 0.2, smoothing = 0.1, lr = 2e-3;
  int prefetch = 2;
  pipeline::ParallelCorpusOptions co;
  cli.add_option("--hidden-size", hidden, "LSTM width (GNMT: 1024)")->check(core::integer_in(2, 1 << 16));
  cli.add_option("--num-layers", layers, "Encoder and decoder layers; 0 = 4 (GNMT) on CUDA, 2 on CPU")
      ->check(core::integer_in(0, 64));
  cli.add_option("--vocab-size", vocab_size, "Shared vocabulary cap (most frequent words)")
      ->check(core::integer_in(8, 1 << 22));
  cli.add_option("--max-length", max_length, "Sentences are cut at this many tokens")
      ->check(core::integer_in(1, 10000));
  cli.add_option("--dropout", dropout, "Dropout")->check(core::number_in(0.0, 0.99));
  cli.add_option("--smoothing", smoothing, "Label smoothing")->check(core::number_in(0.0, 0.99));
  cli.add_option("--lr", lr, "Adam learning rate")->check(core::number_above(0));
  pipeline::add_prefetch_flag(cli, prefetch, "default 2; one background thread");
  cli.add_option("--src-lang", co.source_lang, "Source file suffix");
  cli.add_option("--tgt-lang", co.target_lang, "Target file suffix");
  cli.add_option("--prefix", co.prefix, "File prefix (<prefix>.<lang>)");
  cli.add_option("--max-pairs", co.max_pairs, "Read at most this many sentence pairs (0 = all)")
      ->check(core::integer_in(0, 1LL << 40));
  if (auto rc = cli.parse(argc, argv)) return *rc;

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const auto& o = cli.options();
    bench::GnmtOptions mo;
    mo.hidden = hidden;
    mo.num_layers = layers > 0 ? layers : (ctx.device.is_cuda() ? 4 : 2);
    if (mo.num_layers < 2) throw core::UsageError("--num-layers must be at least 2 (or 0 for the default)");
    mo.dropout = dropout;
    co.vocab_size = vocab_size;
    auto corpus = std::make_shared<pipeline::ParallelCorpus>();
    std::string source = "synthetic";
    if (o.synthetic) {
      mo.vocab = vocab_size;
    } else {
      const auto dir = bench::dataset_path(o, "wmt16", co.prefix + "." + co.source_lang);
      *corpus = pipeline::read_parallel_corpus(dir, co);
      mo.vocab = corpus->vocab.size();
      source = (dir / (co.prefix + "." + co.source_lang)).string();
    }
    bench::Gnmt model(mo);
    model->to(ctx.device);
    auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));
    const std::int64_t bs = o.batch_size;
    const auto n_pairs = static_cast<std::int64_t>(corpus->source.size());
    // Every pair once per epoch in a fresh order (the pipeline's Sampler),
    // collated on the pipeline's prefetch thread.
    std::shared_ptr<pipeline::DataLoader<Batch>> batches;
    if (!o.synthetic) {
      batches = pipeline::in_memory_loader<Batch>(
          static_cast<std::size_t>(n_pairs), static_cast<std::size_t>(bs), prefetch, static_cast<std::uint64_t>(o.seed),
          [=](const std::vector<std::size_t>& idx) {
            return collate(*corpus, std::vector<std::int64_t>(idx.begin(), idx.end()), max_length);
          });
    }
    std::optional<Batch> fixed;
    if (o.synthetic) {
      Batch b;
      b.src = torch::randint(4, mo.vocab, {bs, max_length}, torch::kInt64).to(ctx.device);
      b.src_lengths = torch::full({bs}, max_length, torch::kInt64).to(ctx.device);
      b.tgt_in = torch::randint(4, mo.vocab, {bs, max_length}, torch::kInt64).to(ctx.device);
      b.tgt_out = torch::randint(4, mo.vocab, {bs, max_length}, torch::kInt64).to(ctx.device);
      b.tokens = bs * max_length;
      fixed = b;
    }
    auto tokens = std::make_shared<std::int64_t>(0);
    core::Workload work;
    work.items_per_iteration = static_cast<double>(bs);
    work.step = [=, device = ctx.device](core::Iteration& it) mutable {
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
    const auto params = bench::parameter_count(*model);
    work.finish = [=](nlohmann::json& report) {
      report["pipeline"] = pipeline::in_memory_report(batches.get(), source, static_cast<std::size_t>(n_pairs));
      if (batches) {
        report["pipeline"]["skipped_empty_pairs"] = corpus->skipped_empty;
        report["pipeline"]["unknown_tokens"] = corpus->unknown_tokens;
      }
      auto& m = report["metrics"];
      m["parameters"] = params;
      m["vocabulary"] = mo.vocab;
      m["num_layers"] = mo.num_layers;
      m["hidden_size"] = mo.hidden;
      const double iterations = report.value("iterations", 0.0);
      m["target_tokens_per_item"] = iterations > 0 ? static_cast<double>(*tokens) / (iterations * static_cast<double>(bs)) : 0.0;
    };
    return work;
  });
}
