"""Where kernels run: backend choice, the simulator and its warp intrinsics, launches,
replay, the kernel cache, device views and device facts. Imports nothing of numbakern
above it, and nothing of numba.cuda at import (the backend is chosen first)."""
