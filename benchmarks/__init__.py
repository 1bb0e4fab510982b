"""``python -m benchmarks``: the project's measurement kit, run from a source checkout.

Every speed or memory claim made for spacy_elmo is measured here, as a ratio of two paths run
side by side in one invocation on the same machine, never against figures from elsewhere. Each
command prints a table and can write every figure, with the machine it ran on, to JSON:

- ``inference``: the biLM against a per-time-step reference loop in AllenNLP's style (which also
  checks the package's numbers to 1e-5), with the package's optional fast paths when present;
- ``pipe``: the package's own bench (``python -m spacy_elmo bench``) on random weights of a shape
  too, or with ``--doc-tokens`` the peak memory of long docs without sentence boundaries;
- ``pretrain``: training throughput of the released shape and of the bundled model's shape;
- ``pretrain-ab``: this checkout's pretraining step against another checkout's (an older
  commit), on the same batches in alternating processes;
- ``profile-step``: a pretraining step's device time kernel by kernel, grouped by phase and
  kind, against the card's peaks, and what holds the memory;
- ``step-ab``: pretraining step variants (step kinds, speed settings) in one process, in
  alternating rounds;
- ``senses``: not speed but quality: how well each biLM layer and candidate mix separates the
  senses of ambiguous words (``--plot`` draws them);
- ``embed``: the embed command in one process against torchrun's ranks, and a memory soak;
- ``gpu``: the GPU checks no other command makes, in stages (``gpu_run``), rehearsed on the CPU;
  the next lease's calls are the scripts in ``benchmarks/gpu_lease/`` (docs/gpu_run.md).

The A/B benches that decided a design long ago (``load``, ``token-chunks``, ``lstm-training``)
are at commit 86f05bd, with which the docs' figures of theirs were made.

This package is not installed with spacy_elmo (``setup.py`` packages ``spacy_elmo`` only): it
imports the checkout's ``spacy_elmo`` and may read its ``tests/`` and ``project/``. The installed
package keeps one command for users, ``python -m spacy_elmo bench`` (``spacy_elmo.bench``), and the
clocks, peak memory, machine description, tables and default text that both share. The defaults
here are what the package ships: the bundled model, its shape and recipe, and its slice of
WikiText-2 as text.
"""
