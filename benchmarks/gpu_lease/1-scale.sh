# Call 1 (carry [".whl/a"], after call 0 installed .whl/b): the goals still open after the
# fourth lease (docs/bench/gpu/2026-11-26-h200-b): the new step (all speed settings) at the
# largest batch and at twice it (the new step held 50 GB at 4,096 rows on an H200, today's 63),
# 50 timed steps each; fp32 at the largest batch; the fast recipe there. One trainer at a time.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/b .whl/a
require_spacy || exit 0
for rows in "$LARGE" "$((2 * LARGE))"; do
  log "step-ab ${rows} x ${WINDOW} ${PREC}: the new step"
  timeout 130 python3 -m benchmarks step-ab "new:step=$GRAPH,${NEW}" --one-at-a-time --device "$DEVICE" \
    --case bilm-tf --rows "$rows" --window "$WINDOW" --precision "$PREC" "${SIZE[@]}" --steps 25 --rounds 2 \
    --output "$OUT/step-ab-$rows-$PREC-new.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
done
log "step-ab ${LARGE} x ${WINDOW} fp32: the new step"
timeout 100 python3 -m benchmarks step-ab "new:step=$GRAPH,${NEW}" --one-at-a-time \
  --device "$DEVICE" --case bilm-tf --rows "$LARGE" --window "$WINDOW" --precision fp32 "${SIZE[@]}" \
  --steps 10 --rounds 1 --output "$OUT/step-ab-$LARGE-fp32.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
log "step-ab fast ${LARGE} x ${WINDOW} ${PREC}"
timeout 100 python3 -m benchmarks step-ab "off:step=$GRAPH,${OFF}" "streams:step=$GRAPH,directions_on_streams=true" \
  --one-at-a-time --device "$DEVICE" --case fast --rows "$LARGE" --window "$WINDOW" --precision "$PREC" \
  "${SIZE[@]}" --steps 10 --rounds 1 --output "$OUT/step-ab-fast-$LARGE.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
