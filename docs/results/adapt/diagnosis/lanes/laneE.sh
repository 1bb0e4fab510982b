#!/bin/bash
# Seeds 1 and 2 of the unadapted biLM and of adapt's output (step 50)
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
S=training/diag/snapshots-s0
nice -n 5 python scripts/adapt_curve.py training/curve/curve-seeds.json --task ner --seeds 0,1,2 --bilm 0=bundled --bilm 50=$S/step-50
echo laneE done
