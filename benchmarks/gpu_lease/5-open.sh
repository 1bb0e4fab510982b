# Call 5: the open items. The whole suite on CUDA (its report as JUnit XML), inference at 128
# and 1,024 rows (exact fp32, bf16 and tf32, each with and without CUDA graphs), torchrun with
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
if [ -n "$SMOKE" ]; then
  INFERENCE=(--shape fixture --n-batches 1 --no-isolate); BATCHES=(8)
else
  PATHS="exact,exact without CUDA graphs,bf16 autocast,bf16 autocast without CUDA graphs"
  INFERENCE=(--shape original --n-batches 4 --paths "$PATHS,tf32,tf32 without CUDA graphs"); BATCHES=(128 1024)
fi
for batch in "${BATCHES[@]}"; do
  log "inference, batch $batch"
  timeout 75 python3 -m benchmarks inference --device "$DEVICE" --batch-size "$batch" --repeats 1 "${INFERENCE[@]}" \
    --output "$OUT/inference-$batch.json" >>"$OUT/calls.log" 2>&1; log "exit $?"
done
log "one-rank stage"
python3 -m benchmarks gpu --stage one-rank --out "$OUT" --device "$DEVICE" "${KIT[@]}" --deadline-s 100 \
  >>"$OUT/calls.log" 2>&1; log "exit $?"
