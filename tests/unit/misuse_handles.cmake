# White-box: the registry test starts an internal Registry (a header-only
# class) near its last generation; its errors come from libhpu's objects.
set(white_box ON)
