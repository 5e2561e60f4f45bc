# White-box: the verbs function tables (the real one through dlopen, and the
# in-memory TEST ADAPTER).
set(white_box ON)
