#!/bin/bash
# The most promising candidate at seed 0 (the whole-biLM step capped at 50 updates, adapt --max-steps 50): the component at seeds 1 and 2, one run at a time
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
nice -n 10 python scripts/adapt_curve.py training/curve/scout-seeds.json --task ner --seeds 0,1,2 --name scout --bilm steps50=training/diag/adapt-s0-steps50
echo laneF done
