"""Where the embedded store is, checked without opening it: a cheap refusal before the models load."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from .errors import CollectionNotFoundError


def check_store_exists(settings: Settings) -> None:
    """Raise CollectionNotFoundError when the embedded store's folder does not exist: nothing was ingested there.
    Opening it would create the folder, and leave an empty one behind wherever a user happened to ask. Cheap: the
    CLI asks before it loads the workflow and the models."""
    folder = Path(settings.qdrant_path).expanduser()
    if not settings.qdrant_url and str(folder) != ":memory:" and not folder.exists():
        raise CollectionNotFoundError(
            f"collection {settings.collection!r} does not exist: nothing was ingested into "
            f"{settings.qdrant_location()} (DAGRAG_QDRANT_PATH); ingest documents first: dagrag ingest PATH",
            collection=settings.collection)
