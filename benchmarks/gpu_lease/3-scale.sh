# Call 3: the largest batch in bf16: today's recorded step against the new one (one trainer at
# a time: each fills the card), then the new step's profile with what holds the memory.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
log "step-ab ${LARGE} x ${WINDOW} ${PREC}"
timeout 150 python3 -m benchmarks step-ab "today:step=$GRAPH" "new:step=$GRAPH,${NEW}" --one-at-a-time \
  --device "$DEVICE" --case bilm-tf --rows "$LARGE" --window "$WINDOW" --precision "$PREC" "${SIZE[@]}" \
  --steps 10 --rounds 2 --output "$OUT/step-ab-$LARGE-$PREC.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
SETTINGS=(); for kv in ${NEW//,/ }; do SETTINGS+=("--training.${kv%%=*}" "${kv#*=}"); done
log "profile ${LARGE} x ${WINDOW} ${PREC}: ${GRAPH} with the new settings, --memory"
timeout 110 python3 -m benchmarks profile-step --out "$OUT/profile-$LARGE" --device "$DEVICE" --case bilm-tf \
  --rows "$LARGE" --window "$WINDOW" --precision "$PREC" --steps-kinds "$GRAPH" --memory "${SIZE[@]}" --steps 3 \
  "${PEAKS[@]}" "${SETTINGS[@]}" >>"$OUT/calls.log" 2>&1; log "exit $?"
if [ "$DEVICE" = cuda ] && [ "$LARGE" = 1536 ]; then
  # On an 80 GB card the new step's recording ran out of memory at 2,048 rows (2026-11-26-h100):
  # the memory's history from the trainer's start, dumped where it fails.
  log "profile 2048 x ${WINDOW} ${PREC}: ${GRAPH} with the new settings, --memory (the recording that failed)"
  timeout 110 python3 -m benchmarks profile-step --out "$OUT/profile-2048" --device "$DEVICE" --case bilm-tf \
    --rows 2048 --window "$WINDOW" --precision "$PREC" --steps-kinds "$GRAPH" --memory "${SIZE[@]}" --steps 3 \
    "${PEAKS[@]}" "${SETTINGS[@]}" >>"$OUT/calls.log" 2>&1; log "exit $?"
fi
