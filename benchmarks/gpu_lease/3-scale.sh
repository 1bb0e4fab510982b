# Call 3: the largest batch. Today's recorded step against the new one in bf16 (one trainer at a
# time: each fills the card; and the new one with the cell recomputed in the backward: its peak
# memory), fp32, and the fast recipe.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
for prec in "$PREC" fp32; do
  log "step-ab ${LARGE} x ${WINDOW} ${prec}"
  RECOMPUTE=(); [ "$prec" = "$PREC" ] && RECOMPUTE=("recompute:step=$GRAPH,${NEW},recompute_cell=true")
  timeout 230 python3 -m benchmarks step-ab "today:step=$GRAPH" "new:step=$GRAPH,${NEW}" "${RECOMPUTE[@]}" --one-at-a-time \
    --device "$DEVICE" --case bilm-tf --rows "$LARGE" --window "$WINDOW" --precision "$prec" "${SIZE[@]}" \
    --steps 10 --rounds 2 --output "$OUT/step-ab-$LARGE-$prec.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
done
log "step-ab fast ${LARGE} x ${WINDOW} ${PREC}"
timeout 150 python3 -m benchmarks step-ab "today:step=$GRAPH" "streams:step=$GRAPH,directions_on_streams=true" \
  --one-at-a-time --device "$DEVICE" --case fast --rows "$LARGE" --window "$WINDOW" --precision "$PREC" \
  "${SIZE[@]}" --steps 10 --rounds 2 --output "$OUT/step-ab-fast-$LARGE.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
