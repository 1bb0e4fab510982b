#!/bin/bash
# Deterministic diagnostics: layer drift and linear probes, over the snapshots and controls
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
S=training/diag/snapshots-s0
B=""; L=""
for k in 25 50 75 100 150 200 300; do B="$B $S/step-$k"; L="$L --label $k"; done
nice -n 5 python scripts/layer_drift.py bundled corpus/wnut17/emerging.test.spacy training/curve/drift-test.json $B training/diag/perturbed-1e-4 $L --label perturbed-1e-4
nice -n 5 python scripts/layer_probe.py corpus/wnut17/wnut17train.spacy corpus/wnut17/emerging.test.spacy training/curve/probe.json bundled training/diag/perturbed-1e-4 $B --label 0 --label perturbed-1e-4 $L
echo laneC done
