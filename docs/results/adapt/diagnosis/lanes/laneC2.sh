#!/bin/bash
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
B="training/diag/adapt-s0-steps50 training/diag/adapt-s0-lr5e-4 training/diag/finetuned-bilm"
L="--label steps50 --label lr5e-4 --label finetuned"
nice -n 5 python scripts/layer_drift.py bundled corpus/wnut17/emerging.test.spacy training/curve/drift-test-scout.json $B $L
nice -n 5 python scripts/layer_probe.py corpus/wnut17/wnut17train.spacy corpus/wnut17/emerging.test.spacy training/curve/probe-scout.json $B $L
echo laneC2 done
