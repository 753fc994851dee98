"""robustvlm.data"""
