"""The course as one PyTorch tutorial: `make` (the sphinx-gallery script from source/'s tagged
cells, and its build), `rst` (markdown to reStructuredText)."""
