# Call 2 (carry [".whl/a"]): the new step against today's at 128 x 20. First the CUDA tests of
# the new paths (the recorded step with each setting and compile_graph against eager steps, the
# engine's streams, the wavefront and the fused cell), then in one process, alternating rounds:
# today's recorded step, + the directions on two streams, + the wavefront, + the fused cell.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a
if [ "$DEVICE" = cuda ]; then
  log "CUDA tests of the step"
  timeout 150 python3 -m pytest tests/test_static_step.py tests/test_side_by_side.py tests/test_lstm.py -v -rfE \
    -p no:cacheprovider --device cuda --junitxml "$OUT/step-tests.xml" >"$OUT/step-tests.txt" 2>&1; log "exit $?"
fi
log "step-ab ${ROWS} x ${WINDOW} ${PREC}"
timeout 160 python3 -m benchmarks step-ab "today:step=$GRAPH" "streams:step=$GRAPH,directions_on_streams=true" \
  "wavefront:step=$GRAPH,directions_on_streams=true,lstm_wavefront=true" "all:step=$GRAPH,$NEW" \
  --device "$DEVICE" --case bilm-tf --rows "$ROWS" --window "$WINDOW" --precision "$PREC" "${SIZE[@]}" \
  --steps 20 --rounds 3 --output "$OUT/step-ab-$ROWS.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
