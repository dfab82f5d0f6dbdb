"""The instructor's tools: `build` (release/ and solutions/ from source/), `samples` (sample
submissions), `demo` (the instructor's pipeline on them), `learner_config` (the learners'
nbgrader_config.py), `gradescope` (a Gradescope autograder zip), `classreport/` (the class report:
`tally` reads and counts a batch's results, `figures` draws them, `page` writes the HTML page).
"""
