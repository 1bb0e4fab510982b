"""``python -m spacy_elmo download`` and ``python -m spacy_elmo list``: fill and show the cache."""

from __future__ import annotations

from typing import Optional

import typer

from ..hub.cache import cache_root, list_cached
from ..hub.catalog import releases
from ..hub.download import DEFAULT_TIMEOUT, DownloadError, download_model
from .errors import fail, failing


def download_cli(
    name: Optional[str] = typer.Argument(
        None,
        metavar="NAME",
        help="A released model: small, medium, original or original-5.5b.",
        show_default=False,
    ),
    options_url: Optional[str] = typer.Option(
        None, "--options-url", help="The model's options.json: a URL (any mirror) or a local file.", show_default=False
    ),
    weight_url: Optional[str] = typer.Option(
        None, "--weight-url", help="The weights.hdf5 that goes with --options-url: a URL or a local file.", show_default=False
    ),
    as_name: Optional[str] = typer.Option(
        None, "--name", help="The cache name of a model given by URLs.", show_default=False
    ),
    options_sha256: Optional[str] = typer.Option(
        None, "--options-sha256", help="Refuse the options file unless it has this sha256.",
        show_default=False,
    ),
    weights_sha256: Optional[str] = typer.Option(
        None, "--weight-sha256", help="Refuse the weight file unless it has this sha256.", show_default=False
    ),
    force: bool = typer.Option(False, "--force", help="Download again even when complete."),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT, "--timeout", min=1.0, help="Seconds to wait for a connection or for the next bytes."
    ),
) -> None:
    """Download an ELMo model into the cache, once.

    The weight file is checked against the options before the model counts as cached.

    An interrupted download starts again from the first byte when the same command runs again.
    Without the network, give the two files (copied from elsewhere) as --options-url and
    --weight-url.
    """
    if (options_url is None) != (weight_url is None):
        fail("give both --options-url and --weight-url")
    if options_url is not None and not (as_name or name):
        fail("a model given by URLs needs --name (the name it is cached and loaded under)")
    if options_url is None and name is None:
        released = ", ".join(releases())
        fail(f"name a released model ({released}) or give --options-url, --weight-url and --name")
    with failing(DownloadError, ValueError):
        directory = download_model(
            as_name or name,
            options_url=options_url,
            weights_url=weight_url,
            options_sha256=options_sha256,
            weights_sha256=weights_sha256,
            force=force,
            timeout=timeout,
        )
    typer.echo(f"{as_name or name}: {directory}")


def list_cli() -> None:
    """Show the cached models: name, size, shape, path, state."""
    models = list_cached()
    typer.echo(f"cache: {cache_root()}")
    if not models:
        typer.echo(f"no models yet; released: {', '.join(releases())}")
        return
    for model in models:
        state = "complete" if model.complete else f"INCOMPLETE ({model.problem})"
        size = f"{model.size_bytes / 1e6:.1f} MB"
        typer.echo(f"{model.name}\t{size}\t{model.shape}\t{model.path}\t{state}")
