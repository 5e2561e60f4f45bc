# White-box: the stranger of misuse_rendezvous runs the handshake itself with
# libhpu's internal socket code.
set(white_box ON)
