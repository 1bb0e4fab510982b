"""``python -m spacy_elmo bench``: measure what the package claims about speed and memory.

Every speed or memory claim made for spacy_elmo is measured here, as a ratio of two paths run
side by side in one invocation on the same machine, never against figures from elsewhere. Each
subcommand prints a table and can write every figure, with the machine it ran on, to JSON:

- ``load``: reading the released bilm-tf HDF5 layout (``load_bilm``) against AllenNLP's
  file-per-tensor pattern, and the native safetensors checkpoint;
- ``inference``: the biLM against a per-time-step reference loop in AllenNLP's style (which also
  checks the package's numbers to 1e-5), with the package's optional fast paths when present;
- ``pipe``: ``nlp.pipe`` end to end, and the share of time spent outside the biLM;
- ``memory``: peak memory of long docs without sentence boundaries, by doc length;
- ``pretrain``: training throughput of the released shape and of the bundled model's shape;
- ``senses``: whether each layer, and the pipe's default mix, separates word senses (``--plot``);
- ``embed``: the embed command in one process against torchrun's ranks, and a memory soak;
- ``gpu``: the prepared GPU run, in stages (``gpu_run``), rehearsed on the CPU.
- ``senses``: not speed but quality: how well each biLM layer and candidate mix separates the
  senses of ambiguous words (margin of cosines, nearest-sense accuracy).

Their defaults are what the package ships, never files of a source checkout: the bundled model
(the weights named by nothing: ``spacy_elmo.sources.resolve_weight_source``), its shape and
recipe, and a slice of WikiText-2 as text (:mod:`.text`). ``tests/test_wheel.py`` runs every
command from an installed wheel.
"""
