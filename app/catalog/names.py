"""Catalog names as people type them: slugs, aliases (``h100``, ``H100-SXM``) and "did you mean".

Used by every interface through the request converter, and by the calibration's row parser.
"""

from __future__ import annotations

import difflib

import models_db
from planner import SpecError
from planner.calibration.measurements import gpu_slug


def _unknown(kind: str, name: str, known: list[str]) -> SpecError:
    key = name.strip().lower()
    close = [k for k in known if key and k.startswith(key)][:3]
    close = close or difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return SpecError(f"unknown {kind} {name!r}; {hint}known: {', '.join(known)}", field=kind)


def gpu_slug_for(name: str, *, free_text: bool = False) -> str:
    """The catalog slug of a GPU name or alias (``h100``, ``H100-SXM``); SpecError if none.

    An alias must be the start of the slug it means (``h1000`` is not ``h100``); ``free_text``
    accepts what measurement files and logs write ('H100 (DGX-H100)', 'A100-SXM4-80GB').
    """
    known = models_db.list_gpus()
    key = name.strip().lower()
    slug = key if key in known else gpu_slug(key)  # the measurement loader's alias table
    if slug is None or slug not in known or not (free_text or slug.startswith(key)):
        raise _unknown("gpu", name, known)
    return slug


def cluster_slug_for(name: str) -> str:
    """The preset slug of a cluster name, or of the GPU alias a preset is built on."""
    known = models_db.list_clusters()
    key = name.strip().lower()
    if key in known:
        return key
    try:
        gpu = gpu_slug_for(key)
    except SpecError:
        raise _unknown("cluster", name, known) from None
    for slug in known:
        if models_db.load_cluster_preset(slug).gpu == gpu:
            return slug
    raise _unknown("cluster", name, known)
