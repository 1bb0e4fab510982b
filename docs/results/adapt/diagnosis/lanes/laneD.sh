#!/bin/bash
# The null spread: the unadapted biLM nudged by noise (1e-4 x std), noise seeds 1 and 2, component seed 0
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
for s in 1 2; do
  python scripts/perturb_bilm.py bundled training/diag/perturbed-1e-4-n$s --scale 1e-4 --seed $s
  nice -n 5 python scripts/seeds.py bundled 0 --tasks ner --bilm training/diag/perturbed-1e-4-n$s --name perturbed-1e-4-n$s --elmo-threads 1 --max-steps 2000 --eval-frequency 200
done
echo laneD done
