# Call 1 (carry [".whl/a"], after call 0 installed .whl/b): where the step's device time goes,
# kernel by kernel: bilm-tf's recipe in bf16 at 128 x 20, the recorded step (graph replay: kernels
# by name) and its eager twin (kernels by phase).
source benchmarks/gpu_lease/common.sh
install_wheels .whl/b .whl/a
require_spacy || exit 0
log "profile ${ROWS} x ${WINDOW} ${PREC}: ${KINDS}"
timeout 130 python3 -m benchmarks profile-step --out "$OUT/profile-$ROWS" --device "$DEVICE" --case bilm-tf \
  --rows "$ROWS" --window "$WINDOW" --precision "$PREC" --steps-kinds "$KINDS" "${SIZE[@]}" "${STEPS[@]}" \
  "${PEAKS[@]}" >>"$OUT/calls.log" 2>&1; log "exit $?"
