"""Which answers were shared: a similarity report of a class's answers (placeholder)."""
