"""robustvlm.report"""
