"""What the ``bench`` command (``spacy_elmo.cli.bench``) measures with, shared with the checkout's
``benchmarks/``: clocks and peak memory (``measure``), the machine (``system``), tables and JSON
(``report``), a call in a fresh process (``isolate``) and the default text (``text``).
"""
