"""The figure writer: the measured tables and pictures of the Results pages, made from the results
of the runs that measured them, never typed by hand.

    python -m robustvlm.figures DOC NAME=RESULTS_DIR [NAME=RESULTS_DIR ...] [--images DIR]

It sits above the experiments (tests/test_layers.py): `registry` gathers every figure from the
package that declares it (`experiments.NAME.figures`, `report.figure_tables`), `write` reads the
results and rewrites a document's blocks with their stamps (`report.figure_blocks`,
`report.figure_stamps`), `images` draws the pictures.
"""
