"""Strategies: how the threads of a block, and the blocks of a grid, combine values.

Installed as ``numbakern.strategies``. Each module is one algorithm, written to be
read on its own as a lesson.
"""
