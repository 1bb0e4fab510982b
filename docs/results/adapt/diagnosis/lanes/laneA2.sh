#!/bin/bash
# The scouting adaptations: adapt's whole-biLM step (its config.cfg: same split, fitted softmax, seed, patience) with one setting changed
. /work/venv/bin/activate; export PYTHONPATH=/work/diagnose OMP_NUM_THREADS=1
cd /work/diagnose/project
(time nice -n 5 python -m spacy_elmo pretrain training/diag/adapt-s0/config.cfg training/diag/adapt-s0-steps50 --training.max_steps 50) > training/diag/adapt-s0-steps50.log 2>&1
(time nice -n 5 python -m spacy_elmo pretrain training/diag/adapt-s0/config.cfg training/diag/adapt-s0-lr5e-4 --optimizer.learning_rate 0.0005) > training/diag/adapt-s0-lr5e-4.log 2>&1
