#!/bin/bash
# After laneF: "far fewer updates" as a snapshot (25 updates into the 300-update schedule): the component at seeds 1 and 2, one run at a time
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
while kill -0 $(cat training/diag/laneF.pid) 2>/dev/null; do sleep 20; done
nice -n 10 python scripts/adapt_curve.py training/curve/curve25-seeds.json --task ner --seeds 0,1,2 --bilm 25=training/diag/snapshots-s0/step-25
echo laneG done
