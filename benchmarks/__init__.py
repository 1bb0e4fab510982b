"""``python -m benchmarks``: the project's measurement kit, run from a source checkout.

Every speed or memory claim made for spacy_elmo is measured here, as a ratio of two paths run
side by side in one invocation on the same machine, never against figures from elsewhere. Each
command prints a table and can write every figure, with the machine it ran on, to JSON:

- ``load``: reading the released bilm-tf HDF5 layout (``load_bilm``) against AllenNLP's
  file-per-tensor pattern, and the native safetensors checkpoint;
- ``inference``: the biLM against a per-time-step reference loop in AllenNLP's style (which also
  checks the package's numbers to 1e-5), with the package's optional fast paths when present;
- ``pipe``: ``nlp.pipe`` end to end, and the share of time spent outside the biLM;
- ``memory``: peak memory of long docs without sentence boundaries, by doc length;
- ``pretrain``: training throughput of the released shape and of the bundled model's shape;
- ``pretrain-ab``: this checkout's pretraining step against another checkout's (an older
  commit), on the same batches in alternating processes;
- ``lstm-training``: one LSTM layer's forward and backward on the training loop against
  autograd through the step loop;
- ``profile-step``: a pretraining step's device time kernel by kernel, grouped by phase and
  kind, against the card's peaks, and what holds the memory;
- ``step-ab``: pretraining step variants (step kinds, speed settings) in one process, in
  alternating rounds;
- ``senses``: not speed but quality: how well each biLM layer and candidate mix separates the
  senses of ambiguous words (``--plot`` draws them);
- ``embed``: the embed command in one process against torchrun's ranks, and a memory soak;
- ``gpu``: the prepared GPU run, in stages (``gpu_run``), rehearsed on the CPU; the next
  lease's calls are the scripts in ``benchmarks/gpu_lease/`` (docs/gpu_run.md).

This package is not installed with spacy_elmo (``setup.py`` packages ``spacy_elmo`` only): it
imports the checkout's ``spacy_elmo`` and may read its ``tests/`` and ``project/``. The installed
package keeps one command for users, ``python -m spacy_elmo bench`` (``spacy_elmo.bench``), and the
clocks, peak memory, machine description, tables and default text that both share. The defaults
here are what the package ships: the bundled model, its shape and recipe, and its slice of
WikiText-2 as text.
"""
