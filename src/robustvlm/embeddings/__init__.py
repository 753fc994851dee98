"""robustvlm.embeddings: contrastive (InfoNCE) training of VLM embedding models (VLM2Vec):
query/target pairs, the loss, gradient caching, the all-gather across processes, the training
task of the shared loop."""
