"""robustvlm.evaluation"""
