"""Released ELMo models by name: a catalog, a download cache and the downloader (pooch).

``download_model("small")`` fetches a released model once (``python -m spacy_elmo download
small``); ``model_dir("small")`` finds it afterwards and never downloads.
"""

from .cache import CachedModel, ModelNotCachedError, cache_root, download_command, list_cached, model_dir
from .catalog import Release, get_release, releases
from .download import CannotConnectError, DownloadError, download_model

__all__ = [
    "CachedModel",
    "CannotConnectError",
    "DownloadError",
    "ModelNotCachedError",
    "Release",
    "cache_root",
    "download_command",
    "download_model",
    "get_release",
    "list_cached",
    "model_dir",
    "releases",
]
