# End-to-end: coordinated prep with the `loader` benchmark on fake-imagenet-tiny
# (check_coordinated.py says what it checks).
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${DATAGEN} ensure fake-imagenet-tiny --root ${WORK}/data -q RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "datagen failed: ${rc}")
endif()
execute_process(COMMAND /usr/bin/python3 ${CHECK} ${LOADER} ${WORK}/data/fake-imagenet-tiny/train ${WORK}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "coordinated prep check failed")
endif()
