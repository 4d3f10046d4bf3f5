"""Response caching: exact-match keys, cached answers in the state store, streams assembled and replayed, and the
semantic-cache engine (prompt text, literal guard, local embeddings, similarity index).

Importing this package loads nothing heavy: numpy and onnxruntime are imported when an index is built or the
local model is first loaded, so a worker that never serves a semantic request pays no memory for them.
"""
