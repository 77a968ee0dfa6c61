# End-to-end: generate fake-imagenet-tiny, run `loader` with --trace, check the
# report (valid, completed, non-zero stage times) and that the trace parses
# with the documented event names; then a missing dataset must fail in one line.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${DATAGEN} ensure fake-imagenet-tiny --root ${WORK}/data -q RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "datagen failed: ${rc}")
endif()
execute_process(COMMAND ${LOADER} --data ${WORK}/data/fake-imagenet-tiny/train -b 8 --workers 2 --repeat 3 --number 2
                        --no-cuda --report ${WORK}/report --trace ${WORK}/trace.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "loader failed (${rc}): ${out} ${err}")
endif()
execute_process(COMMAND /usr/bin/python3 ${CHECK} ${WORK}/report ${WORK}/trace.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report/trace check failed")
endif()
execute_process(COMMAND ${LOADER} --data ${WORK}/nowhere --repeat 2 --report ${WORK}/report2
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "nowhere does not exist.*mlbench-datagen ensure")
  message(FATAL_ERROR "missing dataset: expected one error line naming the path and datagen, got rc=${rc}: ${err}")
endif()
# --decode gpu belongs to the image benchmarks: the loader refuses it in one line (a run
# would hand the copy a batch without pixels).
execute_process(COMMAND ${LOADER} --data ${WORK}/data/fake-imagenet-tiny/train -b 8 --repeat 2 --no-cuda --decode gpu
                        --report ${WORK}/report3
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "--decode gpu is for the image benchmarks")
  message(FATAL_ERROR "loader --decode gpu: expected one error line, got rc=${rc}: ${err}")
endif()
# Read-ahead (docs/pipeline.md): --io-depth 3 on each engine and --io-depth 0, same seed, load the
# same items into the same batches; the reports carry io_depth and the engine, and the
# threads run's trace the I/O threads' reads (--drop-after-read: no file is served from the
# page cache in the worker, every read goes to an I/O thread or a ring).
foreach(run "3;threads" "3;io_uring" "0;auto")
  list(GET run 0 depth)
  list(GET run 1 engine)
  execute_process(COMMAND ${LOADER} --data ${WORK}/data/fake-imagenet-tiny/train -b 8 --workers 2 --repeat 3 --number 2
                          --no-cuda --seed 5 --drop-after-read --io-depth ${depth} --io-engine ${engine}
                          --report ${WORK}/report_${engine}${depth} --trace ${WORK}/trace_${engine}${depth}.json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "loader --io-depth ${depth} --io-engine ${engine} failed (${rc}): ${out} ${err}")
  endif()
endforeach()
foreach(engine threads io_uring)
  execute_process(COMMAND /usr/bin/python3 ${CHECK_READ_AHEAD} ${WORK}/report_${engine}3 ${WORK}/trace_${engine}3.json
                          ${WORK}/report_auto0 ${WORK}/trace_auto0.json 3 ${engine} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "read-ahead check failed (--io-engine ${engine})")
  endif()
endforeach()
