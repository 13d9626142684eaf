"""What every ``explain --figure`` shares: the look of its axes, and the order its
states are drawn in."""


def plain_axes(ax) -> None:
    """Hide a Matplotlib axes' top and right spines: the figures draw their own
    lanes and steps, and the frame around them is noise."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def drawing_order(nodes) -> list:
    """Trace nodes sorted by where they were made (launch, step, block, thread) and, in
    one thread, in its program order (its nodes' ids grow with it): the order they
    were recorded in follows how the simulator's threads interleaved, and lines that
    cross are painted in draw order, so a figure drawn in record order would differ,
    byte for byte, run to run."""
    return sorted(nodes, key=lambda n: (n.launch, n.step, n.block, n.thread, n.id))
