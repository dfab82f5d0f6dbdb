"""Grading: one notebook or a batch of them -> scores and messages.

* `submission`: read a submitted notebook (untrusted bytes, bounded before parsing), recognise its
  assignment, and build what each graded function's process runs (`Submission.programs`);
* `plan`: which notebook of a folder is graded as what, the fingerprints that make a batch
  resumable, the shards;
* `batch`: grade one notebook or a folder of them (workers, shards, resumption);
* `plugin`: run the hidden tests (autograder/tests/) with pytest, one `student` per notebook;
* `student`: call the learner's functions through the jail and turn each reply into pass or a
  message; `compare` and `difference` say what is wrong with a value; `causes` names the
  cause of a wrong value from the error model (`mutation`: the one-place mistakes of the
  reference solution, each with a sentence written by `sentences`; `reference`: the process
  that runs the solution and its mutants) when the learner's code shows it;
* `results`: results.json (Gradescope's format) and grades.csv.
"""
