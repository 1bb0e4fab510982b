# Call 5: the open items. The whole suite on CUDA (its report as JUnit XML), inference in bf16
# and tf32 at 1,024 rows and exact fp32 at 128 (the gpu kit's inference stage), torchrun with
# one rank against one process.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
if [ "$DEVICE" = cuda ]; then
  WORKERS=(); python3 -c "import xdist" 2>/dev/null && WORKERS=(-n 8)
  log "the suite on CUDA"
  timeout 270 python3 -m pytest tests -v -rfE -p no:cacheprovider --device cuda "${WORKERS[@]}" --maxfail 10 \
    --ignore tests/test_benchmarks_gpu.py --junitxml "$OUT/suite-cuda.xml" >"$OUT/suite-cuda.txt" 2>&1; log "exit $?"
fi
[ -n "$SMOKE" ] && KIT=(--smoke) || KIT=()
log "inference stage"
python3 -m benchmarks gpu --stage inference --out "$OUT" --device "$DEVICE" "${KIT[@]}" --deadline-s 150 \
  >>"$OUT/calls.log" 2>&1; log "exit $?"
log "one-rank stage"
python3 -m benchmarks gpu --stage one-rank --out "$OUT" --device "$DEVICE" "${KIT[@]}" --deadline-s 100 \
  >>"$OUT/calls.log" 2>&1; log "exit $?"
