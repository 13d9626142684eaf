"""The teaching and measuring tools: the ``numbakern`` command (demo, compare, explain),
the recorder behind ``explain`` and its drawings."""
