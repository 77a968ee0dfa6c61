# Shared code of the image benchmarks (convnet, convnet_fp16, dcgan, reso,
# fast_style, ssd), included from benchmarks/common/CMakeLists.txt.
#
# mlbench_vision_models: the LibTorch models, SSD boxes and the shared image
# benchmark helpers, compiled once for the benchmarks and the unit tests.
add_library(mlbench_vision_models STATIC
  ${CMAKE_CURRENT_LIST_DIR}/vision_models.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssd_box.cc
  ${CMAKE_CURRENT_LIST_DIR}/image_bench.cc)
target_link_libraries(mlbench_vision_models PUBLIC mlbench_bench_common mlbench_pipeline_torch)
target_precompile_headers(mlbench_vision_models REUSE_FROM mlbench_bench_common)

# The convnet / convnet_fp16 program (one translation unit for both executables).
add_library(mlbench_convnet STATIC ${CMAKE_CURRENT_LIST_DIR}/../convnet/convnet.cc)
target_link_libraries(mlbench_convnet PUBLIC mlbench_vision_models)
target_precompile_headers(mlbench_convnet REUSE_FROM mlbench_bench_common)
