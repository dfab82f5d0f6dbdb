"""Which answers were shared: `python -m autograder similarity DIR --out OUT`.

DIR is nbgrader's `submitted/` (or `autograded/`: the same <student>/<assignment>/ layout). For
every graded function and every written answer, the answers of the whole class are compared with
copydetect (MOSS's winnowing over tokens, on PyPI): every name the learner bound counts as the
same token, so renaming hides nothing; comments and layout do not count; the release notebook's
answer cell (signature, docstring, stub) is never counted as shared, nor is code most of the class
holds. OUT gets a self-contained `index.html` (no script, no request, every learner text escaped)
listing, per exercise, the pairs of learners whose answers are more alike than the threshold,
highest first, each side by side with the shared regions marked, and the clusters of more than
two; the answers too short to tell apart; the notebooks and answers that could not be read, with
the reason. `pairs.csv` holds the same pairs (learner, learner, assignment, function,
similarity, weight).

Similarity is evidence to look at, not proof: independent answers to a short exercise converge.

    answers.py  the answers of a folder of notebooks (per learner and exercise, boilerplate out)
    compare.py  copydetect's fingerprints and comparisons, one exercise's class at a time
    page.py     the HTML page and the CSV
    run.py      the command
"""
