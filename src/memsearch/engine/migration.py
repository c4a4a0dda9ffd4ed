"""Opening an index the original memsearch built with its default embedding model.

The original's default onnx model is ``gpahal/bge-m3-onnx-int8`` (1024-d); ours is all-MiniLM-L6-v2
(384-d). A user who switches tools without ever choosing a model has a 1024-d collection that our
default cannot search. :func:`model_for_index` is the one decision, made by ``MemSearch`` when it
opens a store and the model was not chosen (no ``embedding.model`` in config, flags or constructor):
a collection of the original model's dimension is searched and indexed with that model, under its
exact name (the name is part of every chunk ID, so the original's chunks are reused, nothing is
re-embedded), found in the local HuggingFace cache where the original downloaded it. When the model
is not there, one :class:`~memsearch.errors.OriginalModelMissingError` names both ways forward.

:func:`remembered_model` reads the decision back from the index manifest of the last run, so that
an unchanged folder stays a no-op that opens neither Milvus nor the model.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.errors import OriginalModelMissingError

if TYPE_CHECKING:
    from memsearch.core import MemSearch

logger = logging.getLogger("memsearch")

#: The original memsearch 0.4.23's default onnx model, and the dimension of its vectors.
ORIGINAL_MODEL = "gpahal/bge-m3-onnx-int8"
ORIGINAL_DIMENSION = 1024
#: The provider whose default differs from the original's (the others share the original's defaults).
PROVIDER = "onnx"


def model_for_index(provider: str, default_model: str, dimension: int | None, collection: str = "") -> str:
    """The model to use for a store whose model the user did not choose.

    ``dimension`` is the existing collection's (None when there is none). The original's model when
    the collection has its dimension and our default another; else ``default_model``. Raises
    :class:`OriginalModelMissingError` when the original's model is needed and not in the local
    HuggingFace cache (nothing is downloaded).
    """
    if provider != PROVIDER or dimension != ORIGINAL_DIMENSION:
        return default_model
    from memsearch.embeddings.onnx import find_in_hf_cache, hf_cache_dir, settings_for

    settings = settings_for(default_model)
    if settings is not None and settings.dimension == ORIGINAL_DIMENSION:
        return default_model
    if find_in_hf_cache(ORIGINAL_MODEL) is None:
        where = hf_cache_dir() / ("models--" + ORIGINAL_MODEL.replace("/", "--"))
        ours = default_model + (f" ({settings.dimension}-d)" if settings and settings.dimension else "")
        raise OriginalModelMissingError(
            f"The collection '{collection}' was built by the original memsearch with its default "
            f"embedding model {ORIGINAL_MODEL} (dim={ORIGINAL_DIMENSION}); our default model is "
            f"{ours}, and {ORIGINAL_MODEL} is not in the HuggingFace cache ({where}).",
            hint=(
                f"Either put {ORIGINAL_MODEL} (tokenizer.json and its .onnx file) in that cache: copy "
                f"the folder {where.name} from a machine where the original memsearch ran, or download "
                f"it with internet (pip install huggingface_hub; hf download {ORIGINAL_MODEL}); "
                "the index is then used as it is, nothing is re-embedded. Or re-embed everything with "
                "our default model: `memsearch reset --yes`, then `memsearch index <paths>` "
                "(with the same --milvus-uri / --collection)."
            ),
        )
    return ORIGINAL_MODEL


def remembered_model(provider: str, manifest_file: Path) -> str | None:
    """The original's model when the last index run of this store settled on it (else None)."""
    if provider != PROVIDER:
        return None
    try:
        with manifest_file.open(encoding="utf-8") as f:
            data = json.load(f)
        model = data["fingerprint"]["model"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ORIGINAL_MODEL if model == ORIGINAL_MODEL else None


def settle(ms: MemSearch, dimension: int | None) -> None:
    """With no model chosen, an index the original memsearch built with its default model
    (bge-m3, 1024-d) is used with that model, from the local HuggingFace cache, else one clear
    error (:func:`model_for_index`). ``dimension`` is the existing collection's (None: none)."""
    if ms._model_chosen:
        return
    from memsearch.embeddings import DEFAULT_MODELS

    default = DEFAULT_MODELS[ms._provider]
    ms._use_model(model_for_index(ms._provider, default, dimension, ms._collection))
    if ms._model == ORIGINAL_MODEL and not ms._announced:
        ms._announced = True
        logger.warning(
            "memsearch: using the original memsearch's bge-m3 model for this index (%s, %d-d, "
            "from the HuggingFace cache)",
            ORIGINAL_MODEL,
            ORIGINAL_DIMENSION,
        )
