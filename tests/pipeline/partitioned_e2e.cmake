# End-to-end: the partitioned cache with the `loader` benchmark on fake-imagenet-tiny
# (check_partitioned.py says what it checks). -DNETNS=1: across two network namespaces.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${DATAGEN} ensure fake-imagenet-tiny --root ${WORK}/data -q RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "datagen failed: ${rc}")
endif()
set(extra "")
if(NETNS)
  set(extra "--netns")
endif()
execute_process(COMMAND /usr/bin/python3 ${CHECK} ${LOADER} ${WORK}/data/fake-imagenet-tiny/train ${WORK} ${extra}
                RESULT_VARIABLE rc)
if(rc EQUAL 77)
  # ctest reads the skip from this line (SKIP_REGULAR_EXPRESSION): the reason is printed above it.
  message("partitioned cache e2e: SKIPPED")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "partitioned cache check failed")
endif()
