"""Downloading a model into the cache: streamed, resumable, checked before it counts as cached.

Each file goes to ``<name>.part`` first. A dropped connection leaves the ``.part`` file, and the
next run asks the server for the rest with an HTTP ``Range`` header (a server that ignores it is
answered with a clean restart from byte 0). A finished file is checked against the sha256 given
(if any), the options file must parse, the weight file must hold every dataset the options imply
with its shape (``weights.read_bilm_tf_weights``); only then are both files renamed into place and
the manifest marked complete. Any refusal removes what it refused, so nothing half-made is ever
taken for a model, and a forced re-download that fails leaves the cached copy as it was (a refused
first download leaves no folder). One download of a model runs at a time (a lock file beside its
folder): a second process waits, then finds the model complete instead of writing into the same
``.part`` files. The lock file is removed when the download ends, whatever its outcome.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import socket
import sys
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, Optional
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from filelock import FileLock, Timeout, UnixFileLock
from tqdm import tqdm

from ..formats.base import OPTIONS_NAME, WeightFileError
from ..formats.bilm_tf import HDF5_NAME, read_bilm_tf_weights
from ..options import BiLMOptions, OptionsError
from .cache import MANIFEST_NAME, check_name, model_path, read_manifest, unusable_reason, write_manifest
from .catalog import get_release, options_shape, releases

#: Seconds to wait for a connection or for the next bytes of a response.
DEFAULT_TIMEOUT = 60.0
CHUNK_BYTES = 1 << 20
PART_SUFFIX = ".part"
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
# A holder may unlink the lock file just before it releases the lock when the next holder checks
# what it locked: a UnixFileLock that gets the flock of a file unlinked meanwhile (it had opened it
# before the unlink) sees st_nlink == 0 and starts over on the path's new file, and it leaves the
# file in place on release, so only this module removes it (filelock 3.29.5 on: setup.py asks
# for no older one).


class DownloadError(RuntimeError):
    """A download that failed or was refused; nothing it fetched counts as cached."""


class ResumableDownloadError(DownloadError):
    """The connection was lost mid-file: the ``.part`` file is kept and the next run resumes it."""


class CannotConnectError(DownloadError):
    """No connection to a file's server (offline, a firewall, a wrong host): the message says what
    works without the network."""


@dataclass(frozen=True)
class FileRecord:
    """What the manifest records for each file."""

    url: str
    size: int
    sha256: str


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
    files copied to a machine without the network. A complete cached copy is returned as it is
    unless ``force``. No connection raises ``CannotConnectError``, saying what works offline.
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
    options_url, weights_url = as_url(options_url), as_url(weights_url)
    directory = model_path(check_name(name))
    with _one_download_at_a_time(directory, progress):
        manifest = read_manifest(directory) if directory.is_dir() else None
        cached = manifest if manifest and unusable_reason(directory, manifest) is None else None
        if cached and not force:
            return directory
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        urls = {OPTIONS_NAME: options_url, HDF5_NAME: weights_url}
        # The URLs the .part files came from: a forced download records them beside a cached
        # copy, which stays complete and usable until the new files have passed every check.
        started = cached.get("pending_urls") if cached else (manifest or {}).get("urls")
        if manifest and started != urls:
            _remove_parts(directory)  # a .part of other URLs must not be resumed
        if cached:
            write_manifest(directory, {**cached, "pending_urls": urls})
        else:
            write_manifest(directory, {"name": name, "complete": False, "urls": urls, "files": {}})
        manifest = {"name": name, "complete": False, "urls": urls, "files": {}}
        try:
            options_record, options = _fetch_options(
                directory, options_url, options_sha256, timeout, progress
            )
            if release is not None and release.mismatch(options):
                raise DownloadError(f"{options_url}: {release.mismatch(options)}")
            manifest["shape"] = options_shape(options)
            weights_record = _fetch_weights(
                directory, options, weights_url, weights_sha256, timeout, progress
            )
        except (ResumableDownloadError, KeyboardInterrupt):
            raise  # keep the .part files: the next run resumes them
        except BaseException as err:
            _discard(directory, created, keep_manifest=cached is not None)
            if isinstance(err, CannotConnectError):
                raise CannotConnectError(f"{err}\n{offline_help(name, directory)}") from err
            raise
        write_manifest(directory, manifest)  # incomplete only while the checked files move in
        for file_name in (OPTIONS_NAME, HDF5_NAME):
            os.replace(directory / (file_name + PART_SUFFIX), directory / file_name)
        manifest["files"] = {OPTIONS_NAME: asdict(options_record), HDF5_NAME: asdict(weights_record)}
        manifest["complete"] = True
        write_manifest(directory, manifest)
        return directory


def as_url(location: str) -> str:
    """``location`` as a URL: a URL as it is, an existing local file as a ``file://`` URL."""
    if "://" not in location and Path(location).expanduser().is_file():
        return Path(location).expanduser().resolve().as_uri()
    return location


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


@contextmanager
def _one_download_at_a_time(directory: Path, progress: bool) -> Iterator[None]:
    """Hold ``<model folder>.lock`` (a process or thread that finds it held waits, saying why),
    and remove it before releasing it, so no download leaves a lock file in the cache."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{directory}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if progress:
            print(f"Waiting for another download of {directory.name} ({lock.lock_file})", file=sys.stderr)
        lock.acquire()
    held = _held_lock_file(lock)
    try:
        yield
    finally:
        try:
            _remove_held_lock_file(lock, held)
        finally:
            lock.release()


def _held_lock_file(lock: FileLock) -> Optional[os.stat_result]:
    """The identity of the file whose flock ``lock`` now holds, where removing it is safe.

    None where filelock removes its own file (Windows; SoftFileLock, which filelock falls back to
    on a filesystem without flock). Only a holder removes the file, so right after the
    acquisition the path names the locked one.
    """
    if not isinstance(lock, UnixFileLock):
        return None
    try:
        return os.stat(lock.lock_file)
    except OSError:
        return None


def _remove_held_lock_file(lock: FileLock, held: Optional[os.stat_result]) -> None:
    """Unlink the lock file while its lock is still held, and only if the path still names the
    file this process locked: a file someone put there since is another holder's lock."""
    if held is None:
        return
    with suppress(OSError):
        if os.path.samestat(os.lstat(lock.lock_file), held):
            os.unlink(lock.lock_file)


def _fetch_options(
    directory: Path, url: str, sha256: Optional[str], timeout: float, progress: bool
):
    part = directory / (OPTIONS_NAME + PART_SUFFIX)
    record = fetch_file(url, part, sha256, timeout, progress)
    try:
        options = BiLMOptions.from_file(part)
    except (OptionsError, ValueError) as err:
        part.unlink()
        raise DownloadError(f"{url}: not an ELMo options file: {err}") from err
    return record, options


def _fetch_weights(
    directory: Path,
    options: BiLMOptions,
    url: str,
    sha256: Optional[str],
    timeout: float,
    progress: bool,
) -> FileRecord:
    part = directory / (HDF5_NAME + PART_SUFFIX)
    record = fetch_file(url, part, sha256, timeout, progress)
    try:
        read_bilm_tf_weights(options, part)
    except WeightFileError as err:
        part.unlink()
        raise DownloadError(f"{url}: the downloaded weight file was refused: {err}") from err
    return record


def _discard(directory: Path, created: bool, keep_manifest: bool) -> None:
    """After a refusal: remove the folder this run created, else the unfinished files, and the
    manifest and the folder too where no complete copy is cached (a folder an interrupted
    download left): the folder is removed only if nothing else is in it."""
    if created:
        shutil.rmtree(directory, ignore_errors=True)
        return
    _remove_parts(directory)
    if not keep_manifest:
        with suppress(OSError):
            (directory / MANIFEST_NAME).unlink()
        with suppress(OSError):
            directory.rmdir()  # only if empty: files that are not this download's stay


def _remove_parts(directory: Path) -> None:
    for part in directory.glob("*" + PART_SUFFIX):
        part.unlink()


def fetch_file(
    url: str,
    part: Path,
    expected_sha256: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = True,
) -> FileRecord:
    """Download ``url`` into ``part``, resuming what a previous run left there.

    Raises ``ResumableDownloadError`` when the connection drops (``part`` is kept) and
    ``DownloadError`` for an HTTP error or a checksum mismatch (``part`` is removed).
    """
    start = part.stat().st_size if part.is_file() else 0
    response, start, total = _open(url, start, timeout)
    with response, open(part, "r+b" if start else "wb") as out:
        out.seek(start)
        out.truncate()
        _stream(response, out, url, start, total, progress)
    size = part.stat().st_size
    if total is not None and size != total:
        raise ResumableDownloadError(
            f"{url}: got {size} of {total} bytes; run the same command again to resume"
        )
    digest = sha256_of(part)
    if expected_sha256 is not None and digest != expected_sha256.lower():
        part.unlink()
        raise DownloadError(
            f"{url}: sha256 is {digest}, expected {expected_sha256.lower()}; the file was removed"
        )
    return FileRecord(url=url, size=size, sha256=digest)


def _open(url: str, start: int, timeout: float):
    """``(response, start, total)``: ``start`` becomes 0 when the server cannot resume."""
    headers = {"User-Agent": "spacy-elmo", "Accept-Encoding": "identity"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        response = urlopen(Request(url, headers=headers), timeout=timeout)
    except HTTPError as err:
        if err.code == 416 and start:  # the .part is not a prefix the server knows: start over
            return _open(url, 0, timeout)
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
    except (URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise CannotConnectError(f"{url}: cannot connect ({reason})") from err
    length = response.headers.get("Content-Length")
    if start and response.status == 206:
        match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
        if match and int(match[1]) == start:
            total = int(match[3]) if match[3] != "*" else None
            return response, start, total
        response.close()
        return _open(url, 0, timeout)
    # 200: a fresh download, or a server that ignored the Range header (restart from byte 0).
    return response, 0, int(length) if length is not None else None


def _stream(
    response: http.client.HTTPResponse,
    out: BinaryIO,
    url: str,
    start: int,
    total: Optional[int],
    progress: bool,
) -> None:
    name = url.rsplit("/", 1)[-1]
    with tqdm(
        total=total, initial=start, unit="B", unit_scale=True, desc=name, disable=not progress
    ) as bar:
        while True:
            try:
                chunk = response.read(CHUNK_BYTES)
            except (http.client.IncompleteRead, ConnectionError, socket.timeout) as err:
                raise ResumableDownloadError(
                    f"{url}: connection lost after {out.tell()} bytes ({err!r}); run the same "
                    "command again to resume"
                ) from err
            if not chunk:
                return
            out.write(chunk)
            bar.update(len(chunk))


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()
