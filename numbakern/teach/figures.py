"""What every ``explain --figure`` shares: the look of its axes."""


def plain_axes(ax) -> None:
    """Hide a Matplotlib axes' top and right spines: the figures draw their own
    lanes and steps, and the frame around them is noise."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
