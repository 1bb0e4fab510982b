"""Downloading a model into the cache with pooch, checked before it counts as cached.

``pooch.retrieve`` fetches both files into a staging folder of their own beside the model's (it
streams each into a temporary file, and moves it into place only once it is whole and matches
the sha256 given). The options must parse and the weight file must hold every dataset the options
imply with its shape (``read_bilm_tf_weights``); only then do the files move into the model's
folder, and the manifest, written last, marks the model complete. The staging folder goes
whatever happens, Ctrl-C included, so nothing half-made is taken for a model, a refused first
download leaves no folder, and a forced re-download that fails leaves the cached copy as it was.
pooch does not resume: a dropped download starts again from byte 0 on the next run.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse
from urllib.request import url2pathname

import pooch
import requests
import urllib3

from ..files import write_json_atomically
from ..formats.base import OPTIONS_NAME, WeightFileError
from ..formats.bilm_tf import HDF5_NAME, read_bilm_tf_weights
from ..options import BiLMOptions, OptionsError
from .cache import MANIFEST_NAME, check_name, model_path, read_manifest, unusable_reason
from .catalog import Release, get_release, options_shape, releases

#: Seconds to wait for a connection or for the next bytes of a response.
DEFAULT_TIMEOUT = 60.0


#: What a download that failed mid-file leaves, and what to do.
_START_AGAIN = "nothing was kept: the same command starts it again"


class DownloadError(RuntimeError):
    """A download that failed or was refused; nothing it fetched counts as cached."""


class CannotConnectError(DownloadError):
    """No connection to a file's server (offline, a firewall, a wrong host): the message says what
    works without the network."""


def download_model(
    name: str,
    options_url: Optional[str] = None,
    weights_url: Optional[str] = None,
    options_sha256: Optional[str] = None,
    weights_sha256: Optional[str] = None,
    force: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = True,
) -> Path:
    """Download model ``name`` into the cache and return its folder.

    ``name`` alone: a released model of the catalog (``small``, ``medium``, ``original``,
    ``original-5.5b`` or AllenNLP's file-name stem). With ``options_url`` and ``weights_url``: any
    mirror, cached under ``name``; a URL may also be a local file (a path or ``file://``), for
    files copied to a machine without the network. A complete cached copy is returned as it is,
    without the network, unless ``force``. No connection raises ``CannotConnectError``, saying
    what works offline.
    """
    release = get_release(name)
    if options_url is None and weights_url is None:
        if release is None:
            raise ValueError(
                f"unknown ELMo model {name!r}: the released models are {', '.join(releases())}; "
                "for other files give --options-url, --weight-url and --name"
            )
        name, options_url, weights_url = release.name, release.options_url, release.weights_url
    elif options_url is None or weights_url is None:
        raise ValueError("give both an options URL and a weight URL (or neither, for a released name)")
    urls = {OPTIONS_NAME: as_url(options_url), HDF5_NAME: as_url(weights_url)}
    directory = model_path(check_name(name))
    manifest = read_manifest(directory) if directory.is_dir() else None
    if manifest and not force and unusable_reason(directory, manifest) is None:
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        _fetch(urls[OPTIONS_NAME], options_sha256, staging / OPTIONS_NAME, timeout, progress, name)
        options = _read_options(staging / OPTIONS_NAME, urls[OPTIONS_NAME], release)  # before the weights
        _fetch(urls[HDF5_NAME], weights_sha256, staging / HDF5_NAME, timeout, progress, name)
        try:
            read_bilm_tf_weights(options, staging / HDF5_NAME)
        except WeightFileError as err:
            raise DownloadError(f"{urls[HDF5_NAME]}: the downloaded weight file was refused: {err}") from err
        files = {
            file_name: {"url": url, "size": (staging / file_name).stat().st_size,
                        "sha256": pooch.file_hash(str(staging / file_name))}
            for file_name, url in urls.items()
        }
        directory.mkdir(exist_ok=True)
        (directory / MANIFEST_NAME).unlink(missing_ok=True)  # incomplete while the files move in
        for file_name in files:
            os.replace(staging / file_name, directory / file_name)
        write_json_atomically(  # whole or not at all, whichever download of the model writes it
            directory / MANIFEST_NAME,
            {"name": name, "complete": True, "shape": options_shape(options), "urls": urls, "files": files},
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def as_url(location: str) -> str:
    """``location`` as a URL: a URL as it is, a local path as a ``file://`` URL."""
    return location if "://" in location else Path(location).expanduser().resolve().as_uri()


def _fetch(url: str, sha256: Optional[str], target: Path, timeout: float, progress: bool, name: str) -> None:
    """``url`` into ``target`` through pooch, its failures as ``DownloadError`` naming the URL."""
    if url.startswith("file:"):
        downloader = _copy_local_file
    else:
        downloader = pooch.HTTPDownloader(progressbar=progress, timeout=timeout)
    if progress:
        print(f"Downloading {url}", file=sys.stderr)  # pooch's bar does not name the file
    logger = pooch.get_logger()
    # pooch's advice to pass the hash is not for our users. A filter of this call's own, not the
    # logger's level, which overlapping downloads would restore out of order.
    def quiet(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING

    logger.addFilter(quiet)
    try:
        pooch.retrieve(
            url,
            known_hash=f"sha256:{sha256}" if sha256 else None,
            fname=target.name,
            path=target.parent,
            downloader=downloader,
        )
    except requests.HTTPError as err:
        raise DownloadError(f"{url}: HTTP {err.response.status_code} {err.response.reason}") from err
    except requests.ConnectionError as err:
        if not _stalled_mid_file(err):
            raise CannotConnectError(f"{url}: cannot connect ({err})\n{offline_help(name, model_path(name))}") from err
        raise DownloadError(
            f"{url}: the download stalled for {timeout:g} s mid-file ({err}); {_START_AGAIN} (--timeout waits longer)"
        ) from err
    except requests.RequestException as err:  # a dropped connection
        raise DownloadError(f"{url}: the download failed ({err}); {_START_AGAIN}") from err
    except (OSError, ValueError) as err:  # a sha256 mismatch (pooch removed the file), no local file
        raise DownloadError(f"{url}: {err}") from err
    finally:
        logger.removeFilter(quiet)


def _stalled_mid_file(err: requests.ConnectionError) -> bool:
    """Whether the server connected and then sent nothing for the whole timeout: requests reports
    a read timeout while it streams a body as a ConnectionError, not as the connection refused."""
    return bool(err.args) and isinstance(err.args[0], urllib3.exceptions.ReadTimeoutError)


def _copy_local_file(url: str, output_file: str, _pooch: object) -> None:
    """pooch's downloader for ``file://`` URLs: files copied to a machine without the network."""
    shutil.copyfile(url2pathname(urlparse(url).path), output_file)


def _read_options(path: Path, url: str, release: Optional[Release]) -> BiLMOptions:
    """The fetched options, refused when they do not parse or are not ``release``'s shape."""
    try:
        options = BiLMOptions.from_file(path)
    except (OptionsError, ValueError) as err:
        raise DownloadError(f"{url}: not an ELMo options file: {err}") from err
    if release is not None and release.mismatch(options):
        raise DownloadError(f"{url}: {release.mismatch(options)}")
    return options


def offline_help(name: str, directory: Path) -> str:
    """What works without the network, for model ``name`` (cached in ``directory``): the two
    files fetched elsewhere and given to ``download`` as local files, or used where they are."""
    release = get_release(name)
    files = (
        f"{release.options_url}\n      {release.weights_url}"
        if release is not None
        else "the options.json and the weights.hdf5 of the model"
    )
    return (
        "Without the network:\n"
        f"  - fetch the two files elsewhere:\n      {files}\n"
        f"    copy them to this machine and cache them as '{name}' ({directory}), checked as a "
        "download is:\n"
        f"      python -m spacy_elmo download {name} --options-url OPTIONS_FILE "
        "--weight-url WEIGHT_FILE\n"
        "    (or give a mirror's URLs there, one that this machine can reach);\n"
        "  - or use the two files where they are, without the cache: --options-file OPTIONS_FILE "
        "--weight-file WEIGHT_FILE in the commands, options_file and weight_file in the pipe's "
        "[components.elmo.model] block (or --weights DIR and weights = \"DIR\" for a folder "
        "holding options.json and one .hdf5 file)"
    )
