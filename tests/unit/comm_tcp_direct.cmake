# White-box: the test reaches the tcp transport through its internal classes.
set(white_box ON)
