# White-box: sticky errors, blocked streams and the compute budget need queued
# operations that fail or wait on the test's command; only libhpu's internal
# Stream API can queue those.
set(white_box ON)
