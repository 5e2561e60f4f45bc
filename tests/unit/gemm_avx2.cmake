set(white_box ON)
