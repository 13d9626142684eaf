"""Kernel builders by shape of work: whole arrays, rows, columns, tiny rows, scan tiles,
softmax rows, counting. They receive strategies and state kits; they never import a
concrete strategy."""


def __getattr__(name: str):
    """The names the old ``numbakern.kernels`` module held (deprecated)."""
    import warnings

    from numbakern._moved import KERNELS, lookup

    value = lookup("kernels", KERNELS, name)
    warnings.warn(f"numbakern.kernels.{name} moved (numbakern.kernels is a package of kernel "
                  "builders); the old name will be removed", DeprecationWarning,
                  stacklevel=2)
    return value
