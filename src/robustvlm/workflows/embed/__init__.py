"""VLMs as embedding models: contrastive training and evaluation."""
