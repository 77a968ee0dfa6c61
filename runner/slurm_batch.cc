// The --sbatch script and its submission (see slurm_batch.h).
#include "slurm_batch.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "core/credentials.h"
#include "core/environment.h"
#include "core/process.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

namespace {

std::string quote(const std::string& a) {
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

namespace {
bool store_holds_a_credential(const Options& opt) {
  return !opt.store.empty() && core::mask_credentials(opt.store) != opt.store;
}
}  // namespace

std::string batch_script(const Options& opt, const std::string& jobs_file, const std::string& suite,
                         const fs::path& outdir, const fs::path& workdir) {
  // A --store URL with a password is never written into the script: the job reads it from
  // its environment, which sbatch hands it (submit_batch sets kBatchStoreVariable).
  const bool store_from_environment = store_holds_a_credential(opt);
  std::string line = quote(opt.self);
  for (std::size_t i = 0; i < opt.args.size(); ++i) {
    const std::string& a = opt.args[i];
    if (a == "--sbatch-args" || a == "--launcher" || a == "--outdir" || (store_from_environment && a == "--store")) {
      ++i;  // and its value
      continue;
    }
    if (a == "--sbatch" || a.rfind("--sbatch-args=", 0) == 0 || a.rfind("--launcher=", 0) == 0 ||
        a.rfind("--outdir=", 0) == 0 || (store_from_environment && a.rfind("--store=", 0) == 0)) {
      continue;
    }
    line += " " + quote(a);
  }
  if (store_from_environment) line += fmt::format(" '--store' \"${}\"", kBatchStoreVariable);
  line += " --launcher slurm --outdir " + quote(outdir.string());
  // No value of the user's outside single quotes: a newline in the suite or the jobs file's
  // name once ended a comment or an #SBATCH line and ran the rest as a command. The job's
  // name and output go to sbatch as arguments (batch_identity_options), not as directives.
  (void)jobs_file;
  (void)suite;
  return fmt::format(
      "#!/bin/bash\n"
      "# Written by mlbench-run --sbatch: this command line's jobs as job steps of this batch job (docs/runner.md).\n"
      "cd {} || exit 2\n"
      "exec {}\n",
      quote(workdir.string()), line);
}

std::vector<std::string> batch_identity_options(const std::string& suite, const fs::path& outdir) {
  return {"--job-name=mlbench-" + suite, "--output=" + (outdir / "slurm-%j.out").string()};
}

std::vector<std::string> sbatch_options(const Options& opt) {
  std::vector<std::string> args;
  std::istringstream in(opt.sbatch_args.empty() ? "--nodes=1 --exclusive" : opt.sbatch_args);
  for (std::string a; in >> a;) args.push_back(a);
  return args;
}

int submit_batch(const Options& opt, const std::string& jobs_file, const std::string& suite, const fs::path& outdir) {
  const fs::path script = outdir / "mlbench.sbatch";
  try {
    fs::create_directories(outdir);
    std::ofstream out(script);
    out << batch_script(opt, jobs_file, suite, outdir, fs::current_path());
    if (!out.flush()) throw std::runtime_error("cannot write " + script.string());
  } catch (const std::exception& e) {
    std::cerr << "mlbench-run: error: --sbatch: " << e.what() << std::endl;
    return 2;
  }
  std::string sbatch;
  std::istringstream path(core::getenv_or("PATH", ""));
  for (std::string dir; sbatch.empty() && std::getline(path, dir, ':');) {
    if (!dir.empty() && access((fs::path(dir) / "sbatch").c_str(), X_OK) == 0)
      sbatch = (fs::path(dir) / "sbatch").string();
  }
  if (sbatch.empty()) {
    std::cerr << "mlbench-run: error: --sbatch: 'sbatch' not found on PATH (install slurm-client); the script is "
              << script.string() << std::endl;
    return 2;
  }
  core::ProcessSpec spec;
  spec.executable = sbatch;
  spec.args = {"--parsable"};
  for (const std::string& a : batch_identity_options(suite, outdir)) spec.args.push_back(a);
  for (const std::string& a : sbatch_options(opt)) spec.args.push_back(a);  // the user's own win
  spec.args.push_back(script.string());
  if (store_holds_a_credential(opt)) {
    spec.env = core::current_environment();
    (*spec.env)[kBatchStoreVariable] = opt.store;
  }
  spec.output = core::Output::Capture;
  core::CommandResult r;
  try {
    r = core::run_captured(spec);
  } catch (const core::ProcessError& e) {
    std::cerr << "mlbench-run: error: --sbatch: " << e.what() << std::endl;
    return 2;
  }
  std::string text = r.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const std::string last = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  if (!r.status.exited || r.status.code != 0) {
    std::cerr << "mlbench-run: error: --sbatch: sbatch failed: " << last << std::endl;
    return 2;
  }
  std::cout << "mlbench-run: submitted batch job " << last << " (script " << script.string() << "; results in "
            << outdir.string() << ")" << std::endl;
  return 0;
}

}  // namespace mlbench::runner
