"""robustvlm.analysis"""
