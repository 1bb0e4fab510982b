"""``python -m benchmarks ...``: the typer app. Each command runs one benchmark module, prints its
table and, with ``--output``, writes every figure to JSON."""

from __future__ import annotations

import enum
import itertools
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import typer

from spacy_elmo.bench import report
from spacy_elmo.cli import bench
from spacy_elmo.cli.errors import fail, failing
from spacy_elmo.cli.help import prepare_help
from spacy_elmo.cli.pretrain import EXTRA_ARGS, config_overrides
from spacy_elmo.cli.weights import OPTIONS_FILE, WEIGHT_FILE, WEIGHTS, weight_settings, weight_source

from .embed_bench import embed_bench_command
from .shapes import SHAPE_NAMES
from .workdir import bench_workdir

app = typer.Typer(
    name="benchmarks",
    help="The project's benchmarks (run from a checkout): speed and memory, as ratios measured "
    "side by side in one run.",
    no_args_is_help=True,
    add_completion=False,
)

WORKDIR = typer.Option(
    None,
    "--workdir",
    help="Cache for random-weight models (default: a temporary directory, removed after)",
)
THREADS = typer.Option(None, "--threads", min=1, help="torch threads (default: torch's default)")
ISOLATE = typer.Option(
    True, "--isolate/--no-isolate", help="Measure each path in a fresh process (reliable memory)"
)
SEED = typer.Option(0, "--seed", help="Seed of the random weights")
# The pretraining step's options, shared by profile-step and step-ab (and pretrain's window).
CASE = typer.Option("bilm-tf", "--case", help="bilm-tf, fast, bundled or bundled-full (benchmarks pretrain's)")
ROWS = typer.Option(128, "--rows", min=1, help="Window rows per step")
WINDOW = typer.Option(20, "--window", min=1, help="Tokens per window (bilm-tf: 20)")
PRECISION = typer.Option("bf16", "--precision", help="fp32, tf32, bf16 or fp16")
STEP_DEVICE = typer.Option("cuda", "--device", help="cpu or cuda")
WARMUP = typer.Option(10, "--warmup", min=1, help="Untimed steps at least (more until the step time settles)")
SMOKE = typer.Option(False, "--smoke", help="The case with a tiny model (a rehearsal, seconds on the CPU)")


class _Name(str, enum.Enum):
    """A choice typer checks (and lists in --help) that reads as its name, in f-strings too (the
    standard library's StrEnum needs Python 3.11)."""

    def __str__(self) -> str:
        return self.value


def _int_list(default: Optional[str], flag: str, help: str) -> Any:
    """An option taking comma-separated integers >= 1 (parsed to a list; otherwise typer's usage
    error naming ``flag``)."""
    return typer.Option(default, flag, help=help, callback=lambda value: None if value is None else _positive_ints(value, flag))


#: The shapes of ``shapes.py``.
Shape = _Name("Shape", {name: name for name in SHAPE_NAMES})
RANDOM_SHAPE = typer.Option(None, "--random-shape", help="Random weights of a shape instead of --weights")
SHAPE = typer.Option(Shape.original, "--shape", help="Model shape")


def _threads(threads: Optional[int]) -> None:
    if threads:
        torch.set_num_threads(threads)


def _bench_model(
    directory: Path,
    weights: Optional[str],
    options_file: Optional[Path],
    weight_file: Optional[Path],
    random_shape: Optional[Shape],
) -> Tuple[Dict[str, Optional[str]], str]:
    """The elmo model block's weight keys a pipe bench runs, and what they are: ``--random-shape``
    (written to ``directory`` once), or what the weight options name (the bundled model for
    none), resolved by the package's resolver (exits with its error)."""
    from .shapes import cached_model

    if random_shape is None:
        measured = weight_source(weights, options_file, weight_file).describe()
        return weight_settings(weights, options_file, weight_file), measured
    if weights is not None or options_file is not None or weight_file is not None:
        fail("--random-shape replaces the weights: give it or --weights/--options-file/--weight-file")
    model = cached_model(directory, random_shape)
    return weight_settings(str(model), None, None), f"random weights of the {random_shape} shape: {model}"


@app.command("inference")
def inference_command(
    shape: Shape = SHAPE,
    batch_size: str = _int_list("32", "--batch-size", "Sentences per batch; a comma-separated list for a grid (e.g. 1,8,32,128)"),
    seq_len: int = typer.Option(25, "--seq-len", help="Longest sentence (longer ones are cut)"),
    n_batches: int = typer.Option(4, "--n-batches", min=1, help="Batches per timed pass (unless --sentences)"),
    sentences: Optional[int] = typer.Option(
        None, "--sentences", min=1, help="Sentences per timed pass at every batch size (whole batches)"
    ),
    warmup: int = typer.Option(1, "--warmup", help="Batches run before timing"),
    repeats: int = typer.Option(
        2,
        "--repeats",
        help="Rounds: each path times one pass over all batches per round, in its own process, "
        "the order reversed every other round; the best pass counts",
    ),
    device: str = typer.Option("all", "--device", help="cpu, cuda or all (CUDA when available)"),
    text: Optional[Path] = bench.TEXT,
    workdir: Optional[Path] = WORKDIR,
    seed: int = SEED,
    threads: Optional[str] = _int_list(None, "--threads", "torch threads (at least 1); a comma-separated list for a grid (e.g. 1,2)"),
    isolate: bool = ISOLATE,
    weights: Optional[str] = typer.Option(
        None, "--weights", help="Trained weights instead of random ones of --shape: a model directory or name (en_wikitext_small: the bundled model)"
    ),
    paths: Optional[str] = typer.Option(
        None, "--paths", help="Only these paths (comma-separated names as in the table, e.g. 'exact,int8,int8 + token cache'); the reference always runs"
    ),
    intra_op: bool = typer.Option(
        False, "--intra-op", help="Also run threads > 1 the earlier way (one biLM thread, torch.set_num_threads): a before and after in one run"
    ),
    contention: bool = typer.Option(
        False, "--contention", help="Also run every cell beside a process that keeps one core busy (a shared machine)"
    ),
    against: Optional[Path] = typer.Option(
        None, "--against", help="Another checkout (git worktree add ../old COMMIT): its package paths too, and this one's x against"
    ),
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """biLM forward: the package's paths against a per-time-step reference loop.

    Tokens/s, the latency of one 20-token sentence, peak memory and every layer's difference
    from the reference (AllenNLP's algorithm), on random weights and real sentences; CPU, and
    CUDA when available; at each batch size and thread count given.
    """
    from .inference_bench import (
        INFERENCE_COLUMNS,
        THREAD_MODES,
        run_inference_bench,
    )

    with failing(ValueError, FileNotFoundError, RuntimeError):
        with bench_workdir(workdir) as directory:
            result = run_inference_bench(
                directory, shape, seed, text, batch_size, seq_len, n_batches, warmup, repeats,
                device, threads, isolate, sentences=sentences, weights=weights,
                paths=None if paths is None else [p.strip() for p in paths.split(",")],
                thread_modes=THREAD_MODES if intra_op else THREAD_MODES[:1], contention=contention,
                against=against,
            )
    sizes = ", ".join(f"{c['batch_size']}x{c['threads']}t: {c['real_tokens']:,} tokens" for c in result["cells"])
    report.echo_table(
        f"biLM inference, {'random ' + shape if weights is None else weights} weights, sentences <= {seq_len} tokens, per cell "
        f"(batch size x threads) one timed pass of {sizes}; best of {repeats} rounds (order "
        f"alternating) after {warmup} warm-up batch(es)",
        result["rows"],
        INFERENCE_COLUMNS,
    )
    not_exact = _echo_inference_notes(result, isolate)
    report.finish(result, output)
    if not_exact:
        raise typer.Exit(2)


def _echo_inference_notes(result: Dict[str, Any], isolate: bool) -> List[str]:
    """What follows the inference table: thread scaling, the CPU, the token cache, each inexact
    path's cosines, whether the float32 paths agree, how peak memory was measured; returns the
    paths that disagree with the reference."""
    from .inference_bench import EXACT_TOLERANCE, SCALING_COLUMNS, thread_scaling

    scaling = thread_scaling(result["rows"])
    result["thread_scaling"] = scaling
    if scaling:
        report.echo_table(
            "threads: each path's tokens/s over its one-thread tokens/s in the same run (busy core: "
            "beside a process that keeps one core busy)",
            scaling,
            SCALING_COLUMNS,
        )
    typer.echo(f"CPU: {result['system']['cpu']}; flags: {' '.join(result['system']['cpu_flags'])}")
    cache = next((row for row in result["rows"] if "cache_build_s" in row), None)
    if cache is not None:
        typer.echo(
            f"token cache: the {cache['cache_words']:,} most frequent words of the text "
            f"({result['batches']['cache_hit_rate']:.0%} of the timed tokens), built in "
            f"{cache['cache_build_s']:.3f} s (inside the peak, outside the timing)"
        )
    for row in result["rows"]:
        if "cosine_mean_per_layer" in row:
            layers = ", ".join(f"{c:.5f}" for c in row["cosine_mean_per_layer"])
            typer.echo(
                f"{row['device']} {row['path']} (batch {row['batch_size']}, {row['threads']} threads): "
                f"mean cosine per layer {layers}, mix {row['mix_cosine_mean']:.5f}; smallest "
                f"{min(row['cosine_min_per_layer'] + [row['mix_cosine_min']]):.4f}; max |diff| {row['max_abs_diff']:.2e}"
            )
    not_exact = [f"{r['device']} {r['path']}" for r in result["rows"] if r.get("exact") is False]
    typer.echo(
        f"max |diff| per layer vs the reference must be < {EXACT_TOLERANCE:g} for float32 paths: "
        + ("all agree" if not not_exact else "DISAGREE: " + ", ".join(not_exact))
    )
    typer.echo(
        f"peak memory: {result['rows'][0]['peak_method']}, beyond the loaded weights "
        f"({result['model_mb']:.0f} MB), each path in "
        f"{'its own process' if isolate else 'this process'}"
    )
    return not_exact


def _positive_ints(value: Union[str, List[int]], option: str) -> List[int]:
    """A comma-separated list of integers >= 1, or typer's usage error naming the option."""
    if isinstance(value, list):  # already parsed (typer runs callbacks on defaults too)
        return value
    try:
        numbers = [int(part) for part in value.split(",")]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 1:
        raise typer.BadParameter(
            f"takes integers greater than or equal to 1, separated by commas (e.g. 1,8,32), got {value!r}",
            param_hint=f"'{option}'",
        )
    return numbers


@app.command("pipe")
def pipe_command(
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    random_shape: Optional[Shape] = RANDOM_SHAPE,
    precisions: str = bench.PRECISIONS,
    threads: str = bench.THREADS,
    text: Path = bench.TEXT,
    batch_size: int = bench.BATCH_SIZE,
    warmup: int = bench.WARMUP,
    batches: int = bench.BATCHES,
    rounds: int = bench.ROUNDS,
    gpu_id: int = bench.GPU_ID,
    doc_tokens: Optional[str] = _int_list(
        None, "--doc-tokens", "Instead of batches: one doc of each length (tokens, comma-separated, e.g. "
        "2500,10000,40000) without sentence boundaries, its peak memory beyond its outputs"
    ),
    cache_sizes: List[int] = typer.Option([0], "--cache-size-mb", help="With --doc-tokens: the pipe's layer cache (repeat to compare)"),
    allocators: List[str] = typer.Option(
        ["default", "fixed-mmap"], "--allocator", help="With --doc-tokens: default and/or fixed-mmap (glibc)"
    ),
    workdir: Optional[Path] = WORKDIR,
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """The elmo pipe: python -m spacy_elmo bench (tokens/s and peak memory per precision and
    thread count, each cell in a fresh process), on random weights of a shape too; or with
    --doc-tokens, docs without sentence boundaries by length: does memory grow with the doc?"""
    from spacy_elmo.cli.bench import run_bench

    from .pipe_bench import DOC_COLUMNS, run_doc_bench

    with bench_workdir(workdir) as directory:
        model, measured = _bench_model(directory, weights, options_file, weight_file, random_shape)
        if doc_tokens is None:
            run_bench(None, model, measured, precisions, threads, text, batch_size, warmup, batches, rounds, gpu_id, output)
            return
        typer.echo(f"measuring: {measured}")
        with failing(ValueError):
            result = run_doc_bench(model, doc_tokens, precisions, threads, cache_sizes, allocators, text, gpu_id)
    rows = result["rows"]
    report.echo_table(
        f"elmo pipe, peak memory increase per doc without sentence boundaries (windows of <= "
        f"{rows[0]['max_sequence_length']} tokens, max_batch_tokens {rows[0]['max_batch_tokens']}; {rows[0]['peak_method']})",
        rows,
        DOC_COLUMNS,
    )
    typer.echo(
        "outputs = doc._.elmo + doc._.elmo_layers; default = glibc's dynamic mmap threshold (what "
        "users see), fixed-mmap = MALLOC_MMAP_THRESHOLD_=131072 (freed blocks go back to the OS); "
        "loaded RSS = the process's resident memory with the pipeline loaded and run once"
    )
    report.finish(result, output)


@app.command("pretrain")
def pretrain_command(
    cases: List[str] = typer.Option(
        ["bundled"],
        "--case",
        help="bilm-tf (init-config --recipe bilm-tf: the original shape, clipped), fast (the same "
        "unclipped), bundled (the project's recipe) and/or bundled-full (with a full softmax); "
        "repeat the option",
    ),
    rows: List[str] = typer.Option(
        ["128"], "--rows", help="Window rows per step (bilm-tf: 128), or max (the most that fit a GPU); repeat"
    ),
    window: int = WINDOW,
    warmup: int = WARMUP,
    steps: int = typer.Option(50, "--steps", help="Timed steps at least"),
    seconds: float = typer.Option(30.0, "--seconds", help="Timed seconds at least"),
    precisions: List[str] = typer.Option(["fp32"], "--precision", help="fp32, tf32, bf16 or fp16; repeat"),
    step_kinds: List[str] = typer.Option(
        ["eager"], "--step", help="eager, cuda_graph, compile or compile_graph (windows only); repeat"
    ),
    tiny: bool = typer.Option(False, "--tiny", help="The recipes with a tiny model and vocabulary (a rehearsal)"),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto"),
    text: Optional[Path] = bench.TEXT,
    threads: Optional[int] = THREADS,
    isolate: bool = ISOLATE,
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """Pretraining throughput in steady state: the trainer's own steps (where their time goes:
    profile-step).

    Writes --output after every case, so that a cut run keeps what it measured.
    """
    from .pretrain_bench import PRETRAIN_COLUMNS, named_case, run_pretrain_bench

    sizes = [r if r == "max" else int(r) for r in rows if r == "max" or r.isdigit()]
    if len(sizes) != len(rows) or any(r != "max" and r < 1 for r in sizes):
        fail(f"--rows takes positive integers or max, got {rows}")
    _threads(threads)
    with failing(ValueError, FileNotFoundError):
        chosen = [named_case(c, tiny) for c in cases]
        result = run_pretrain_bench(
            chosen, text, sizes, window, warmup, steps, seconds, precisions,
            step_kinds, device, threads, isolate, on_row=lambda partial: report.write_json(partial, output, quiet=True),
        )
    s = result["settings"]
    measured = [row for row in result["rows"] if "tokens_per_s" in row]
    report.echo_table(
        f"pretraining steps on {s['device']}, steady state: at least {steps} steps and {seconds:.0f} s "
        f"after at least {warmup} warm-up steps",
        measured,
        PRETRAIN_COLUMNS,
    )
    for row in result["rows"]:
        if "tokens_per_s" not in row:
            typer.echo(f"{row['case']} {row.get('precision')} {row.get('step')}: {row.get('error') or row.get('skipped')}")
    typer.echo("tokens/s = predictions per direction per second (as the trainer logs it)")
    report.finish(result, output)


@app.command("adapt-ab", context_settings=EXTRA_ARGS)
def adapt_ab_command(
    ctx: typer.Context,
    against: Path = typer.Option(..., "--against", help="Another checkout (git worktree add ../old COMMIT)"),
    text: List[Path] = typer.Option(..., "--text", help="The text to adapt to (repeat for more files)"),
    source: str = typer.Option("en_wikitext_small", "--source", help="The biLM to adapt"),
    threads: int = typer.Option(2, "--threads", min=1, help="adapt's --threads in each run"),
    rounds: int = typer.Option(1, "--rounds", min=1, help="Runs of each checkout, alternating which goes first"),
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """This checkout's adapt command against another checkout's, on the same text.

    Each run is the whole command in a fresh process with its checkout's package, in the order
    A B, B A, ...; the ratio of the median times and both sides' held-out perplexities (on the
    same held-out text) come from the one run. Extra arguments go to adapt: --tokenized.
    """
    from .adapt_ab import run_adapt_ab

    with failing(ValueError, RuntimeError):
        result = run_adapt_ab(against, text, source, threads, rounds, ctx.args)
    for side in ("this", "against"):
        for run in result["runs"][side]:
            typer.echo(
                f"{side:8s} {result['commits'][side] or 'no git'}: {run['seconds']:,.0f} s, held-out perplexity "
                f"{run['ppl_before']:.2f} -> {run['ppl_after']:.2f}, {run['steps']} updates, load {run['load_average_1min'][0]:.1f}"
            )
    typer.echo(f"against / this: {result['speedup']:.2f}x (median times)")
    report.finish(result, output)


@app.command("pretrain-ab", context_settings=EXTRA_ARGS)
def pretrain_ab_command(
    ctx: typer.Context,
    against: Path = typer.Option(..., "--against", help="Another checkout (git worktree add ../old COMMIT)"),
    text: Path = typer.Option(..., "--text", help="Training text (the project's: ../shared/data/wikitext-2/train.txt)"),
    config: Optional[Path] = typer.Option(None, "--config", help="Pretraining config (default: the project's recipe)"),
    threads: int = typer.Option(2, "--threads", min=1, help="torch threads of each run"),
    steps: int = typer.Option(15, "--steps", min=1, help="Timed steps per run"),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed steps before them"),
    rounds: int = typer.Option(4, "--rounds", min=1, help="Runs of each checkout, alternating which goes first"),
    gpu_id: int = bench.GPU_ID,
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """This checkout's pretraining step against another checkout's, on the same batches.

    Each run is a fresh process with its checkout's package, in the order A B, B A, ...; the
    ratio of the medians and the median of the step-by-step ratios come from the one run. Config
    values can be overridden for both, as for pretrain: --corpus.batching windows.
    """
    from .pretrain_ab import PROJECT_RECIPE, run_pretrain_ab

    with failing(ValueError, FileNotFoundError, RuntimeError):
        overrides = config_overrides(ctx.args)
        result = run_pretrain_ab(against, text, config or PROJECT_RECIPE, overrides, threads, steps, warmup, rounds,
                                 gpu_id=gpu_id)  # fmt: skip
    for side in ("this", "against"):
        runs = ", ".join(f"{run['tokens_per_s']:,.0f}" for run in result["runs"][side])
        commit = result["commits"][side] or "no git"
        typer.echo(f"{side:8s} {result[side]} ({commit}): {runs} tokens/s (median {result['median_tokens_per_s'][side]:,.0f})")
    typer.echo(
        f"this / against: {result['ratio_of_medians']:.3f}x (medians), "
        f"{result['step_by_step_ratio_median']:.3f}x (step by step)"
    )
    report.finish(result, output)


@app.command("profile-step", context_settings=EXTRA_ARGS)
def profile_step_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", help="Folder for profile.json, profile.md (and the memory snapshot)"),
    case: str = CASE,
    rows: int = ROWS,
    window: int = WINDOW,
    precision: str = PRECISION,
    step_kinds: str = typer.Option(
        "cuda_graph,eager", "--steps-kinds", help="Step kinds profiled one after the other, comma-separated"
    ),
    device: str = STEP_DEVICE,
    warmup: int = WARMUP,
    steps: int = typer.Option(5, "--steps", min=1, help="Profiled steps per step kind"),
    memory: bool = typer.Option(False, "--memory", help="Also what holds the memory over one step"),
    smoke: bool = SMOKE,
    peak_tflops: Optional[float] = typer.Option(None, "--peak-tflops", help="The card's dense peak at this precision"),
    peak_gbs: Optional[float] = typer.Option(None, "--peak-gbs", help="The card's memory bandwidth, GB/s"),
    text: Optional[Path] = bench.TEXT,
    threads: Optional[int] = THREADS,
) -> None:
    """A pretraining step's device time kernel by kernel, grouped by phase and kind, with FLOP/s
    and bytes/s against the card's peaks; extra --section.key value arguments override the
    case's config (e.g. --training.fused_cell true)."""
    from .profile_step import run_profile

    _threads(threads)
    kinds = [k.strip() for k in step_kinds.split(",") if k.strip()]
    with failing(ValueError):
        result = run_profile(out, case, rows, window, precision, kinds, device, warmup, steps, memory, smoke,
                             config_overrides(ctx.args), peak_tflops, peak_gbs, str(text) if text else None, threads)  # fmt: skip
    for kind, part in result["kinds"].items():
        if "error" in part:
            typer.echo(f"{kind}: error: {part['error'].strip().splitlines()[-1]}")
            continue
        shares = ", ".join(f"{g['group']} {g['share']:.0%}" for g in part["groups"][:6])
        typer.echo(f"{kind}: {part['step_ms']:.1f} ms a step; {shares}")
    typer.echo(f"wrote {out / 'profile.json'} and {out / 'profile.md'}")


@app.command("step-ab")
def step_ab_command(
    variants: List[str] = typer.Argument(
        ..., help="NAME:key=value[,key=value] ([training] keys unless section.key), the first the baseline, "
        'e.g. off:step=cuda_graph,fused_cell=false,lstm_wavefront=false today:step=cuda_graph'
    ),
    case: str = CASE,
    rows: int = ROWS,
    window: int = WINDOW,
    precision: str = PRECISION,
    device: str = STEP_DEVICE,
    warmup: int = WARMUP,
    steps: int = typer.Option(20, "--steps", min=1, help="Timed steps per variant and round"),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Rounds, the variants' order alternating"),
    together: bool = typer.Option(
        True, "--together/--one-at-a-time", help="All variants built at once (alternating rounds), or one after another"
    ),
    smoke: bool = SMOKE,
    text: Optional[Path] = bench.TEXT,
    threads: Optional[int] = THREADS,
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """Pretraining step variants against each other in one process, in alternating rounds."""
    from .step_ab import run_step_ab

    _threads(threads)
    with failing(ValueError):
        result = run_step_ab(variants, case, rows, window, precision, device, warmup, steps, rounds, together,
                             smoke, output, str(text) if text else None, threads)  # fmt: skip
    for name, v in result["variants"].items():
        if "error" in v:
            typer.echo(f"{name}: error: {v['error'].strip().splitlines()[-1]}")
        elif v["median_tokens_per_s"]:
            typer.echo(f"{name} ({v['step']}): {v['median_tokens_per_s']:,.0f} tokens/s, {v['ratio_to_first']:.2f}x the first")


@app.command("senses")
def senses_command(
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    data: Optional[Path] = typer.Option(
        None, "--data", help="Sentences, JSON lines with word, sense, text (default: the bundled set)"
    ),
    heldout: bool = typer.Option(
        False,
        "--heldout",
        help="Score the held-out set instead: 24 other words, written after the default mix and "
        "model were chosen on the main set",
    ),
    batch_size: int = typer.Option(32, "--batch-size", help="Sentences per biLM call"),
    center_text: Optional[Path] = typer.Option(
        None,
        "--center-text",
        help="Tokenized text whose mean vector the centered outputs subtract "
        "(default: the benchmark's own sentences)",
    ),
    center_sentences: int = typer.Option(
        1000, "--center-sentences", help="Sentences of --center-text to use (the first ones)"
    ),
    per_word: bool = typer.Option(
        False, "--per-word", help="Also print each word's scores for the pipe's default output"
    ),
    plot: Optional[Path] = typer.Option(
        None,
        "--plot",
        help="Also draw a 2-D projection of a few words' occurrences per layer, coloured by sense, "
        "to this PNG (needs matplotlib: the 'plot' extra)",
    ),
    threads: Optional[int] = THREADS,
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """Word senses: does each layer, and the pipe's default mix, separate them?

    margin = mean within-sense cosine - mean across-sense cosine of a word's occurrences
    (per word, then averaged); accuracy = leave-one-out nearest occurrence of the same sense.
    Default model: the bundled one.
    """
    from spacy_elmo.cli.senses import DATA_FILE, HELDOUT_FILE

    from .senses import draw_projection

    _threads(threads)
    if heldout and data is not None:
        fail("--heldout and --data each choose the sentences: give one")
    data = HELDOUT_FILE if heldout else data or DATA_FILE
    source = weight_source(weights, options_file, weight_file)  # exits with the resolver's error
    typer.echo(f"model: {source.describe()}")
    with failing(ValueError, FileNotFoundError):
        result = _measure_senses(source, data, batch_size, center_text, center_sentences, plot is not None)
    _echo_senses(result, per_word)
    if plot is not None:
        with failing(ImportError):
            title = f"Word senses, {source.weight_file.parent.name} ({source.format})"
            draw_projection(result["projection"], plot, title)
        typer.echo(f"\nwrote {plot}: {', '.join(result['projection']['words'])}, per output")
    report.finish(result, output)


def _measure_senses(source, data: Path, batch_size: int, center_text, center_sentences: int, projection: bool):
    """The senses bench's result: its rows, the model, the data, the system (and the 2-D
    projection with ``projection``)."""
    from spacy_elmo.bench.system import system_info
    from spacy_elmo.bench.text import text_lines
    from spacy_elmo.sources import load_bilm_from

    from .senses import run_senses_bench, sense_projection
    from .text import sentences

    reference = None
    if center_text is not None:
        reference = list(itertools.islice(sentences(text_lines(center_text), 100), center_sentences))
    bilm = load_bilm_from(source)
    result = run_senses_bench(bilm, data, batch_size, reference)
    if projection:
        result["projection"] = sense_projection(bilm, data, batch_size=batch_size)
    result["model"] = source.describe()
    result["weights"] = {"options_file": str(source.options_file), "weight_file": str(source.weight_file), "format": source.format}
    result["data"]["centering_text"] = str(center_text or "the benchmark sentences")
    result["system"] = system_info()
    return result


def _echo_senses(result: Dict[str, Any], per_word: bool) -> None:
    """The senses table, what its columns mean, and with ``per_word`` each word's row."""
    from .senses import PIPE_DEFAULT, POS_COLUMNS, SENSE_COLUMNS, per_word_rows

    d = result["data"]
    report.echo_table(
        f"Word senses, {result['model']}: {d['words']} words, {d['senses']} senses, "
        f"{d['sentences']} sentences",
        result["rows"],
        SENSE_COLUMNS + (POS_COLUMNS if d["words_same_pos"] is not None else []),
    )
    typer.echo(
        "margin and accuracy averaged over words; accuracy: nearest other occurrence has the "
        "same sense (ties share the credit; a context-free output scores the chance level); "
        f"centered: minus the mean over {d['centering_tokens']:,} tokens of {d['centering_text']}"
        + (
            f"; margin by part of speech: {d['words_same_pos']} words whose occurrences share "
            f"one tag (only meaning separates the senses), {d['words_pos_differs']} whose senses "
            "differ in part of speech too"
            if d["words_same_pos"] is not None
            else ""
        )
    )
    if per_word:
        default_row = next(row for row in result["rows"] if row["output"] == PIPE_DEFAULT)
        report.echo_table(
            f"Per word, {PIPE_DEFAULT} (the pipe's default output), least separated first",
            per_word_rows(default_row),
            [("output", "word", ""), *SENSE_COLUMNS[1:]],
        )


# embed keeps its options beside its subprocess runs, in embed_bench.py.
app.command("embed")(embed_bench_command)


@app.command("gpu")
def gpu_command(
    stage: str = typer.Option(
        ..., "--stage", help="one-rank, or all of the stages in turn"
    ),
    out: Path = typer.Option(..., "--out", help="Folder for <stage>.json and <stage>.log"),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu to rehearse"),
    smoke: bool = typer.Option(
        False, "--smoke", help="Tiny shapes and a few steps: the rehearsal, minutes on 2 CPU cores"
    ),
    deadline_s: float = typer.Option(
        420.0, "--deadline-s", min=0, help="Per stage: cases not started by then are skipped"
    ),
) -> None:
    """Measure the package's GPU code paths, one stage at a time.

    Stages: pretraining under torchrun with one rank against one process (one-rank); each stage
    stops starting new cases at --deadline-s, so a stage fits a time-limited session on a GPU
    machine.

    Each stage writes OUT/<stage>.json (the machine and every case: its figures, or its error)
    and OUT/<stage>.log, and prints a line per case. A failing case is recorded and the stage
    goes on; at the deadline the cases left are marked "skipped: deadline". The exit status is 0
    once the JSON is written. Try it first on the CPU with --device cpu --smoke (tiny shapes, a
    few minutes): see docs/gpu_run.md.
    """
    from .gpu_run import run_stages

    with failing(ValueError):
        run_stages(stage, out, device, smoke, deadline_s, echo=typer.echo)


prepare_help(app)
