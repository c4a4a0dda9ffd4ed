"""The models wing: finding, building and running the local ONNX models.

Private to memsearch; the wing's public faces are the original's ``memsearch.embeddings``,
``memsearch.reranker`` and ``memsearch.jev_reranker``. ``files`` resolves a model's graph and
tokenizer (directory, installed package, HuggingFace cache, hub), ``onnx_cache`` seals the saved
optimised graph, ``onnx_build`` builds it in a child process and ``onnx_runtime`` holds one session
and one tokenizer per model file per process. It imports only the floor (docs/architecture.md).
"""
