"""robustvlm.models"""
