"""robustvlm.report: plots, tables and report pages rendered from typed results."""
