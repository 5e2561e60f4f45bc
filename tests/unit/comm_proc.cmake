# hpu-comm-job: one process of a multi-process job, in C against the public API.
if(NOT TARGET hpu-comm-job)
  add_executable(hpu-comm-job ${CMAKE_CURRENT_SOURCE_DIR}/unit/comm_job.c)
  target_link_libraries(hpu-comm-job PRIVATE hpu)
endif()
target_compile_definitions(test_comm_proc PRIVATE HPU_COMM_JOB="$<TARGET_FILE:hpu-comm-job>")
add_dependencies(test_comm_proc hpu-comm-job)
