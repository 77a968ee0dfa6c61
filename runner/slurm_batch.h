// mlbench-run --sbatch: the batch script that reruns the same command line with
// --launcher slurm inside a Slurm job, and its submission.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runner.h"

namespace mlbench::runner {

// The script: `opt.args` again without --sbatch, --sbatch-args, --launcher and --outdir,
// then `--launcher slurm --outdir <outdir>`, run from `workdir`; Slurm's own output
// goes to <outdir>/slurm-<jobid>.out.
std::string batch_script(const Options& opt, const std::string& jobs_file, const std::string& suite,
                         const std::filesystem::path& outdir, const std::filesystem::path& workdir);

// sbatch's arguments: opt.sbatch_args split on blanks (default "--nodes=1 --exclusive").
std::vector<std::string> sbatch_options(const Options& opt);

// Writes <outdir>/mlbench.sbatch, submits it with `sbatch --parsable` and prints the job
// id; the exit code (2 with one error line when it cannot).
int submit_batch(const Options& opt, const std::string& jobs_file, const std::string& suite,
                 const std::filesystem::path& outdir);

}  // namespace mlbench::runner
