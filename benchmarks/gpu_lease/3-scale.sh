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
