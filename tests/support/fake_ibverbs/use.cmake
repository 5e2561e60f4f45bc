# Included by the <name>.cmake of a test that runs the verbs transport over
# the fake libibverbs: the test gets its path as HPU_FAKE_IBVERBS (for
# HPU_IB_LIBRARY), and the fake is built before it.
target_compile_definitions(test_${name} PRIVATE HPU_FAKE_IBVERBS="$<TARGET_FILE:fake-ibverbs>")
add_dependencies(test_${name} fake-ibverbs)
