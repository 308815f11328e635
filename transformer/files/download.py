"""Fetch a translator from the Hugging Face Hub, then convert it (``hub.py``, ``multilingual.py``): the id checked
before it reaches the network, the files a translator needs chosen and weighed before a byte is downloaded (a
server refuses what is over its limit), and, offline, a model downloaded before found in the cache."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Callable

from ..errors import detail
from .hub import (MULTILINGUAL_TYPES, OPTIONAL_FILES, REQUIRED_FILES, WEIGHT_FILES, HubError, Source, convert,
                  licence_of)

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def _network_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub raises when the Hub cannot be reached: OSError (offline mode) and its HTTP client's."""
    errors: list[type[BaseException]] = [OSError]
    for client in ("httpx2", "httpx", "requests"):
        try:
            errors.append(importlib.import_module(client).HTTPError)
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def check_repo_id(repo_id: str) -> None:
    """Refuse what is not a Hub model id (owner/name), before it names a file or reaches the network."""
    if not REPO_ID.match(repo_id or "") or ".." in repo_id:
        raise HubError(code="hub.not_repo_id", repo_id=str(repo_id))


def download(repo_id: str, revision: str | None = None, max_bytes: int | None = None,
             cache_dir: str | Path | None = None,
             before_download: Callable[[int], None] | None = None) -> tuple[Path, Source]:
    """Fetch what a Marian model needs from the Hub into ``cache_dir`` (or, offline, find it there or in
    huggingface_hub's own cache).

    Only the files listed above are fetched (the safetensors weights when both kinds exist), after the Hub has
    said what they weigh: more than ``max_bytes`` is refused before anything is downloaded, and
    ``before_download`` is told the total (to make room for it, or to show how far along the download is).
    """
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    check_repo_id(repo_id)
    try:
        info = HfApi().model_info(repo_id, revision=revision, files_metadata=True, timeout=20)
    except GatedRepoError:
        raise HubError(code="hub.gated",
                       repo_id=repo_id) from None
    except RevisionNotFoundError:
        raise HubError(code="hub.no_revision", repo_id=repo_id,
                       revision=repr(revision)) from None
    except RepositoryNotFoundError:
        raise HubError(code="hub.no_such_model",
                       repo_id=repo_id) from None
    except HfHubHTTPError as error:
        reason = str(error).splitlines()[0]
        raise HubError(code="hub.refused", repo_id=repo_id,
                       error=reason) from None
    except _network_errors():
        for cache in dict.fromkeys([cache_dir, None]):  # offline: a model downloaded before is still there
            try:
                directory = Path(snapshot_download(repo_id, revision=revision, local_files_only=True,
                                                   cache_dir=cache))
            except (LocalEntryNotFoundError, OSError):
                continue
            return directory, Source(repo_id, directory.name, licence_of(directory))
        raise HubError(code="hub.offline", repo_id=repo_id)
    sizes = {sibling.rfilename: sibling.size or 0 for sibling in info.siblings or []}
    if "config.json" not in sizes:
        raise HubError(code="hub.no_config",
                       name=repo_id)
    kind = (info.config or {}).get("model_type")
    if kind and kind != "marian" and kind not in MULTILINGUAL_TYPES:
        raise HubError(code="hub.repo_not_marian", repo_id=repo_id, kind=str(kind))
    required = ("config.json", "sentencepiece.bpe.model") if kind in MULTILINGUAL_TYPES else REQUIRED_FILES
    missing = [name for name in required if name not in sizes]
    if missing:
        raise HubError(code="hub.repo_missing_files", repo_id=repo_id, files=", ".join(missing))
    weights = next((name for name in WEIGHT_FILES if name in sizes), None)
    if weights is None:
        raise HubError(code="hub.repo_no_weights",
                       repo_id=repo_id)
    wanted = [*required, weights, *(name for name in OPTIONAL_FILES if name in sizes and name not in required)]
    total = sum(sizes[name] for name in wanted)
    if max_bytes is not None and total > max_bytes:
        size, limit = round(total / 1e6), round(max_bytes / 1e6)
        raise HubError(code="hub.too_big", repo_id=repo_id, size=size, limit=limit)
    if before_download is not None:
        before_download(total)
    try:
        directory = Path(snapshot_download(repo_id, revision=info.sha, allow_patterns=wanted, cache_dir=cache_dir))
    except _network_errors() as error:
        raise HubError(code="hub.download_stopped",
                       repo_id=repo_id, error=detail(error)) from None
    license = getattr(info.card_data, "license", None) if info.card_data else None
    return directory, Source(repo_id, info.sha, license or licence_of(directory))


def open_model(name: str, out: str | Path, revision: str | None = None, max_bytes: int | None = None,
               cache_dir: str | Path | None = None,
               before_download: Callable[[int], None] | None = None) -> Path:
    """A Hub id or a local directory, converted into ``out``."""
    if Path(name).is_dir():
        return convert(name, out)
    directory, source = download(name, revision, max_bytes, cache_dir, before_download)
    return convert(directory, out, source)
