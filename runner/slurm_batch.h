// mlbench-run --sbatch: the batch script that reruns the same command line with
// --launcher slurm inside a Slurm job, and its submission.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runner.h"

namespace mlbench::runner {

// The variable that hands the batch job a --store URL holding a password (sbatch passes the
// submitter's environment to the job): the script says `--store "$MLBENCH_STORE"`, so
// the password is in no file (docs/reliability.md, "Trust boundaries").
inline constexpr const char* kBatchStoreVariable = "MLBENCH_STORE";

// The script: `opt.args` again without --sbatch, --sbatch-args, --launcher and --outdir,
// then `--launcher slurm --outdir <outdir>`, run from `workdir`, every value in single
// quotes; no #SBATCH directive (batch_identity_options names the job and its output).
// A --store holding a credential becomes `'--store' "$MLBENCH_STORE"`.
std::string batch_script(const Options& opt, const std::string& jobs_file, const std::string& suite,
                         const std::filesystem::path& outdir, const std::filesystem::path& workdir);

// The job's name and Slurm's output file as sbatch arguments (argv, never parsed by a
// shell or by sbatch's #SBATCH reader): --job-name=mlbench-<suite>,
// --output=<outdir>/slurm-%j.out (an outdir with blanks works).
std::vector<std::string> batch_identity_options(const std::string& suite, const std::filesystem::path& outdir);

// sbatch's arguments: opt.sbatch_args split on blanks (default "--nodes=1 --exclusive").
std::vector<std::string> sbatch_options(const Options& opt);

// Writes <outdir>/mlbench.sbatch, submits it with `sbatch --parsable` and prints the job
// id; the exit code (2 with one error line when it cannot).
int submit_batch(const Options& opt, const std::string& jobs_file, const std::string& suite,
                 const std::filesystem::path& outdir);

}  // namespace mlbench::runner
