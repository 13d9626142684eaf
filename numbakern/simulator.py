"""Warp intrinsics for Numba's CUDA simulator (being written)."""


def install():
    pass
