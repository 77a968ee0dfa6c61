// The coordinated-prep what-if (stall/coordinated_model.h): numbers in, numbers out.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "stall/coordinated_model.h"

namespace mlbench::stall {
namespace {

CoordinatedJobs prep_only(int jobs) {
  CoordinatedJobs in;
  in.jobs = jobs;
  in.cores = 2;
  in.prep_cpu_s = 0.01;  // 100 samples/s per CPU
  in.workers = 1;
  return in;
}

TEST(CoordinatedModel, PrepBoundJobsGainKTimesUpToTheCpus) {
  const CoordinatedPrediction two = predict_coordinated(prep_only(2));
  EXPECT_DOUBLE_EQ(two.alone, 100);          // one worker
  EXPECT_DOUBLE_EQ(two.uncoordinated, 100);  // 2 CPUs / (2 jobs x 10 ms)
  EXPECT_DOUBLE_EQ(two.coordinated, 200);    // each sample prepped once: 2 CPUs / 10 ms
  EXPECT_DOUBLE_EQ(two.gain, 2);
  const CoordinatedPrediction four = predict_coordinated(prep_only(4));
  EXPECT_DOUBLE_EQ(four.uncoordinated, 50);
  EXPECT_DOUBLE_EQ(four.coordinated, 200);
  EXPECT_EQ(four.bound_uncoordinated, "cpu");
  EXPECT_EQ(four.bound_coordinated, "cpu");
  EXPECT_DOUBLE_EQ(four.gain, 4);
}

TEST(CoordinatedModel, CopiesAndHostComputeCostEveryJob) {
  CoordinatedJobs in = prep_only(2);
  in.copy_cpu_s = 0.002;
  in.host_compute_cpu_s = 0.003;
  const CoordinatedPrediction p = predict_coordinated(in);
  EXPECT_DOUBLE_EQ(p.uncoordinated, 2 / (2 * (0.01 + 0.003)));
  EXPECT_DOUBLE_EQ(p.coordinated, 2 / (0.01 + 2 * (0.003 + 0.002)));
  EXPECT_DOUBLE_EQ(p.alone, 1 / 0.01);  // its one worker, not the CPUs (2 / 13 ms)
}

TEST(CoordinatedModel, ADeviceBoundJobGainsNothing) {
  CoordinatedJobs in = prep_only(4);
  in.cores = 16;
  in.workers = 8;
  in.device_rate = 150;
  const CoordinatedPrediction p = predict_coordinated(in);
  EXPECT_DOUBLE_EQ(p.uncoordinated, 150);
  EXPECT_DOUBLE_EQ(p.coordinated, 150);
  EXPECT_EQ(p.bound_coordinated, "device");
  EXPECT_DOUBLE_EQ(p.gain, 1);
}

TEST(CoordinatedModel, SharedFetchIsReadOncePerGroup) {
  CoordinatedJobs in = prep_only(2);
  in.cores = 64;
  in.workers = 64;
  in.fetch_rate = 100;
  const CoordinatedPrediction p = predict_coordinated(in);
  EXPECT_DOUBLE_EQ(p.uncoordinated, 50);
  EXPECT_EQ(p.bound_uncoordinated, "fetch");
  EXPECT_DOUBLE_EQ(p.coordinated, 100);
}

TEST(CoordinatedModel, WorkersCapTheGroupsPrep) {
  CoordinatedJobs in = prep_only(2);
  in.cores = 8;
  const CoordinatedPrediction p = predict_coordinated(in);
  EXPECT_DOUBLE_EQ(p.coordinated, 200);  // 2 jobs x 1 worker x 100/s
  EXPECT_EQ(p.bound_coordinated, "workers");
}

TEST(CoordinatedModel, OneJobIsItsOwnGroup) {
  const CoordinatedPrediction p = predict_coordinated(prep_only(1));
  EXPECT_DOUBLE_EQ(p.uncoordinated, p.coordinated);
  EXPECT_DOUBLE_EQ(p.alone, p.uncoordinated);
}

TEST(CoordinatedModel, BadInputsThrow) {
  CoordinatedJobs in = prep_only(0);
  EXPECT_THROW(predict_coordinated(in), std::invalid_argument);
  in = prep_only(2);
  in.cores = 0;
  EXPECT_THROW(predict_coordinated(in), std::invalid_argument);
  in = prep_only(2);
  in.prep_cpu_s = -1;
  EXPECT_THROW(predict_coordinated(in), std::invalid_argument);
  in = CoordinatedJobs{};  // no cost, no ceiling
  EXPECT_THROW(predict_coordinated(in), std::invalid_argument);
}

TEST(CoordinatedModel, InputsFromTheAnalyzersRates) {
  // On a CPU: P(1) = 50/s is 20 ms per sample, of which compute is 2 cores / G = 200/s: 10 ms.
  CoordinatedJobs in = coordinated_inputs(2, 50, 80, 2, 200, false, 3 * 32 * 32 * 4, 1.2288e9, 1);
  EXPECT_DOUBLE_EQ(in.cores, 2);
  EXPECT_NEAR(in.host_compute_cpu_s, 0.01, 1e-12);
  EXPECT_NEAR(in.prep_cpu_s, 0.01, 1e-12);
  EXPECT_NEAR(in.copy_cpu_s, 1e-5, 1e-12);
  EXPECT_EQ(in.workers, 1);
  // Compute on one thread (--cpu-cores 1): 1 / G of CPU per sample, not cores / G.
  in = coordinated_inputs(2, 50, 80, 2, 200, false, 0, 0, 1, 1);
  EXPECT_NEAR(in.host_compute_cpu_s, 0.005, 1e-12);
  EXPECT_NEAR(in.prep_cpu_s, 0.015, 1e-12);
  // On a device: compute costs the host nothing; without a cpus-1 run, P over its prep CPUs.
  in = coordinated_inputs(8, 0, 400, 4, 1000, true, 0, 0, 4);
  EXPECT_DOUBLE_EQ(in.host_compute_cpu_s, 0);
  EXPECT_DOUBLE_EQ(in.prep_cpu_s, 4.0 / 400);
  EXPECT_DOUBLE_EQ(in.copy_cpu_s, 0);
  EXPECT_DOUBLE_EQ(in.device_rate, 1000);
  const nlohmann::json j = coordinated_whatif_json(in, {2, 4});
  ASSERT_EQ(j["predictions"].size(), 2u);
  EXPECT_EQ(j["predictions"][1]["jobs"], 4);
  EXPECT_GT(j["predictions"][1]["gain"].get<double>(), 1.0);
  EXPECT_EQ(j["prep_cpu_from"], "P");
}

TEST(CoordinatedModel, PrepIsWhatItsStagesTookAndTheRestIsPaidByEveryJob) {
  // A convnet on one CPU each (measured rates): P(1) = 158.2/s is 6.32 ms a sample; compute
  // on one thread 1 / G = 4.13 ms leaves 2.19 ms by the difference, but the prep stages took 0.72
  // ms. So p = 0.72 ms (shared when coordinated) and h = 5.60 ms (every job), not 2.19 and 4.13.
  const double p1 = 158.2, G = 242.4, stages = 0.72e-3, per_sample = 1 / p1;
  CoordinatedJobs in = coordinated_inputs(2, p1, 204.3, 1, G, false, 0, 0, 1, 1, stages);
  EXPECT_EQ(in.prep_from, "stages");
  EXPECT_NEAR(in.prep_cpu_s, stages, 1e-12);
  EXPECT_NEAR(in.host_compute_cpu_s, per_sample - stages, 1e-12);
  in.jobs = 2;
  const CoordinatedPrediction two = predict_coordinated(in);
  EXPECT_NEAR(two.uncoordinated, 2 / (2 * per_sample), 1e-9) << "plain jobs: a whole sample's CPU each, as before";
  EXPECT_NEAR(two.coordinated, 2 / (stages + 2 * (per_sample - stages)), 1e-9);
  // By the difference the gain was 2 / (2.19 + 2 x 4.13) ms = 191/s, x1.21 (measured x0.98).
  const CoordinatedJobs by_difference = coordinated_inputs(2, p1, 204.3, 1, G, false, 0, 0, 1, 1);
  EXPECT_EQ(by_difference.prep_from, "cpus-1");
  EXPECT_NEAR(by_difference.host_compute_cpu_s, 1 / G, 1e-12);
  // Stages slower than the difference (a worker that waited for its CPU inside a stage): the
  // difference stands.
  const CoordinatedJobs slow = coordinated_inputs(2, p1, 204.3, 1, G, false, 0, 0, 1, 1, 3e-3);
  EXPECT_EQ(slow.prep_from, "cpus-1");
  EXPECT_NEAR(slow.prep_cpu_s, per_sample - 1 / G, 1e-12);
  // On a device every CPU cost is prep: the stages change nothing.
  const CoordinatedJobs device = coordinated_inputs(2, p1, 204.3, 1, G, true, 0, 0, 1, 1, stages);
  EXPECT_NEAR(device.prep_cpu_s, per_sample, 1e-12);
  EXPECT_EQ(device.prep_from, "cpus-1");
}

TEST(CoordinatedModel, JobsComputingAtOnceOnACpuPayWhatKSyntheticJobsPaidBeyondOne) {
  // A convnet on one CPU each of 2 (measured rates): a sample 5.5 ms on one CPU, its prep
  // stages 0.7 ms; two synthetic jobs at once paid 0.4 ms a sample more each than one alone.
  const double p1 = 1 / 5.5e-3, stages = 0.7e-3, extra = 0.4e-3;
  const CoordinatedJobs base = coordinated_inputs(2, p1, 210, 1, 260, false, 0, 0, 1, 1, stages);
  const double h = base.host_compute_cpu_s;
  JobsSharing sharing;
  sharing.step_cpu_extra_s = {{2, extra}};
  const CoordinatedJobs two = for_jobs(base, 2, sharing);
  EXPECT_DOUBLE_EQ(two.step_cpu_extra_s, extra);
  const CoordinatedPrediction p = predict_coordinated(two);
  // Every job pays it, plain or coordinated; one job alone does not.
  EXPECT_NEAR(p.uncoordinated, 2 / (2 * (stages + h + extra)), 1e-9);
  EXPECT_NEAR(p.coordinated, 2 / (stages + 2 * (h + extra)), 1e-9);
  const CoordinatedPrediction unmeasured = predict_coordinated(for_jobs(base, 2, {}));
  EXPECT_DOUBLE_EQ(p.alone, unmeasured.alone);
  EXPECT_LT(p.uncoordinated, unmeasured.uncoordinated);
  // 4 and 8 jobs on the 2 CPUs were not measured (K x 1 CPU > 2): they take the 2 jobs' extra,
  // the CPUs being as busy; one job takes none.
  EXPECT_DOUBLE_EQ(for_jobs(base, 4, sharing).step_cpu_extra_s, extra);
  EXPECT_DOUBLE_EQ(for_jobs(base, 1, sharing).step_cpu_extra_s, 0);
  sharing.step_cpu_extra_s[4] = 2 * extra;
  EXPECT_DOUBLE_EQ(for_jobs(base, 8, sharing).step_cpu_extra_s, 2 * extra) << "the largest K measured below 8";
  EXPECT_DOUBLE_EQ(for_jobs(base, 2, sharing).step_cpu_extra_s, extra);
  // Noise that made K jobs at once cheaper than one: no extra, not a discount.
  EXPECT_DOUBLE_EQ(for_jobs(base, 2, JobsSharing{{}, {{2, -1e-4}}}).step_cpu_extra_s, 0);
  CoordinatedJobs bad = two;
  bad.step_cpu_extra_s = -1e-4;
  EXPECT_THROW(predict_coordinated(bad), std::invalid_argument);
  const nlohmann::json j = coordinated_whatif_json(base, {2, 4, 8}, JobsSharing{{}, {{2, extra}}});
  EXPECT_NEAR(j["predictions"][0]["step_cpu_extra_us"].get<double>(), 400, 1e-9);
  EXPECT_EQ(j["predictions"][0]["step_cpu_extra_from"], "synthetic-x2");
  EXPECT_EQ(j["predictions"][2]["step_cpu_extra_from"], "synthetic-x2");
  const nlohmann::json none = coordinated_whatif_json(base, {2});
  EXPECT_TRUE(none["predictions"][0]["step_cpu_extra_from"].is_null());
  EXPECT_DOUBLE_EQ(none["predictions"][0]["step_cpu_extra_us"].get<double>(), 0);
}

TEST(CoordinatedModel, KSyntheticJobsAreMeasuredOnACpuWhereEachHasItsCpus) {
  EXPECT_EQ(shared_cpu_jobs(2, 1, kCoordinatedJobs), std::vector<int>({2}));
  EXPECT_EQ(shared_cpu_jobs(16, 2, kCoordinatedJobs), std::vector<int>({2, 4, 8}));
  EXPECT_EQ(shared_cpu_jobs(16, 4, kCoordinatedJobs), std::vector<int>({2, 4}));
  EXPECT_TRUE(shared_cpu_jobs(2, 2, kCoordinatedJobs).empty()) << "2 jobs of 2 CPUs do not fit 2";
  EXPECT_TRUE(shared_cpu_jobs(8, 0, kCoordinatedJobs).empty());
  EXPECT_TRUE(shared_cpu_jobs(8, 1, {1}).empty()) << "one job is the synthetic run itself";
}

TEST(CoordinatedModel, JobsOnOneGpuShareItAndEachPaysItsHostCpu) {
  // One GPU, G = 40,000/s for one job alone; a sample's CPU on one CPU 1 / P(1) = 1 ms, of which the
  // synthetic run's process took 25 us (launches and the wait for the GPU): h = 25 us, p = 975 us.
  const double G = 40000, p1 = 1000;
  CoordinatedJobs in = coordinated_inputs(16, p1, 12000, 16, G, true, 0, 0, 16, 0, 0, {25e-6, 1});
  EXPECT_NEAR(in.host_compute_cpu_s, 25e-6, 1e-15);
  EXPECT_NEAR(in.prep_cpu_s, 975e-6, 1e-15);
  EXPECT_EQ(in.devices, 1);
  in.jobs = 2;
  CoordinatedPrediction two = predict_coordinated(in);
  // Plain: 16 CPUs / (2 x 1 ms) = 8,000/s each, under the GPU's half (20,000).
  EXPECT_NEAR(two.uncoordinated, 16 / (2 * 1e-3), 1e-6);
  EXPECT_EQ(two.bound_uncoordinated, "cpu");
  // Coordinated: 16 / (975 + 2 x 25) us = 15,610/s each by the CPUs, under G / 2.
  EXPECT_NEAR(two.coordinated, 16 / (975e-6 + 2 * 25e-6), 1e-6);
  in.jobs = 4;
  const CoordinatedPrediction four = predict_coordinated(in);
  // Coordinated, 4 jobs: the CPUs would give 16 / (975 + 100) us = 14,884/s each; the GPU gives 10,000.
  EXPECT_NEAR(four.coordinated, G / 4, 1e-9);
  EXPECT_EQ(four.bound_coordinated, "device");
  // Each job with a GPU of its own (devices 0, as before): the CPUs bound it.
  in.devices = 0;
  EXPECT_NEAR(predict_coordinated(in).coordinated, 16 / (975e-6 + 4 * 25e-6), 1e-6);
  // 4 jobs on 8 GPUs: each has a whole one.
  in.devices = 8;
  EXPECT_NEAR(predict_coordinated(in).coordinated, 16 / (975e-6 + 4 * 25e-6), 1e-6);
  // Measured: 4 synthetic jobs at once got 14,000/s each from the one GPU (a job alone leaves it
  // mostly idle): that is the ceiling, not G / 4.
  in.devices = 1;
  in.shared_device_rate = 14000;
  EXPECT_DOUBLE_EQ(device_per_job(in), 14000);
  EXPECT_NEAR(predict_coordinated(in).coordinated, 14000, 1e-9);
  EXPECT_EQ(predict_coordinated(in).bound_coordinated, "device");
  in.shared_device_rate = -1;
  EXPECT_THROW(predict_coordinated(in), std::invalid_argument);
  in.shared_device_rate = 0;
  in.devices = -1;
  EXPECT_THROW(predict_coordinated(in), std::invalid_argument);
  // The host CPU is at most a sample's whole CPU; the device count is kept only on a device.
  EXPECT_NEAR(coordinated_inputs(16, p1, 12000, 16, G, true, 0, 0, 16, 0, 0, {5e-3, 1}).host_compute_cpu_s, 1e-3,
              1e-15);
  EXPECT_EQ(coordinated_inputs(16, p1, 12000, 16, G, false, 0, 0, 16, 0, 0, {25e-6, 1}).devices, 0);
  const CoordinatedJobs one_gpu = coordinated_inputs(16, p1, 12000, 16, G, true, 0, 0, 16, 0, 0, {25e-6, 1});
  const nlohmann::json j = coordinated_whatif_json(one_gpu, {2, 4}, JobsSharing{{{4, 14000.0}}, {}});
  EXPECT_EQ(j["devices"], 1);
  EXPECT_EQ(j["predictions"][0]["device_per_job_from"], "G x D / K");
  EXPECT_DOUBLE_EQ(j["predictions"][0]["device_per_job"].get<double>(), G / 2);
  EXPECT_EQ(j["predictions"][1]["device_per_job_from"], "measured");
  EXPECT_DOUBLE_EQ(j["predictions"][1]["device_per_job"].get<double>(), 14000);
  EXPECT_NEAR(j["predictions"][1]["coordinated"].get<double>(), 14000, 1e-9);
  EXPECT_EQ(coordinated_whatif_json(coordinated_inputs(2, 50, 80, 2, 200, false, 0, 0, 1), {2})["predictions"][0]
                                   ["device_per_job_from"],
            "G");
}

}  // namespace
}  // namespace mlbench::stall
