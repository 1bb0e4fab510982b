# Call 3: where the step's device time goes, kernel by kernel: bilm-tf's recipe in bf16 at
# 128 x 20, the recorded step with the new settings (graph replay: kernels by name) and its
# eager twin (kernels by phase); then at the largest batch with what holds the memory.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
SETTINGS=(); for kv in ${NEW//,/ }; do SETTINGS+=("--training.${kv%%=*}" "${kv#*=}"); done
log "profile ${ROWS} x ${WINDOW} ${PREC}: ${KINDS} with the new settings"
timeout 130 python3 -m benchmarks profile-step --out "$OUT/profile-$ROWS" --device "$DEVICE" --case bilm-tf \
  --rows "$ROWS" --window "$WINDOW" --precision "$PREC" --steps-kinds "$KINDS" "${SIZE[@]}" "${STEPS[@]}" \
  "${PEAKS[@]}" "${SETTINGS[@]}" >>"$OUT/calls.log" 2>&1; log "exit $?"
log "profile ${LARGE} x ${WINDOW} ${PREC}: ${GRAPH} with the new settings, --memory"
timeout 110 python3 -m benchmarks profile-step --out "$OUT/profile-$LARGE" --device "$DEVICE" --case bilm-tf \
  --rows "$LARGE" --window "$WINDOW" --precision "$PREC" --steps-kinds "$GRAPH" --memory "${SIZE[@]}" --steps 3 \
  "${PEAKS[@]}" "${SETTINGS[@]}" >>"$OUT/calls.log" 2>&1; log "exit $?"
