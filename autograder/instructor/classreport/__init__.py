"""Class report: `python -m autograder report DIR --out REPORT_DIR` (`page.write_report`).

Reads a batch's DIR (`DIR/<student>/<assignment>.json`, as written by
`python -m autograder grade SUBMITTED --out DIR`) and writes one self-contained
`REPORT_DIR/index.html` (figures are PNGs embedded as data URIs: it works offline, and can be
mailed as one file) showing what a class got wrong: the score distribution per assignment, the
pass rate of every graded function, the most frequent named mistakes (the hints learners
received, counted once per notebook), the notebooks that could not be graded, the flags for the
instructor, and the slowest notebooks (`extra_data.seconds`, when the results carry it).

tally.py     the result files read and counted: Result, load, function_table, mistakes, needs_review
figures.py   the figures, as PNG data URIs
page.py      the HTML page (render) and the command (write_report), with the link to the
             similarity page
"""
