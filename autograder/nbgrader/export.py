"""nbgrader export: a grades.csv a spreadsheet opens as data (`c.ExportApp.plugin_class`)."""

from __future__ import annotations

from nbgrader.api import MissingEntry
from nbgrader.plugins import CsvExportPlugin


EXPORT_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                  "email", "raw_score", "late_submission_penalty", "score", "max_score"]


class SpreadsheetSafeCsvExport(CsvExportPlugin):
    """nbgrader's CSV export (same columns, same rows, same `--to`, `--student`, `--assignment`),
    written with the csv module (a name holding a comma, a quote or a newline stays one field)
    and with every text cell that a spreadsheet would read as a formula (= + - @ or ＝ ＋ － ＠,
    also after leading whitespace; tab, CR at its start) prefixed with a single quote
    (`autograder.grade.results.spreadsheet_cell`, as grades.csv of the batch grader). Scores stay
    numbers."""

    def export(self, gradebook) -> None:
        import csv

        from autograder.grade.results import spreadsheet_cell
        dest = self.to or "grades.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)  # \r\n: a field holding a lone \r or \n is quoted
            writer.writerow(EXPORT_COLUMNS)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        timestamp, raw, penalty = None, 0.0, 0.0
                    else:
                        timestamp, raw = submission.timestamp, submission.score
                        penalty = submission.late_submission_penalty
                    row = [assignment.name, assignment.duedate, timestamp, student.id,
                           student.last_name, student.first_name, student.email, raw, penalty,
                           max(0.0, raw - penalty), assignment.max_score]
                    writer.writerow([spreadsheet_cell(v) for v in row])
