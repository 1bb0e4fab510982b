#!/bin/bash
# After the snapshot run: the scouting adaptations (same split and fitted softmax as adapt-s0, via --resume)
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
while kill -0 25330 2>/dev/null; do sleep 30; done
for v in "steps50 --max-steps 50" "lr5e-4 --learning-rate 0.0005"; do
  set -- $v; name=$1; shift
  out=training/diag/adapt-s0-$name
  if [ ! -f $out/adapt/summary.json ]; then
    mkdir -p $out && cp -r training/diag/adapt-s0/adapt $out/ && rm -f $out/adapt/summary.json
    (time nice -n 5 python -m spacy_elmo adapt en_wikitext_small corpus/wnut17/wnut17train.spacy $out --threads 1 --seed 0 --resume "$@") > training/diag/adapt-s0-$name.log 2>&1
  fi
done
