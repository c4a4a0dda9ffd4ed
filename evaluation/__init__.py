"""memsearch's retrieval-quality harness (``make eval``, ``python -m evaluation``).

This package owns how retrieval quality is measured: the dataset format (:mod:`.dataset`), the
metrics and the paired comparison (:mod:`.metrics`), the builders that turn text shipped in
installed packages into development sets (:mod:`.builders`), indexing a corpus with one
configuration and running every query (:mod:`.runner`), and the tables (:mod:`.report`).

Why a harness of our own and not a retrieval benchmark library: what we need to measure is the
product's own path (chunker, embedding text cleaning, Milvus hybrid search, the analyzer, the
reranker) on markdown corpora, with gold answers given as line spans in files, which is exactly
what a memsearch search result points at.
"""
