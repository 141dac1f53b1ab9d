"""Review: diffs drawn for a phone, and a page for a browser.

Modules:

- ``unified``: git's unified diff (bytes) read into typed file records, bounded
- ``filekinds``: source, tests, docs and config, generated: the order, and what is not drawn
- ``typeface``: the vendored monospace font, its fallbacks, its glyph check and drawn runs
- ``colouring``: a hunk's lines as Pygments tokens, with hidden characters marked
- ``layout``: rows wrapped at the page's width, line numbers, pages
- ``drawing``: a page drawn as an 8-bit PNG (Pillow)
- ``page``: the whole diff as one self-contained HTML page
- ``rendering``: what is drawn and what is said in words: ``render``, ``Picture``, ``albums``
"""
