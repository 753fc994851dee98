"""robustvlm.training"""
