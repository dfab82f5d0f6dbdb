"""A notebook cell's nbgrader metadata, read the same way by every step of the pack's nbgrader."""


def nbgrader_metadata(cell) -> dict:
    """The cell's `metadata.nbgrader` ({} when it is missing or not a dict: learner input)."""
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}
