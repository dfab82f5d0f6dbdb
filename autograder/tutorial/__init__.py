"""The course as one PyTorch tutorial: `make` (the sphinx-gallery script from source/'s tagged
cells; code only), `tables.toml` (its content as data: the frame's text, the checks after cells,
the cells left out and the rewrites), `to_rst` (markdown to reStructuredText), `publish` (the
HTML build and the pull request's files)."""
