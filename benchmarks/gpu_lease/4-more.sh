# Call 4: the compiled steps at 128 x 20 (compile against compile_graph: the first step of each
# compiles for about a minute).
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
[ "$DEVICE" = cuda ] && COMPILED=(compile compile_graph) || COMPILED=(compile)
VARIANTS=(); for kind in "${COMPILED[@]}"; do VARIANTS+=("$kind:step=$kind"); done
log "step-ab ${ROWS} x ${WINDOW} ${PREC}: ${COMPILED[*]}"
timeout 220 python3 -m benchmarks step-ab "${VARIANTS[@]}" --device "$DEVICE" --case bilm-tf --rows "$ROWS" \
  --window "$WINDOW" --precision "$PREC" "${SIZE[@]}" --steps 20 --rounds 3 \
  --output "$OUT/step-ab-$ROWS-compiled.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
