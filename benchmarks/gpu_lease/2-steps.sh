# Call 2: the CUDA tests of the step's paths (the recorded step with each setting and
# compile_graph against eager steps, the engine's streams, the wavefront, the fused cell, one cast
# per weight), each test with its own limit so that a slow compilation cannot swallow the report.
# The fourth lease (docs/bench/gpu/2026-11-26-h200-b) found three failures, fixed since.
source benchmarks/gpu_lease/common.sh
install_wheels .whl/a .whl/b
if [ "$DEVICE" = cuda ]; then
  log "CUDA tests of the step"
  timeout 300 python3 -m pytest tests/test_lstm.py tests/test_side_by_side.py tests/test_static_step.py -v -rfE \
    --tb=short --timeout 90 -p no:cacheprovider --device cuda --junitxml "$OUT/step-tests.xml" \
    >"$OUT/step-tests.txt" 2>&1
  log "exit $?"
fi
