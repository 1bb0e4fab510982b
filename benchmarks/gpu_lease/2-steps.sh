# Call 2: the new step against today's at 128 x 20, in one process, alternating rounds: today's
# recorded step, + the directions on two streams, + the wavefront, + the fused cell. Then the
# CUDA tests of the new paths (the recorded step with each setting and compile_graph against
# eager steps, the engine's streams, the wavefront and the fused cell), each test with its own
# limit so that a slow compilation cannot swallow the report.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/b .whl/a
require_spacy || exit 0
log "step-ab ${ROWS} x ${WINDOW} ${PREC}"
timeout 160 python3 -m benchmarks step-ab "today:step=$GRAPH" "streams:step=$GRAPH,directions_on_streams=true" \
  "wavefront:step=$GRAPH,directions_on_streams=true,lstm_wavefront=true" "all:step=$GRAPH,$NEW" \
  --device "$DEVICE" --case bilm-tf --rows "$ROWS" --window "$WINDOW" --precision "$PREC" "${SIZE[@]}" \
  --steps 20 --rounds 3 --output "$OUT/step-ab-$ROWS.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
if [ "$DEVICE" = cuda ]; then
  log "CUDA tests of the step"
  timeout 170 python3 -m pytest tests/test_lstm.py tests/test_side_by_side.py tests/test_static_step.py -v -rfE \
    --timeout 60 -p no:cacheprovider --device cuda --junitxml "$OUT/step-tests.xml" >"$OUT/step-tests.txt" 2>&1
  log "exit $?"
fi
