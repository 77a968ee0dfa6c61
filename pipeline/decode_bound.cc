// mlbench-decode-bound: the raw full-size JPEG decode rate of one core (the
// bound bench/compare_loader.sh compares the loader with): every file under
// DIR is read into memory first, then decoded at scale 1/1 to RGB with
// TurboJPEG, single-threaded, for --seconds; prints images/s as JSON.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "pipeline/jpeg_decoder.h"
#include "pipeline/source.h"

int main(int argc, char** argv) {
  using namespace mlbench::pipeline;
  CLI::App app("mlbench-decode-bound: full-size TurboJPEG decode rate of one core over an ImageFolder",
               "mlbench-decode-bound");
  std::string root;
  double seconds = 5;
  app.add_option("root", root, "ImageFolder root (root/<class>/<file>.jpg)")->required();
  app.add_option("--seconds", seconds, "Minimum decode time")->check(mlbench::core::number_above(0));
  CLI11_PARSE(app, argc, argv);
  try {
    ImageFolderReader reader(root);
    std::vector<Bytes> files(reader.size());
    for (std::size_t i = 0; i < files.size(); ++i) reader.fetch(i, files[i]);
    JpegDecoder dec;
    Image img;
    long decoded = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      for (const Bytes& f : files) {
        dec.decode(f.data(), f.size(), {1, 1}, img);
        ++decoded;
      }
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::cout << nlohmann::json{{"images", decoded}, {"seconds", elapsed}, {"images_per_s", decoded / elapsed},
                                {"files", files.size()}}
                     .dump()
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "mlbench-decode-bound: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
