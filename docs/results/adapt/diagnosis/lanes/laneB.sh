#!/bin/bash
# Components, in order, one at a time (each waits for the biLM it needs)
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
S=training/diag/snapshots-s0
wait_for() { while [ ! -f "$1" ]; do sleep 30; done; }
while pgrep -f "adapt_curve.py training/curve/curve-partial" >/dev/null; do sleep 30; done
python scripts/perturb_bilm.py bundled training/diag/perturbed-1e-4 --scale 1e-4 --seed 0
nice -n 5 python scripts/seeds.py bundled 0 --tasks ner --bilm training/diag/perturbed-1e-4 --name perturbed-1e-4 --elmo-threads 1 --max-steps 2000 --eval-frequency 200
wait_for $S/step-100/model.safetensors
nice -n 5 python scripts/adapt_curve.py training/curve/curve-partial.json --task ner --seeds 0 --bilm 0=bundled --bilm 25=$S/step-25 --bilm 50=$S/step-50 --bilm 100=$S/step-100
nice -n 5 python scripts/seeds.py bundled 0 --tasks ner --name finetune --elmo-threads 1 --max-steps 2000 --eval-frequency 200 \
  --set components.elmo.frozen=false --set "training.frozen_components=[]" --set "training.annotating_components=[]"
wait_for $S/step-300/model.safetensors
nice -n 5 python scripts/adapt_curve.py training/curve/curve-s0.json --task ner --seeds 0 --bilm 0=bundled --bilm 25=$S/step-25 --bilm 50=$S/step-50 --bilm 100=$S/step-100 --bilm 200=$S/step-200 --bilm 300=$S/step-300
while pgrep -f laneA2.sh >/dev/null; do sleep 30; done
nice -n 5 python scripts/adapt_curve.py training/curve/scout-s0.json --task ner --seeds 0 --name scout --bilm steps50=training/diag/adapt-s0-steps50 --bilm lr5e-4=training/diag/adapt-s0-lr5e-4
echo laneB done
