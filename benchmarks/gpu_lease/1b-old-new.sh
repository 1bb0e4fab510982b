# Call 1b (carry [".old"], the fourth lease's package: `mkdir .old && git archive 3ed00f0
# spacy_elmo | tar -x -C .old`): issue 61's step against the step the fourth lease measured
# (docs/bench/gpu/2026-11-26-h200-b), alternating fresh processes of each (pretrain-ab), bilm-tf's
# recipe at 128 x 20: with the three LSTM settings on (the wavefront now sums the recurrent
# weight's gradient step by step, where the old one made it one product), then without the
# wavefront (the new step trains on the hand-written backward of nn/lstm_training.py, the old on
# autograd through its dense loop).
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
require_spacy || exit 0
OLD=$(pwd)/.old
[ -d "$OLD/spacy_elmo" ] || { log "no .old/spacy_elmo: carry it (docs/gpu_run.md)"; exit 0; }
OUT_ABS=$(cd "$OUT" && pwd)
# The old package's own recipe file (it refuses keys it does not know; this one takes its keys).
(cd "$OLD" && python3 -m spacy_elmo init-config "$OUT_ABS/old-new.cfg" --recipe bilm-tf) >>"$OUT/calls.log" 2>&1
sed -i '/^recompute_cell/d' "$OUT_ABS/old-new.cfg"
TEXT=$(python3 -c "from spacy_elmo.bench.text import DEFAULT_TEXT; print(DEFAULT_TEXT)")
[ "$DEVICE" = cuda ] && GPU=(--gpu-id 0) || GPU=()
if [ -n "$SMOKE" ]; then
  CASE=(--model.lstm_dim 32 --model.projection_dim 16 --model.filters '[[1, 8], [2, 8]]' --training.batch_tokens 20
        --corpus.window_length 5 --steps 2 --warmup 1 --rounds 1)
else
  CASE=(--training.batch_tokens $((ROWS * WINDOW)) --corpus.window_length "$WINDOW" --steps 30 --warmup 10)
fi
AB=(--against "$OLD" --text "$TEXT" --config "$OUT_ABS/old-new.cfg" --threads 1 "${GPU[@]}" "${CASE[@]}"
    --training.precision "$PREC" --training.step "$GRAPH" --vocab.min_count 1 --objective.n_negative_samples 1024
    --training.fused_cell true --training.directions_on_streams true)
log "pretrain-ab ${ROWS} x ${WINDOW} ${PREC}: this step against the old one, the three settings on"
timeout 300 python3 -m benchmarks pretrain-ab "${AB[@]}" --training.lstm_wavefront true --rounds 2 \
  --output "$OUT/old-new-wavefront.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
log "pretrain-ab ${ROWS} x ${WINDOW} ${PREC}: this step against the old one, without the wavefront"
timeout 250 python3 -m benchmarks pretrain-ab "${AB[@]}" --training.lstm_wavefront false --rounds 1 \
  --output "$OUT/old-new-layers.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
