"""Searching a chunk collection: the two legs, and the one place they are run and fused.

Why a module of its own: this is the ranking (how many candidates each leg fetches, how the hits of
several filtered calls merge, how ties break, the fusion), apart from the collection's life and
writes (:mod:`memsearch.store.milvus`). :class:`Searching` is a part of ``MilvusStore``: it needs
only the store's guarded driver calls, declared below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from memsearch import errors
from memsearch.config.schema import DEFAULT_CANDIDATES
from memsearch.store.filters import content_holds, escape_filter_value
from memsearch.store.fusion import (
    LEGS,
    MULTILINGUAL,
    SEARCH_MODES,
    Ranking,
    exact_holders_first,
    fuse,
    hit_key,
    hit_to_result,
    leg_order,
    leg_score,
    merge_legs,
)
from memsearch.store.rows import QUERY_FIELDS, chunked
from memsearch.store.stopwords import bm25_query
from memsearch.store.weights import Weights

if TYPE_CHECKING:
    from memsearch.store.driver import StoreDriver
    from memsearch.store.multilingual import Sidecar

P = ParamSpec("P")
R = TypeVar("R")

SIMILARITY_BATCH = 256  # chunk hashes per ``chunk_hash in [...]`` similarity call
MAX_LEG_HITS = 16_000  # the most hits one leg asks for (Milvus caps a search's limit at 16,384)


class Searching:
    """The search part of ``MilvusStore``."""

    _collection: str

    # -- what the store provides (MilvusStore) ---------------------------------------------

    def _guard(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        raise NotImplementedError

    def _driver(self) -> StoreDriver:
        raise NotImplementedError

    def _require_collection(self) -> None:
        raise NotImplementedError

    def _ready_analyzer(self) -> None:
        raise NotImplementedError

    @property
    def multilingual(self) -> Sidecar:
        raise NotImplementedError

    # -- searching ----------------------------------------------------------------------------

    def search(
        self,
        query_embedding: Sequence[float],
        *,
        query_text: str = "",
        top_k: int = 10,
        filter_expr: str = "",
        mode: str = "hybrid",
        weights: Weights | tuple[float, float] | None = None,
        leg_hits: Mapping[str, list[Any]] | None = None,
        candidates: int | None = None,
        multilingual: Sequence[float] | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid dense + BM25 search fused by RRF (k=60); ``score`` is 1.0 for rank 1 in both lists.

        ``weights`` (dense, BM25) makes the fusion weighted RRF (see :func:`fuse`); ``None`` is plain
        RRF, as in the original (the fusion Milvus' RRF ranker computes; only the order of exact
        ties may differ). The fusion is computed here from the two legs' hits, the same way on
        Lite and on a server. ``mode`` ``"dense"`` or ``"sparse"`` asks one leg alone (the
        evaluation's baselines); its ``score`` is that leg's own measure: cosine similarity, or the
        BM25 score.

        Each leg is asked for ``candidates`` hits (``top_k`` when larger), all of them are fused,
        and the first ``top_k`` returned: with weights the default is
        :data:`~memsearch.config.schema.DEFAULT_CANDIDATES`, so the ranking does not depend on
        ``top_k`` (:meth:`ranked`); without, it is ``top_k``: the original's search, verbatim (its
        best hit changes with ``top_k``). ``leg_hits`` and ``multilingual`` (the query's vector of
        the multilingual model, for the third leg): see :meth:`ranked`.
        """
        if mode not in SEARCH_MODES:
            raise errors.ConfigValueError(
                f"Unknown search mode '{mode}'. Valid: {', '.join(SEARCH_MODES)}",
                hint="use 'hybrid' (the default), 'dense' or 'sparse'",
            )
        if mode in LEGS:
            query: Sequence[float] | str = query_embedding if mode == "dense" else query_text
            found = (leg_hits or {}).get(mode)
            if found is None:
                found = self.search_leg(mode, query, top_k=top_k, filter_expr=filter_expr)
            return [hit_to_result(hit, LEGS[mode][2]) for hit in leg_order(found, mode)[:top_k]]
        if candidates is None:
            candidates = DEFAULT_CANDIDATES if weights else top_k
        depth = max(top_k, candidates)
        ranking = self.ranked(
            query_embedding,
            query_text=query_text,
            depth=depth,
            filters=(filter_expr,),
            weights=weights,
            leg_hits=leg_hits,
            multilingual=multilingual,
        )
        return ranking.hits[:top_k]

    def ranked(
        self,
        query_embedding: Sequence[float],
        *,
        query_text: str,
        depth: int,
        filters: Sequence[str] = ("",),
        weights: Weights | tuple[float, float] | None = None,
        leg_hits: Mapping[str, list[Any]] | None = None,
        multilingual: Sequence[float] | None = None,
    ) -> Ranking:
        """Every candidate of a hybrid search, fused, best first: each leg's best ``depth`` hits
        among the rows any of ``filters`` selects (one call per filter and leg, merged by score:
        :func:`merge_legs`), weighted as ``weights`` says (:meth:`search`).

        This is the one place the legs are run and fused. ``leg_hits`` holds the hits of legs the
        caller already ran with :meth:`leg` (same ``depth`` and ``filters``), by leg name:
        ``MemSearch.search`` runs the BM25 leg on a cold start while the model embeds the query.
        The legs not in it are run here. The ranking keeps each dense candidate's cosine
        similarity (:attr:`Ranking.similarity`) for the hits' relevance.

        ``multilingual`` (the query's vector of the multilingual model) adds the third leg: the
        nearest second vectors in the store's sidecar (:attr:`multilingual`), as the chunks the
        collection holds (a vector whose chunk is gone is left out: the sidecar may lag).
        """
        queries: dict[str, Sequence[float] | str] = {"dense": query_embedding, "sparse": query_text}
        done = leg_hits or {}
        legs = {
            leg: done[leg] if leg in done else self.leg(leg, queries[leg], depth, filters) for leg in LEGS
        }
        if weights and query_text:
            legs["sparse"] = exact_holders_first(query_text, legs["sparse"], depth, self._holders(filters))
        if multilingual is not None:
            legs[MULTILINGUAL] = self._as_chunks(self.leg(MULTILINGUAL, multilingual, depth, filters), legs)
        similarity = {hit_key(hit): leg_score(hit, "dense") for hit in legs["dense"]}
        crossing = {hit_key(hit): leg_score(hit, MULTILINGUAL) for hit in legs.get(MULTILINGUAL, [])}
        return Ranking(fuse(legs, weights, None, query_text), similarity, crossing)

    def _as_chunks(self, found: list[Any], legs: Mapping[str, list[Any]]) -> list[Any]:
        """The sidecar's hits (hash and source only) with their chunks' rows, in their order; a
        hit whose chunk the collection no longer holds is left out."""
        rows = {hit_key(hit): hit.get("entity") for hits in legs.values() for hit in hits}
        missing = [key for key in map(hit_key, found) if key not in rows]
        for batch in chunked(missing, SIMILARITY_BATCH):
            values = ", ".join(f'"{escape_filter_value(h)}"' for h in batch)
            for row in self._guard(
                self._driver().query,
                self._collection,
                filter=f"chunk_hash in [{values}]",
                output_fields=QUERY_FIELDS,
                limit=len(batch),
            ):
                rows[str(row["chunk_hash"])] = row
        return [
            {"id": key, "distance": hit.get("distance", 0.0), "entity": rows[key]}
            for hit in found
            if (key := hit_key(hit)) in rows
        ]

    def leg(
        self, leg: str, query: Sequence[float] | str, depth: int, filters: Sequence[str] = ("",)
    ) -> list[Any]:
        """One retriever's best ``depth`` hits among the rows any of ``filters`` selects, in
        :func:`leg_order` (one call per filter, merged)."""
        return merge_legs([self._leg_whole_ties(leg, query, depth, f) for f in filters], leg, depth)

    def _leg_whole_ties(
        self, leg: str, query: Sequence[float] | str, depth: int, filter_expr: str
    ) -> list[Any]:
        """:meth:`search_leg`'s best ``depth`` hits, and every hit tied with the last of them.

        Why: the store keeps which of several equal scores make its cut in its own order (row
        order, per segment); asked again for a part of the rows, it may keep others. With the
        whole group of ties at the cut, :func:`leg_order` decides (by chunk hash), the same way
        however the rows were asked for. Equal scores are rare (the same text twice), so this is
        one hit more per call, and a few more calls only when a group of ties straddles the cut."""
        limit = depth
        while True:
            hits = self.search_leg(leg, query, top_k=limit + 1, filter_expr=filter_expr)
            if len(hits) <= limit or limit >= MAX_LEG_HITS:
                return hits
            if leg_score(hits[-1], leg) != leg_score(hits[depth - 1], leg):
                return hits
            limit = min(limit * 2, MAX_LEG_HITS)

    def similarity(
        self, query_embedding: Sequence[float], chunk_hashes: Iterable[str], leg: str = "dense"
    ) -> dict[str, float]:
        """The cosine similarity of each chunk to ``query_embedding`` (by chunk hash; the chunks
        that are gone, or that have no second vector, are left out): the dense leg (or the
        multilingual one, with that model's vector) asked for those chunks alone."""
        wanted = list(dict.fromkeys(chunk_hashes))
        found: dict[str, float] = {}
        for batch in chunked(wanted, SIMILARITY_BATCH):
            values = ", ".join(f'"{escape_filter_value(h)}"' for h in batch)
            hits = self.search_leg(
                leg, query_embedding, top_k=len(batch), filter_expr=f"chunk_hash in [{values}]"
            )
            found.update({hit_key(hit): leg_score(hit, leg) for hit in hits})
        return found

    def _holders(self, filters: Sequence[str]) -> Callable[[str, int], list[dict[str, Any]]]:
        """``(text, limit)`` -> rows whose content holds ``text`` literally (within any of
        ``filters``; at most ``limit`` of each)."""

        def rows(text: str, limit: int) -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            for filter_expr in filters:
                expr = content_holds(text) + (f" and ({filter_expr})" if filter_expr else "")
                found += self._guard(
                    self._driver().query,
                    self._collection,
                    filter=expr,
                    output_fields=QUERY_FIELDS,
                    limit=limit,
                )
                if len(found) >= limit:
                    break
            return found

        return rows

    def search_leg(
        self, leg: str, query: Sequence[float] | str, *, top_k: int, filter_expr: str = ""
    ) -> list[Any]:
        """One retriever's raw hits, best first: ``"dense"`` (``query`` is the embedding) or
        ``"sparse"`` (``query`` is the text, scored by BM25). Combine legs with :func:`fuse`.

        The two legs are separate calls so a caller can run the BM25 leg before the query vector
        exists (``MemSearch.search`` does on a cold start, while the model loads). BM25 searches
        the query's words without Chinese function words (:func:`~memsearch.store.stopwords.bm25_query`).
        ``"multilingual"`` (``query`` is the multilingual model's vector) searches the sidecar: its
        hits hold the chunk hash and source only.
        """
        self._require_collection()
        if top_k <= 0:
            return []
        if leg == MULTILINGUAL:
            assert not isinstance(query, str), "the multilingual leg searches with a vector"
            return self.multilingual.search(query, limit=top_k, filter_expr=filter_expr)
        field, params, _ = LEGS[leg]
        if leg == "sparse":
            self._ready_analyzer()
        data: list[Any] = [bm25_query(str(query or ""))] if leg == "sparse" else [list(query)]
        try:
            found = self._guard(
                self._driver().search,
                self._collection,
                data=data,
                anns_field=field,
                search_params=params,
                limit=top_k,
                filter=filter_expr,
                output_fields=QUERY_FIELDS,
            )
        except errors.CollectionNotFoundError:
            raise
        except errors.StoreError:
            # BM25 over an empty collection can fail on Milvus server (NaN average length). Row-count
            # stats lag there, so ask a consistent query instead of trusting them.
            if self._is_empty():
                return []
            raise
        return list(found[0]) if found else []

    def _is_empty(self) -> bool:
        rows = self._guard(
            self._driver().query,
            self._collection,
            filter='chunk_hash != ""',
            output_fields=["chunk_hash"],
            limit=1,
        )
        return not rows
