# White-box: the test reaches the process transports, the verbs transport and
# the collective algorithms through their internal classes. comm_verbs.cmake
# and verbs_transport.cmake include this file.
set(white_box ON)
