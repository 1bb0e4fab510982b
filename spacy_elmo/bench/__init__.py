"""``python -m spacy_elmo bench``: what the elmo pipe costs on the user's machine and text.

One command (:mod:`.command`), sized like ``spacy benchmark speed``: tokens/s and peak memory per
precision and thread count, as ratios measured side by side in one run. Beside it, what it
shares with the project's measurement kit (``benchmarks/`` in a source checkout, not installed):
clocks and peak memory (:mod:`.measure`), the machine a figure was measured on (:mod:`.system`),
tables and JSON (:mod:`.report`), a call in a fresh process (:mod:`.isolate`) and the default
text shipped with the package (:mod:`.text`).
"""
