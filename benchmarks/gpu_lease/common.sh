# Sourced by each call's script (docs/gpu_run.md): the device, the sizes, the output folder, the
# card's peaks, and the wheels that came with the call. Rehearse on the CPU with
#   DEVICE=cpu SMOKE=1 OUT=/tmp/lease bash benchmarks/gpu_lease/N-....sh
set -u
export PYTHONUNBUFFERED=1
DEVICE=${DEVICE:-cuda}
SMOKE=${SMOKE:-}
OUT=${OUT:?set OUT (the device machine sets it)}
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/calls.log"; }
# Wheels carried by this call (.whl/a or .whl/b), into the interpreter's own environment.
install_wheels() {
  for dir in "$@"; do
    if [ "$DEVICE" = cuda ] && ls "$dir"/*.whl >/dev/null 2>&1; then
      log "installing $dir"
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$dir"/*.whl >>"$OUT/calls.log" 2>&1
    fi
  done
}
# The kit imports the package, which imports spaCy: both wheel sets must be in (a cold machine
# has neither: carry .whl/b, then .whl/a, in two calls).
require_spacy() {
  python3 -c "import spacy, pooch" 2>>"$OUT/calls.log" && return 0
  log "spaCy or pooch missing: install .whl/b and .whl/a first (docs/gpu_run.md)"; return 1
}
if [ -n "$SMOKE" ]; then
  SIZE=(--smoke --warmup 1 --threads 1); ROWS=4; LARGE=8; WINDOW=5; STEPS=(--steps 1); GRAPH=eager; PREC=fp32
  KINDS=eager
else
  SIZE=(--warmup 10); ROWS=128; WINDOW=20; STEPS=(--steps 5); GRAPH=cuda_graph; PREC=bf16
  KINDS=cuda_graph,eager
  # The largest bilm-tf batch that fits an H200 (docs/bench/gpu/2026-11-26-h200); on an 80 GB
  # card the largest whose recording with the new settings fits (docs/bench/gpu/2026-11-26-h100).
  LARGE=$(python3 -c "import torch; print(4096 if torch.cuda.get_device_properties(0).total_memory > 100e9 else 1536)")
fi
# The card's dense peaks at the step's precision (benchmarks/gpu_lease/peaks.json, the
# datasheets), for the profile's fractions.
PEAKS=()
if [ "$DEVICE" = cuda ]; then
  read -r TFLOPS GBS < <(python3 - "$PREC" <<'PY'
import json, sys, pathlib, torch
peaks = json.loads((pathlib.Path("benchmarks/gpu_lease/peaks.json")).read_text())
name = torch.cuda.get_device_name(0)
card = next((v for k, v in peaks["cards"].items() if k in name), None)
print(*(card[sys.argv[1] + "_tflops"], card["gbs"]) if card else ("", ""))
PY
)
  [ -n "$TFLOPS" ] && PEAKS=(--peak-tflops "$TFLOPS" --peak-gbs "$GBS")
fi
# The step's LSTM settings, all on (their "auto" on a GPU, the default since issue 61), and all
# off (the step before).
NEW="lstm_wavefront=true,directions_on_streams=true,fused_cell=true"
OFF="lstm_wavefront=false,directions_on_streams=false,fused_cell=false"
