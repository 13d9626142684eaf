"""NumPy-style public functions: parse the arguments, plan, run, deliver (thin)."""
