"""robustvlm.multiple_choice"""
