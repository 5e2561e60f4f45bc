# Calls the internal parallel_for and the compute budget.
set(white_box ON)
